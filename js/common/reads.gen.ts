// Written by scripts/gen_reads.py from dask_analytics_lab/read_rows.py and reads.py:
// do not edit, run it instead.  The store's rows as every reader answers them; a
// field that may be null reads `| null`, one that may be absent `?`.

/** One kind of finding over a cluster's computations (findings/across.py). */
export interface ClusterFinding {
  kind: string;
  why: string;
  n_computations: number;
  impact: number;
  computations: FindingComputation[];
  advice: string;
}

/** A cluster, with the lifecycle the store works out (store/queries.py). */
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
  settings?: Record<string, unknown> | null;
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
  sample_time?: number | null;
  peak_workers?: number | null;
  peak_threads?: number | null;
  peak_memory?: number | null;
  reported_user?: string | null;
  first_seen?: number | null;
  last_seen?: number | null;
  heartbeat?: number | null;
  updated?: number | null;
  status?: string | null;
  ended?: number | null;
  duration?: number | null;
  cursor?: string | null;
}

/** One sample of a cluster's totals over time. */
export interface ClusterSample {
  id?: number;
  cluster_id?: string;
  time: number;
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
}

/** A code snippet that made a computation; `text` is null when its `code` message */
export interface CodeSnippet {
  hash?: string;
  text?: string | null;
  filename?: string | null;
  lineno_frame?: number | null;
  lineno_relative?: number | null;
  name?: string | null;
  error?: string | null;
}

/** A computation against an earlier run of the same code (store/compare.py). */
export interface Compare {
  computation_id: string;
  baseline_id: string | null;
  before?: RunRow | null;
  after?: RunRow | null;
  wall?: Record<string, number | null> | null;
  groups?: Record<string, unknown>[] | null;
  inputs_differ?: Record<string, unknown> | null;
  findings?: string[] | null;
}

/** A computation with its groups, code and fine metrics. */
export interface ComputationDetail {
  computation_id?: string;
  cluster_id?: string;
  start?: number | null;
  stop?: number | null;
  state?: string | null;
  code_hashes?: string[] | null;
  code_frames?: Record<string, unknown>[] | null;
  code_line?: string | null;
  code_error?: string | null;
  label?: string | null;
  fingerprint?: string | null;
  states?: Record<string, number | null> | null;
  n_tasks?: number | null;
  n_groups?: number | null;
  n_erred?: number | null;
  n_done?: number | null;
  n_not_run?: number | null;
  n_cancelled?: number | null;
  compute?: number | null;
  transfer?: number | null;
  disk?: number | null;
  nbytes?: number | null;
  host_cpu?: number | null;
  host_cores?: number | null;
  updated?: number | null;
  cursor?: string | null;
  groups: TaskGroupRow[];
  code: CodeSnippet[];
  metrics: MetricRow[];
}

/** ComputationRow */
export interface ComputationRow {
  computation_id?: string;
  cluster_id?: string;
  start?: number | null;
  stop?: number | null;
  state?: string | null;
  code_hashes?: string[] | null;
  code_frames?: Record<string, unknown>[] | null;
  code_line?: string | null;
  code_error?: string | null;
  label?: string | null;
  fingerprint?: string | null;
  states?: Record<string, number | null> | null;
  n_tasks?: number | null;
  n_groups?: number | null;
  n_erred?: number | null;
  n_done?: number | null;
  n_not_run?: number | null;
  n_cancelled?: number | null;
  compute?: number | null;
  transfer?: number | null;
  disk?: number | null;
  nbytes?: number | null;
  host_cpu?: number | null;
  host_cores?: number | null;
  updated?: number | null;
  cursor?: string | null;
}

/** One user's, day's or month's clusters; key null when unknown. */
export interface CostRow {
  key: string | null;
  clusters: number;
  computations: number;
  core_hours: number;
  cost: number | null;
}

/** An event as stored: a topic's message at a time (worker-joined, worker-left, ...). */
export interface EventRow {
  id?: number;
  cluster_id?: string;
  topic: string;
  time: number;
  msg: unknown;
}

/** One kind of failure: the tasks that raised the same type at the same frame. */
export interface ExceptionRow {
  id?: number | null;
  cluster_id?: string;
  computation_id?: string | null;
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
  retried?: number | null;
  recovered?: number | null;
  first_time?: number | null;
  last_time?: number | null;
  updated?: number | null;
  recorded_location?: string | null;
  recorded_traceback_text?: string | null;
}

/** Why a computation was slow and what to change (findings/). */
export interface Finding {
  kind: string;
  title: string;
  evidence: string;
  advice: string;
  impact: number;
  groups: string[];
  workers: string[];
  why?: string;
}

/** A computation with a finding of the kind a ClusterFinding sums. */
export interface FindingComputation {
  computation_id: string;
  label: string | null;
  impact: number;
  title: string;
}

/** One GPU at one moment, with the task groups running then. */
export interface GpuSample {
  id?: number;
  cluster_id?: string;
  monitor_id?: string | null;
  timestamp?: number | null;
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
  power_w?: number | null;
  temperature_c?: number | null;
  task_groups?: string[] | null;
  waiting?: string | null;
  job?: string | null;
  dag?: string | null;
  jobs?: [string, string | null][] | null;
  shared_by?: string[] | null;
}

/** One of Dask's fine performance metrics of a computation, summed per prefix. */
export interface MetricRow {
  prefix?: string | null;
  context: string;
  activity: string;
  unit: string;
  value: number;
}

/** Dask's profile tree (distributed/profile.py); {} when nothing was recorded. */
export interface ProfileTree {
  count?: number;
  identifier?: string;
  description?: Record<string, unknown>;
  children?: Record<string, unknown>;
}

/** One run of a computation's code (store/compare.py). */
export interface RunRow {
  computation_id: string;
  cluster_id: string;
  cluster_name?: string | null;
  label?: string | null;
  state?: string | null;
  start?: number | null;
  stop?: number | null;
  wall?: number | null;
  compute?: number | null;
  transfer?: number | null;
  disk?: number | null;
  nbytes?: number | null;
  n_tasks?: number | null;
  n_erred?: number | null;
  cost?: number | null;
}

/** What the views show of compare: ratios, findings, the recent runs' wall times. */
export interface RunSummary {
  computation_id?: string;
  baseline_id?: string | null;
  wall?: Record<string, number | null> | null;
  findings?: string[] | null;
  inputs_differ?: Record<string, unknown> | null;
  groups?: Record<string, number | null> | null;
  runs?: Record<string, unknown>[] | null;
}

/** A task of the task stream, or past the collector's limit a bin of a worker's tasks */
export interface StreamRow {
  id?: number;
  cluster_id?: string;
  computation_id?: string;
  start: number;
  stop: number;
  worker?: string | null;
  thread?: number | null;
  prefix?: string | null;
  task_group?: string | null;
  state?: string | null;
  n_tasks?: number | null;
  busy?: number | null;
  binned?: boolean | null;
}

/** TaskGroupRow */
export interface TaskGroupRow {
  name: string;
  cluster_id?: string;
  computation_id?: string;
  prefix?: string | null;
  states?: Record<string, number | null> | null;
  n_tasks?: number | null;
  n_done?: number | null;
  n_erred?: number | null;
  n_not_run?: number | null;
  n_cancelled?: number | null;
  compute?: number | null;
  transfer?: number | null;
  disk_read?: number | null;
  disk_write?: number | null;
  nbytes?: number | null;
  start?: number | null;
  stop?: number | null;
  dependencies?: string[] | null;
  updated?: number | null;
}

/** An event topic a cluster recorded: how many events, and the newest's time. */
export interface TopicRow {
  topic: string;
  events: number;
  last_time: number;
}

/** A worker at one moment of its cluster's life. */
export interface WorkerSample {
  id?: number;
  cluster_id?: string;
  worker: string;
  time: number;
  name?: string | number | null;
  host?: string | null;
  nthreads?: number | null;
  memory_limit?: number | null;
  managed?: number | null;
  unmanaged?: number | null;
  spilled?: number | null;
  cpu?: number | null;
  processing?: number | null;
}

/** What a `finding=` filter takes: the kinds findings/ finds (filters.py). */
export const FINDING_KINDS = [
  "small-tasks",
  "straggler",
  "imbalance",
  "spilling",
  "memory-kill",
  "gil-contention",
  "cpu-starved",
  "transfer-bound",
  "serialization",
  "too-few-tasks",
  "failures",
  "slower-than-before",
  "idle-cluster",
  "gpu-underused",
] as const;

/** Each read's paths under the API (the first whose ids are given). */
export const READ_PATHS = {
  list_clusters: ["/clusters"],
  get_cluster: ["/clusters/{cluster_id}"],
  list_cluster_samples: ["/clusters/{cluster_id}/samples"],
  list_computations: ["/computations", "/clusters/{cluster_id}/computations"],
  cost_report: ["/costs"],
  get_computation: ["/computations/{computation_id}"],
  list_task_groups: ["/computations/{computation_id}/groups"],
  list_exceptions: ["/exceptions"],
  list_events: ["/events"],
  list_topics: ["/clusters/{cluster_id}/topics"],
  get_profile: ["/computations/{computation_id}/profile", "/clusters/{cluster_id}/profile"],
  list_worker_samples: ["/clusters/{cluster_id}/workers"],
  list_task_stream: ["/computations/{computation_id}/tasks"],
  list_gpu_metrics: ["/gpu"],
  list_runs: ["/computations/{computation_id}/runs"],
  compare: ["/computations/{computation_id}/compare"],
  run_summary: ["/computations/{computation_id}/summary"],
  explain: ["/computations/{computation_id}/findings"],
  cluster_findings: ["/clusters/{cluster_id}/findings"],
  export: ["/export"],
} as const;
