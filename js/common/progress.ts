// What became of a group's (or a computation's) tasks, and the stacked bar that shows it.
//
// The store counts each group's tasks: n_done (finished), n_erred (raised), n_cancelled
// (running when cancelled), n_not_run (never ran: a dependency failed, released,
// cancelled before it ran); these survive Dask forgetting the tasks.  What is left of
// n_tasks is still to come, split by the live `states`.
import { h } from "./dom.js";
import * as fmt from "./format.js";
import { SEGMENTS, SEGMENT_COLOR, SEGMENT_LABEL, type Segment } from "./colors.js";
import type { CountedRow } from "./rows.js";

const LIVE = ["processing", "no-worker", "queued"] as const;

/** Tasks per segment of the bar, their total, and whether the counts are exact (the
 *  store's) or read from the live states of a row recorded before it kept them. */
export type TaskCounts = Record<Segment, number> & { total: number; exact: boolean };

/** {total, done, memory, erred, cancelled, "not-run", processing, "no-worker", queued, waiting, exact}
 *  of a task-group row or a computation row (its totals). */
export function taskCounts(g: CountedRow): TaskCounts {
  const st: Record<string, number> = {};
  for (const [s, c] of Object.entries(g.states || {})) st[s] = (st[s] || 0) + (c || 0);
  const stateTotal = Object.values(st).reduce((a, c) => a + c, 0);
  const total = g.n_tasks ?? stateTotal;
  const exact = g.n_done != null || g.n_not_run != null;
  let done: number, erred: number, notRun: number;
  const cancelled = g.n_cancelled || 0;
  if (exact) {
    done = g.n_done || 0;
    erred = g.n_erred || 0;
    notRun = g.n_not_run || 0;
  } else {
    // A row recorded before the store kept these counts: the states are all there is.
    erred = g.n_erred ?? st.erred ?? 0;
    done = (st.memory || 0) + (st.released || 0) + (st.forgotten || 0);
    notRun = 0;
  }
  const out: TaskCounts = {
    total,
    exact,
    done,
    memory: Math.min(st.memory || 0, done),
    erred,
    cancelled,
    "not-run": notRun,
    processing: 0,
    "no-worker": 0,
    queued: 0,
    waiting: 0,
  };
  let left = Math.max(total - done - erred - cancelled - notRun, 0);
  for (const s of LIVE) {
    out[s] = Math.min(st[s] || 0, left);
    left -= out[s];
  }
  out.waiting = left;
  return out;
}

/** Sum of taskCounts over rows. */
export function addCounts(rows: CountedRow[]): TaskCounts {
  const sum: TaskCounts = {
    total: 0,
    exact: true,
    done: 0,
    memory: 0,
    erred: 0,
    cancelled: 0,
    "not-run": 0,
    processing: 0,
    "no-worker": 0,
    queued: 0,
    waiting: 0,
  };
  for (const r of rows) {
    const c = taskCounts(r);
    for (const k of Object.keys(sum) as (keyof TaskCounts)[]) {
      if (k === "exact") sum.exact = sum.exact && c.exact;
      else sum[k] += c[k] || 0;
    }
  }
  return sum;
}

/** The width of each segment: "done" is what finished and is no longer in memory. */
function segmentCounts(c: TaskCounts): TaskCounts {
  return { ...c, done: c.done - c.memory };
}

/** A stacked bar: finished (in memory / released), erred, cancelled, never ran, then live states. */
export function progressBar(
  counts: TaskCounts,
  { cls = "dal-bar", label = true }: { cls?: string; label?: boolean } = {},
): HTMLElement {
  const bar = h(`div.${cls}`, {
    dataset: {
      done: counts.done,
      erred: counts.erred,
      cancelled: counts.cancelled,
      notRun: counts["not-run"],
      total: counts.total,
    },
  });
  const n = Math.max(counts.total || 0, 1);
  const seg = segmentCounts(counts);
  for (const [s] of SEGMENTS) {
    const c = seg[s];
    if (!c) continue;
    bar.append(
      h(`span.seg-${s}`, {
        style: { width: `${(100 * c) / n}%`, background: SEGMENT_COLOR[s] },
        title: `${SEGMENT_LABEL[s]}: ${fmt.count(c)}`,
      }),
    );
  }
  if (label)
    bar.append(h("span.dal-bar-label", `${fmt.count(counts.done)} / ${fmt.count(counts.total)}`));
  return bar;
}

/** The legend of the bar's colours; `only`: the segments to list (default: all but the rare ones). */
export function progressLegend(only: string[] | null = null): HTMLElement {
  const keep = only || ["memory", "done", "erred", "not-run", "processing", "waiting"];
  return h(
    "div.dal-legend",
    SEGMENTS.filter(([s]) => keep.includes(s)).map(([s, label, color]) =>
      h(
        "span",
        { dataset: { segment: s } },
        h(`i.seg-${s}`, { style: { background: color } }),
        label,
      ),
    ),
  );
}
