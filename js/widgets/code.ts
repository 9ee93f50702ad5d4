// Code snippets that made a computation, syntax-highlighted, with file and line; the
// line that called compute/persist/submit is marked.
// Traits: code [{hash, text, filename, lineno_frame, lineno_relative}].
import { h, clear, watch, empty } from "../common/dom.js";
import { onScreen } from "../common/onscreen.js";
import type { RenderProps } from "../common/model.js";
import type { CodeSnippet } from "../common/rows.js";

/** A highlighted piece of a line: its class (a keyword, a string...) or null, and its text. */
export type Token = [string | null, string];

const KEYWORDS = new Set(
  (
    "False None True and as assert async await break class continue def del elif else except finally for from " +
    "global if import in is lambda nonlocal not or pass raise return try while with yield match case"
  ).split(" "),
);
const BUILTINS = new Set(
  (
    "print len range sum min max abs list dict set tuple str int float bool open enumerate zip map filter sorted " +
    "isinstance getattr setattr hasattr type super object Exception ValueError KeyError TypeError RuntimeError any all iter next round"
  ).split(" "),
);

// One regex, alternatives in priority order: comment, string (prefixed, triple, single),
// decorator, number, name.
const TOKEN =
  /(#[^\n]*)|((?:[rRbBuUfF]{1,2})?(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?))|(@[\w.]+)|(\b(?:0[xob][\da-f_]+|\d[\d_]*\.?[\d_]*(?:e[+-]?\d+)?j?)\b)|([A-Za-z_]\w*)/gi;

/** Python source -> array of lines, each an array of [className|null, text]. */
export function highlight(text: string): Token[][] {
  const parts: Token[] = [];
  let last = 0,
    prevWord = "";
  for (const m of text.matchAll(TOKEN)) {
    if (m.index > last) parts.push([null, text.slice(last, m.index)]);
    let cls: string | null = null;
    if (m[1]) cls = "com";
    else if (m[2]) cls = "str";
    else if (m[3]) cls = "dec";
    else if (m[4]) cls = "num";
    else if (m[5]) {
      const w = m[5];
      if (KEYWORDS.has(w)) cls = "kw";
      else if (prevWord === "def" || prevWord === "class") cls = "fn";
      else if (BUILTINS.has(w) || /^(dask|da|dd|db|np|pd|client)$/.test(w)) cls = "bi";
      prevWord = w;
    }
    parts.push([cls, m[0]]);
    last = m.index + m[0].length;
  }
  if (last < text.length) parts.push([null, text.slice(last)]);
  // Split tokens across lines (triple-quoted strings span several).
  const lines: Token[][] = [[]];
  for (const [cls, t] of parts) {
    const pieces = t.split("\n");
    pieces.forEach((p, k) => {
      if (k) lines.push([]);
      if (p) lines[lines.length - 1].push([cls, p]);
    });
  }
  return lines;
}

export function codeBlock(snippet: CodeSnippet): HTMLElement {
  const first = Math.max((snippet.lineno_frame || 1) - (snippet.lineno_relative || 0), 1);
  const hit = snippet.lineno_relative ?? -1;
  const lines = highlight(snippet.text || "");
  while (lines.length > 1 && !lines[lines.length - 1].length) lines.pop();
  const pre = h("pre");
  lines.forEach((toks, k) => {
    pre.append(
      h(
        `div.dal-line${k === hit ? ".hit" : ""}`,
        h("span.dal-ln", first + k),
        h(
          "span",
          toks.map(([cls, t]) => (cls ? h(`span.dal-tok-${cls}`, t) : t)),
        ),
      ),
    );
  });
  const name = (snippet.filename || "").match(/ipykernel_\d+[\\/]\d+\.py$/)
    ? "notebook cell"
    : snippet.filename;
  const block = h(
    "div.dal-code",
    h(
      "div.dal-code-head",
      h("span", { title: snippet.filename }, name || "<unknown>"),
      h("span.dal-faint", `line ${snippet.lineno_frame ?? "?"}`),
    ),
    h("div.dal-code-body", pre),
  );
  // Bring the calling line into view once laid out.
  requestAnimationFrame(() => {
    const line = pre.querySelector<HTMLElement>(".dal-line.hit");
    const body = block.querySelector<HTMLElement>(".dal-code-body");
    if (line && body && line.offsetTop > body.clientHeight - 40)
      body.scrollTop = line.offsetTop - body.clientHeight / 2;
  });
  return block;
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-codeview");
  el.append(root);
  const draw = () => {
    const code: CodeSnippet[] = model.get("code") || [];
    clear(root);
    if (!code.length) {
      root.append(
        empty(
          "No code recorded for this computation",
          h(
            "span",
            "Code is sent by the client when ",
            h("code", "analytics.computation.code.transmit"),
            " is on (the default) and analytics was registered before the computation.",
          ),
        ),
      );
      return;
    }
    for (const s of code) root.append(codeBlock(s));
  };
  draw();
  const off = watch(model, ["code"], draw);
  return () => {
    off();
    root.remove();
  };
}

export default onScreen({ render });
