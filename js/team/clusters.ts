// The Clusters page (/): every cluster on a timeline and in a table, with the filters
// and the page in the URL.
import type { Child } from "../common/dom.js";
import { h, svg as s } from "../common/dom.js";
import { bytes, datetime, duration, money, whole } from "../common/format.js";
import {
  clusterEnded as ended,
  clusterSize as size,
  clusterStatus as status,
  clusterUptime as uptime,
} from "../common/lifecycle.js";
import type { Filters } from "../common/filters.js";
import { filterBar, filterParams, filtersFrom, pager } from "../common/filters.js";
import { PREFIX, api, enc, link, visit } from "./api.js";
import { clusterBadge } from "./badges.js";
import { table } from "./tables.js";
import type { SentCluster, SentException } from "../common/rows.js";

const STATE_COLOR: Record<string, string> = {
  live: "#1f6feb",
  stopped: "#8c959f",
  lost: "#bf8700",
};

/** The newest 60 clusters as bars from start to end, red with errors; each links its page. */
function timeline(clusters: SentCluster[], errorsBy: Record<string, number>): SVGElement | null {
  const rows = clusters.slice(0, 60).reverse();
  if (!rows.length) return null;
  const now = Date.now() / 1000;
  const t0 = Math.min(...rows.map((c) => c.started));
  const t1 = Math.max(...rows.map((c) => ended(c) ?? now));
  const W = 1000,
    rowH = 14,
    left = 160,
    top = 8,
    H = top + rows.length * rowH + 22;
  const x = (t: number) => left + ((t - t0) / Math.max(t1 - t0, 1)) * (W - left - 10);
  const svg = s("svg", {
    class: "chart",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": "Clusters over time",
  });
  rows.forEach((c, i) => {
    const y = top + i * rowH;
    const state = status(c);
    const end = ended(c) ?? now;
    const color = errorsBy[c.cluster_id] ? "#cf222e" : STATE_COLOR[state];
    const label = s(
      "text",
      { x: left - 6, y: y + 10, "text-anchor": "end" },
      (c.name || c.cluster_id).slice(0, 26),
    );
    const bar = s("rect", {
      x: x(c.started),
      y: y + 2,
      width: Math.max(2, x(end) - x(c.started)),
      height: rowH - 4,
      fill: color,
      rx: 2,
    });
    bar.appendChild(
      s(
        "title",
        {},
        `${c.name} (${c.user || "?"}): ${datetime(c.started)} – ${ended(c) !== null ? `${datetime(ended(c))} (${state})` : state}`,
      ),
    );
    const a = s("a", { href: `${PREFIX}/clusters/${enc(c.cluster_id)}` });
    a.appendChild(label);
    a.appendChild(bar);
    svg.appendChild(a);
  });
  const yAxis = top + rows.length * rowH + 14;
  svg.appendChild(s("text", { x: left, y: yAxis }, datetime(t0)));
  svg.appendChild(s("text", { x: W - 10, y: yAxis, "text-anchor": "end" }, datetime(t1)));
  return svg;
}

type SizeKey = "workers" | "threads" | "memory";

/** Now while live, the peak (marked) once it ended. */
function sizeCell(c: SentCluster, key: SizeKey, fmt: (n: number | null) => string): Child {
  const z = size(c);
  return z.peak
    ? h(
        "span",
        { class: "peak", title: "peak: how big it got" },
        fmt(z[key]),
        h("small", { class: "muted" }, " peak"),
      )
    : fmt(z[key]);
}

export async function clustersPage(main: HTMLElement): Promise<void> {
  document.title = "Clusters · dask-analytics";
  const search = new URLSearchParams(location.search);
  const filters = filtersFrom(search);
  const before = search.get("before");
  const limit = Number(search.get("limit")) || 100;
  const keep = (f: Filters, b: string | null) =>
    visit({ ...f, before: b, limit: search.get("limit") });
  const [{ clusters }, { exceptions }] = await Promise.all([
    api<{ clusters: SentCluster[] }>("/clusters", { limit, ...filterParams(filters), before }),
    api<{ exceptions: SentException[] }>("/exceptions", { limit: 2000 }),
  ]);
  const errorsBy: Record<string, number> = {};
  for (const e of exceptions) errorsBy[e.cluster_id] = (errorsBy[e.cluster_id] || 0) + e.count;
  const now = Date.now() / 1000;
  const filtered = before || Object.keys(filters).length;
  main.replaceChildren(
    h("h1", {}, "Clusters"),
    filterBar(["live", "stopped", "lost"], filters, (f) => keep(f, null)),
    h(
      "div",
      { class: "legend muted" },
      ["live|#1f6feb", "stopped|#8c959f", "lost (went silent)|#bf8700", "with errors|#cf222e"].map(
        (p) => {
          const [label, color] = p.split("|");
          const i = h("i", {});
          i.style.background = color;
          return h("span", {}, i, label);
        },
      ),
    ),
    timeline(clusters, errorsBy) || h("p", { class: "muted" }, "No cluster recorded yet."),
    h("h2", {}, `${clusters.length} clusters${filtered ? " shown" : ""}`),
    table<SentCluster>(
      [
        {
          label: "Cluster",
          value: (c) => link(`/clusters/${enc(c.cluster_id)}`, c.name || c.cluster_id),
        },
        { label: "User", value: (c) => c.user || "" },
        { label: "Account", value: (c) => c.account || "" },
        { label: "State", value: (c) => clusterBadge(c) },
        { label: "Started", value: (c) => datetime(c.started) },
        { label: "Ended", value: (c) => (ended(c) !== null ? datetime(ended(c)) : "") },
        { label: "Duration", num: true, value: (c) => duration(uptime(c, now)) },
        { label: "Workers", num: true, value: (c) => sizeCell(c, "workers", whole) },
        { label: "Threads", num: true, value: (c) => sizeCell(c, "threads", whole) },
        { label: "Memory", num: true, value: (c) => sizeCell(c, "memory", bytes) },
        { label: "Cost", num: true, value: (c) => money(c.cost) },
        {
          label: "Idle",
          num: true,
          value: (c) => (c.idle_since ? duration((ended(c) ?? now) - c.idle_since) : ""),
        },
        {
          label: "Errors",
          num: true,
          value: (c) =>
            errorsBy[c.cluster_id]
              ? h("span", { class: "error" }, whole(errorsBy[c.cluster_id]))
              : "0",
        },
      ],
      clusters,
      filtered
        ? "No cluster matches."
        : "No cluster recorded yet: register one with dask_analytics_lab.register(client).",
    ),
    pager(clusters, limit, !!before, (b) => keep(filters, b)),
  );
}
