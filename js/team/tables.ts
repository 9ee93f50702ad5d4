// The pages' two ways to lay out rows: a table of columns, and a list of facts.
import type { Child } from "../common/dom.js";
import { h } from "../common/dom.js";

export interface Column<R> {
  label: string;
  num?: boolean; // right-aligned
  value: (row: R) => Child;
}

/** One row per item; `empty` says why there is none. */
export function table<R>(columns: Column<R>[], rows: R[], empty?: string): HTMLElement {
  if (!rows.length) return h("p", { class: "muted" }, empty || "Nothing recorded yet.");
  return h(
    "table",
    {},
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        columns.map((c) => h("th", { class: c.num ? "num" : null }, c.label)),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((r) =>
        h(
          "tr",
          {},
          columns.map((c) => h("td", { class: c.num ? "num" : null }, c.value(r))),
        ),
      ),
    ),
  );
}

/** Name and value pairs; a pair with nothing to say ("", "–", null) is left out. */
export function facts(pairs: [string, Child][]): HTMLElement {
  return h(
    "dl",
    { class: "facts" },
    pairs
      .filter((p) => p[1] !== "" && p[1] !== "–" && p[1] !== null && p[1] !== undefined)
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
}
