// The Reports page (/reports): the performance reports shared to this server.
import { h } from "../common/dom.js";
import { datetime, duration, whole } from "../common/format.js";
import { api } from "./api.js";
import { table } from "./tables.js";
import type { ReportRow } from "./rows.js";

export async function reportsPage(main: HTMLElement): Promise<void> {
  document.title = "Reports · dask-analytics";
  const { reports } = await api<{ reports: ReportRow[] }>("/reports", { limit: 500 });
  main.replaceChildren(
    h("h1", {}, "Performance reports"),
    table<ReportRow>(
      [
        {
          label: "Report",
          value: (r) =>
            h("a", { href: r.url }, r.title || (r.filename || "report").split("/").pop()),
        },
        { label: "User", value: (r) => r.user || "" },
        { label: "Created", value: (r) => datetime(r.created) },
        { label: "Duration", num: true, value: (r) => duration(r.summary && r.summary.duration) },
        { label: "Tasks", num: true, value: (r) => whole(r.summary && r.summary.n_tasks) },
        { label: "Visibility", value: (r) => (r.private ? "private" : "anyone with the link") },
        { label: "Data", value: (r) => h("a", { href: r.json_url }, "JSON") },
      ],
      reports,
      "No reports yet: with dask_analytics_lab.performance_report(filename=...): ...",
    ),
  );
}
