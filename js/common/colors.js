// Colours: task states (the same order everywhere) and a stable colour per task prefix.

// Order of the segments in a progress bar: done work first, then live, then pending.
export const STATES = [
  ["released", "done", "#7fa6dc"],
  ["memory", "in memory", "#2fa572"],
  ["erred", "erred", "#e5484d"],
  ["processing", "processing", "#f5a524"],
  ["queued", "queued", "#c9ced6"],
  ["no-worker", "no worker", "#b197fc"],
  ["waiting", "waiting", "#dfe3e8"],
];
export const STATE_COLOR = Object.fromEntries(STATES.map(([s, , c]) => [s, c]));
export const STATE_LABEL = Object.fromEntries(STATES.map(([s, l]) => [s, l]));

// "forgotten" tasks counted the same as released ones: both ran and are done.
export function stateOf(s) {
  return s === "forgotten" ? "released" : s;
}

function hash(text) {
  let x = 2166136261;
  for (let i = 0; i < text.length; i++) x = Math.imul(x ^ text.charCodeAt(i), 16777619);
  return x >>> 0;
}

/** A pleasant, stable colour for a task prefix ("random_sample", "mean_chunk" ...). */
export function prefixColor(prefix) {
  const hue = hash(prefix || "") % 360;
  return `hsl(${hue} 62% 52%)`;
}

export const ACCENT = "#ee6b3b";
