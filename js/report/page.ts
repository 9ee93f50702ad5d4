// The page of a shared report: the monitor's views over the data stored with it.
// Built as a classic script (IIFE) so the report is one self-contained HTML file that
// also opens from disk; dask_analytics_lab/reports/render.py inlines it.
//
// A report is a snapshot: the views' clock is frozen at the moment it was made
// (state.snapshot_time), so durations, uptimes and "… ago" read as they did then, a
// live cluster says "live then", and the page says when that was.
import monitor from "../widgets/monitor.js";
import { LocalModel } from "../common/model.js";
import { freeze } from "../common/clock.js";
import { h } from "../common/dom.js";
import * as fmt from "../common/format.js";
import type { ProfileNode } from "../widgets/flamegraph.js";

/** The monitor's traits as stored with the report (reports/render.py), and the moment
 *  it was made; profiles: each task prefix's profile, for the flamegraph's group picker. */
export interface ReportState extends Record<string, unknown> {
  snapshot_time?: number | null;
  profile?: ProfileNode | null;
  profiles?: Record<string, ProfileNode> | null;
}

export function render(el: HTMLElement, state: ReportState): void | (() => void) {
  freeze(state.snapshot_time);
  el.classList.add("dal-frozen");
  if (state.snapshot_time) {
    el.append(
      h(
        "div.dal.dal-asof",
        { title: "Everything below is as it was recorded when the report was made" },
        "Snapshot of ",
        h("b", fmt.datetime(state.snapshot_time)),
        ": the figures below are as of then.",
      ),
    );
  }
  const model = new LocalModel({ ...state, shareable: false });
  // The flamegraph's group picker: each prefix's profile came with the report.
  const whole = state.profile;
  model.on("change:profile_prefix", () => {
    const prefix = model.get("profile_prefix");
    model.set("profile", (prefix && state.profiles?.[prefix]) || whole);
  });
  const view = h("div");
  el.append(view);
  return monitor.render({ model, el: view });
}
