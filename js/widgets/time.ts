// Where each task group's time went: Dask's fine performance metrics of one computation
// (what the workers measured while running its tasks), one stacked bar per task prefix
// by kind of activity, so a group that is I/O-bound, GIL-bound or spilling shows at a
// glance.  Bars share one scale (seconds summed over all worker threads).
// Traits: metrics [{prefix, context, activity, unit, value}] (get_computation's),
// groups_base/groups_patch (optional: the groups' dependency order), computation {}.
import { h, clear, watch, throttle, empty } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { readTable, tableTraits } from "../common/table.js";
import { onScreen } from "../common/onscreen.js";
import { dependencyOrder } from "./taskgroups.js";
import type { RenderProps } from "../common/model.js";
import type { ComputationRow, MetricRow, TaskGroupRow } from "../common/rows.js";

// [id, label, colour, what it is made of, a row's verdict]: left to right in each bar.
export const CATEGORIES: [string, string, string, string, string][] = [
  ["cpu", "CPU", "#2fa572", "thread-cpu: the task's thread running on a core", "CPU"],
  [
    "wait",
    "Waiting (I/O, GIL)",
    "#f5a524",
    "thread-noncpu, executor, other: the task's thread not on a core (I/O, sleep, a lock, the GIL, no free core) and the executor's overhead",
    "waiting",
  ],
  [
    "serial",
    "Serialization",
    "#b197fc",
    "serialize, deserialize, compress, decompress",
    "serialization",
  ],
  [
    "disk",
    "Disk",
    "#7fa6dc",
    "disk-read, disk-write: data spilled to or read back from disk while running tasks",
    "disk",
  ],
  [
    "network",
    "Network",
    "#5b8def",
    "gather-dep: fetching task inputs from other workers",
    "network",
  ],
  [
    "spill",
    "Spill",
    "#e5484d",
    "memory-monitor: a worker spilling to stay under its memory limit",
    "spilling",
  ],
  [
    "other",
    "Other",
    "#c9ced6",
    "what else Dask measured: time of failed or cancelled tasks, custom metrics",
    "other",
  ],
];
const VERDICT = Object.fromEntries(CATEGORIES.map(([id, , , , verdict]) => [id, verdict]));
const COLOR = Object.fromEntries(CATEGORIES.map(([id, , color]) => [id, color]));
const WAIT = new Set(["thread-noncpu", "executor", "other"]);
const SERIAL = new Set([
  "serialize",
  "deserialize",
  "compress",
  "decompress",
  "pickle",
  "unpickle",
]);
const DISK = new Set(["disk-read", "disk-write"]);
// The row for time not tied to a task group (transfers, spilling).
export const UNGROUPED = "(between tasks)";

/** The category of one metric in seconds, or null for one not drawn: get-data (the
 *  sending side of the same transfers gather-dep counts) and p2p (also counted under
 *  execute) would count time twice. */
export function category(context: string, activity: string): string | null {
  if (context === "execute") {
    if (activity === "thread-cpu" || activity.endsWith("-cpu")) return "cpu";
    if (WAIT.has(activity) || activity.endsWith("-noncpu")) return "wait";
    if (SERIAL.has(activity)) return "serial";
    if (DISK.has(activity)) return "disk";
    return "other";
  }
  if (context === "gather-dep") return "network";
  if (context === "memory-monitor") return "spill";
  return null;
}

export interface TimeRow {
  prefix: string; // UNGROUPED for time not tied to a group
  total: number;
  parts: Record<string, number>; // category -> seconds
  activities: [string, number][]; // "context activity" -> seconds, largest first
}

/** One row per task prefix (in the groups' dependency order when known), then the
 *  time not tied to a group; seconds only. */
export function timeRows(metrics: MetricRow[], groups: TaskGroupRow[] = []): TimeRow[] {
  const rows = new Map<string, TimeRow>();
  for (const m of metrics || []) {
    if (m.unit !== "seconds" || !m.value) continue;
    const cat = category(m.context, m.activity);
    if (!cat) continue;
    const prefix = m.prefix ?? UNGROUPED;
    let row = rows.get(prefix);
    if (!row) rows.set(prefix, (row = { prefix, total: 0, parts: {}, activities: [] }));
    row.total += m.value;
    row.parts[cat] = (row.parts[cat] || 0) + m.value;
    row.activities.push([
      m.context === "execute" ? m.activity : `${m.context} ${m.activity}`,
      m.value,
    ]);
  }
  const order = new Map<string, number>();
  for (const g of dependencyOrder(groups)) {
    const p = g.prefix || g.name;
    if (!order.has(p)) order.set(p, order.size);
  }
  const rank = (p: string) => (p === UNGROUPED ? Infinity : (order.get(p) ?? order.size));
  const out = [...rows.values()].filter((r) => r.total > 0);
  for (const r of out) r.activities.sort((a, b) => b[1] - a[1]);
  return out.sort(
    (a, b) =>
      rank(a.prefix) - rank(b.prefix) || b.total - a.total || a.prefix.localeCompare(b.prefix),
  );
}

/** The category that took most of a row's time, and its share. */
export function dominant(row: TimeRow): [string, number] {
  let best = "other",
    most = -1;
  for (const [id] of CATEGORIES)
    if ((row.parts[id] || 0) > most) {
      best = id;
      most = row.parts[id] || 0;
    }
  return [best, row.total ? most / row.total : 0];
}

function describe(row: TimeRow): string {
  const parts = CATEGORIES.filter(([id]) => row.parts[id] > 0).map(
    ([id, label]) =>
      `${label} ${fmt.duration(row.parts[id])} (${fmt.percent((100 * row.parts[id]) / row.total)})`,
  );
  return `${row.prefix}: ${fmt.duration(row.total)} in all; ${parts.join(", ")}`;
}

function bar(row: TimeRow, scale: number): HTMLElement {
  const el = h("div.dal-time-bar", {
    style: { width: `${Math.max((100 * row.total) / scale, 0.5)}%` },
  });
  for (const [id, label] of CATEGORIES) {
    const s = row.parts[id];
    if (!s) continue;
    el.append(
      h(`span.dal-time-seg`, {
        dataset: { category: id },
        style: { width: `${(100 * s) / row.total}%`, background: COLOR[id] },
        title: `${label}: ${fmt.duration(s)} (${fmt.percent((100 * s) / row.total)})`,
      }),
    );
  }
  return el;
}

function legend(): HTMLElement {
  return h(
    "div.dal-legend.dal-time-legend",
    CATEGORIES.map(([id, label, color, what]) =>
      h(
        "span",
        { dataset: { category: id }, title: what },
        h("i", { style: { background: color } }),
        label,
      ),
    ),
  );
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-time");
  el.append(root);
  const draw = throttle(() => {
    const metrics: MetricRow[] = model.get("metrics") || [];
    const rows = timeRows(metrics, readTable<TaskGroupRow>(model, "groups", "name"));
    clear(root);
    if (!rows.length) {
      const computation: ComputationRow = model.get("computation") || {};
      const running = computation.state === "running";
      root.append(
        running
          ? empty(
              "No time measured yet",
              "Workers send their measurements with each heartbeat: they appear within seconds.",
            )
          : empty(
              "No time breakdown recorded for this computation",
              h(
                "span",
                "Workers measure where each task's time goes (Dask's fine performance metrics); they are recorded when ",
                h("code", "analytics.metrics.transmit"),
                " is on (the default) and analytics was registered before the computation.",
              ),
            ),
      );
      return;
    }
    const scale = Math.max(...rows.map((r) => r.total));
    const list = h("div.dal-time-rows", {
      role: "list",
      "aria-label": "Time per task group, by activity",
    });
    for (const row of rows) {
      const [top, share] = dominant(row);
      const text = describe(row);
      list.append(
        h(
          "div.dal-time-row",
          {
            role: "listitem",
            "aria-label": text,
            title:
              `${text}\n\n` + row.activities.map(([a, s]) => `${a}: ${fmt.duration(s)}`).join("\n"),
            dataset: { prefix: row.prefix, dominant: top },
          },
          h(
            "span.dal-time-name",
            row.prefix === UNGROUPED ? h("span.dal-faint", "transfers, spilling") : row.prefix,
          ),
          h("span.dal-time-track", bar(row, scale)),
          h("span.dal-time-total", fmt.duration(row.total)),
          h(
            "span.dal-time-verdict",
            { style: { color: COLOR[top] === "#c9ced6" ? "var(--dal-fg2)" : COLOR[top] } },
            `${fmt.percent(100 * share)} ${VERDICT[top]}`,
          ),
        ),
      );
    }
    root.append(
      legend(),
      list,
      h(
        "div.dal-time-note.dal-faint",
        "Seconds summed over all worker threads, as the workers measured them " +
          "(Dask's fine performance metrics); hover a bar for each activity. Transfers and memory-monitor spilling " +
          "are not tied to one group: they have a row of their own.",
      ),
    );
  });
  draw();
  const off = watch(model, ["metrics", "computation", ...tableTraits("groups")], draw);
  return () => {
    off();
    root.remove();
  };
}

export default onScreen({ render });
