// The store's rows as the views receive them: JSON from the kernel's traits, the
// server's API or a shared report.  Their types are written from the read declarations
// (reads.gen.ts, by scripts/gen_reads.py from dask_analytics_lab/read_rows.py): nearly
// every field is optional and nullable, since a nullable column arrives as null and a
// report or store made by an older version lacks the columns added since; the views
// show "–" for what is missing.

import type { WorkerSample as StoredWorkerSample } from "./reads.gen.js";

export type {
  ClusterFinding,
  ClusterRow,
  ClusterSample,
  CodeSnippet,
  ComputationDetail,
  ComputationRow,
  CostRow,
  EventRow,
  ExceptionRow,
  Finding,
  GpuSample,
  MetricRow,
  StreamRow,
  TaskGroupRow,
} from "./reads.gen.js";
import type { ClusterRow, ComputationDetail, ComputationRow, ExceptionRow } from "./reads.gen.js";

/** What became of a group's (or a computation's) tasks: see progress.ts. */
export interface CountedRow {
  states?: Record<string, number | null> | null;
  n_tasks?: number | null;
  n_done?: number | null;
  n_erred?: number | null;
  n_not_run?: number | null;
  n_cancelled?: number | null;
}

/** A worker's memory at one moment (a sample, or the nanny's reading as it killed it). */
export interface MemoryReading {
  time: number;
  managed?: number | null;
  unmanaged?: number | null;
  spilled?: number | null;
  killed?: boolean;
}

/** A worker at one moment, as sampled (or as the nanny read it when it killed it). */
export type WorkerSample = StoredWorkerSample & MemoryReading;

/** `R` as the JSON API (the team server's, and the Lab extension's) always sends it: the
 *  keys `K` present and not null (primary keys and NOT NULL columns, store/schema.py).
 *  The rows above leave them optional: a view's trait is {} until its first read. */
type Sent<R, K extends keyof R> = R & { [P in K]-?: NonNullable<R[P]> };

export type SentCluster = Sent<ClusterRow, "cluster_id" | "started">;
type ComputationKeys = "computation_id" | "cluster_id" | "start" | "state";
export type SentComputation = Sent<ComputationRow, ComputationKeys>;
export type SentDetail = Sent<ComputationDetail, ComputationKeys>;
export type SentException = Sent<ExceptionRow, "cluster_id" | "count">;
