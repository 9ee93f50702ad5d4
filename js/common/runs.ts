// A run against the earlier runs of the same code (store/compare.py run_summary):
// a one-line banner when it is much slower or faster than its baseline, a small
// trend of the runs' wall times, and the "vs previous run" cell of a task group.
// summary: {baseline_id, wall: {before, after, ratio}, findings: [str], inputs_differ,
//           groups: {prefix: ratio}, runs: [{computation_id, start, wall, state}] (oldest first)}
// inputs_differ: null, or {sentence, before, after, groups} when the baseline ran on other
// inputs (another size): then the banner says so first and is neutral, not a regression.
import { h, svg } from "./dom.js";
import * as fmt from "./format.js";

// A run this much slower or faster than its baseline gets the banner; a group's ratio
// this far from 1 is coloured.
export const NOTABLE = 1.5;

export interface RunSummary {
  baseline_id?: string | null;
  wall?: { before: number | null; after: number | null; ratio: number | null } | null;
  findings?: string[];
  inputs_differ?: { sentence: string } | null;
  groups?: Record<string, number | null>;
  runs?: { computation_id: string; start: number; wall: number | null; state: string }[];
}

export function times(ratio: number): string {
  return ratio < 10 ? `${ratio.toFixed(1)}x` : `${Math.round(ratio)}x`;
}

/** "4.0x slower than the previous run (10.0 s → 40.0 s) · groupby: compute 5.0x", or null.
 * When the previous run had other inputs the banner says so whether or not the time moved. */
export function runsBanner(summary: RunSummary | null | undefined): HTMLElement | null {
  const wall = summary?.wall;
  if (!summary?.baseline_id) return null;
  const inputs = summary.inputs_differ?.sentence;
  const notable = !!wall?.ratio && (wall.ratio >= NOTABLE || wall.ratio <= 1 / NOTABLE);
  if (!notable && !inputs) return null;
  if (!notable || !wall?.ratio) {
    return h(
      "div.dal-runs-banner.inputs",
      { role: "status", title: (summary.findings || []).join("\n") },
      "Other inputs than the previous run of this code: ",
      h("span.dal-runs-inputs", inputs),
    );
  }
  const note = inputs ? [", on other inputs: ", h("span.dal-runs-inputs", inputs)] : null;
  const slower = wall.ratio > 1;
  const x = slower ? wall.ratio : 1 / wall.ratio;
  // The first findings repeat the overall change and the inputs: show what moved most.
  const detail = (summary.findings || []).find(
    (f) =>
      !/ overall \(/.test(f) && !f.startsWith("this run") && !f.startsWith("the inputs differ"),
  );
  return h(
    `div.dal-runs-banner.${inputs ? "inputs" : slower ? "slower" : "faster"}`,
    { role: "status", title: (summary.findings || []).join("\n") },
    h("b", `${times(x)} ${slower ? "slower" : "faster"}`),
    ` than the previous run of this code (${fmt.duration(wall.before)} → ${fmt.duration(wall.after)})`,
    note,
    detail ? h("span.dal-runs-detail", ` · ${detail}`) : null,
  );
}

/** The runs' wall times as small bars, oldest first; this run's bar stands out. */
export function runsTrend(
  summary: RunSummary | null | undefined,
  current: string | null | undefined,
): SVGElement | null {
  const runs = (summary?.runs || []).filter((r) => r.wall != null);
  if (runs.length < 2) return null;
  const W = 120,
    H = 24,
    gap = 2;
  const top = Math.max(...runs.map((r) => r.wall as number), 1e-9);
  const bw = Math.min(10, Math.max(2, (W - gap * (runs.length - 1)) / runs.length));
  const el = svg("svg", {
    viewBox: `0 0 ${W} ${H}`,
    class: "dal-runs-trend",
    role: "img",
    "aria-label": `wall time of the last ${runs.length} runs of this code`,
  });
  runs.forEach((r, i) => {
    const bh = Math.max(1, ((r.wall as number) / top) * (H - 2));
    const bar = svg("rect", {
      x: i * (bw + gap),
      y: H - bh,
      width: bw,
      height: bh,
      rx: 1,
      class: r.computation_id === current ? "current" : r.state === "finished" ? "" : "other",
    });
    bar.append(svg("title", {}, `${fmt.datetime(r.start)} · ${fmt.duration(r.wall)} · ${r.state}`));
    el.append(bar);
  });
  return el;
}

/** A task group's compute time against the same prefix in the baseline run. */
export function vsPrevious(ratio: number | null | undefined): HTMLElement | string {
  if (ratio == null) return "–";
  const cls = ratio >= NOTABLE ? ".slower" : ratio <= 1 / NOTABLE ? ".faster" : "";
  return h(`span.dal-vs${cls}`, times(ratio));
}
