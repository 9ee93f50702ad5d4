// Cluster summary: workers, threads, memory over time, cost, idle time, versions.
// Traits: cluster {} (the store's cluster row), samples_base/samples_patch (by time).
import { h, clear, watch, throttle, empty } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { timeChart } from "../common/chart.js";
import { readTable, tableTraits } from "../common/table.js";
import { injectStyle } from "../common/style.js";

/** "live", "stopped" or "lost" (no sample for a while and no stop message). */
export function clusterState(c, now = Date.now() / 1000) {
  if (!c || !c.cluster_id) return "unknown";
  if (c.stopped) return "stopped";
  const interval = c.settings?.interval || 1;
  const seen = c.last_seen || c.sample_time || c.started;
  return now - seen > Math.max(30, 10 * interval) ? "lost" : "live";
}

export function stateBadge(state) {
  const text = { live: "live", stopped: "stopped", lost: "no contact", unknown: "…" }[state] || state;
  return h(`span.dal-badge.${state}`, { title: state === "lost" ? "No news from this scheduler for a while, and it never said it stopped" : "" },
    h("span.dal-dot"), text);
}

function kpi(label, value, sub) {
  return h("div.dal-kpi", h("div.dal-kpi-label", label), h("div.dal-kpi-value", value), sub ? h("div.dal-kpi-sub", sub) : null);
}

function kv(obj) {
  const entries = Object.entries(obj || {}).filter(([, v]) => v != null && v !== "");
  if (!entries.length) return h("div.dal-faint", "–");
  return h("dl.dal-kv", entries.flatMap(([k, v]) => [h("dt", k), h("dd", typeof v === "object" ? JSON.stringify(v) : String(v))]));
}

export function clusterSummary(c, samples) {
  const box = h("div");
  const state = clusterState(c);
  const end = c.stopped || (state === "live" ? Date.now() / 1000 : c.last_seen);
  const idle = c.idle_since && !c.stopped ? `idle ${fmt.duration(Date.now() / 1000 - c.idle_since)}` : c.processing ? `${fmt.count(c.processing)} tasks running` : "–";
  box.append(h("div.dal-cards",
    kpi("Workers", fmt.count(c.n_workers), `${fmt.count(c.n_threads)} threads`),
    kpi("Memory", fmt.bytes(c.memory_used), `of ${fmt.bytes(c.memory_total)}`),
    kpi("Cost", fmt.money(c.cost), `${fmt.money(c.price_per_core_hour)} per core-hour`),
    kpi(c.stopped ? "Ran for" : "Up for", fmt.duration(end - c.started), `since ${fmt.clock(c.started)}`),
    kpi("Activity", idle, c.last_activity ? `last work ${fmt.ago(c.last_activity)}` : ""),
    kpi("Worker time", fmt.duration(c.worker_seconds), `${fmt.duration(c.core_seconds)} core time`)));
  const pts = [...samples].sort((a, b) => a.time - b.time);
  if (pts.length > 1) {
    box.append(h("div.dal-charts",
      h("div.dal-chart", h("div.dal-chart-title", h("span", "Workers and threads"), h("span.dal-faint", "workers — threads ┅")),
        timeChart({ series: [
          { points: pts.map((s) => [s.time, s.n_workers]), color: "#ee6b3b", fill: true },
          { points: pts.map((s) => [s.time, s.n_threads]), color: "#5b8def", dash: true },
        ] })),
      h("div.dal-chart", h("div.dal-chart-title", h("span", "Memory"), h("span.dal-faint", "used — total ┅")),
        timeChart({ yFormat: fmt.bytes, series: [
          { points: pts.map((s) => [s.time, s.memory_used]), color: "#2fa572", fill: true },
          { points: pts.map((s) => [s.time, s.memory_total]), color: "#8c959f", dash: true },
        ] })),
      h("div.dal-chart", h("div.dal-chart-title", h("span", "Tasks processing")),
        timeChart({ series: [{ points: pts.map((s) => [s.time, s.processing]), color: "#f5a524", fill: true }] }))));
  }
  const p = c.platform || {};
  box.append(h("div.dal-section", "Cluster"),
    kv({ id: c.cluster_id, address: c.address, user: c.user, account: c.account, stopped: c.stopped ? `${fmt.clock(c.stopped)} (${c.stop_reason || "closed"})` : null,
      "idle shutdown": c.idle_shutdown ? "yes" : null, "dropped messages": c.dropped_messages || null }),
    h("div.dal-section", "Versions"), kv(c.versions),
    h("div.dal-section", "Platform"), kv(p));
  return box;
}

function render({ model, el }) {
  injectStyle();
  const root = h("div.dal.dal-cluster");
  el.append(root);
  const draw = throttle(() => {
    const c = model.get("cluster") || {};
    clear(root);
    if (!c.cluster_id) {
      root.append(empty("No cluster recorded yet", h("span", "Run ", h("code", "%load_ext dask_analytics"), " and create a Client.")));
      return;
    }
    root.append(h("div.dal-totals", stateBadge(clusterState(c)), h("b", c.name || c.cluster_id)), clusterSummary(c, readTable(model, "samples", "time")));
  });
  draw();
  const off = watch(model, ["cluster", ...tableTraits("samples")], draw);
  return () => { off(); root.remove(); };
}

export default { render };
