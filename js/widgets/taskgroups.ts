// Task groups of one computation: what became of each group's tasks (finished, erred,
// never ran, still to come) as a stacked bar and as numbers, compute / transfer / disk
// time, bytes; sortable; dependency order by default.  The computation's failures are
// listed one row per failure; an erred group opens its own.
// Against the earlier runs of the same code: a "vs previous" column (compute time against
// the same prefix in the baseline run), a banner when the whole run is much slower or
// faster, and the runs' trend.
// Traits: computation {}, groups_base/groups_patch (KeyedTable by name), exceptions [],
// runs {} (store/compare.py run_summary).
import { h, clear, watch, throttle, empty, type Child } from "../common/dom.js";
import { prefixColor, type Segment } from "../common/colors.js";
import * as fmt from "../common/format.js";
import { readTable, tableTraits, sortHeader, focusedSort, refocusSort } from "../common/table.js";
import {
  taskCounts,
  addCounts,
  progressBar,
  progressLegend,
  type TaskCounts,
} from "../common/progress.js";
import { failureList } from "../common/failures.js";
import { computationDuration } from "../common/lifecycle.js";
import { onScreen } from "../common/onscreen.js";
import { runsBanner, runsTrend, vsPrevious, type RunSummary } from "../common/runs.js";
import type { RenderProps } from "../common/model.js";
import type { ComputationRow, ExceptionRow, TaskGroupRow } from "../common/rows.js";
import { topFinding } from "./findings.js";

const MAX_ROWS = 400;

/** What dependencyOrder reads of a group, and where it writes the group's place. */
interface Ordered {
  name: string;
  dependencies?: string[] | null;
  start?: number | null;
  _order?: number; // its place in dependency order
  _level?: number; // how many groups it comes after, along its longest chain
}

/** A group as the table shows it: what became of its tasks, its wall time, and its
 *  compute time against the same prefix in the previous run. */
interface ShownGroup extends TaskGroupRow, Ordered {
  _counts: TaskCounts;
  _wall: number | null;
  _vs: number | null;
}

interface Column {
  id: string;
  label: string;
  num?: boolean;
  title?: string;
  value: (g: ShownGroup) => number | null | undefined;
  show?: (v: number | null | undefined) => Child;
}

const COLUMNS: Column[] = [
  { id: "order", label: "Task group", num: false, value: (g) => g._order },
  {
    id: "progress",
    label: "Finished",
    num: false,
    value: (g) => g._counts.done / Math.max(g._counts.total || 1, 1),
    title:
      "Tasks that ran to the end, of all the group's tasks; the bar shows what became of the rest",
  },
  {
    id: "erred",
    label: "Erred",
    num: true,
    value: (g) => g._counts.erred,
    show: (v) => (v ? h("span.dal-bad-num", fmt.count(v)) : "0"),
    title: "Tasks that raised an exception",
  },
  {
    id: "not-run",
    label: "Never ran",
    num: true,
    value: (g) => g._counts["not-run"],
    show: (v) => (v ? h("span.dal-notrun-num", fmt.count(v)) : "0"),
    title:
      "Tasks that never ran: a dependency failed, or they were released or cancelled before they ran",
  },
  {
    id: "cancelled",
    label: "Cancelled",
    num: true,
    value: (g) => g._counts.cancelled,
    show: (v) => (v ? h("span.dal-notrun-num", fmt.count(v)) : "0"),
    title: "Tasks that were running when they were cancelled",
  },
  { id: "compute", label: "Compute", num: true, value: (g) => g.compute || 0, show: fmt.duration },
  {
    id: "vs",
    label: "vs previous",
    num: true,
    value: (g) => g._vs,
    show: vsPrevious,
    title:
      "Compute time against the same task prefix in the previous run of this code (dask-analytics compare)",
  },
  {
    id: "transfer",
    label: "Transfer",
    num: true,
    value: (g) => g.transfer || 0,
    show: fmt.duration,
  },
  {
    id: "disk",
    label: "Disk",
    num: true,
    value: (g) => (g.disk_read || 0) + (g.disk_write || 0),
    show: fmt.duration,
  },
  { id: "nbytes", label: "Bytes", num: true, value: (g) => g.nbytes || 0, show: fmt.bytes },
  { id: "wall", label: "Wall", num: true, value: (g) => g._wall, show: fmt.duration },
];

// Group names end in a token ("random_sample-78306eba..."): show the prefix, fade the token.
const TOKEN = /-([0-9a-f]{8,})$/;
export function shortName(name: string): string {
  return name.replace(TOKEN, "");
}
function splitName(g: TaskGroupRow): Child[] {
  const m = g.name.match(TOKEN);
  return m ? [g.name.slice(0, m.index), h("span.dal-token", `-${m[1].slice(0, 6)}`)] : [g.name];
}

/** Topological level of each group among the groups of this computation. */
export function dependencyOrder<G extends Ordered>(groups: G[]): G[] {
  const byName = new Map(groups.map((g) => [g.name, g]));
  const level = new Map<string, number>();
  const visit = (g: G, stack: Set<string>): number => {
    if (level.has(g.name)) return level.get(g.name)!;
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
    (a, b) =>
      level.get(a.name)! - level.get(b.name)! ||
      (a.start || Infinity) - (b.start || Infinity) ||
      a.name.localeCompare(b.name),
  );
  sorted.forEach((g, i) => {
    g._order = i;
    g._level = level.get(g.name);
  });
  return sorted;
}

export { progressBar };

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-taskgroups");
  el.append(root);
  let sort = { id: "order", desc: false };
  const open = new Set<string>(); // groups whose failures are shown
  const openFailures = new Set<string>(); // failure rows (and tracebacks) the user opened

  const draw = throttle(() => {
    const comp: ComputationRow = model.get("computation") || {};
    const recorded = readTable<TaskGroupRow>(model, "groups", "name");
    const exceptions: ExceptionRow[] = model.get("exceptions") || [];
    const runs: RunSummary & { computation_id?: string } = model.get("runs") || {};
    const focused = focusedSort(root);
    clear(root);
    if (!recorded.length) {
      root.append(
        empty(
          comp.computation_id ? "No task groups recorded yet" : "No computation yet",
          comp.computation_id
            ? "They appear within a second of the scheduler seeing them."
            : "Run a Dask computation; it shows up here live.",
        ),
      );
      return;
    }
    const compared = !!runs.baseline_id && runs.computation_id === comp.computation_id;
    const groups: ShownGroup[] = recorded.map((g) => ({
      ...g,
      _counts: taskCounts(g),
      _wall: g.start && g.stop ? g.stop - g.start : null,
      _vs: compared ? (runs.groups?.[g.prefix || shortName(g.name)] ?? null) : null,
    }));
    const ordered = dependencyOrder(groups);
    // Columns that would be all zero stay out (the table must fit a notebook): erred and
    // never-ran counts when some group has them, disk time when some group spilled.
    const sum = addCounts(groups);
    const spilled = groups.some((g) => (g.disk_read || 0) + (g.disk_write || 0) > 0);
    const shown: Record<string, boolean> = {
      erred: sum.erred > 0,
      "not-run": sum["not-run"] > 0,
      cancelled: sum.cancelled > 0,
      disk: spilled,
      vs: compared,
    };
    const columns = COLUMNS.filter((c) => shown[c.id] ?? true);
    const col = columns.find((c) => c.id === sort.id) || columns[0];
    const rows = [...ordered].sort((a, b) => {
      const d = (col.value(a) ?? -1) - (col.value(b) ?? -1);
      return sort.desc ? -d : d;
    });
    root.append(totals(comp, groups, sum, compared ? runs : null), progressLegend(legendOf(sum)));
    const top = topFinding(model);
    if (top) root.append(top);
    const banner = compared ? runsBanner(runs) : null;
    if (banner) root.append(banner);
    if (exceptions.length) {
      const n = exceptions.reduce((a, e) => a + (e.count || 0), 0);
      root.append(
        h(
          "div.dal-section",
          `Failures · ${exceptions.length} kind${exceptions.length === 1 ? "" : "s"}, ${fmt.count(n)} task${n === 1 ? "" : "s"}`,
        ),
        failureList(exceptions, openFailures),
      );
    }

    const head = h(
      "tr",
      columns.map((c) =>
        sortHeader(
          `th${c.num ? ".dal-num" : ""}`,
          c.label,
          sort.id !== c.id ? "none" : sort.desc ? "descending" : "ascending",
          () => {
            sort = { id: c.id, desc: sort.id === c.id ? !sort.desc : !!c.num };
            draw();
          },
          {
            dataset: { sort: c.id },
            title:
              c.id === "order"
                ? "Dependency order: a group comes after the groups it depends on"
                : c.title || `Sort by ${c.label.toLowerCase()}`,
          },
        ),
      ),
    );
    const byGroup = new Map<string | undefined, ExceptionRow[]>();
    for (const e of exceptions) {
      const list = byGroup.get(e.task_group) || [];
      list.push(e);
      byGroup.set(e.task_group, list);
    }
    const body = h("tbody");
    for (const g of rows.slice(0, MAX_ROWS)) {
      const erred = g._counts.erred;
      const excs = byGroup.get(g.name) || [];
      const indent = g._level ? `${"  ".repeat(Math.min(g._level - 1, 8))}└ ` : "";
      body.append(
        h(
          `tr.dal-row${erred ? ".erred" : ""}`,
          { dataset: { group: g.name } },
          h(
            "td",
            h(
              "div.dal-group",
              h("span.dal-level", indent),
              h("span.dal-swatch", { style: { background: prefixColor(g.prefix || g.name) } }),
              h("span.dal-group-name", { title: g.name }, ...splitName(g)),
              erred || excs.length
                ? h(
                    "button.dal-err-link",
                    {
                      title: "Show how its tasks failed",
                      onclick: () => {
                        if (open.has(g.name)) open.delete(g.name);
                        else open.add(g.name);
                        draw();
                      },
                    },
                    `${fmt.count(erred || excs.reduce((a, e) => a + (e.count || 0), 0))} erred ${open.has(g.name) ? "▴" : "▾"}`,
                  )
                : null,
            ),
            g.dependencies?.length
              ? h(
                  "div.dal-deps",
                  { title: g.dependencies.join("\n") },
                  `after ${g.dependencies.map(shortName).join(", ")}`,
                )
              : null,
          ),
          h("td", progressBar(g._counts)),
          columns
            .slice(2)
            .map((c) => h("td.dal-num", { dataset: { col: c.id } }, c.show!(c.value(g)))),
        ),
      );
      if (open.has(g.name))
        body.append(
          h(
            "tr.dal-exc-row",
            h("td", { colspan: columns.length }, exceptionList(excs, openFailures)),
          ),
        );
    }
    if (rows.length > MAX_ROWS)
      body.append(
        h(
          "tr",
          h(
            "td.dal-muted",
            { colspan: columns.length },
            `… and ${rows.length - MAX_ROWS} more groups`,
          ),
        ),
      );
    root.append(h("table.dal-table", h("thead", head), body));
    refocusSort(root, focused);
  });

  draw();
  const off = watch(
    model,
    ["computation", "exceptions", "runs", "findings", ...tableTraits("groups")],
    draw,
  );
  return () => {
    off();
    root.remove();
  };
}

/** The legend lists what the bars can show here: always finished / erred / never ran. */
function legendOf(sum: TaskCounts): string[] {
  const keep = ["done", "erred", "not-run"];
  if (sum.memory) keep.unshift("memory");
  if (sum.cancelled) keep.splice(keep.indexOf("not-run"), 0, "cancelled");
  for (const s of ["processing", "no-worker", "queued", "waiting"] as Segment[])
    if (sum[s]) keep.push(s);
  return keep;
}

function totals(
  comp: ComputationRow,
  groups: TaskGroupRow[],
  sum: TaskCounts,
  runs: RunSummary | null,
): HTMLElement {
  const compute = groups.reduce((a, g) => a + (g.compute || 0), 0);
  const transfer = groups.reduce((a, g) => a + (g.transfer || 0), 0);
  const nbytes = groups.reduce((a, g) => a + (g.nbytes || 0), 0);
  const wall = computationDuration(comp);
  const state = comp.state || "running";
  return h(
    "div.dal-totals",
    h(`span.dal-badge.${state}`, h("span.dal-dot"), state),
    h(
      "span.dal-total-done",
      h("b", `${fmt.count(sum.done)} / ${fmt.count(sum.total)}`),
      " finished",
    ),
    sum.erred
      ? h("span.dal-total-erred", h("b.dal-bad-num", fmt.count(sum.erred)), " erred")
      : null,
    sum["not-run"]
      ? h("span.dal-total-notrun", h("b.dal-notrun-num", fmt.count(sum["not-run"])), " never ran")
      : null,
    h("span", h("b", groups.length), " groups"),
    h("span", "compute ", h("b", fmt.duration(compute))),
    h("span", "transfer ", h("b", fmt.duration(transfer))),
    h("span", "bytes ", h("b", fmt.bytes(nbytes))),
    wall != null ? h("span", "wall ", h("b", fmt.duration(wall))) : null,
    runs
      ? h(
          "span.dal-runs",
          { title: "Wall time of the runs of this code, oldest first; this one stands out" },
          "runs ",
          runsTrend(runs, comp.computation_id),
        )
      : null,
  );
}

export function exceptionList(excs: ExceptionRow[], open: Set<string> | null = null): HTMLElement {
  if (!excs.length)
    return h(
      "div.dal-exc.dal-muted",
      "The exception of this group was not recorded (its tasks may have failed because a dependency did).",
    );
  return h("div.dal-exc", failureList(excs, open));
}

export default onScreen({ render });
