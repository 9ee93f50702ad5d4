// The time the views compute "how long ago" and "up for" against.  Live views use the
// viewer's clock; a shared report is frozen at the moment it was made (its
// snapshot_time): opened a week later it still says what it said then.  One report per
// page, so the report page freezes this module's clock once (js/report/page.ts); the
// notebook and Lab bundles never do.
let frozenAt: number | null = null;

/** Seconds since the epoch: the report's moment when frozen, else now. */
export function now(): number {
  return frozenAt ?? Date.now() / 1000;
}

/** Freeze the clock at `t` (seconds); null or 0 leaves it running. */
export function freeze(t: number | null | undefined): void {
  frozenAt = t ? Number(t) : null;
}

/** When the clock was frozen (a report's moment), or null for a live view. */
export function frozen(): number | null {
  return frozenAt;
}
