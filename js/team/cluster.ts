// A cluster's page (/clusters/{id}): its facts, charts over time, workers, computations,
// failures, events and, on demand, its profile.
import { h } from "../common/dom.js";
import { bytes, datetime, duration, money, whole } from "../common/format.js";
import {
  clusterEnded as ended,
  clusterSize as size,
  clusterStatus as status,
  clusterUptime as uptime,
  computationDuration as compDuration,
} from "../common/lifecycle.js";
import { clusterCharts } from "../widgets/cluster.js";
import { workersView } from "../widgets/workers.js";
import { api, enc, link } from "./api.js";
import { clusterBadge, stateBadge, statusTitle } from "./badges.js";
import { exceptionsList, failureCount } from "./failures.js";
import { facts, table } from "./tables.js";
import { counts, numCell, taskBar } from "./tasks.js";
import { flamegraph } from "./views.js";
import type { ProfileNode } from "../widgets/flamegraph.js";
import type { RawWorkerEvent } from "../widgets/workers.js";
import type {
  ClusterFinding,
  ClusterSample,
  EventRow,
  SentCluster,
  SentComputation,
  SentException,
  WorkerSample,
} from "../common/rows.js";

function computationsTable(computations: SentComputation[]): HTMLElement {
  return table<SentComputation>(
    [
      {
        label: "Computation",
        value: (c) =>
          h(
            "div",
            { class: "comp" },
            link(
              `/computations/${enc(c.computation_id)}`,
              c.label || `computation ${c.computation_id.slice(0, 12)}`,
            ),
            c.code_line
              ? h("code", { class: "code-line", title: c.code_line }, c.code_line.trim())
              : null,
            h("small", { class: "muted id" }, c.computation_id.slice(0, 12)),
          ),
      },
      { label: "State", value: (c) => stateBadge(c.state) },
      { label: "Start", value: (c) => h("span", { class: "nowrap" }, datetime(c.start)) },
      { label: "Duration", num: true, value: (c) => duration(compDuration(c, Date.now() / 1000)) },
      { label: "Tasks", value: (c) => taskBar(counts(c)) },
      {
        label: "Finished",
        num: true,
        value: (c) => `${whole(counts(c).done)} / ${whole(c.n_tasks)}`,
      },
      { label: "Erred", num: true, value: (c) => numCell(counts(c).erred, "error") },
      { label: "Never ran", num: true, value: (c) => numCell(counts(c)["not-run"], "not-run") },
      { label: "Compute", num: true, value: (c) => duration(c.compute) },
      { label: "Transfer", num: true, value: (c) => duration(c.transfer) },
      { label: "Bytes", num: true, value: (c) => bytes(c.nbytes) },
    ],
    computations,
    "No computation recorded.",
  );
}

/** The cluster's findings, summed over its computations: each kind's cost, its costliest
 *  computations (each a link to its own findings) and what to change. */
function findingsTable(found: ClusterFinding[]): HTMLElement {
  return table<ClusterFinding>(
    [
      {
        label: "Finding",
        value: (k) => h("div", {}, h("strong", {}, k.kind), h("div", { class: "muted" }, k.why)),
      },
      { label: "Computations", num: true, value: (k) => whole(k.n_computations) },
      { label: "Lost", num: true, value: (k) => `~${duration(k.impact)}` },
      {
        label: "Costliest",
        value: (k) =>
          h(
            "div",
            { class: "finding-comps" },
            k.computations
              .slice(0, 3)
              .map((c) =>
                h(
                  "div",
                  {},
                  link(
                    `/computations/${enc(c.computation_id)}`,
                    c.label || `computation ${c.computation_id.slice(0, 12)}`,
                  ),
                  " ",
                  h("small", { class: "muted id" }, c.computation_id.slice(0, 8)),
                  ` ~${duration(c.impact)}`,
                ),
              ),
          ),
      },
      { label: "What to change", value: (k) => k.advice },
    ],
    found,
    "No findings: none of its computations cost enough time to mention.",
  );
}

export async function clusterPage(main: HTMLElement, id: string): Promise<void> {
  const [
    { cluster: c },
    { samples },
    { computations },
    { exceptions },
    { events },
    { workers },
    joined,
    left,
    found,
  ] = await Promise.all([
    api<{ cluster: SentCluster }>(`/clusters/${enc(id)}`),
    api<{ samples: ClusterSample[] }>(`/clusters/${enc(id)}/samples`, { limit: 5000 }),
    api<{ computations: SentComputation[] }>(`/clusters/${enc(id)}/computations`, { limit: 500 }),
    api<{ exceptions: SentException[] }>("/exceptions", { cluster_id: id, limit: 500 }),
    api<{ events: EventRow[] }>("/events", { cluster_id: id, limit: 200 }),
    api<{ workers: WorkerSample[] }>(`/clusters/${enc(id)}/workers`, { limit: 100000 }),
    api<{ events: RawWorkerEvent[] }>("/events", {
      cluster_id: id,
      topic: "worker-joined",
      limit: 5000,
    }),
    api<{ events: RawWorkerEvent[] }>("/events", {
      cluster_id: id,
      topic: "worker-left",
      limit: 5000,
    }),
    // Its findings say why they are missing rather than keep the page from showing.
    api<{ findings: ClusterFinding[] | null; error?: unknown }>(
      `/clusters/${enc(id)}/findings`,
    ).catch((error: unknown) => ({ findings: null, error })),
  ]);
  document.title = `${c.name} · dask-analytics`;
  const now = Date.now() / 1000;
  const z = size(c);
  const versions = c.versions || {};
  const profileBox = h(
    "div",
    {},
    h(
      "button",
      {
        onclick: async () => {
          profileBox.replaceChildren(h("p", { class: "muted" }, "Loading…"));
          const { profile } = await api<{ profile: ProfileNode | null }>(
            `/clusters/${enc(id)}/profile`,
          );
          profileBox.replaceChildren(flamegraph(profile));
        },
      },
      "Show the cluster's profile",
    ),
  );
  const findingsBox = found.findings
    ? findingsTable(found.findings)
    : h(
        "p",
        { class: "muted" },
        `No findings: ${found.error instanceof Error ? found.error.message : String(found.error)}`,
      );
  main.replaceChildren(
    h("h1", {}, c.name || c.cluster_id, " ", clusterBadge(c)),
    facts([
      ["Id", c.cluster_id],
      ["Status", statusTitle(c)],
      ["User", c.user],
      ["Account", c.account],
      ["Address", c.address],
      ["Started", datetime(c.started)],
      [
        status(c) === "lost" ? "Last seen" : "Ended",
        ended(c) !== null
          ? `${datetime(ended(c))}${c.stop_reason ? ` (${c.stop_reason})` : ""}`
          : "",
      ],
      ["Duration", duration(uptime(c, now))],
      [z.peak ? "Peak workers" : "Workers", whole(z.workers)],
      [z.peak ? "Peak threads" : "Threads", whole(z.threads)],
      z.peak
        ? ["Peak memory", bytes(z.memory)]
        : ["Memory", c.memory_total ? `${bytes(c.memory_used)} of ${bytes(c.memory_total)}` : ""],
      ["Worker time", duration(c.worker_seconds)],
      ["Cost", money(c.cost)],
      ["Idle since", c.idle_since ? datetime(c.idle_since) : ""],
      ["Dropped messages", c.dropped_messages ? whole(c.dropped_messages) : ""],
      [
        "Versions",
        Object.entries(versions)
          .map(([k, v]) => `${k} ${v}`)
          .join(", "),
      ],
      [
        "Platform",
        c.platform
          ? `${c.platform.os || ""} ${c.platform.arch || ""} ${c.platform.python || ""}`
          : "",
      ],
    ]),
    h("h2", {}, "Findings"),
    findingsBox,
    h("h2", {}, "Workers, memory and tasks over time"),
    clusterCharts(samples) || h("p", { class: "muted" }, "Not enough samples for a chart yet."),
    // The notebook's Workers section: which worker ran out of memory, when, during what.
    h("h2", {}, "Workers over time"),
    h(
      "div",
      { class: "dal workers" },
      workersView(workers, [...joined.events, ...left.events], computations),
    ),
    h("h2", {}, `Computations (${computations.length})`),
    computationsTable(computations),
    h("h2", {}, `Exceptions (${failureCount(exceptions)})`),
    exceptionsList(exceptions, false),
    h("h2", {}, `Events (${events.length})`),
    table<EventRow>(
      [
        { label: "Time", value: (e) => datetime(e.time) },
        { label: "Topic", value: (e) => e.topic },
        { label: "Message", value: (e) => h("code", {}, JSON.stringify(e.msg).slice(0, 300)) },
      ],
      events,
      "No events recorded.",
    ),
    h("h2", {}, "Profile"),
    profileBox,
  );
}
