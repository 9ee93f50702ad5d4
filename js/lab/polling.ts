// How the panel polls the store: the rules are dask_analytics_lab/polling.json, the file
// the notebook monitor's feed reads (through dask_analytics_lab/polling.py), bundled in.
// Kept and thin follow polling.py's spec line for line; tests/unit/test_polling.py runs both
// on the same reads and compares what they keep.
import rules from "../../dask_analytics_lab/polling.json";

export const RULES = rules;

/** A row of a kept series as the JSON API answers it: the store's id (ids grow as rows
 *  land) and its time, and what thinning reads of a worker's or a GPU's sample. */
export interface SeriesRow {
  id: number;
  time: number;
  worker?: string | null;
  gpu_uuid?: string | null;
  managed?: number | null;
  unmanaged?: number | null;
  cpu?: number | null;
  processing?: number | null;
}

/** A row of js/common/rows.ts as the store answers it: with its id. */
export type Stored<R> = R & { id: number };

export type SeriesKind = "samples" | "workers" | "gpu" | "events";

interface SeriesRule {
  keep: number;
  every?: number;
  since?: boolean;
  late?: number;
  limit?: number;
  first?: number;
  tail?: number;
}

/** Seconds between polls once everything shown is history. */
export function historyPeriod(interval: number): number {
  return Math.max(RULES.poll.history, interval);
}

/** Polls of `interval` seconds between reads meant every `seconds`: at least 1. */
export function everyPolls(seconds: number, interval: number): number {
  return Math.max(1, Math.floor(seconds / Math.max(interval, 0.001) + 0.5));
}

const byTime = (a: SeriesRow, b: SeriesRow): number => a.time - b.time;

/** At most `most` rows, evenly spread over time, always keeping the newest (display.downsample). */
export function downsample<R>(rows: R[], most: number): R[] {
  if (rows.length <= most) return rows;
  const step = rows.length / most;
  const picked: R[] = [];
  for (let i = 0; i < most - 1; i++) picked.push(rows[Math.floor(i * step)]);
  picked.push(rows[rows.length - 1]);
  return picked;
}

// The worker process's memory, what its limit bounds (spilled data is on disk).
const memory = (r: SeriesRow): number => (r.managed || 0) + (r.unmanaged || 0);

// The first row with the largest key, as Python's max() picks it.
function top<R>(part: R[], key: (r: R) => number): R {
  let best = part[0];
  for (const r of part) if (key(r) > key(best)) best = r;
  return best;
}

/** Worker samples, at most 3 x `most` per worker: of each of `most` stretches, the rows
 *  with the most memory, CPU and tasks processing (display.worker_peaks). By time. */
export function workerPeaks<R extends SeriesRow>(rows: R[], most: number): R[] {
  const byWorker = new Map<unknown, R[]>();
  for (const r of [...rows].sort(byTime)) {
    if (!byWorker.has(r.worker)) byWorker.set(r.worker, []);
    byWorker.get(r.worker)!.push(r);
  }
  const kept: R[] = [];
  for (const series of byWorker.values()) {
    if (series.length <= 3 * most) {
      kept.push(...series);
      continue;
    }
    const step = series.length / most;
    for (let i = 0; i < most; i++) {
      const part = series.slice(Math.floor(i * step), Math.floor((i + 1) * step));
      if (part.length) {
        kept.push(
          ...new Set([
            top(part, memory),
            top(part, (r) => r.cpu || 0),
            top(part, (r) => r.processing || 0),
          ]),
        );
      }
    }
  }
  return kept.sort(byTime);
}

/** What the panel keeps of a series of `kind`, by time (polling.thin). */
export function thin<R extends SeriesRow>(kind: SeriesKind, rows: R[]): R[] {
  const keep = (RULES[kind] as SeriesRule).keep;
  rows = [...rows].sort(byTime);
  if (kind === "workers") return workerPeaks(rows, keep);
  if (kind === "samples") return rows.length > 2 * keep ? downsample(rows, keep) : rows;
  if (kind === "gpu") {
    const byGpu = new Map<string, R[]>();
    for (const r of rows) {
      const k = JSON.stringify([r.worker ?? null, r.gpu_uuid ?? null]);
      if (!byGpu.has(k)) byGpu.set(k, []);
      byGpu.get(k)!.push(r);
    }
    const kept: R[] = [];
    for (const series of byGpu.values())
      kept.push(...(series.length > 2 * keep ? downsample(series, keep) : series));
    return kept.sort(byTime);
  }
  return rows.slice(-keep); // events
}

/** What the panel keeps of one series it reads again and again, and where its next read
 *  starts (polling.Kept): a row is new when its id is above every id read before; a
 *  since= read starts at the newest time read less the kind's `late` seconds. */
export class Kept<R extends SeriesRow = SeriesRow> {
  rows: R[] = [];
  reads = 0;
  done = false; // read once after the cluster ended: nothing more comes
  private rule: SeriesRule;
  private time: number | null = null;
  private id: number | null = null;

  constructor(readonly kind: SeriesKind) {
    this.rule = RULES[kind] as SeriesRule;
  }

  /** Whether to read at this poll: the first time, every `every` seconds while the
   *  cluster is live, once more after it ended, then never. */
  due(polls: number, interval: number, ended: boolean): boolean {
    if (this.done) return false;
    return this.reads === 0 || ended || polls % everyPolls(this.rule.every ?? 0, interval) === 0;
  }

  /** since= of the next read; null: the first read, of the newest `limit` rows. */
  since(): number | null {
    if (this.time === null || !this.rule.since) return null;
    return this.time - (this.rule.late ?? 0);
  }

  limit(): number {
    if (this.rule.limit !== undefined) return this.rule.limit;
    return (this.reads === 0 ? this.rule.first : this.rule.tail) ?? 1;
  }

  /** The query parameters of the next read: limit=, and since= once something was read. */
  query(): string {
    const since = this.since();
    return `limit=${this.limit()}` + (since === null ? "" : `&since=${since}`);
  }

  /** Add what a read found to what is kept; returns what is kept now, by time. */
  merge(read: R[], ended = false): R[] {
    const newest = this.id;
    const fresh = read.filter((r) => newest === null || r.id > newest);
    for (const r of fresh) {
      if (this.id === null || r.id > this.id) this.id = r.id;
      if (this.time === null || r.time > this.time) this.time = r.time;
    }
    this.rows = thin(this.kind, [...this.rows, ...fresh]);
    this.reads++;
    this.done = ended;
    return this.rows;
  }
}
