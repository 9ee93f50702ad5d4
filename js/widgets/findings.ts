// Why the chosen computation was slow, and what to change: explain()'s findings, most
// costly first (dask_analytics_lab/findings/).  Each: its title and the wall time the
// advice would save, why its kind matters, the recorded figures it rests on, the advice,
// and the groups and workers named.
// Traits: findings {computation_id, findings: [{kind, title, evidence, advice, impact,
// groups, workers}]}, computation {computation_id, state}.
import { h, clear, watch, throttle, empty } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { onScreen } from "../common/onscreen.js";
import type { Model, RenderProps } from "../common/model.js";
import type { ComputationRow, Finding } from "../common/rows.js";

export type { Finding };

/** The findings of the computation the model shows, or null when they are not (yet) its. */
export function findingsOf(model: Model): Finding[] | null {
  const comp: ComputationRow = model.get("computation") || {};
  const f: { computation_id?: string; findings?: Finding[] } = model.get("findings") || {};
  if (!comp.computation_id || f.computation_id !== comp.computation_id) return null;
  return f.findings || [];
}

/** "Straggler: a straggler in spin held up the end by 2.83 s (~2.8 s to save)": the top
 *  finding as one line above the task groups; clicking it opens the Findings tab. */
export function topFinding(model: Model): HTMLElement | null {
  const found = findingsOf(model);
  if (!found || !found.length) return null;
  const f = found[0];
  const more = found.length > 1 ? ` · ${found.length - 1} more` : "";
  return h(
    "div.dal-top-finding",
    {
      role: "status",
      title: f.evidence,
      onclick: () => {
        model.set("tab", "findings");
        model.save_changes();
      },
    },
    h("span.dal-finding-kind", f.kind),
    h("b", f.title),
    h("span.dal-finding-cost", ` ~${fmt.duration(f.impact)} to save`),
    h("span.dal-finding-more", `${more} — see Findings`),
  );
}

function card(f: Finding): HTMLElement {
  const names = [
    ...(f.groups || []).map((g) => h("span.dal-chip", { title: "task group" }, g)),
    ...(f.workers || []).map((w) => h("span.dal-chip.worker", { title: "worker" }, w)),
  ];
  return h(
    "div.dal-finding",
    { dataset: { kind: f.kind } },
    h(
      "div.dal-finding-head",
      h("span.dal-finding-kind", f.kind),
      h("b.dal-finding-title", f.title),
      h(
        "span.dal-finding-cost",
        { title: "wall time the advice would save (an estimate: see the evidence)" },
        `~${fmt.duration(f.impact)} to save`,
      ),
    ),
    f.why ? h("div.dal-finding-why", f.why) : null,
    h("div.dal-finding-evidence", h("span.dal-finding-label", "Evidence "), f.evidence),
    h("div.dal-finding-advice", h("span.dal-finding-label", "Advice "), f.advice),
    names.length ? h("div.dal-finding-names", names) : null,
  );
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-findings");
  el.append(root);
  const draw = throttle(() => {
    clear(root);
    const comp: ComputationRow = model.get("computation") || {};
    const found = findingsOf(model);
    if (!comp.computation_id) {
      root.append(empty("No computation yet", "Findings appear once a computation ends."));
    } else if (found === null) {
      root.append(
        empty(
          comp.state === "running" ? "Still running" : "Reading the record…",
          "Findings are made from the whole record, once the computation ends.",
        ),
      );
    } else if (!found.length) {
      root.append(
        empty(
          "No findings",
          "Nothing here cost enough time to mention (analytics.findings.* thresholds).",
        ),
      );
    } else {
      for (const f of found) root.append(card(f));
    }
  });
  draw();
  return watch(model, ["findings", "computation"], draw);
}

export default onScreen({ render });
