// Flamegraph of Dask's statistical profile (distributed/profile.py's tree):
// click to zoom, search to highlight, hover for file, line number and line of code.
// Drawn on a canvas from flat typed arrays, so a 10,000-node profile renders in a few
// milliseconds (benchmarks/flamegraph_bench.py measures it).
// A task-group picker narrows it to one prefix's samples (the kernel reads that
// profile); "Hide Dask internals" folds the frames of dask, distributed and the
// thread pool so the user's code and libraries carry the width.
// Traits: profile {count, identifier, description, children}, profile_title "",
// profile_prefixes [str], profile_prefix "" (all).
import { h, clear, watch, empty, fitCanvas } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { fnv1a } from "../common/colors.js";
import { onScreen } from "../common/onscreen.js";
import type { RenderProps } from "../common/model.js";

const ROW = 18;
const FONT = "11px var(--jp-code-font-family, ui-monospace, Menlo, Consolas, monospace)";
const CHAR_W = 6.6; // width of one glyph at FONT; avoids measureText per node

/** A frame as distributed/profile.py describes it. */
export interface FrameDescription {
  name?: string;
  filename?: string;
  line_number?: number;
  line?: string;
}

/** A node of the profile tree: its samples and its callees by identifier. */
export interface ProfileNode {
  count?: number;
  identifier?: string;
  description?: FrameDescription;
  children?: Record<string, ProfileNode>;
}

/** The tree as flat arrays, one entry per node (depth first); byDepth: each row's nodes,
 *  left to right. */
export interface FlatProfile {
  n: number;
  maxDepth: number;
  byDepth: number[][];
  desc: FrameDescription[];
  ident: string[];
  parent: Int32Array;
  depth: Int32Array;
  count: Float64Array;
  start: Float64Array;
}

/** Flatten a profile tree (children heaviest first) into typed arrays + strings. */
export function flatten(tree: ProfileNode): FlatProfile {
  const parent: number[] = [],
    depth: number[] = [],
    count: number[] = [],
    start: number[] = [],
    desc: FrameDescription[] = [];
  const ident: string[] = [];
  let maxDepth = 0;
  // Iterative DFS: profiles can be deeper than the JS call stack likes.
  const stack: [ProfileNode, number, number, number, number | undefined][] = [
    [tree, -1, 0, 0, undefined],
  ];
  while (stack.length) {
    const [node, p, d, x, own] = stack.pop()!;
    const i = count.length;
    const c = own ?? (node.count || 0);
    parent.push(p);
    depth.push(d);
    count.push(c);
    start.push(x);
    desc.push(node.description || {});
    ident.push(node.identifier ?? "");
    if (d > maxDepth) maxDepth = d;
    const kids = childSamples(node, c).sort((a, b) => b[1] - a[1]);
    // Push in reverse so the heaviest child is laid out (and popped) first, leftmost.
    const offsets: number[] = [];
    let xx = x;
    for (const [, w] of kids) {
      offsets.push(xx);
      xx += w;
    }
    for (let j = kids.length - 1; j >= 0; j--)
      stack.push([kids[j][0], i, d + 1, offsets[j], kids[j][1]]);
  }
  const n = count.length;
  const byDepth = Array.from({ length: maxDepth + 1 }, (): number[] => []);
  for (let i = 0; i < n; i++) byDepth[depth[i]].push(i);
  for (const list of byDepth) list.sort((a, b) => start[a] - start[b]);
  return {
    n,
    maxDepth,
    byDepth,
    desc,
    ident,
    parent: Int32Array.from(parent),
    depth: Int32Array.from(depth),
    count: Float64Array.from(count),
    start: Float64Array.from(start),
  };
}

/** Colour by where the code lives: your code warm, Dask blue, the numeric stack green. */
export function colorFor(d: FrameDescription): string {
  const f = d.filename || "";
  const v = fnv1a(d.name || "") % 12;
  if (!f) return "hsl(220 10% 70%)";
  if (/[\\/](dask|distributed)[\\/]/.test(f)) return `hsl(${205 + v} 60% ${64 + (v % 4) * 3}%)`;
  if (/[\\/](numpy|pandas|pyarrow|scipy|numba|cupy|sklearn|xarray)[\\/]/.test(f))
    return `hsl(${145 + v} 42% ${60 + (v % 4) * 3}%)`;
  if (/site-packages|dist-packages/.test(f)) return `hsl(${265 + v} 40% ${70 + (v % 4) * 2}%)`;
  if (/[\\/]lib[\\/]python3[.\d]*[\\/]/.test(f) || f.startsWith("<"))
    return `hsl(${30 + v} 8% ${72 + (v % 4) * 2}%)`;
  return `hsl(${18 + v * 2} 88% ${60 + (v % 4) * 3}%)`;
}

// Frames of the machinery that runs a task, not of the task: dask, distributed, and the
// standard library's threads, futures and event loop.
const INTERNAL =
  /[\\/](dask|distributed|tornado)[\\/]|[\\/](threading|asyncio[\\/][^\\/]*|concurrent[\\/]futures[\\/][^\\/]*)\.py$/;

export function isInternal(d: FrameDescription | null | undefined): boolean {
  return INTERNAL.test(d?.filename || "");
}

/** [child, its samples] of a node that has `own` samples.  Dask's innermost frames can
 *  carry a count of 0: they share their parent's samples that no child claims, so the
 *  function that was running still shows. */
export function childSamples(node: ProfileNode, own: number): [ProfileNode, number][] {
  const kids = Object.values(node.children || {});
  const claimed = kids.reduce((t, k) => t + (k.count || 0), 0);
  const zero = kids.filter((k) => !k.count).length;
  const share = zero && own > claimed ? (own - claimed) / zero : 0;
  return kids.map((k) => [k, k.count || share]);
}

/** The tree with the frames that ran the task folded away: their children take their
 *  place (merged with siblings of the same identity), their own samples stay with their
 *  caller.  Only above the first frame of the user's code or a library: what that frame
 *  calls stays whole, dask's included.  A path with no such frame (NumPy's C code called
 *  straight from dask.array: `_matmul`, `_apply_random`) keeps its innermost frame, so a
 *  NumPy-bound profile never folds away to nothing.  Counts are the samples each frame
 *  had where it was (a 0 count's share of its first parent, as flatten draws it). */
export function foldInternals(tree: ProfileNode): ProfileNode {
  const out: ProfileNode & Folding = { ...tree, children: {} };
  const stack: [ProfileNode, number, Folding, boolean][] = [[tree, tree.count || 0, out, false]];
  while (stack.length) {
    const [src, own, dst, below] = stack.pop()!;
    const lifted: [ProfileNode, number][] = [];
    const todo = childSamples(src, own);
    while (todo.length) {
      const [c, w] = todo.pop()!;
      const leaf = !Object.keys(c.children || {}).length;
      if (!below && !leaf && isInternal(c.description)) todo.push(...childSamples(c, w));
      else if (w > 0) lifted.push([c, w]);
    }
    for (const [c, w] of lifted) {
      const id = String(c.identifier); // as an object key would be
      let have = dst.children[id];
      if (have) have.count += w;
      else have = dst.children[id] = { ...c, count: w, children: {} };
      stack.push([c, w, have, below || !isInternal(c.description)]);
    }
  }
  return out;
}

/** A node of the folded tree, its callees merged as they are lifted into it. */
interface Folding {
  children: Record<string, Folded>;
}
type Folded = ProfileNode & Folding & { count: number };

function label(d: FrameDescription): string {
  return d.name ? d.name : "all";
}

export class FlameChart {
  container: HTMLElement;
  canvas: HTMLCanvasElement;
  tip: HTMLElement;
  flat: FlatProfile | null = null;
  focus = 0;
  query = "";
  matched: Uint8Array | null = null; // 1: the node matches the search
  matchedCount = 0;
  boxes: [number, number, number][][] = []; // per depth: [x0, x1, node] as drawn
  keyFrame = -1; // the frame the keyboard is on (-1: none yet)
  onZoom?: (path: number[]) => void;
  _resize: ResizeObserver;

  constructor(container: HTMLElement, { onZoom }: { onZoom?: (path: number[]) => void } = {}) {
    this.container = container;
    this.canvas = h("canvas");
    this.tip = h("div.dal-tip", { style: { display: "none" } });
    container.append(this.canvas);
    document.body.append(this.tip);
    this.flat = null;
    this.focus = 0;
    this.query = "";
    this.matched = null;
    this.onZoom = onZoom;
    this.canvas.addEventListener("mousemove", (e) => this._hover(e));
    this.canvas.addEventListener("mouseleave", () => {
      this.tip.style.display = "none";
    });
    this.canvas.addEventListener("click", (e) => {
      const i = this._hit(e);
      if (i >= 0) this.zoom(i);
    });
    // Keyboard: Tab reaches the chart; arrows walk the frames (up: the caller, down: the
    // heaviest callee, left/right: the neighbours on that row); Enter or Space zooms to
    // the frame, Escape zooms out; the frame is outlined and named for screen readers.
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("role", "img");
    this.canvas.setAttribute(
      "aria-label",
      "Flamegraph: use the arrow keys to move between frames, Enter to zoom",
    );
    this.canvas.addEventListener("keydown", (e) => this._key(e));
    this.canvas.addEventListener("blur", () => this.draw());
    this._resize = new ResizeObserver(() => this.draw());
    this._resize.observe(container);
  }

  setTree(tree: ProfileNode | null) {
    // A refreshed profile (a live one grows) keeps the frame the user zoomed into, if
    // it is still there: found by its callers' identifiers, root first.
    const zoomed =
      this.flat && this.focus ? this.path(this.focus).map((i) => this.flat!.ident[i]) : null;
    this.flat = tree ? flatten(tree) : null;
    this.focus = zoomed && this.flat ? this._find(zoomed) : 0;
    this.keyFrame = -1;
    this.search(this.query);
  }

  _find(idents: string[]): number {
    const f = this.flat!;
    let at = 0;
    for (let d = 1; d < idents.length; d++) {
      const next = (f.byDepth[d] || []).find((j) => f.parent[j] === at && f.ident[j] === idents[d]);
      if (next === undefined) return 0;
      at = next;
    }
    return at;
  }

  zoom(i: number) {
    this.focus = i;
    this.draw();
    this.onZoom?.(this.path(i));
  }

  /** Ancestors of node i, root first. */
  path(i: number): number[] {
    const out: number[] = [];
    for (let j = i; j >= 0; j = this.flat!.parent[j]) out.unshift(j);
    return out;
  }

  search(query: string) {
    this.query = query;
    const f = this.flat;
    this.matched = null;
    this.matchedCount = 0;
    if (f && query) {
      const q = query.toLowerCase();
      this.matched = new Uint8Array(f.n);
      for (let i = 0; i < f.n; i++) {
        const d = f.desc[i];
        if (
          (d.name || "").toLowerCase().includes(q) ||
          (d.filename || "").toLowerCase().includes(q)
        )
          this.matched[i] = 1;
      }
      // Samples matched: count each matching node not below another match.
      for (let i = 0; i < f.n; i++) {
        if (!this.matched[i]) continue;
        let p = f.parent[i],
          covered = false;
        while (p >= 0) {
          if (this.matched[p]) {
            covered = true;
            break;
          }
          p = f.parent[p];
        }
        if (!covered) this.matchedCount += f.count[i];
      }
    }
    this.draw();
  }

  draw() {
    const f = this.flat;
    const W = this.container.clientWidth;
    if (!f || !W) return;
    const focus = this.focus;
    const fx = f.start[focus],
      fw = f.count[focus] || 1,
      fd = f.depth[focus];
    const rows = f.maxDepth + 1;
    const H = rows * ROW;
    const ctx = fitCanvas(this.canvas, W, H);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    const scale = W / fw;
    const ancestors = new Set(this.path(focus));
    this.boxes = []; // for hit-testing what is drawn
    for (let d = 0; d < rows; d++) {
      const list = f.byDepth[d];
      const drawn: [number, number, number][] = [];
      for (let k = 0; k < list.length; k++) {
        const i = list[k];
        let x: number, w: number;
        if (d < fd) {
          if (!ancestors.has(i)) continue;
          x = 0;
          w = W;
        } else {
          const s = f.start[i];
          if (s + f.count[i] <= fx || s >= fx + fw) continue;
          x = (s - fx) * scale;
          w = f.count[i] * scale;
        }
        if (w < 0.4) continue;
        const y = d * ROW;
        const desc = f.desc[i];
        let color = colorFor(desc);
        if (this.matched) color = this.matched[i] ? "#ee6b3b" : "rgba(160,166,175,0.35)";
        ctx.fillStyle = color;
        ctx.fillRect(x, y, Math.max(w - 0.5, 0.4), ROW - 1);
        if (w > 28) {
          const text = label(desc);
          const maxChars = Math.floor((w - 8) / CHAR_W);
          ctx.fillStyle = this.matched && !this.matched[i] ? "rgba(60,64,70,0.55)" : "#1b1f24";
          ctx.fillText(
            text.length > maxChars ? text.slice(0, Math.max(maxChars - 1, 1)) + "…" : text,
            x + 4,
            y + ROW / 2,
          );
        }
        if (i === this.keyFrame && document.activeElement === this.canvas) {
          ctx.strokeStyle = "#1b1f24";
          ctx.lineWidth = 2;
          ctx.strokeRect(x + 1, y + 1, Math.max(w - 2.5, 1), ROW - 3);
        }
        drawn.push([x, x + w, i]);
      }
      this.boxes.push(drawn);
    }
  }

  /** The frame an arrow key leads to from frame i, or -1. */
  _step(i: number, key: string): number {
    const f = this.flat!;
    if (key === "ArrowUp") return f.parent[i];
    const row = f.byDepth[f.depth[i]];
    if (key === "ArrowDown") {
      // the heaviest callee: flatten() lays children out heaviest first, leftmost
      const next = f.byDepth[f.depth[i] + 1] || [];
      return next.find((j: number) => f.parent[j] === i && f.count[j] > 0) ?? -1;
    }
    const visible = (j: number) => this.path(j).includes(this.focus) && f.count[j] > 0;
    const k = row.indexOf(i);
    if (key === "ArrowRight") {
      for (let m = k + 1; m < row.length; m++) if (visible(row[m])) return row[m];
    }
    if (key === "ArrowLeft") {
      for (let m = k - 1; m >= 0; m--) if (visible(row[m])) return row[m];
    }
    return -1;
  }

  _key(e: KeyboardEvent) {
    const f = this.flat;
    if (!f) return;
    const i = this.keyFrame >= 0 ? this.keyFrame : this.focus;
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      this.zoom(i);
    } else if (e.key === "Escape") {
      e.preventDefault();
      this.keyFrame = 0;
      this.zoom(0);
    } else if (e.key.startsWith("Arrow")) {
      e.preventDefault();
      const next = this.keyFrame < 0 ? this.focus : this._step(i, e.key);
      if (next < 0) return;
      this.keyFrame = next;
      const d = f.desc[next];
      this.canvas.setAttribute(
        "aria-label",
        `${label(d)}: ${fmt.count(f.count[next])} samples, ${fmt.percent((100 * f.count[next]) / (f.count[0] || 1))}` +
          (d.filename ? `, ${d.filename}:${d.line_number}` : ""),
      );
      this.canvas.dataset.frame = label(d);
      this.draw();
    }
  }

  _hit(e: MouseEvent): number {
    if (!this.boxes) return -1;
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left,
      d = Math.floor((e.clientY - r.top) / ROW);
    const row = this.boxes[d];
    if (!row) return -1;
    let lo = 0,
      hi = row.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (row[mid][1] < x) lo = mid + 1;
      else if (row[mid][0] > x) hi = mid - 1;
      else return row[mid][2];
    }
    return -1;
  }

  _hover(e: MouseEvent) {
    const i = this._hit(e);
    if (i < 0) {
      this.tip.style.display = "none";
      return;
    }
    const f = this.flat!,
      d = f.desc[i];
    const total = f.count[0] || 1;
    clear(this.tip).append(
      ...([
        h(
          "div",
          h("b", label(d)),
          `  ${fmt.count(f.count[i])} samples · ${fmt.percent((100 * f.count[i]) / total)}`,
        ),
        d.filename ? h("div.dal-tip-file", `${d.filename}:${d.line_number}`) : null,
        d.line ? h("pre", d.line.trim()) : null,
      ].filter((x) => x !== null) as HTMLElement[]),
    );
    this.tip.style.display = "block";
    const tw = this.tip.offsetWidth,
      th = this.tip.offsetHeight;
    this.tip.style.left = `${Math.min(e.clientX + 14, window.innerWidth - tw - 8)}px`;
    this.tip.style.top = `${e.clientY + 16 + th > window.innerHeight ? e.clientY - th - 10 : e.clientY + 16}px`;
  }

  dispose() {
    this._resize.disconnect();
    this.tip.remove();
  }
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-flame");
  const input = h("input.dal-input", {
    type: "search",
    placeholder: "Search functions or files…",
    "aria-label": "Search the profile",
  });
  const reset = h("button.dal-btn", { disabled: true }, "Reset zoom");
  const crumbs = h("div.dal-crumbs");
  const info = h("span.dal-muted");
  const holder = h("div");
  const picker = h("select.dal-input.dal-prefix-picker", { "aria-label": "Task group" });
  const hide = h("input", { type: "checkbox" });
  const hideLabel = h(
    "label.dal-flame-opt",
    {
      title:
        "Fold the frames of dask, distributed and the thread pool, so your code carries the width",
    },
    hide,
    "Hide Dask internals",
  );
  const bar = h("div.dal-flame-bar", input, picker, hideLabel, reset, info);
  root.append(bar, crumbs, holder);
  el.append(root);
  const chart = new FlameChart(holder, {
    onZoom: (path) => {
      reset.disabled = path.length <= 1;
      clear(crumbs);
      path.forEach((i, k) => {
        if (k) crumbs.append(" › ");
        crumbs.append(h("a", { onclick: () => chart.zoom(i) }, label(chart.flat!.desc[i])));
      });
    },
  });
  input.addEventListener("input", () => {
    chart.search(input.value.trim());
    info.textContent = chart.matched
      ? `${fmt.percent((100 * chart.matchedCount) / (chart.flat!.count[0] || 1))} of samples match`
      : summary();
  });
  reset.addEventListener("click", () => chart.zoom(0));
  picker.addEventListener("change", () => {
    model.set("profile_prefix", picker.value);
    model.save_changes();
  });
  hide.addEventListener("change", () => update());
  const drawPicker = () => {
    const prefixes: string[] = model.get("profile_prefixes") || [];
    const chosen = model.get("profile_prefix") || "";
    picker.style.display = prefixes.length > 1 ? "" : "none";
    clear(picker);
    picker.append(
      h("option", { value: "" }, "All task groups"),
      ...prefixes.map((p) => h("option", { value: p }, p)),
    );
    picker.value = chosen;
  };
  const summary = () => {
    const p: ProfileNode = model.get("profile") || {};
    return p.count
      ? `${fmt.count(p.count)} samples${model.get("profile_title") ? ` · ${model.get("profile_title")}` : ""}`
      : "";
  };
  let placeholder: HTMLElement | null = null;
  const update = () => {
    const p: ProfileNode = model.get("profile") || {};
    placeholder?.remove();
    placeholder = null;
    if (!p.count) {
      chart.setTree(null);
      chart.canvas.style.display = "none";
      // With a task group chosen, the picker stays: the way back to all of them.
      bar.style.display = model.get("profile_prefix") ? "flex" : "none";
      placeholder = empty(
        "No profile yet",
        "Dask samples what the workers run; the profile of a computation is recorded when it finishes.",
      );
      root.append(placeholder);
      return;
    }
    chart.canvas.style.display = "block";
    bar.style.display = "flex";
    chart.setTree(hide.checked ? foldInternals(p) : p);
    chart.onZoom?.(chart.path(chart.focus));
    info.textContent = summary();
  };
  drawPicker();
  update();
  const off = watch(model, ["profile"], update);
  const offPicker = watch(model, ["profile_prefixes", "profile_prefix"], drawPicker);
  return () => {
    off();
    offPicker();
    chart.dispose();
    root.remove();
  };
}

export default onScreen({ render });
