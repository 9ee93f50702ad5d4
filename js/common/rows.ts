// The store's rows as the views receive them: JSON from the kernel's traits, the
// server's API or a shared report (columns in dask_analytics_lab/store/schema.py).
// Nearly every field is optional and nullable: a nullable column arrives as null, and a
// report or store made by an older version lacks the columns added since; the views
// show "–" for what is missing.

/** What became of a group's (or a computation's) tasks: see progress.ts. */
export interface CountedRow {
  states?: Record<string, number | null> | null;
  n_tasks?: number | null;
  n_done?: number | null;
  n_erred?: number | null;
  n_not_run?: number | null;
  n_cancelled?: number | null;
}

/** A cluster, with the lifecycle the store works out (store/queries.py lifecycle). */
export interface ClusterRow {
  cluster_id?: string;
  name?: string | null;
  address?: string | null;
  user?: string | null;
  account?: string | null;
  started?: number | null;
  stopped?: number | null;
  stop_reason?: string | null;
  idle_shutdown?: boolean | null;
  versions?: Record<string, unknown> | null;
  platform?: Record<string, unknown> | null;
  price_per_core_hour?: number | null;
  n_workers?: number | null;
  n_threads?: number | null;
  memory_used?: number | null;
  memory_total?: number | null;
  processing?: number | null;
  worker_seconds?: number | null;
  core_seconds?: number | null;
  cost?: number | null;
  idle_since?: number | null;
  last_activity?: number | null;
  dropped_messages?: number | null;
  peak_workers?: number | null;
  peak_threads?: number | null;
  peak_memory?: number | null;
  last_seen?: number | null;
  sample_time?: number | null; // the newest sample's time: the samples moved when it did
  status?: string | null; // "live" | "stopped" | "lost"
  ended?: number | null;
  duration?: number | null;
  cursor?: string | null; // where the page after this row starts (common/filters.ts pager)
}

/** One sample of a cluster's totals over time. */
export interface ClusterSample {
  id?: number;
  time: number;
  n_workers?: number | null;
  n_threads?: number | null;
  memory_used?: number | null;
  memory_total?: number | null;
  processing?: number | null;
}

export interface ComputationRow extends CountedRow {
  computation_id?: string;
  cluster_id?: string;
  start?: number | null;
  stop?: number | null;
  state?: string | null; // "running", "finished", "erred", "cancelled"; "lost" on an ended cluster
  updated?: number | null;
  code_line?: string | null;
  label?: string | null;
  n_groups?: number | null;
  compute?: number | null;
  transfer?: number | null;
  disk?: number | null;
  nbytes?: number | null;
  cursor?: string | null; // as ClusterRow's
}

export interface TaskGroupRow extends CountedRow {
  name: string;
  computation_id?: string;
  prefix?: string | null;
  compute?: number | null;
  transfer?: number | null;
  disk_read?: number | null;
  disk_write?: number | null;
  nbytes?: number | null;
  start?: number | null;
  stop?: number | null;
  dependencies?: string[] | null;
}

/** One kind of failure: the tasks that raised the same type at the same frame. */
export interface ExceptionRow {
  id?: number | null;
  cluster_id?: string;
  computation_id?: string | null; // null or "": not tied to one
  task_group?: string;
  hash?: string;
  exc_type?: string | null;
  location?: string | null;
  pattern?: string | null;
  examples?: (string | null)[] | null;
  workers?: string[] | null;
  exception_text?: string | null;
  traceback_text?: string | null;
  example_key?: string | null;
  count?: number | null;
  first_time?: number | null;
  last_time?: number | null;
}

/** A code snippet that made a computation; `text` is null when its `code` message
 *  never arrived. */
export interface CodeSnippet {
  hash?: string;
  text?: string | null;
  filename?: string | null;
  lineno_frame?: number | null;
  lineno_relative?: number | null;
}

/** A computation with its groups, code and fine metrics (store/queries.py get_computation:
 *  the JSON API's GET computations/{id}). */
export interface ComputationDetail extends ComputationRow {
  groups: TaskGroupRow[];
  code: CodeSnippet[];
  metrics: MetricRow[];
}

/** An event as stored: a topic's message at a time (worker-joined, worker-left, ...). */
export interface EventRow {
  id?: number;
  cluster_id?: string;
  topic: string;
  time: number;
  msg: unknown;
}

/** A worker's memory at one moment (a sample, or the nanny's reading as it killed it). */
export interface MemoryReading {
  time: number;
  managed?: number | null;
  unmanaged?: number | null;
  spilled?: number | null;
  killed?: boolean;
}

export interface WorkerSample extends MemoryReading {
  id?: number;
  worker: string;
  name?: string | number | null;
  host?: string | null;
  nthreads?: number | null;
  memory_limit?: number | null;
  cpu?: number | null;
  processing?: number | null;
}

export interface GpuSample {
  id?: number;
  time: number;
  worker?: string | null;
  host?: string | null;
  gpu_uuid?: string | null;
  gpu_index?: number | null;
  gpu_name?: string | null;
  mem_used?: number | null;
  mem_total?: number | null;
  mem_util?: number | null;
  compute_util?: number | null;
  task_groups?: string[] | null;
  /** No task ran on its workers: what they waited on ("inputs", "memory", "nothing"). */
  waiting?: string | null;
  job?: string | null;
  dag?: string | null;
  /** Every [job, dag] running then, when more than one. */
  jobs?: [string, string | null][] | null;
  /** The workers that see this GPU, when more than one (its rows come from one). */
  shared_by?: string[] | null;
}

/** A task of the task stream, or past the collector's limit a bin of a worker's tasks of
 *  one prefix (binned: n_tasks started in it, busy seconds of work). */
export interface StreamRow {
  id?: number;
  start: number;
  stop: number;
  worker?: string | null;
  thread?: number | null;
  prefix?: string | null;
  state?: string | null;
  n_tasks?: number | null;
  busy?: number | null;
  binned?: boolean | null;
}

/** One of Dask's fine performance metrics of a computation, summed per prefix. */
export interface MetricRow {
  prefix?: string | null; // null: not tied to a task group
  context: string;
  activity: string;
  unit: string;
  value: number;
}

/** `R` as the JSON API (the team server's, and the Lab extension's) always sends it: the
 *  keys `K` present and not null (primary keys and NOT NULL columns, store/schema.py).
 *  The rows above leave them optional: a view's trait is {} until its first read. */
type Sent<R, K extends keyof R> = R & { [P in K]-?: NonNullable<R[P]> };

export type SentCluster = Sent<ClusterRow, "cluster_id" | "started">;
type ComputationKeys = "computation_id" | "cluster_id" | "start" | "state";
export type SentComputation = Sent<ComputationRow, ComputationKeys>;
export type SentDetail = Sent<ComputationDetail, ComputationKeys>;
export type SentException = Sent<ExceptionRow, "cluster_id" | "count">;
