// How the views read a cluster's lifecycle and a computation's duration.
//
// The store decides whether a cluster is live, stopped or lost (one rule, in
// dask_analytics_lab/store/queries.py, below every reader) and says so on each cluster
// row: `status`, `ended` (time or null), `duration` (seconds), and how big it got
// (`peak_workers`, `peak_threads`, `peak_memory`).  The views only show that: none of
// them decides "lost" from a clock of its own.
import { h } from "./dom.js";
import * as fmt from "./format.js";
import { now as clockNow, frozen } from "./clock.js";
import type { ClusterRow, ComputationRow } from "./rows.js";

/** What a view shows of a cluster's size: now while live, the peak once it ended. */
export interface ClusterSize {
  peak: boolean;
  workers: number | null;
  threads: number | null;
  memory: number | null;
  memoryUsed: number | null;
}

/** "live" | "stopped" | "lost" as the store says; "unknown" for no row. */
export function clusterStatus(c: ClusterRow | null | undefined): string {
  if (!c || !c.cluster_id) return "unknown";
  if (c.status) return c.status;
  // A row without `status` (a report shared before the store said it): only a stop
  // message is known for sure.
  return c.stopped ? "stopped" : "live";
}

/** When the cluster ended (stopped, or last seen when lost); null while live. */
export function clusterEnded(c: ClusterRow): number | null {
  if (clusterStatus(c) === "live") return null;
  return c.ended ?? c.stopped ?? c.last_seen ?? null;
}

/** Seconds from start to its end, or to `now` while live (it never counts past `ended`). */
export function clusterUptime(c: ClusterRow | null | undefined, now = clockNow()): number | null {
  if (!c || c.started == null) return null;
  const ended = clusterEnded(c);
  if (ended != null) return Math.max(ended - c.started, 0);
  if (clusterStatus(c) === "live") return Math.max(now - c.started, 0);
  return c.duration ?? null;
}

/** Workers, threads and memory to show: now while live, the peak once it ended
 *  (a stopped cluster has no worker left: "0 workers" says nothing). */
export function clusterSize(c: ClusterRow): ClusterSize {
  if (clusterStatus(c) === "live") {
    return {
      peak: false,
      workers: c.n_workers ?? null,
      threads: c.n_threads ?? null,
      memory: c.memory_total ?? null,
      memoryUsed: c.memory_used ?? null,
    };
  }
  return {
    peak: true,
    workers: c.peak_workers ?? c.n_workers ?? null,
    threads: c.peak_threads ?? c.n_threads ?? null,
    memory: c.peak_memory ?? c.memory_total ?? null,
    memoryUsed: null,
  };
}

const STATUS_TEXT: Record<string, string> = {
  live: "live",
  stopped: "stopped",
  lost: "lost",
  unknown: "…",
};

export function statusTitle(c: ClusterRow | null | undefined): string {
  if (!c) return ""; // no row: its status is "unknown"
  const status = clusterStatus(c);
  if (status === "lost") {
    return `Its scheduler went silent without saying it stopped (killed, kernel restart, lost node); last seen ${fmt.clock(clusterEnded(c))}`;
  }
  if (status === "stopped")
    return `Stopped ${fmt.clock(clusterEnded(c))}${c.stop_reason ? ` (${c.stop_reason})` : ""}`;
  if (status === "live") return "Its scheduler is sending heartbeats";
  return "";
}

/** The status badge: pass a cluster row (or a status string).  In a report (a frozen
 *  clock) a cluster live when it was made says so, "live then", not "live". */
export function statusBadge(c: ClusterRow | string | null | undefined): HTMLElement {
  const status = typeof c === "string" ? c : clusterStatus(c);
  const then = frozen();
  if (then != null && status === "live") {
    return h(
      "span.dal-badge.live.frozen",
      {
        dataset: { status },
        title: `Its scheduler was sending heartbeats when this report was made, ${fmt.datetime(then)}`,
      },
      h("span.dal-dot"),
      "live then",
    );
  }
  return h(
    `span.dal-badge.${status}`,
    { title: typeof c === "string" ? "" : statusTitle(c), dataset: { status } },
    h("span.dal-dot"),
    STATUS_TEXT[status] || status,
  );
}

/** Seconds a computation ran: to its stop; to `now` only while it runs.  A computation
 *  that ended without a stop time (recorded before stops were kept) shows its last
 *  update, never a duration that grows forever. */
export function computationDuration(
  c: ComputationRow | null | undefined,
  now = clockNow(),
): number | null {
  if (!c || !c.start) return null;
  if (c.stop && c.stop >= c.start) return c.stop - c.start;
  if (!c.state || c.state === "running") return Math.max(now - c.start, 0);
  return c.updated && c.updated >= c.start ? c.updated - c.start : null;
}
