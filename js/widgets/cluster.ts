// Cluster summary: workers, threads, memory over time, cost, idle time, versions, and
// each worker over time (./workers.ts).
// Traits: cluster {} (the store's cluster row), samples_base/samples_patch (by time),
// workers_base/workers_patch (worker samples, by id), worker_events [] (the
// worker-joined / worker-left events), computations_base/_patch (marked on the axis).
import { h, clear, watch, throttle, empty } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { timeChart } from "../common/chart.js";
import { readTable, tableTraits } from "../common/table.js";
import {
  clusterStatus,
  clusterEnded,
  clusterUptime,
  clusterSize,
  statusBadge,
} from "../common/lifecycle.js";
import { onScreen } from "../common/onscreen.js";
import { frozen } from "../common/clock.js";
import type { RenderProps } from "../common/model.js";
import type { ClusterRow, ClusterSample, ComputationRow, WorkerSample } from "../common/rows.js";
import { workersView, type RawWorkerEvent } from "./workers.js";

/** What the Workers section draws: worker samples, lifecycle events, computations. */
export interface WorkersData {
  samples: WorkerSample[];
  events: RawWorkerEvent[];
  computations: ComputationRow[];
  picked?: { worker?: string | null };
}

// The cluster's status (live / stopped / lost) is the store's: see common/lifecycle.ts.
export { clusterStatus, statusBadge as stateBadge } from "../common/lifecycle.js";

/** Workers and threads, memory, and tasks processing over time, from a cluster's
 *  samples (the widget's Cluster tab and the team page's cluster page); null with fewer
 *  than two samples. */
export function clusterCharts(samples: ClusterSample[]): HTMLElement | null {
  const pts = [...samples].sort((a, b) => a.time - b.time);
  if (pts.length < 2) return null;
  return h(
    "div.dal-charts",
    h(
      "div.dal-chart",
      h(
        "div.dal-chart-title",
        h("span", "Workers and threads"),
        h("span.dal-faint", "workers — threads ┅"),
      ),
      timeChart({
        series: [
          { points: pts.map((s) => [s.time, s.n_workers]), color: "#ee6b3b", fill: true },
          { points: pts.map((s) => [s.time, s.n_threads]), color: "#5b8def", dash: true },
        ],
      }),
    ),
    h(
      "div.dal-chart",
      h("div.dal-chart-title", h("span", "Memory"), h("span.dal-faint", "used — total ┅")),
      timeChart({
        yFormat: fmt.bytes,
        series: [
          { points: pts.map((s) => [s.time, s.memory_used]), color: "#2fa572", fill: true },
          { points: pts.map((s) => [s.time, s.memory_total]), color: "#8c959f", dash: true },
        ],
      }),
    ),
    h(
      "div.dal-chart",
      h("div.dal-chart-title", h("span", "Tasks processing")),
      timeChart({
        series: [{ points: pts.map((s) => [s.time, s.processing]), color: "#f5a524", fill: true }],
      }),
    ),
  );
}

function kpi(label: string, value: string, sub: string | null | undefined): HTMLElement {
  return h(
    "div.dal-kpi",
    h("div.dal-kpi-label", label),
    h("div.dal-kpi-value", value),
    sub ? h("div.dal-kpi-sub", sub) : null,
  );
}

function kv(obj: Record<string, unknown> | null | undefined): HTMLElement {
  const entries = Object.entries(obj || {}).filter(([, v]) => v != null && v !== "");
  if (!entries.length) return h("div.dal-faint", "–");
  return h(
    "dl.dal-kv",
    entries.flatMap(([k, v]) => [
      h("dt", k),
      h("dd", typeof v === "object" ? JSON.stringify(v) : String(v)),
    ]),
  );
}

export function clusterSummary(
  c: ClusterRow,
  samples: ClusterSample[],
  now = Date.now() / 1000,
  workers: WorkersData | null = null,
): HTMLElement {
  const box = h("div");
  const status = clusterStatus(c);
  const live = status === "live";
  const ended = clusterEnded(c);
  const size = clusterSize(c);
  const activity = !live
    ? kpi(
        status === "lost" ? "Last seen" : "Stopped",
        fmt.clock(ended),
        status === "lost" ? "no heartbeat since: lost" : c.stop_reason || "closed",
      )
    : kpi(
        "Activity",
        c.idle_since
          ? `idle ${fmt.duration(now - c.idle_since)}`
          : c.processing
            ? `${fmt.count(c.processing)} tasks running`
            : "–",
        c.last_activity ? `last work ${fmt.ago(c.last_activity)}` : "",
      );
  box.append(
    h(
      "div.dal-cards",
      kpi(
        size.peak ? "Peak workers" : "Workers",
        fmt.count(size.workers),
        `${fmt.count(size.threads)} threads${size.peak ? " at most" : ""}`,
      ),
      size.peak
        ? kpi("Peak memory", fmt.bytes(size.memory), "the workers' total at its biggest")
        : kpi("Memory", fmt.bytes(size.memoryUsed), `of ${fmt.bytes(size.memory)}`),
      kpi("Cost", fmt.money(c.cost), `${fmt.money(c.price_per_core_hour)} per core-hour`),
      kpi(
        live ? "Up for" : "Ran for",
        fmt.duration(clusterUptime(c, now)),
        `since ${fmt.clock(c.started)}`,
      ),
      activity,
      kpi(
        "Worker time",
        fmt.duration(c.worker_seconds),
        `${fmt.duration(c.core_seconds)} core time`,
      ),
    ),
  );
  const charts = clusterCharts(samples);
  if (charts) box.append(charts);
  if (workers) {
    box.append(
      h("div.dal-section", "Workers over time"),
      workersView(workers.samples, workers.events, workers.computations, workers.picked),
    );
  }
  const p = c.platform || {};
  box.append(
    h("div.dal-section", "Cluster"),
    kv({
      id: c.cluster_id,
      status: frozen() != null && live ? "live when the report was made" : status,
      address: c.address,
      user: c.user,
      account: c.account,
      ended:
        ended != null
          ? `${fmt.clock(ended)} (${status === "lost" ? "last seen; it never said it stopped" : c.stop_reason || "closed"})`
          : null,
      "idle shutdown": c.idle_shutdown ? "yes" : null,
      "dropped messages": c.dropped_messages || null,
    }),
    h("div.dal-section", "Versions"),
    kv(c.versions),
    h("div.dal-section", "Platform"),
    kv(p),
  );
  return box;
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-cluster");
  el.append(root);
  const picked: { worker: string | null } = { worker: null }; // the worker chosen in the Workers section, across redraws
  const draw = throttle(() => {
    const c: ClusterRow = model.get("cluster") || {};
    clear(root);
    if (!c.cluster_id) {
      root.append(
        empty(
          "No cluster recorded yet",
          h("span", "Run ", h("code", "%load_ext dask_analytics"), " and create a Client."),
        ),
      );
      return;
    }
    const now = model.get("snapshot_time") || Date.now() / 1000;
    const workers: WorkersData = {
      samples: readTable<WorkerSample>(model, "workers", "id"),
      events: model.get("worker_events") || [],
      computations: readTable<ComputationRow>(model, "computations", "computation_id"),
      picked,
    };
    root.append(
      h("div.dal-totals", statusBadge(c), h("b", c.name || c.cluster_id)),
      clusterSummary(c, readTable<ClusterSample>(model, "samples", "time"), now, workers),
    );
  });
  draw();
  const off = watch(
    model,
    [
      "cluster",
      "worker_events",
      ...tableTraits("samples"),
      ...tableTraits("workers"),
      ...tableTraits("computations"),
    ],
    draw,
  );
  return () => {
    off();
    root.remove();
  };
}

export default onScreen({ render });
