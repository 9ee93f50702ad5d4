// A computation's page (/computations/{id}): its facts against the previous run of the
// same code, findings, code, task groups, time, task stream, failures and profile.
import type { Child } from "../common/dom.js";
import { h } from "../common/dom.js";
import { bytes, datetime, duration, whole } from "../common/format.js";
import { computationDuration as compDuration } from "../common/lifecycle.js";
import type { RunSummary } from "../common/runs.js";
import { runsBanner, runsTrend, vsPrevious } from "../common/runs.js";
import type { Finding } from "../widgets/findings.js";
import { api, enc, link } from "./api.js";
import { stateBadge } from "./badges.js";
import { exceptionsList, failureCount } from "./failures.js";
import type { Column } from "./tables.js";
import { facts, table } from "./tables.js";
import { counts, numCell, taskBar, taskLegend } from "./tasks.js";
import { findingsBox, flamegraph, taskStream, timeBreakdown } from "./views.js";
import type { ProfileNode } from "../widgets/flamegraph.js";
import type { SentDetail, SentException, StreamRow, TaskGroupRow } from "../common/rows.js";

export async function computationPage(main: HTMLElement, id: string): Promise<void> {
  const [
    { computation: c },
    { exceptions },
    { profile },
    { summary: runs },
    { tasks },
    { findings },
  ] = await Promise.all([
    api<{ computation: SentDetail }>(`/computations/${enc(id)}`),
    api<{ exceptions: SentException[] }>("/exceptions", { computation_id: id, limit: 500 }),
    api<{ profile: ProfileNode | null }>(`/computations/${enc(id)}/profile`),
    api<{ summary: RunSummary | null }>(`/computations/${enc(id)}/summary`),
    api<{ tasks: StreamRow[] }>(`/computations/${enc(id)}/tasks`, { limit: 50000 }),
    api<{ findings: Finding[] }>(`/computations/${enc(id)}/findings`),
  ]);
  // The run this one is compared with: none while it runs.
  const baseline = c.state !== "running" ? runs?.baseline_id || null : null;
  const compared = !!baseline;
  document.title = `${c.label || `Computation ${id.slice(0, 12)}`} · dask-analytics`;
  const groups = c.groups || [];
  const code = c.code || [];
  const total = counts(c);
  const runFacts: [string, Child][] = baseline
    ? [
        [
          "Runs of this code",
          h(
            "span",
            { class: "dal-runs" },
            runsTrend(runs, c.computation_id) || "",
            " previous: ",
            link(`/computations/${enc(baseline)}`, baseline.slice(0, 12)),
          ),
        ],
      ]
    : [];
  const vsColumn: Column<TaskGroupRow>[] = compared
    ? [
        {
          label: "vs previous",
          num: true,
          value: (g) => vsPrevious(runs?.groups?.[g.prefix || g.name]),
        },
      ]
    : [];
  main.replaceChildren(
    h("h1", {}, c.label || "Computation", " ", stateBadge(c.state)),
    compared ? runsBanner(runs) || "" : "",
    c.code_line ? h("pre", { class: "code code-line" }, c.code_line) : "",
    facts([
      ["Id", h("code", {}, c.computation_id)],
      ["Cluster", link(`/clusters/${enc(c.cluster_id)}`, c.cluster_id)],
      ["Start", datetime(c.start)],
      ["Stop", datetime(c.stop)],
      ["Duration", duration(compDuration(c, Date.now() / 1000))],
      [
        "Tasks",
        h(
          "span",
          {},
          `${whole(c.n_tasks)}: ${whole(total.done)} finished, `,
          numCell(total.erred, "error"),
          " erred, ",
          numCell(total["not-run"], "not-run"),
          " never ran",
        ),
      ],
      ["Compute time", duration(c.compute)],
      ["Transfer time", duration(c.transfer)],
      ["Disk time", duration(c.disk)],
      ["Bytes", bytes(c.nbytes)],
      ...runFacts,
    ]),
    h("h2", {}, c.state === "running" ? "Findings" : `Findings (${findings.length})`),
    findingsBox(c, findings),
    h("h2", {}, "Code"),
    code.length
      ? h(
          "div",
          {},
          code.map((snippet) =>
            h(
              "div",
              { class: "snippet" },
              h(
                "p",
                { class: "muted" },
                `${snippet.filename || "?"}${snippet.lineno_frame ? `, line ${snippet.lineno_frame}` : ""}`,
              ),
              h(
                "pre",
                { class: "code" },
                snippet.text === null ? "(snippet not received)" : snippet.text,
              ),
            ),
          ),
        )
      : h(
          "p",
          { class: "muted" },
          "No code recorded (analytics.computation.code.transmit off, or none sent).",
        ),
    h("h2", {}, `Task groups (${groups.length})`),
    groups.length ? taskLegend() : "",
    table<TaskGroupRow>(
      [
        { label: "Group", value: (g) => g.name },
        { label: "Prefix", value: (g) => g.prefix },
        { label: "Tasks", value: (g) => taskBar(counts(g)) },
        {
          label: "Finished",
          num: true,
          value: (g) => `${whole(counts(g).done)} / ${whole(g.n_tasks)}`,
        },
        { label: "Erred", num: true, value: (g) => numCell(counts(g).erred, "error") },
        { label: "Never ran", num: true, value: (g) => numCell(counts(g)["not-run"], "not-run") },
        { label: "Compute", num: true, value: (g) => duration(g.compute) },
        ...vsColumn,
        { label: "Transfer", num: true, value: (g) => duration(g.transfer) },
        {
          label: "Disk",
          num: true,
          value: (g) => duration((g.disk_read || 0) + (g.disk_write || 0)),
        },
        { label: "Bytes", num: true, value: (g) => bytes(g.nbytes) },
        { label: "Depends on", value: (g) => (g.dependencies || []).join(", ") },
      ],
      groups,
      "No task groups recorded.",
    ),
    h("h2", {}, "Time"),
    timeBreakdown(c),
    h("h2", {}, "Task stream"),
    taskStream(c, tasks),
    h("h2", {}, `Exceptions (${failureCount(exceptions)})`),
    exceptionsList(exceptions, false),
    h("h2", {}, "Profile"),
    flamegraph(profile),
  );
}
