// The notebook's own views on the team pages, over the stored rows (a LocalModel stands
// in for the widget's model), bundled into this page's script: the product has one
// flamegraph, one Time tab, one task stream and one Findings tab.
import { h } from "../common/dom.js";
import { LocalModel } from "../common/model.js";
import flamegraphView from "../widgets/flamegraph.js";
import timeView from "../widgets/time.js";
import streamView from "../widgets/stream.js";
import findingsView from "../widgets/findings.js";
import type { Finding } from "../widgets/findings.js";
import type { ComputationDetail, StreamRow } from "../common/rows.js";
import type { ProfileNode } from "../widgets/flamegraph.js";

/** Dask's profile tree as the notebook's flamegraph (zoom on click, search, hover for
 *  file, line and code). */
export function flamegraph(tree: ProfileNode | null): HTMLElement {
  const wrap = h("div", { class: "flame" });
  if (!tree || !tree.count) {
    wrap.appendChild(
      h(
        "p",
        { class: "muted" },
        "No profile recorded (analytics.profile.transmit off, or too short to sample).",
      ),
    );
    return wrap;
  }
  flamegraphView.render({ model: new LocalModel({ profile: tree }), el: wrap });
  return wrap;
}

/** Where each task group's time went: the notebook's Time tab over the stored metrics. */
export function timeBreakdown(c: ComputationDetail): HTMLElement {
  const wrap = h("div", { class: "time" });
  timeView.render({
    model: new LocalModel({
      metrics: c.metrics || [],
      computation: c,
      groups_base: { v: 0, rows: c.groups || [] },
    }),
    el: wrap,
  });
  return wrap;
}

/** When and where each task ran: the notebook's Task stream tab over the stored rows. */
export function taskStream(c: ComputationDetail, tasks: StreamRow[]): HTMLElement {
  const wrap = h("div", { class: "stream" });
  streamView.render({
    model: new LocalModel({ stream_base: { v: 0, rows: tasks }, computation: c }),
    el: wrap,
  });
  return wrap;
}

/** Why it was slow: the notebook's Findings tab over the server's findings (findings/).
 *  A running computation's record is partial, so it gets none yet (the view says so). */
export function findingsBox(c: ComputationDetail, found: Finding[]): HTMLElement {
  const wrap = h("div", { class: "findings" });
  const shown = c.state === "running" ? {} : { computation_id: c.computation_id, findings: found };
  findingsView.render({ model: new LocalModel({ computation: c, findings: shown }), el: wrap });
  return wrap;
}
