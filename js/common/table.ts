// The receiving half of the Python KeyedTable: a table sent as `<name>_base` (all rows at
// version v) plus `<name>_patch` (rows changed since that base, and removed keys), so
// a live update sends only what changed and a freshly opened view still gets everything.

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
