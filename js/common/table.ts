// The receiving half of the Python KeyedTable: a table sent as `<name>_base` (all rows at
// version v) plus `<name>_patch` (rows changed since that base, and removed keys), so
// a live update sends only what changed and a freshly opened view still gets everything.
// And the header of a table the user sorts, as a keyboard and a screen reader reach it.

import { h, type Attrs, type Child } from "./dom.js";
import type { Model } from "./model.js";

interface TableBase<Row> {
  v: number;
  rows?: Row[];
}
interface TablePatch<Row> extends TableBase<Row> {
  removed?: unknown[];
}

/** The rows of table `name` (keyed by `key`); `Row`: what the kernel sends for it. */
export function readTable<Row extends object>(model: Model, name: string, key: keyof Row): Row[] {
  const base: TableBase<Row> = model.get(`${name}_base`) || { v: 0, rows: [] };
  const patch: TablePatch<Row> = model.get(`${name}_patch`) || { v: 0, rows: [], removed: [] };
  if (!patch.rows?.length && !patch.removed?.length) return base.rows || [];
  const rows = new Map<unknown, Row>((base.rows || []).map((r) => [r[key], r]));
  if (patch.v === base.v) {
    for (const k of patch.removed || []) rows.delete(k);
    for (const r of patch.rows || []) rows.set(r[key], r);
  }
  return [...rows.values()];
}

export function tableTraits(name: string): string[] {
  return [`${name}_base`, `${name}_patch`];
}

/** How a column is sorted, in aria-sort's words. */
export type SortOrder = "ascending" | "descending" | "none";

/** A sortable column's header: in the tab order, sorting on a click, Enter or Space, and
 *  telling a screen reader its order (aria-sort); the arrow is for the eye only.
 *  `spec` and `attrs` as h's (data-sort names the column for refocusSort). */
export function sortHeader(
  spec: string,
  label: Child,
  order: SortOrder,
  onSort: () => void,
  attrs: Attrs = {},
): HTMLElement {
  return h(
    spec,
    {
      ...attrs,
      tabindex: 0,
      "aria-sort": order,
      onclick: onSort,
      onkeydown: (e: KeyboardEvent) => {
        if (e.key !== "Enter" && e.key !== " ") return;
        e.preventDefault(); // Space would scroll the page too
        onSort();
      },
    },
    label,
    order === "none"
      ? null
      : h("span.dal-arrow", { "aria-hidden": "true" }, order === "descending" ? "▼" : "▲"),
  );
}

/** The data-sort of the header that has the focus inside `root`, read before a redraw
 *  replaces it. */
export function focusedSort(root: HTMLElement): string | null {
  const el = root.ownerDocument.activeElement;
  return el instanceof HTMLElement && root.contains(el) ? (el.dataset.sort ?? null) : null;
}

/** After a redraw, give the focus back to the header `sort` (focusedSort's answer), so
 *  sorting from the keyboard (or a live update) does not drop it to the page. */
export function refocusSort(root: HTMLElement, sort: string | null): void {
  if (sort === null) return;
  const el = [...root.querySelectorAll<HTMLElement>("[data-sort]")].find(
    (e) => e.dataset.sort === sort,
  );
  el?.focus();
}
