// The page of a shared report: the monitor's views over the data stored with it.
// Built as a classic script (IIFE) so the report is one self-contained HTML file that
// also opens from disk; dask_analytics_lab/reports/render.py inlines it, over the state
// reports/twin_page.py makes from the report's twin (every report page's one source).
//
// A report is a snapshot: the views' clock is frozen at the moment it was made
// (state.snapshot_time), so durations, uptimes and "… ago" read as they did then, a
// live cluster says "live then", and the page says when that was.
//
// The views' empty states speak to a notebook's user ("Run %load_ext …"); a report's
// reader cannot run anything, so here each says what the report lacks instead.
import monitor from "../widgets/monitor.js";
import { LocalModel } from "../common/model.js";
import { freeze } from "../common/clock.js";
import { h, empty, retellEmpty } from "../common/dom.js";
import * as fmt from "../common/format.js";
import type { ProfileNode } from "../widgets/flamegraph.js";

/** What twin_page.py adds for this page: each other computation's own traits (applied
 *  when it is chosen in the list), whether the report holds a cluster record at all,
 *  and the code of a performance_report's block. */
export interface ReportExtras {
  computations?: Record<string, Record<string, unknown>>;
  has_record?: boolean;
  block_code?: string | null;
}

/** The monitor's traits as stored with the report (reports/twin_page.py), and the
 *  moment it was made; profiles: each task prefix's profile, for the flamegraph's
 *  group picker. */
export interface ReportState extends Record<string, unknown> {
  snapshot_time?: number | null;
  profile?: ProfileNode | null;
  profiles?: Record<string, ProfileNode> | null;
  report?: ReportExtras | null;
}

/** The traits that are one computation's own (reports/twin_page.py _views). */
const OWN_TRAITS = [
  "computation_id",
  "computation",
  "exceptions",
  "code",
  "metrics",
  "stream_base",
  "groups_base",
  "profile",
  "profile_title",
  "profiles",
  "profile_prefixes",
  "profile_prefix",
  "runs",
  "findings",
];

/** A view's empty-state title -> what the report's reader is told instead. */
export const EMPTY_TEXTS: Record<string, [string, string]> = {
  "No cluster recorded yet": [
    "This report holds no cluster record",
    "analytics was not recording this cluster when the report was made, so the store kept nothing of it.",
  ],
  "No computation yet": [
    "This report holds no computation",
    "The store kept no computation of this cluster in the report's window.",
  ],
  "No task groups recorded yet": [
    "This report holds no task groups",
    "The recorder kept no task group of this computation.",
  ],
  "No profile yet": [
    "The recorder kept no profile for this computation",
    "Its tasks ran too briefly to be sampled, or profiles were not recorded (analytics.profile.transmit).",
  ],
  "No time breakdown recorded for this computation": [
    "This report holds no time breakdown",
    "The recorder kept no fine performance metrics of this computation (analytics.metrics.transmit).",
  ],
  "No time measured yet": [
    "This report holds no time breakdown",
    "The computation was still running when the report was made.",
  ],
  "No task stream recorded for this computation": [
    "This report holds no task stream",
    "The recorder kept no task stream of this computation (analytics.task-stream.transmit).",
  ],
  "No task has finished yet": [
    "This report holds no task stream",
    "No task had finished when the report was made.",
  ],
  "No code recorded for this computation": [
    "This report holds no code",
    "No calling code was recorded with this computation, or the report leaves it out (analytics.computation.code.transmit).",
  ],
  "No GPU samples for this cluster": [
    "This report holds no GPU samples",
    "No GPU was sampled on this cluster while the computation ran.",
  ],
  "Still running": [
    "This report holds no findings",
    "The computation was still running when the report was made: findings are made once it ends.",
  ],
  "Reading the record…": [
    "This report holds no findings",
    "It was stored by a release that did not keep them.",
  ],
};

/** A report with nothing of the cluster (analytics was not recording it): say so, and
 *  show the block's code as text. */
function noRecord(el: HTMLElement, extras: ReportExtras): void {
  const [title, hint] = EMPTY_TEXTS["No cluster recorded yet"];
  el.append(
    h(
      "div.dal.dal-report-norecord",
      empty(title, hint),
      extras.block_code
        ? h(
            "div.dal-code",
            h("div.dal-code-head", h("span", "The report's block")),
            h("div.dal-code-body", h("pre", extras.block_code)),
          )
        : null,
    ),
  );
}

export function render(el: HTMLElement, state: ReportState): void | (() => void) {
  freeze(state.snapshot_time);
  retellEmpty(EMPTY_TEXTS);
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
  const extras: ReportExtras = state.report || {};
  if (extras.has_record === false) {
    noRecord(el, extras);
    return;
  }
  const model = new LocalModel({ ...state, shareable: false });
  // Choosing another computation of the report shows its own rows (they came with it);
  // the one shown first has its traits in the state itself.
  const first = Object.fromEntries(OWN_TRAITS.map((k) => [k, state[k]]));
  let whole = state.profile;
  let profiles = state.profiles;
  model.on("change:computation_id", () => {
    const id = model.get("computation_id");
    const own = id === first.computation_id ? first : extras.computations?.[id];
    if (!own) return;
    whole = own.profile as ProfileNode | null;
    profiles = own.profiles as Record<string, ProfileNode> | null;
    model.update({ findings: null, runs: {}, ...own });
  });
  // The flamegraph's group picker: each prefix's profile came with the report.
  model.on("change:profile_prefix", () => {
    const prefix = model.get("profile_prefix");
    model.set("profile", (prefix && profiles?.[prefix]) || whole);
  });
  const view = h("div");
  el.append(view);
  return monitor.render({ model, el: view });
}
