// Small SVG time-series charts (no chart library: a few hundred points at most).
import { svg } from "./dom.js";
import * as fmt from "./format.js";

// The size drawn at before layout; the margins hold the axis labels (11 px text).
const W = 600,
  H = 110,
  L = 56,
  R = 8,
  T = 8,
  B = 18;

/**
 * series: [{points: [[t, v], ...], color, fill?: bool, label}]; yFormat(v) -> text.
 *   base: the lower edge of a filled series, one value per point (a stacked area);
 *   without it the fill goes down to 0.
 * bands: [{t0, t1, color, label}] drawn along the bottom (e.g. task groups running).
 * marks: [{t, color, label, cls}] vertical lines at moments (e.g. a worker left).
 * label: the chart's text for screen readers.
 */
export interface ChartSeries {
  points: [number, number | null | undefined][];
  color: string;
  fill?: boolean;
  dash?: boolean;
  label?: string;
  base?: (number | null)[];
  opacity?: number;
}
export interface ChartBand {
  t0: number;
  t1: number;
  color: string;
  label: string;
}
export interface ChartMark {
  t: number;
  color: string;
  label: string;
  cls?: string;
}
export interface ChartOptions {
  series: ChartSeries[];
  yFormat?: (v: number) => string;
  yMax?: number | null;
  t0?: number | null;
  t1?: number | null;
  bands?: ChartBand[];
  marks?: ChartMark[];
  label?: string;
}

export function timeChart(options: ChartOptions): SVGElement {
  const el = svg("svg", { role: "img", "aria-label": options.label });
  // Drawn in the element's own pixels, redrawn when its size changes: with a fixed
  // viewBox scaled to fit, a chart a third of a narrow notebook wide shrank its 11 px
  // axis labels to about 5 px.  Until it is laid out (built off-screen, a hidden tab)
  // it keeps the default size.
  let size = "";
  const draw = () => {
    const w = Math.round(el.clientWidth) || W,
      ht = Math.round(el.clientHeight) || H;
    if (`${w}x${ht}` === size) return;
    size = `${w}x${ht}`;
    el.setAttribute("viewBox", `0 0 ${w} ${ht}`);
    el.replaceChildren(...chartParts(options, w, ht));
  };
  draw();
  if (typeof ResizeObserver !== "undefined")
    new ResizeObserver(draw).observe(el as unknown as Element);
  return el;
}

function chartParts(
  {
    series,
    yFormat = fmt.count,
    yMax = null,
    t0 = null,
    t1 = null,
    bands = [],
    marks = [],
  }: ChartOptions,
  W: number,
  H: number,
): SVGElement[] {
  const parts: SVGElement[] = [];
  const all = series.flatMap((s) => s.points);
  const ts = all.map((p) => p[0]);
  const lo = t0 ?? Math.min(...ts),
    hi = t1 ?? Math.max(...ts);
  const peak = Math.max(0, ...all.map((p) => p[1] ?? 0));
  const top = yMax ?? (peak > 0 ? peak * 1.1 : 1); // all zero: an axis of 0 to 1, not 0, 0, 0
  const x = (t: number) => L + ((t - lo) / Math.max(hi - lo, 1e-9)) * (W - L - R);
  const y = (v: number | null | undefined) => T + (1 - (v ?? 0) / top) * (H - T - B);
  for (const f of [0, 0.5, 1]) {
    const v = top * f;
    parts.push(
      svg("line", {
        x1: L,
        x2: W - R,
        y1: y(v),
        y2: y(v),
        stroke: "var(--dal-border)",
        "stroke-width": 1,
      }),
    );
    parts.push(
      svg("text", { x: L - 5, y: y(v) + 4, "text-anchor": "end", class: "axis" }, yFormat(v)),
    );
  }
  if (isFinite(lo) && isFinite(hi)) {
    parts.push(svg("text", { x: L, y: H - 3, class: "axis" }, fmt.clock(lo)));
    parts.push(
      svg("text", { x: W - R, y: H - 3, "text-anchor": "end", class: "axis" }, fmt.clock(hi)),
    );
  }
  for (const b of bands) {
    parts.push(
      svg(
        "rect",
        {
          x: x(b.t0),
          y: H - B - 4,
          width: Math.max(x(b.t1) - x(b.t0), 1),
          height: 4,
          fill: b.color,
          opacity: 0.9,
        },
        svg("title", {}, b.label),
      ),
    );
  }
  for (const s of series) {
    const kept = s.points
      .map((p, i) => [p, s.base?.[i] ?? 0] as const)
      .filter(([p]) => p[1] != null);
    const pts = kept.map(([p]) => p);
    if (!pts.length) continue;
    const d = pts
      .map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`)
      .join("");
    if (s.fill && s.base) {
      const back = kept
        .slice()
        .reverse()
        .map(([p, b]) => `L${x(p[0]).toFixed(1)},${y(b).toFixed(1)}`)
        .join("");
      parts.push(svg("path", { d: `${d}${back}Z`, fill: s.color, opacity: s.opacity ?? 0.14 }));
    } else if (s.fill) {
      parts.push(
        svg("path", {
          d: `${d}L${x(pts[pts.length - 1][0]).toFixed(1)},${y(0)}L${x(pts[0][0]).toFixed(1)},${y(0)}Z`,
          fill: s.color,
          opacity: s.opacity ?? 0.14,
        }),
      );
    }
    if (pts.length === 1) {
      // one sample draws no line: a dot
      parts.push(svg("circle", { cx: x(pts[0][0]), cy: y(pts[0][1]), r: 2.5, fill: s.color }));
    }
    parts.push(
      svg("path", {
        d,
        fill: "none",
        stroke: s.color,
        "stroke-width": 1.8,
        "stroke-linejoin": "round",
        ...(s.dash ? { "stroke-dasharray": "4 3" } : {}),
      }),
    );
  }
  for (const m of marks) {
    if (!isFinite(m.t)) continue;
    const at = x(m.t).toFixed(1);
    parts.push(
      svg(
        "g",
        { class: `dal-mark ${m.cls || ""}`.trim() },
        svg("title", {}, m.label),
        svg("line", {
          x1: at,
          x2: at,
          y1: T,
          y2: H - B,
          stroke: m.color,
          "stroke-width": 1.5,
          "stroke-dasharray": "3 2",
        }),
        svg("circle", { cx: at, cy: T + 3, r: 3.5, fill: m.color }),
      ),
    );
  }
  return parts;
}
