// The task stream: when each task of one computation ran, on which worker and thread,
// as Dask's dashboard draws it, but kept.  One lane per worker thread, one bar per task
// coloured by its prefix (erred ones red).  Past the collector's limit a computation is
// stored in time bins per (worker, prefix): a worker's lanes then show how many of its
// threads each prefix kept busy in each bin, so a million tasks still show where the
// time went.  Drawn on a canvas: 10,000 bars cost a few milliseconds.
// Traits: stream_base/stream_patch, a table of list_task_stream's rows by id ({start, stop,
// worker, thread, prefix, state, n_tasks, busy, binned}), computation {} (its start, state).
import { h, clear, watch, throttle, empty, fitCanvas } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { prefixColor, SEGMENT_COLOR } from "../common/colors.js";
import { now } from "../common/clock.js";
import { onScreen } from "../common/onscreen.js";
import { readTable, tableTraits } from "../common/table.js";
import type { RenderProps } from "../common/model.js";
import type { ComputationRow, StreamRow } from "../common/rows.js";

const AXIS = 18; // px under the lanes for the time axis
const GAP = 4; // px between workers
const FONT = "11px var(--jp-ui-font-family, system-ui, sans-serif)";

interface Lane {
  worker: string;
  label: string;
  y: number;
  h: number;
  bars: number[];
  binned: boolean;
}

export interface StreamLayout {
  t0: number;
  t1: number;
  lanes: Lane[];
  height: number;
  tasks: number;
  workers: number;
  threads: number;
  binWidth: number | null;
  prefixes: [string, number, number][]; // prefix, tasks, busy seconds; busiest first
  peak: Map<string, number>; // worker -> most threads busy in one bin (binned lanes' scale)
}

/** Lanes, time range and totals of a task stream: pure, so tests and every view share it. */
export function layout(
  rows: StreamRow[],
  computation: ComputationRow = {},
  laneHeight = 0,
): StreamLayout {
  let t0 = Infinity,
    t1 = -Infinity,
    tasks = 0,
    binWidth: number | null = null;
  const byWorker = new Map<string, { threads: Map<number, number[]>; bins: number[] }>();
  const prefixes = new Map<string, [number, number]>();
  const peak = new Map<string, number>();
  const perBin = new Map<string, number>();
  rows.forEach((r, i) => {
    if (!(r.stop >= r.start)) return;
    t0 = Math.min(t0, r.start);
    t1 = Math.max(t1, r.stop);
    const n = r.n_tasks ?? 1;
    const busy = r.binned ? (r.busy ?? 0) : r.stop - r.start;
    tasks += n;
    const p = prefixes.get(r.prefix ?? "") || [0, 0];
    prefixes.set(r.prefix ?? "", [p[0] + n, p[1] + busy]);
    const worker = r.worker ?? "";
    let w = byWorker.get(worker);
    if (!w) byWorker.set(worker, (w = { threads: new Map(), bins: [] }));
    if (r.binned) {
      w.bins.push(i);
      const width = r.stop - r.start;
      binWidth = binWidth == null ? width : Math.max(binWidth, width);
      // All prefixes of one bin stack up: the worker's scale is its busiest bin.
      const key = `${worker}\u0000${r.start}`;
      const busyThreads = (perBin.get(key) || 0) + (width > 0 ? busy / width : 0);
      perBin.set(key, busyThreads);
      peak.set(worker, Math.max(peak.get(worker) || 0, busyThreads));
    } else {
      const list = w.threads.get(r.thread ?? 0) || [];
      list.push(i);
      w.threads.set(r.thread ?? 0, list);
    }
  });
  if (!isFinite(t0)) {
    t0 = computation.start || 0;
    t1 = t0;
  }
  if (computation.start && computation.start < t0) t0 = computation.start;
  if (computation.state === "running") t1 = Math.max(t1, now());
  else if (computation.stop && computation.stop > t1) t1 = computation.stop;
  if (!laneHeight) {
    // About 300 px in all: thick lanes for a few threads, thin ones for hundreds.
    let n = 0;
    for (const w of byWorker.values()) n += w.threads.size + (w.bins.length ? 3 : 0);
    laneHeight = Math.max(3, Math.min(18, Math.floor(300 / Math.max(n, 1))));
  }
  const lanes: Lane[] = [];
  let y = 0,
    threads = 0;
  for (const worker of [...byWorker.keys()].sort()) {
    const w = byWorker.get(worker)!;
    const ids = [...w.threads.keys()].sort((a, b) => a - b);
    threads += ids.length;
    const short = worker.replace(/^[a-z]+:\/\//, "");
    ids.forEach((id, k) => {
      lanes.push({
        worker,
        label: k === 0 ? short : "",
        y,
        h: laneHeight,
        bars: w.threads.get(id)!,
        binned: false,
      });
      y += laneHeight;
    });
    if (w.bins.length) {
      const hBins = laneHeight * Math.max(2, Math.min(8, Math.ceil(peak.get(worker) || 1)));
      lanes.push({
        worker,
        label: ids.length ? "" : short,
        y,
        h: hBins,
        bars: w.bins,
        binned: true,
      });
      y += hBins;
    }
    y += GAP;
  }
  return {
    t0,
    t1,
    lanes,
    height: Math.max(y - GAP, 0),
    tasks,
    workers: byWorker.size,
    threads,
    binWidth,
    peak,
    prefixes: [...prefixes.entries()]
      .map(([p, [n, s]]) => [p, n, s] as [string, number, number])
      .sort((a, b) => b[2] - a[2] || a[0].localeCompare(b[0])),
  };
}

function color(r: StreamRow): string {
  return r.state === "erred" ? SEGMENT_COLOR.erred : prefixColor(r.prefix);
}

function tickStep(span: number, px: number): number {
  const want = span / Math.max(px / 90, 1);
  const steps = [
    1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800,
    3600, 7200, 21600, 86400,
  ];
  return steps.find((s) => s >= want) ?? want;
}

class StreamChart {
  canvas: HTMLCanvasElement;
  tip: HTMLElement | null = null; // made on the first hover, gone when the mouse leaves
  rows: StreamRow[] = [];
  lay: StreamLayout | null = null;
  labelW = 0;
  private resize: ResizeObserver;

  constructor(private container: HTMLElement) {
    this.canvas = h("canvas", { role: "img", tabIndex: 0 });
    container.append(this.canvas);
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("mouseleave", () => this.hideTip());
    this.resize = new ResizeObserver(() => this.draw());
    this.resize.observe(container);
  }

  set(rows: StreamRow[], lay: StreamLayout) {
    this.rows = rows;
    this.lay = lay;
    this.draw();
  }

  x(t: number, W: number): number {
    const lay = this.lay!;
    const span = lay.t1 - lay.t0 || 1;
    return this.labelW + ((t - lay.t0) / span) * (W - this.labelW - 4);
  }

  draw() {
    const lay = this.lay;
    const W = this.container.clientWidth;
    if (!lay || !W) return;
    const H = lay.height + AXIS;
    const ctx = fitCanvas(this.canvas, W, H);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    const fg = getComputedStyle(this.container).color || "#555";
    this.labelW = Math.min(
      Math.max(...lay.lanes.map((l) => ctx.measureText(l.label).width), 0) + 8,
      W / 4,
    );
    const rows = this.rows;
    for (const lane of lay.lanes) {
      if (lane.label) {
        ctx.fillStyle = fg;
        ctx.fillText(lane.label, 0, lane.y + Math.min(lane.h, 18) / 2, this.labelW - 6);
      }
      if (lane.binned) {
        // A bin's prefixes stack from the lane's floor: height = threads busy / peak.
        const scale = lane.h / Math.max(lay.peak.get(lane.worker) || 1, 1e-9);
        const floor = new Map<number, number>();
        for (const i of lane.bars) {
          const r = rows[i];
          const width = r.stop - r.start;
          if (!(width > 0)) continue;
          const hgt = ((r.busy ?? 0) / width) * scale;
          const base = floor.get(r.start) || 0;
          floor.set(r.start, base + hgt);
          const x0 = this.x(r.start, W),
            x1 = this.x(r.stop, W);
          ctx.fillStyle = color(r);
          ctx.fillRect(x0, lane.y + lane.h - base - hgt, Math.max(x1 - x0, 0.5), hgt);
        }
      } else {
        for (const i of lane.bars) {
          const r = rows[i];
          const x0 = this.x(r.start, W),
            x1 = this.x(r.stop, W);
          ctx.fillStyle = color(r);
          ctx.fillRect(x0, lane.y + 1, Math.max(x1 - x0 - 0.3, 0.6), lane.h - 2);
        }
      }
    }
    // Time axis: seconds since the computation started.
    const span = lay.t1 - lay.t0;
    const step = tickStep(span || 1, W - this.labelW);
    ctx.fillStyle = fg;
    ctx.strokeStyle = "rgba(128,128,128,0.35)";
    ctx.textBaseline = "top";
    for (let t = 0; t <= span + 1e-9; t += step) {
      const x = this.x(lay.t0 + t, W);
      ctx.fillRect(x, lay.height + 1, 1, 4);
      const text = fmt.duration(t);
      const w = ctx.measureText(text).width;
      ctx.fillText(text, Math.min(Math.max(x - w / 2, this.labelW), W - w), lay.height + 5);
    }
  }

  hit(e: MouseEvent): StreamRow | null {
    const lay = this.lay;
    if (!lay) return null;
    const box = this.canvas.getBoundingClientRect();
    const mx = e.clientX - box.left,
      my = e.clientY - box.top;
    const W = this.container.clientWidth;
    const lane = lay.lanes.find((l) => my >= l.y && my < l.y + l.h);
    if (!lane) return null;
    let best: StreamRow | null = null,
      bestD = 3; // px of slack around thin bars
    for (const i of lane.bars) {
      const r = this.rows[i];
      const x0 = this.x(r.start, W),
        x1 = this.x(r.stop, W);
      const d = mx < x0 ? x0 - mx : mx > x1 ? mx - x1 : 0;
      if (d < bestD || (d === 0 && best && r.binned)) {
        best = r;
        bestD = d;
      }
      if (d === 0 && !r.binned) break;
    }
    return best;
  }

  hideTip() {
    this.tip?.remove();
    this.tip = null;
  }

  hover(e: MouseEvent) {
    const r = this.hit(e);
    if (!r) {
      this.hideTip();
      return;
    }
    const lay = this.lay!;
    if (!this.tip) document.body.append((this.tip = h("div.dal-tip")));
    clear(this.tip).append(
      h("b", r.prefix || "?"),
      h(
        "div",
        r.binned
          ? `${fmt.whole(r.n_tasks)} tasks started here; ${fmt.duration(r.busy)} of work in ${fmt.duration(r.stop - r.start)}`
          : `${fmt.duration(r.stop - r.start)} · ${r.state || "ran"}`,
      ),
      h("div", `${fmt.duration(r.start - lay.t0)} after the start`),
      h("div.dal-tip-file", r.binned ? r.worker : `${r.worker} · thread ${r.thread}`),
    );
    Object.assign(this.tip.style, {
      display: "block",
      left: `${e.clientX + 12}px`,
      top: `${e.clientY + 12}px`,
    });
  }

  destroy() {
    this.resize.disconnect();
    this.hideTip();
  }
}

function summary(lay: StreamLayout): string {
  const top = lay.prefixes[0];
  const binned = lay.binWidth
    ? `; binned in ${fmt.duration(lay.binWidth)} bins per worker and prefix`
    : "";
  return (
    `${fmt.whole(lay.tasks)} tasks on ${lay.workers} worker${lay.workers === 1 ? "" : "s"} over ` +
    `${fmt.duration(lay.t1 - lay.t0)}${binned}` +
    (top ? `; most time in ${top[0]} (${fmt.duration(top[2])})` : "")
  );
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-stream");
  const head = h("div.dal-stream-head.dal-faint");
  const legend = h("div.dal-legend");
  const body = h("div.dal-stream-chart");
  const chart = new StreamChart(body);
  el.append(root);
  const draw = throttle(() => {
    const rows = readTable<StreamRow>(model, "stream", "id");
    const computation: ComputationRow = model.get("computation") || {};
    clear(root);
    if (!rows.length) {
      root.append(
        computation.state === "running"
          ? empty(
              "No task has finished yet",
              "Tasks appear here as they finish, within a second or two.",
            )
          : empty(
              "No task stream recorded for this computation",
              h(
                "span",
                "Each task's start, stop, worker and thread are recorded when ",
                h("code", "analytics.task-stream.transmit"),
                " is on (the default) and analytics was registered before the computation.",
              ),
            ),
      );
      return;
    }
    const lay = layout(rows, computation);
    const text = summary(lay);
    head.textContent = text;
    chart.canvas.setAttribute("aria-label", `Task stream: ${text}`);
    clear(legend).append(
      ...lay.prefixes
        .slice(0, 12)
        .map(([p, n, s]) =>
          h(
            "span",
            { dataset: { prefix: p }, title: `${fmt.whole(n)} tasks, ${fmt.duration(s)} of work` },
            h("i", { style: { background: prefixColor(p) } }),
            p,
          ),
        ),
    );
    if (lay.prefixes.length > 12) legend.append(h("span", `and ${lay.prefixes.length - 12} more`));
    root.append(head, legend, body);
    chart.set(rows, lay);
  });
  draw();
  const off = watch(model, [...tableTraits("stream"), "computation"], draw);
  return () => {
    off();
    chart.destroy();
    root.remove();
  };
}

export default onScreen({ render });
