// Small SVG time-series charts (no chart library: a few hundred points at most).
import { svg } from "./dom.js";
import * as fmt from "./format.js";

const W = 600, H = 120, L = 46, R = 8, T = 8, B = 18;

/**
 * series: [{points: [[t, v], ...], color, fill?: bool, label}]; yFormat(v) -> text.
 * bands: [{t0, t1, color, label}] drawn along the bottom (e.g. task groups running).
 */
export interface ChartSeries { points: [number, number | null][]; color: string; fill?: boolean; dash?: boolean; label?: string }
export interface ChartBand { t0: number; t1: number; color: string; label: string }
export interface ChartOptions {
  series: ChartSeries[];
  yFormat?: (v: number) => string;
  yMax?: number | null;
  t0?: number | null;
  t1?: number | null;
  bands?: ChartBand[];
}

export function timeChart({ series, yFormat = fmt.count, yMax = null, t0 = null, t1 = null, bands = [] }: ChartOptions): SVGElement {
  const all = series.flatMap((s) => s.points);
  const ts = all.map((p) => p[0]);
  const lo = t0 ?? Math.min(...ts), hi = t1 ?? Math.max(...ts);
  const top = yMax ?? Math.max(1e-9, ...all.map((p) => p[1] ?? 0)) * 1.1;
  const x = (t) => L + ((t - lo) / Math.max(hi - lo, 1e-9)) * (W - L - R);
  const y = (v) => T + (1 - (v ?? 0) / top) * (H - T - B);
  const el = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "xMidYMid meet", role: "img" });
  for (const f of [0, 0.5, 1]) {
    const v = top * f;
    el.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "var(--dal-border)", "stroke-width": 1 }));
    el.append(svg("text", { x: L - 5, y: y(v) + 3, "text-anchor": "end", class: "axis" }, yFormat(v)));
  }
  if (isFinite(lo) && isFinite(hi)) {
    el.append(svg("text", { x: L, y: H - 4, class: "axis" }, fmt.clock(lo)));
    el.append(svg("text", { x: W - R, y: H - 4, "text-anchor": "end", class: "axis" }, fmt.clock(hi)));
  }
  for (const b of bands) {
    el.append(svg("rect", { x: x(b.t0), y: H - B - 4, width: Math.max(x(b.t1) - x(b.t0), 1), height: 4, fill: b.color, opacity: 0.9 },
      svg("title", {}, b.label)));
  }
  for (const s of series) {
    const pts = s.points.filter((p) => p[1] != null);
    if (!pts.length) continue;
    const d = pts.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    if (s.fill) {
      el.append(svg("path", { d: `${d}L${x(pts[pts.length - 1][0]).toFixed(1)},${y(0)}L${x(pts[0][0]).toFixed(1)},${y(0)}Z`, fill: s.color, opacity: 0.14 }));
    }
    el.append(svg("path", { d, fill: "none", stroke: s.color, "stroke-width": 1.8, "stroke-linejoin": "round", ...(s.dash ? { "stroke-dasharray": "4 3" } : {}) }));
  }
  return el;
}
