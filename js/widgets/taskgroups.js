// Task groups of one computation: a progress bar by state per group, compute /
// transfer / disk time, bytes; sortable; dependency order by default; erred groups
// open their exceptions and tracebacks.
// Traits: computation {}, groups_base/groups_patch (KeyedTable by name), exceptions [].
import { h, clear, watch, throttle, empty } from "../common/dom.js";
import { STATES, STATE_COLOR, STATE_LABEL, stateOf, prefixColor } from "../common/colors.js";
import * as fmt from "../common/format.js";
import { readTable, tableTraits } from "../common/table.js";
import { injectStyle } from "../common/style.js";

const DONE = new Set(["released", "memory", "erred", "forgotten"]);
const MAX_ROWS = 400;

const COLUMNS = [
  { id: "order", label: "Task group", num: false, value: (g) => g._order },
  { id: "progress", label: "Progress", num: false, value: (g) => g._done / Math.max(g.n_tasks || 1, 1) },
  { id: "compute", label: "Compute", num: true, value: (g) => g.compute || 0, show: fmt.duration },
  { id: "transfer", label: "Transfer", num: true, value: (g) => g.transfer || 0, show: fmt.duration },
  { id: "disk", label: "Disk", num: true, value: (g) => (g.disk_read || 0) + (g.disk_write || 0), show: fmt.duration },
  { id: "nbytes", label: "Bytes", num: true, value: (g) => g.nbytes || 0, show: fmt.bytes },
  { id: "wall", label: "Wall", num: true, value: (g) => g._wall, show: fmt.duration },
];

// Group names end in a token ("random_sample-78306eba..."): show the prefix, fade the token.
const TOKEN = /-([0-9a-f]{8,})$/;
export function shortName(name) {
  return name.replace(TOKEN, "");
}
function splitName(g) {
  const m = g.name.match(TOKEN);
  return m ? [g.name.slice(0, m.index), h("span.dal-token", `-${m[1].slice(0, 6)}`)] : [g.name];
}

/** Topological level of each group among the groups of this computation. */
export function dependencyOrder(groups) {
  const byName = new Map(groups.map((g) => [g.name, g]));
  const level = new Map();
  const visit = (g, stack) => {
    if (level.has(g.name)) return level.get(g.name);
    if (stack.has(g.name)) return 0; // a cycle cannot happen in a DAG; be safe anyway
    stack.add(g.name);
    let l = 0;
    for (const d of g.dependencies || []) {
      const dep = byName.get(d);
      if (dep) l = Math.max(l, visit(dep, stack) + 1);
    }
    stack.delete(g.name);
    level.set(g.name, l);
    return l;
  };
  for (const g of groups) visit(g, new Set());
  const sorted = [...groups].sort(
    (a, b) => level.get(a.name) - level.get(b.name) || (a.start || Infinity) - (b.start || Infinity) || a.name.localeCompare(b.name)
  );
  sorted.forEach((g, i) => { g._order = i; g._level = level.get(g.name); });
  return sorted;
}

export function progressBar(states, total, cls = "dal-bar", label = true) {
  const bar = h(`div.${cls}`);
  const n = Math.max(total || 0, 1);
  const merged = {};
  for (const [s, c] of Object.entries(states || {})) merged[stateOf(s)] = (merged[stateOf(s)] || 0) + c;
  for (const [s] of STATES) {
    const c = merged[s];
    if (!c) continue;
    bar.append(h(`span.${s}`, { style: { width: `${(100 * c) / n}%`, background: STATE_COLOR[s] }, title: `${STATE_LABEL[s]}: ${c}` }));
  }
  if (label) {
    const done = Object.entries(merged).filter(([s]) => DONE.has(s)).reduce((a, [, c]) => a + c, 0);
    bar.append(h("span.dal-bar-label", `${fmt.count(done)} / ${fmt.count(total)}`));
  }
  return bar;
}

function render({ model, el }) {
  injectStyle();
  const root = h("div.dal.dal-taskgroups");
  el.append(root);
  let sort = { id: "order", desc: false };
  const open = new Set(); // groups whose exceptions are shown

  const draw = throttle(() => {
    const comp = model.get("computation") || {};
    const groups = readTable(model, "groups", "name");
    const exceptions = model.get("exceptions") || [];
    clear(root);
    if (!groups.length) {
      root.append(empty(comp.computation_id ? "No task groups recorded yet" : "No computation yet",
        comp.computation_id ? "They appear within a second of the scheduler seeing them." : "Run a Dask computation; it shows up here live."));
      return;
    }
    for (const g of groups) {
      g._done = Object.entries(g.states || {}).filter(([s]) => DONE.has(s)).reduce((a, [, c]) => a + c, 0);
      g._wall = g.start && g.stop ? g.stop - g.start : null;
    }
    const ordered = dependencyOrder(groups);
    const col = COLUMNS.find((c) => c.id === sort.id) || COLUMNS[0];
    const rows = [...ordered].sort((a, b) => {
      const d = (col.value(a) ?? -1) - (col.value(b) ?? -1);
      return sort.desc ? -d : d;
    });
    root.append(totals(comp, groups), legend());

    const head = h("tr", COLUMNS.map((c) => h(`th${c.num ? ".dal-num" : ""}`, {
      onclick: () => { sort = { id: c.id, desc: sort.id === c.id ? !sort.desc : c.num }; draw(); },
      title: c.id === "order" ? "Dependency order: a group comes after the groups it depends on" : `Sort by ${c.label.toLowerCase()}`,
    }, c.label, sort.id === c.id ? h("span.dal-arrow", sort.desc ? "▼" : "▲") : null)));
    const byGroup = new Map();
    for (const e of exceptions) {
      const list = byGroup.get(e.task_group) || [];
      list.push(e);
      byGroup.set(e.task_group, list);
    }
    const body = h("tbody");
    for (const g of rows.slice(0, MAX_ROWS)) {
      const erred = (g.states || {}).erred || 0;
      const excs = byGroup.get(g.name) || [];
      const indent = g._level ? `${"  ".repeat(Math.min(g._level - 1, 8))}└ ` : "";
      body.append(h(`tr.dal-row${erred ? ".erred" : ""}`, { dataset: { group: g.name } },
        h("td", h("div.dal-group",
          h("span.dal-level", indent),
          h("span.dal-swatch", { style: { background: prefixColor(g.prefix || g.name) } }),
          h("span.dal-group-name", { title: g.name }, ...splitName(g)),
          erred || excs.length ? h("button.dal-err-link", {
            title: "Show the exception and traceback",
            onclick: () => { open.has(g.name) ? open.delete(g.name) : open.add(g.name); draw(); },
          }, `${fmt.count(erred || excs.reduce((a, e) => a + (e.count || 0), 0))} erred ${open.has(g.name) ? "▴" : "▾"}`) : null),
          g.dependencies?.length ? h("div.dal-deps", { title: g.dependencies.join("\n") }, `after ${g.dependencies.map(shortName).join(", ")}`) : null),
        h("td", progressBar(g.states, g.n_tasks)),
        COLUMNS.slice(2).map((c) => h("td.dal-num", c.show(c.value(g))))));
      if (open.has(g.name)) body.append(h("tr", h("td", { colspan: COLUMNS.length }, exceptionList(excs))));
    }
    if (rows.length > MAX_ROWS) body.append(h("tr", h("td.dal-muted", { colspan: COLUMNS.length }, `… and ${rows.length - MAX_ROWS} more groups`)));
    root.append(h("table.dal-table", h("thead", head), body));
  });

  draw();
  const off = watch(model, ["computation", "exceptions", ...tableTraits("groups")], draw);
  return () => { off(); root.remove(); };
}

function totals(comp, groups) {
  const n = groups.reduce((a, g) => a + (g.n_tasks || 0), 0);
  const done = groups.reduce((a, g) => a + g._done, 0);
  const compute = groups.reduce((a, g) => a + (g.compute || 0), 0);
  const transfer = groups.reduce((a, g) => a + (g.transfer || 0), 0);
  const nbytes = groups.reduce((a, g) => a + (g.nbytes || 0), 0);
  const wall = comp.start ? (comp.stop || Date.now() / 1000) - comp.start : null;
  const state = comp.state || "running";
  return h("div.dal-totals",
    h(`span.dal-badge.${state}`, h("span.dal-dot"), state),
    h("span", h("b", `${fmt.count(done)} / ${fmt.count(n)}`), " tasks"),
    h("span", h("b", groups.length), " groups"),
    h("span", "compute ", h("b", fmt.duration(compute))),
    h("span", "transfer ", h("b", fmt.duration(transfer))),
    h("span", "bytes ", h("b", fmt.bytes(nbytes))),
    wall != null ? h("span", "wall ", h("b", fmt.duration(wall))) : null);
}

function legend() {
  return h("div.dal-legend", STATES.filter(([s]) => s !== "no-worker" && s !== "queued").map(([, label, color]) => h("span", h("i", { style: { background: color } }), label)));
}

export function exceptionList(excs) {
  if (!excs.length) return h("div.dal-exc.dal-muted", "The exception of this group was not recorded (its tasks may have failed because a dependency did).");
  return h("div", excs.map((e) => h("div.dal-exc",
    h("div.dal-exc-title", e.exception_text || "(no exception text)"),
    h("div.dal-muted", `${fmt.count(e.count)} task${e.count === 1 ? "" : "s"} · first ${fmt.clock(e.first_time)} · last ${fmt.clock(e.last_time)}`,
      e.example_key ? ` · e.g. ${e.example_key}` : ""),
    e.traceback_text ? h("pre", e.traceback_text) : null)));
}

export default { render };
