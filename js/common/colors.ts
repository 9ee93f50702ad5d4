// Colours: what became of a group's tasks (the same order and colours everywhere) and a
// stable colour per task prefix.

// Segments of a progress bar, left to right: finished work first, then what failed,
// then what is still to come.  "erred" (raised), "cancelled" (running when cancelled) and
// "never ran" (skipped because a dependency failed, released, cancelled before it ran)
// are never drawn as done.
export type Segment =
  | "memory"
  | "done"
  | "erred"
  | "cancelled"
  | "not-run"
  | "processing"
  | "no-worker"
  | "queued"
  | "waiting";
export const SEGMENTS: [Segment, string, string][] = [
  ["memory", "in memory", "#2fa572"],
  ["done", "finished", "#7fa6dc"],
  ["erred", "erred", "#e5484d"],
  ["cancelled", "cancelled while running", "#a06b3c"],
  ["not-run", "never ran", "#6e5a8a"],
  ["processing", "processing", "#f5a524"],
  ["no-worker", "no worker", "#b197fc"],
  ["queued", "queued", "#c9ced6"],
  ["waiting", "waiting", "#dfe3e8"],
];
export const SEGMENT_COLOR = Object.fromEntries(SEGMENTS.map(([s, , c]) => [s, c]));
export const SEGMENT_LABEL = Object.fromEntries(SEGMENTS.map(([s, l]) => [s, l]));

/** FNV-1a (32 bits) of the string's UTF-16 code units: the views' one hash, for colours
 *  that stay the same from one render (and one view) to the next. */
export function fnv1a(text: string): number {
  let x = 2166136261;
  for (let i = 0; i < text.length; i++) x = Math.imul(x ^ text.charCodeAt(i), 16777619);
  return x >>> 0;
}

/** A pleasant, stable colour for a task prefix ("random_sample", "mean_chunk" ...). */
export function prefixColor(prefix: string | null | undefined): string {
  const hue = fnv1a(prefix || "") % 360;
  return `hsl(${hue} 62% 52%)`;
}

export const ACCENT = "#ee6b3b";
