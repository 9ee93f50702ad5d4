// What became of a group's (or computation's) tasks, as the team pages draw it: finished,
// erred (raised), cancelled while running, never ran (a dependency failed, released,
// cancelled before it ran), and what is still to come.  The counts are the views'
// (js/common/progress.ts) and so are the colours (js/common/colors.ts); the page draws
// fewer segments than the notebook's bar.
import { h } from "../common/dom.js";
import { whole } from "../common/format.js";
import { SEGMENT_COLOR, SEGMENT_LABEL } from "../common/colors.js";
import { taskCounts } from "../common/progress.js";
import type { ComputationRow, TaskGroupRow } from "../common/rows.js";

const SEGMENTS = ["done", "erred", "cancelled", "not-run", "processing", "waiting"] as const;
type Segment = (typeof SEGMENTS)[number];
export type TaskCounts = Record<Segment, number> & { total: number };

/** The views' reading of a row's task counts, in this page's segments: processing
 *  includes tasks waiting for a worker. */
export function counts(g: TaskGroupRow | ComputationRow): TaskCounts {
  const k = taskCounts(g);
  const processing = (k.processing || 0) + (k["no-worker"] || 0);
  return {
    total: k.total,
    done: k.done,
    erred: k.erred,
    cancelled: k.cancelled,
    "not-run": k["not-run"],
    processing,
    waiting: Math.max(k.total - k.done - k.erred - k.cancelled - k["not-run"] - processing, 0),
  };
}

export function taskBar(k: TaskCounts): HTMLElement {
  const n = Math.max(k.total || 0, 1);
  const bar = h("div", {
    class: "bar",
    title: SEGMENTS.filter((id) => k[id])
      .map((id) => `${SEGMENT_LABEL[id]}: ${whole(k[id])}`)
      .join(", "),
  });
  for (const id of SEGMENTS) {
    if (!k[id]) continue;
    bar.appendChild(
      h("span", {
        class: `seg ${id}`,
        title: `${SEGMENT_LABEL[id]}: ${whole(k[id])}`,
        style: `width:${((100 * k[id]) / n).toFixed(3)}%;background:${SEGMENT_COLOR[id]}`,
      }),
    );
  }
  return bar;
}

export const taskLegend = () =>
  h(
    "div",
    { class: "legend muted" },
    SEGMENTS.map((id) =>
      h(
        "span",
        {},
        h("i", { class: `seg ${id}`, style: `background:${SEGMENT_COLOR[id]}` }),
        SEGMENT_LABEL[id],
      ),
    ),
  );

/** A count, marked with `cls` when not zero. */
export const numCell = (n: number, cls: string) => (n ? h("span", { class: cls }, whole(n)) : "0");
