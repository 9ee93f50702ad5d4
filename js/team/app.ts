// dask-analytics team view: reads the JSON API and builds the page with DOM calls.
// Stored strings (names, tracebacks, code) only ever go through textContent, never
// innerHTML, so nothing recorded can inject markup or script into this page.
// Built by js/build.mjs into dask_analytics_lab/static/team.js (one classic script, served
// at {prefix}/widgets/team.js); it reads the store's rows with the notebook views'
// helpers (js/common/lifecycle.ts, progress.ts) and shows profiles with their flamegraph.
import { clusterStatus as status, clusterEnded as ended, clusterUptime as uptime, clusterSize as size,
  computationDuration as compDuration } from "../common/lifecycle.js";
import { taskCounts } from "../common/progress.js";
import flamegraphView from "../widgets/flamegraph.js";
import timeView from "../widgets/time.js";
import streamView from "../widgets/stream.js";
import findingsView from "../widgets/findings.js";
import { clusterCharts } from "../widgets/cluster.js";
import { workersView } from "../widgets/workers.js";
import { LocalModel } from "../common/model.js";
import { h, svg } from "../common/dom.js";
import { bytes, datetime, duration, money, whole } from "../common/format.js";
import { failureRow as commonFailureRow } from "../common/failures.js";
import { runsBanner, runsTrend, vsPrevious } from "../common/runs.js";
import { Filters, filterBar, filterParams, filtersFrom, pager } from "../common/filters.js";

(function () {
  const body = document.body;
  const PREFIX = body.dataset.prefix || "";
  const app = document.getElementById("app")!;

  // ---------- helpers: the views' (js/common) ----------
  const s = svg;
  const link = (path, text) => h("a", { href: PREFIX + path }, text);
  const enc = encodeURIComponent;
  const stateBadge = (state) => h("span", { class: `state ${state}` }, state);

  function table(columns, rows, empty) {
    if (!rows.length) return h("p", { class: "muted" }, empty || "Nothing recorded yet.");
    return h("table", {},
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.label)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, columns.map((c) => h("td", { class: c.num ? "num" : null }, c.value(r)))))));
  }
  function facts(pairs) {
    return h("dl", { class: "facts" }, pairs.filter((p) => p[1] !== "" && p[1] !== "–" && p[1] !== null && p[1] !== undefined)
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  }

  // ---------- the API ----------
  let redirecting = false;
  async function api(path: string, params?: Record<string, unknown>): Promise<any> {
    const given = Object.entries(params || {}).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => [k, String(v)]);
    const q = params ? "?" + new URLSearchParams(given) : "";
    const response = await fetch(`${PREFIX}/api${path}${q}`, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (response.status === 401) {
      if (!redirecting) {  // several calls fail at once: navigate once
        redirecting = true;
        location.replace(`${PREFIX}/login?next=${enc(location.pathname)}`);
      }
      throw new Error("not logged in");
    }
    let data: any = null;
    try { data = await response.json(); } catch (e) { /* not JSON */ }
    if (!response.ok) throw new Error((data && data.error) || `${response.status} ${response.statusText}`);
    return data;
  }

  // ---------- what the store says, shown as it says it ----------
  // live / stopped / lost is decided once, by the store (store/queries.py); the page
  // reads it with the views' helpers (js/common/lifecycle.ts).
  function statusTitle(c) {
    const st = status(c);
    if (st === "lost") return `its scheduler went silent without saying it stopped; last seen ${datetime(ended(c))}`;
    if (st === "stopped") return `stopped ${datetime(ended(c))}${c.stop_reason ? ` (${c.stop_reason})` : ""}`;
    return "its scheduler is sending heartbeats";
  }
  const clusterBadge = (c) => h("span", { class: `state ${status(c)}`, title: statusTitle(c) }, status(c));


  // What became of a group's (or computation's) tasks: finished, erred (raised), cancelled
  // while running, never ran (a dependency failed, released, cancelled before it ran), and
  // what is still to come.
  const SEGMENTS = [["done", "finished", "#7fa6dc"], ["erred", "erred", "#e5484d"],
    ["cancelled", "cancelled while running", "#a06b3c"], ["not-run", "never ran", "#6e5a8a"],
    ["processing", "processing", "#f5a524"], ["waiting", "waiting", "#dfe3e8"]];
  // The views' reading of a row's task counts (js/common/progress.ts), in this page's
  // segments: processing includes tasks waiting for a worker.
  function counts(g) {
    const k = taskCounts(g);
    const processing = (k.processing || 0) + (k["no-worker"] || 0);
    return { total: k.total, done: k.done, erred: k.erred, cancelled: k.cancelled, "not-run": k["not-run"], processing,
      waiting: Math.max(k.total - k.done - k.erred - k.cancelled - k["not-run"] - processing, 0) };
  }
  function taskBar(k) {
    const n = Math.max(k.total || 0, 1);
    const bar = h("div", { class: "bar", title: SEGMENTS.filter(([id]) => k[id]).map(([id, label]) => `${label}: ${whole(k[id])}`).join(", ") });
    for (const [id, label, color] of SEGMENTS) {
      if (!k[id]) continue;
      bar.appendChild(h("span", { class: `seg ${id}`, title: `${label}: ${whole(k[id])}`,
        style: `width:${((100 * k[id]) / n).toFixed(3)}%;background:${color}` }));
    }
    return bar;
  }
  const taskLegend = () => h("div", { class: "legend muted" }, SEGMENTS.map(([id, label, color]) =>
    h("span", {}, h("i", { class: `seg ${id}`, style: `background:${color}` }), label)));
  const numCell = (n, cls) => (n ? h("span", { class: cls }, whole(n)) : "0");

  // One row per failure: the views' (js/common/failures.ts); on the Exceptions page it
  // also links the cluster and computation it came from.
  function failureRow(e, withLinks) {
    const row = commonFailureRow(e);
    if (withLinks) {
      row.querySelector(".dal-fail-body")!.prepend(h("p", {}, "Cluster ", link(`/clusters/${enc(e.cluster_id)}`, e.cluster_id),
        e.computation_id ? [", computation ", link(`/computations/${enc(e.computation_id)}`, e.computation_id.slice(0, 12))] : ""));
    }
    return row;
  }

  // ---------- charts ----------
  function timeline(clusters, errorsBy) {
    const rows = clusters.slice(0, 60).reverse();
    if (!rows.length) return null;
    const now = Date.now() / 1000;
    const t0 = Math.min(...rows.map((c) => c.started));
    const t1 = Math.max(...rows.map((c) => ended(c) ?? now));
    const W = 1000, rowH = 14, left = 160, top = 8, H = top + rows.length * rowH + 22;
    const x = (t) => left + ((t - t0) / Math.max(t1 - t0, 1)) * (W - left - 10);
    const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Clusters over time" });
    rows.forEach((c, i) => {
      const y = top + i * rowH;
      const state = status(c);
      const end = ended(c) ?? now;
      const color = errorsBy[c.cluster_id] ? "#cf222e" : { live: "#1f6feb", stopped: "#8c959f", lost: "#bf8700" }[state];
      const label = s("text", { x: left - 6, y: y + 10, "text-anchor": "end" }, (c.name || c.cluster_id).slice(0, 26));
      const bar = s("rect", { x: x(c.started), y: y + 2, width: Math.max(2, x(end) - x(c.started)), height: rowH - 4, fill: color, rx: 2 });
      bar.appendChild(s("title", {}, `${c.name} (${c.user || "?"}): ${datetime(c.started)} – ${ended(c) !== null ? `${datetime(ended(c))} (${state})` : state}`));
      const a = s("a", { href: `${PREFIX}/clusters/${enc(c.cluster_id)}` });
      a.appendChild(label); a.appendChild(bar);
      svg.appendChild(a);
    });
    const yAxis = top + rows.length * rowH + 14;
    svg.appendChild(s("text", { x: left, y: yAxis }, datetime(t0)));
    svg.appendChild(s("text", { x: W - 10, y: yAxis, "text-anchor": "end" }, datetime(t1)));
    return svg;
  }

  // Dask's profile tree as a flamegraph: the notebook widget's own view (zoom on click,
  // search, hover for file, line and code), bundled into this page's script, so
  // the product has one flamegraph.
  function flamegraph(tree) {
    const wrap = h("div", { class: "flame" });
    if (!tree || !tree.count) {
      wrap.appendChild(h("p", { class: "muted" }, "No profile recorded (analytics.profile.transmit off, or too short to sample)."));
      return wrap;
    }
    flamegraphView.render({ model: new LocalModel({ profile: tree }), el: wrap });
    return wrap;
  }

  // Where each task group's time went: the notebook's Time tab over the stored metrics.
  function timeBreakdown(c) {
    const wrap = h("div", { class: "time" });
    timeView.render({ model: new LocalModel({ metrics: c.metrics || [], computation: c,
      groups_base: { v: 0, rows: c.groups || [] } }), el: wrap });
    return wrap;
  }

  // When and where each task ran: the notebook's Task stream tab over the stored rows.
  function taskStream(c, tasks) {
    const wrap = h("div", { class: "stream" });
    streamView.render({ model: new LocalModel({ stream_base: { v: 0, rows: tasks }, computation: c }), el: wrap });
    return wrap;
  }

  // Why it was slow: the notebook's Findings tab over the server's findings (findings/).
  // A running computation's record is partial, so it gets none yet (the view says so).
  function findingsBox(c, found) {
    const wrap = h("div", { class: "findings" });
    const shown = c.state === "running" ? {} : { computation_id: c.computation_id, findings: found };
    findingsView.render({ model: new LocalModel({ computation: c, findings: shown }), el: wrap });
    return wrap;
  }

  // ---------- pages ----------
  // The filters and the page live in the URL (?user=ann&state=live&before=...): a
  // filtered page is a link to share, and Back goes to the page before.
  function visit(params: Record<string, string | null | undefined>): void {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
    location.assign(location.pathname + (q.toString() ? `?${q}` : ""));
  }

  async function clustersPage() {
    document.title = "Clusters · dask-analytics";
    const search = new URLSearchParams(location.search);
    const filters = filtersFrom(search);
    const before = search.get("before");
    const limit = Number(search.get("limit")) || 100;
    const keep = (f: Filters, b: string | null) => visit({ ...f, before: b, limit: search.get("limit") });
    const [{ clusters }, { exceptions }] = await Promise.all([
      api("/clusters", { limit, ...filterParams(filters), before }), api("/exceptions", { limit: 2000 })]);
    const errorsBy = {};
    for (const e of exceptions) errorsBy[e.cluster_id] = (errorsBy[e.cluster_id] || 0) + e.count;
    const now = Date.now() / 1000;
    const filtered = before || Object.keys(filters).length;
    app.replaceChildren(
      h("h1", {}, "Clusters"),
      filterBar(["live", "stopped", "lost"], filters, (f) => keep(f, null)),
      h("div", { class: "legend muted" },
        ["live|#1f6feb", "stopped|#8c959f", "lost (went silent)|#bf8700", "with errors|#cf222e"].map((p) => {
          const [label, color] = p.split("|"); const i = h("i", {}); i.style.background = color; return h("span", {}, i, label);
        })),
      timeline(clusters, errorsBy) || h("p", { class: "muted" }, "No cluster recorded yet."),
      h("h2", {}, `${clusters.length} clusters${filtered ? " shown" : ""}`),
      table([
        { label: "Cluster", value: (c) => link(`/clusters/${enc(c.cluster_id)}`, c.name || c.cluster_id) },
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
        { label: "Idle", num: true, value: (c) => (c.idle_since ? duration((ended(c) ?? now) - c.idle_since) : "") },
        { label: "Errors", num: true, value: (c) => (errorsBy[c.cluster_id] ? h("span", { class: "error" }, whole(errorsBy[c.cluster_id])) : "0") },
      ], clusters, filtered ? "No cluster matches." : "No cluster recorded yet: register one with dask_analytics_lab.register(client)."),
      pager(clusters, limit, !!before, (b) => keep(filters, b)));
  }

  async function costsPage() {
    document.title = "Costs · dask-analytics";
    const search = new URLSearchParams(location.search);
    const by = search.get("by") || "user";
    const since = search.get("since") || "";
    const { costs } = await api("/costs", { by, since: since || null });
    const names = { user: "User", day: "Day (UTC)", month: "Month (UTC)" };
    const total = costs.reduce((a, r) => a + (r.cost || 0), 0);
    const sinceField = h("input", { type: "date", name: "since", value: since, "aria-label": "Since (UTC day)" });
    app.replaceChildren(
      h("h1", {}, "Costs"),
      h("div", { class: "dal-filters" },
        h("span", { role: "tablist", "aria-label": "Group by" }, Object.entries(names).map(([key, label]) =>
          h("a", { href: `?${new URLSearchParams(since ? { by: key, since } : { by: key })}`, role: "tab",
            "aria-selected": String(key === by), class: key === by ? "chosen" : null }, `by ${label.split(" ")[0].toLowerCase()}`))),
        h("form", { onsubmit: (e: Event) => { e.preventDefault(); visit({ by, since: sinceField.value }); } },
          h("label", {}, "since ", sinceField), h("button", { type: "submit" }, "Show"))),
      h("p", { class: "muted" }, `${whole(costs.length)} row${costs.length === 1 ? "" : "s"} · total ${money(total)}`,
        " · a cluster counts in the day it started, with its cost so far"),
      table([
        { label: names[by] || by, value: (r) => (r.key === null ? "(unknown)" : r.key) },
        { label: "Clusters", num: true, value: (r) => whole(r.clusters) },
        { label: "Computations", num: true, value: (r) => whole(r.computations) },
        { label: "Core-hours", num: true, value: (r) => r.core_hours.toFixed(2) },
        { label: "Cost", num: true, value: (r) => money(r.cost) },
      ], costs, "No cluster recorded in this time."));
  }

  // Now while live, the peak (marked) once it ended.
  function sizeCell(c, key, fmt) {
    const z = size(c);
    return z.peak ? h("span", { class: "peak", title: "peak: how big it got" }, fmt(z[key]), h("small", { class: "muted" }, " peak")) : fmt(z[key]);
  }

  function computationsTable(computations) {
    return table([
      { label: "Computation", value: (c) => h("div", { class: "comp" },
        link(`/computations/${enc(c.computation_id)}`, c.label || `computation ${c.computation_id.slice(0, 12)}`),
        c.code_line ? h("code", { class: "code-line", title: c.code_line }, c.code_line.trim()) : null,
        h("small", { class: "muted id" }, c.computation_id.slice(0, 12))) },
      { label: "State", value: (c) => stateBadge(c.state) },
      { label: "Start", value: (c) => h("span", { class: "nowrap" }, datetime(c.start)) },
      { label: "Duration", num: true, value: (c) => duration(compDuration(c, Date.now() / 1000)) },
      { label: "Tasks", value: (c) => taskBar(counts(c)) },
      { label: "Finished", num: true, value: (c) => `${whole(counts(c).done)} / ${whole(c.n_tasks)}` },
      { label: "Erred", num: true, value: (c) => numCell(counts(c).erred, "error") },
      { label: "Never ran", num: true, value: (c) => numCell(counts(c)["not-run"], "not-run") },
      { label: "Compute", num: true, value: (c) => duration(c.compute) },
      { label: "Transfer", num: true, value: (c) => duration(c.transfer) },
      { label: "Bytes", num: true, value: (c) => bytes(c.nbytes) },
    ], computations, "No computation recorded.");
  }

  function exceptionsList(exceptions, withLinks) {
    if (!exceptions.length) return h("p", { class: "muted" }, "No failed tasks.");
    return h("div", { class: "failures dal-fails" }, exceptions.map((e) => failureRow(e, withLinks)));
  }
  const failureCount = (exceptions) => {
    const n = exceptions.reduce((a, e) => a + (e.count || 0), 0);
    return `${exceptions.length} kind${exceptions.length === 1 ? "" : "s"}, ${whole(n)} task${n === 1 ? "" : "s"}`;
  };

  async function clusterPage(id) {
    const [{ cluster: c }, { samples }, { computations }, { exceptions }, { events }, { workers }, joined, left] = await Promise.all([
      api(`/clusters/${enc(id)}`), api(`/clusters/${enc(id)}/samples`, { limit: 5000 }),
      api(`/clusters/${enc(id)}/computations`, { limit: 500 }), api("/exceptions", { cluster_id: id, limit: 500 }),
      api("/events", { cluster_id: id, limit: 200 }), api(`/clusters/${enc(id)}/workers`, { limit: 100000 }),
      api("/events", { cluster_id: id, topic: "worker-joined", limit: 5000 }),
      api("/events", { cluster_id: id, topic: "worker-left", limit: 5000 })]);
    document.title = `${c.name} · dask-analytics`;
    const now = Date.now() / 1000;
    const z = size(c);
    const versions = c.versions || {};
    const profileBox = h("div", {}, h("button", { onclick: async () => {
      profileBox.replaceChildren(h("p", { class: "muted" }, "Loading…"));
      const { profile } = await api(`/clusters/${enc(id)}/profile`);
      profileBox.replaceChildren(flamegraph(profile));
    } }, "Show the cluster's profile"));
    app.replaceChildren(
      h("h1", {}, c.name || c.cluster_id, " ", clusterBadge(c)),
      facts([["Id", c.cluster_id], ["Status", statusTitle(c)], ["User", c.user], ["Account", c.account], ["Address", c.address],
        ["Started", datetime(c.started)],
        [status(c) === "lost" ? "Last seen" : "Ended", ended(c) !== null ? `${datetime(ended(c))}${c.stop_reason ? ` (${c.stop_reason})` : ""}` : ""],
        ["Duration", duration(uptime(c, now))],
        [z.peak ? "Peak workers" : "Workers", whole(z.workers)], [z.peak ? "Peak threads" : "Threads", whole(z.threads)],
        z.peak ? ["Peak memory", bytes(z.memory)]
          : ["Memory", c.memory_total ? `${bytes(c.memory_used)} of ${bytes(c.memory_total)}` : ""],
        ["Worker time", duration(c.worker_seconds)], ["Cost", money(c.cost)],
        ["Idle since", c.idle_since ? datetime(c.idle_since) : ""], ["Dropped messages", c.dropped_messages ? whole(c.dropped_messages) : ""],
        ["Versions", Object.entries(versions).map(([k, v]) => `${k} ${v}`).join(", ")],
        ["Platform", c.platform ? `${c.platform.os || ""} ${c.platform.arch || ""} ${c.platform.python || ""}` : ""]]),
      h("h2", {}, "Workers, memory and tasks over time"),
      clusterCharts(samples) || h("p", { class: "muted" }, "Not enough samples for a chart yet."),
      // The notebook's Workers section: which worker ran out of memory, when, during what.
      h("h2", {}, "Workers over time"),
      h("div", { class: "dal workers" }, workersView(workers, [...joined.events, ...left.events], computations)),
      h("h2", {}, `Computations (${computations.length})`), computationsTable(computations),
      h("h2", {}, `Exceptions (${failureCount(exceptions)})`), exceptionsList(exceptions, false),
      h("h2", {}, `Events (${events.length})`),
      table([{ label: "Time", value: (e) => datetime(e.time) }, { label: "Topic", value: (e) => e.topic },
        { label: "Message", value: (e) => h("code", {}, JSON.stringify(e.msg).slice(0, 300)) }], events, "No events recorded."),
      h("h2", {}, "Profile"), profileBox);
  }

  async function computationPage(id) {
    const [{ computation: c }, { exceptions }, { profile }, { summary: runs }, { tasks }, { findings }] = await Promise.all([
      api(`/computations/${enc(id)}`), api("/exceptions", { computation_id: id, limit: 500 }),
      api(`/computations/${enc(id)}/profile`), api(`/computations/${enc(id)}/summary`),
      api(`/computations/${enc(id)}/tasks`, { limit: 50000 }), api(`/computations/${enc(id)}/findings`)]);
    const compared = c.state !== "running" && !!runs?.baseline_id;
    document.title = `${c.label || `Computation ${id.slice(0, 12)}`} · dask-analytics`;
    const groups = c.groups || [];
    const total = counts(c);
    app.replaceChildren(
      h("h1", {}, c.label || "Computation", " ", stateBadge(c.state)),
      compared ? runsBanner(runs) || "" : "",
      c.code_line ? h("pre", { class: "code code-line" }, c.code_line) : "",
      facts([["Id", h("code", {}, c.computation_id)], ["Cluster", link(`/clusters/${enc(c.cluster_id)}`, c.cluster_id)], ["Start", datetime(c.start)],
        ["Stop", datetime(c.stop)], ["Duration", duration(compDuration(c, Date.now() / 1000))],
        ["Tasks", h("span", {}, `${whole(c.n_tasks)}: ${whole(total.done)} finished, `, numCell(total.erred, "error"), " erred, ",
          numCell(total["not-run"], "not-run"), " never ran")],
        ["Compute time", duration(c.compute)], ["Transfer time", duration(c.transfer)],
        ["Disk time", duration(c.disk)], ["Bytes", bytes(c.nbytes)],
        ...(compared ? [["Runs of this code", h("span", { class: "dal-runs" }, runsTrend(runs, c.computation_id) || "",
          " previous: ", link(`/computations/${enc(runs.baseline_id)}`, runs.baseline_id.slice(0, 12)))]] : [])]),
      h("h2", {}, c.state === "running" ? "Findings" : `Findings (${findings.length})`), findingsBox(c, findings),
      h("h2", {}, "Code"),
      (c.code || []).length ? h("div", {}, c.code.map((snippet) => h("div", { class: "snippet" },
        h("p", { class: "muted" }, `${snippet.filename || "?"}${snippet.lineno_frame ? `, line ${snippet.lineno_frame}` : ""}`),
        h("pre", { class: "code" }, snippet.text === null ? "(snippet not received)" : snippet.text))))
        : h("p", { class: "muted" }, "No code recorded (analytics.computation.code.transmit off, or none sent)."),
      h("h2", {}, `Task groups (${groups.length})`),
      groups.length ? taskLegend() : "",
      table([
        { label: "Group", value: (g) => g.name }, { label: "Prefix", value: (g) => g.prefix },
        { label: "Tasks", value: (g) => taskBar(counts(g)) },
        { label: "Finished", num: true, value: (g) => `${whole(counts(g).done)} / ${whole(g.n_tasks)}` },
        { label: "Erred", num: true, value: (g) => numCell(counts(g).erred, "error") },
        { label: "Never ran", num: true, value: (g) => numCell(counts(g)["not-run"], "not-run") },
        { label: "Compute", num: true, value: (g) => duration(g.compute) },
        ...(compared ? [{ label: "vs previous", num: true, value: (g) => vsPrevious(runs.groups?.[g.prefix || g.name]) }] : []),
        { label: "Transfer", num: true, value: (g) => duration(g.transfer) },
        { label: "Disk", num: true, value: (g) => duration((g.disk_read || 0) + (g.disk_write || 0)) },
        { label: "Bytes", num: true, value: (g) => bytes(g.nbytes) },
        { label: "Depends on", value: (g) => (g.dependencies || []).join(", ") },
      ], groups, "No task groups recorded."),
      h("h2", {}, "Time"), timeBreakdown(c),
      h("h2", {}, "Task stream"), taskStream(c, tasks),
      h("h2", {}, `Exceptions (${failureCount(exceptions)})`), exceptionsList(exceptions, false),
      h("h2", {}, "Profile"), flamegraph(profile));
  }

  async function exceptionsPage() {
    document.title = "Exceptions · dask-analytics";
    const { exceptions } = await api("/exceptions", { limit: 500 });
    app.replaceChildren(h("h1", {}, "Exceptions"), exceptions.length ? h("p", { class: "muted" }, failureCount(exceptions)) : "",
      exceptionsList(exceptions, true));
  }

  async function reportsPage() {
    document.title = "Reports · dask-analytics";
    const { reports } = await api("/reports", { limit: 500 });
    app.replaceChildren(h("h1", {}, "Performance reports"),
      table([
        { label: "Report", value: (r) => h("a", { href: r.url }, r.title || (r.filename || "report").split("/").pop()) },
        { label: "User", value: (r) => r.user || "" },
        { label: "Created", value: (r) => datetime(r.created) },
        { label: "Duration", num: true, value: (r) => duration(r.summary && r.summary.duration) },
        { label: "Tasks", num: true, value: (r) => whole(r.summary && r.summary.n_tasks) },
        { label: "Visibility", value: (r) => (r.private ? "private" : "anyone with the link") },
        { label: "Data", value: (r) => h("a", { href: r.json_url }, "JSON") },
      ], reports, "No reports yet: with dask_analytics_lab.performance_report(filename=...): ..."));
  }

  async function whoami() {
    const slot = document.getElementById("whoami")!;
    try {
      const { whoami: w } = await api("/whoami");
      if (w.via === "open") { slot.textContent = "all accounts"; return; }
      // Tornado's XSRF token from its cookie (set with the login form), sent as the field.
      const xsrf = (document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/) || [])[1];
      const field = xsrf ? [h("input", { type: "hidden", name: "_xsrf", value: decodeURIComponent(xsrf) })] : [];
      slot.replaceChildren(`${w.user} · ${w.account}`,
        h("form", { method: "post", action: `${PREFIX}/logout` }, ...field, h("button", { type: "submit" }, "Log out")));
    } catch (e) { /* the page shows the error */ }
  }

  const pages: Record<string, (arg?: string) => Promise<void>> = { clusters: clustersPage, cluster: clusterPage, computation: computationPage,
    exceptions: exceptionsPage, reports: reportsPage, costs: costsPage };
  const page = pages[body.dataset.page || ""];
  if (page) {
    whoami();
    page(body.dataset.arg0).catch((e) => {
      if (e.message !== "not logged in") app.replaceChildren(h("p", { class: "error", role: "alert" }, e.message));
    });
  }
})();
