// Tiny DOM helpers: the views build plain DOM (no framework) so each bundle stays small.
import type { Model } from "./model.js";

/** h("div.cls1.cls2", {title: "x", onclick: fn}, child, "text", [more]) */
export type Child = Node | string | number | null | undefined | false | Child[];
/** Attributes: `on<event>` a listener, `style` and `dataset` objects, any other a value
 *  set as text (true: present; false, null and undefined: left out). */
export type Attrs = Listeners & Record<string, unknown>;
type Listeners = { [event: `on${string}`]: Listener | null | undefined | false };
// A listener of whichever event it is given: a method's parameter is bivariant, so a
// handler of (e: KeyboardEvent) fits too.
type Listener = { bivarianceHack(e: Event): void }["bivarianceHack"];

export function h<K extends keyof HTMLElementTagNameMap>(
  spec: K | `${K}.${string}`,
  attrs?: Attrs | Child,
  ...children: Child[]
): HTMLElementTagNameMap[K];
export function h(spec: string, attrs?: Attrs | Child, ...children: Child[]): HTMLElement;
export function h(spec: string, attrs?: Attrs | Child, ...children: Child[]): HTMLElement {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs as Child);
    attrs = null;
  }
  for (const [k, v] of Object.entries((attrs as Attrs | null) || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v as EventListener);
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el: HTMLElement, children: Child[]): void {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

const SVG = "http://www.w3.org/2000/svg";
export function svg(tag: string, attrs: Attrs = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v != null) el.setAttribute(k, String(v));
  for (const c of (children as unknown[]).flat(Infinity) as Child[])
    if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

export function clear<E extends Element>(el: E): E {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Subscribe to model traits; returns an unsubscribe function. */
export function watch(model: Model, names: string[], cb: () => void): () => void {
  const events = names.map((n) => `change:${n}`);
  for (const e of events) model.on(e, cb);
  return () => {
    for (const e of events) model.off(e, cb);
  };
}

/** Coalesce bursts of trait changes into one render per animation frame. */
export function throttle(fn: () => void): () => void {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn();
    });
  };
}

// Another reader's words for the views' empty states, by their title: the views speak to
// the notebook's user ("run %load_ext …"), and a report page, whose reader can run
// nothing, gives its own (js/report/page.ts).
const retold = new Map<string, [string, string]>();

/** From now on, `empty(title, …)` says `texts[title]` instead. */
export function retellEmpty(texts: Record<string, [string, string]>): void {
  for (const [title, said] of Object.entries(texts)) retold.set(title, said);
}

export function empty(text: Child, hint?: Child): HTMLElement {
  const said = typeof text === "string" ? retold.get(text) : undefined;
  if (said) [text, hint] = said;
  return h(
    "div.dal-empty",
    h("div.dal-empty-title", text),
    hint ? h("div.dal-empty-hint", hint) : null,
  );
}

/** A canvas sized to W x H CSS pixels at the screen's pixel ratio, cleared, its context
 *  scaled so that drawing is in CSS pixels. */
export function fitCanvas(
  canvas: HTMLCanvasElement,
  W: number,
  H: number,
): CanvasRenderingContext2D {
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    canvas.style.height = `${H}px`;
  }
  const ctx = canvas.getContext("2d")!;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  return ctx;
}
