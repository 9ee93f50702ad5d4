// What the team pages read of the JSON API's answers (server/routes.py lists the routes;
// the rows are store/queries.py's, the columns store/schema.py's).  Only the fields a
// page reads are named; rows handed whole to a notebook view are that view's business.

/** A cluster row, with the lifecycle the store decided (`status`, `ended`, `duration`). */
export interface ClusterRow {
  cluster_id: string;
  name: string | null;
  address: string | null;
  user: string | null;
  account: string | null;
  started: number;
  stopped: number | null;
  stop_reason: string | null;
  status: "live" | "stopped" | "lost";
  ended: number | null;
  duration: number;
  versions: Record<string, string> | null;
  platform: { os?: string; arch?: string; python?: string } | null;
  n_workers: number | null;
  n_threads: number | null;
  memory_used: number | null;
  memory_total: number | null;
  peak_workers: number | null;
  peak_threads: number | null;
  peak_memory: number | null;
  worker_seconds: number | null;
  cost: number | null;
  idle_since: number | null;
  dropped_messages: number | null;
  cursor: string;
}

/** A computation row with its totals; a running one on an ended cluster reads "lost". */
export interface ComputationRow {
  computation_id: string;
  cluster_id: string;
  start: number;
  stop: number | null;
  state: "running" | "finished" | "erred" | "cancelled" | "lost";
  label: string | null;
  code_line: string | null;
  n_tasks: number | null;
  n_done: number | null;
  n_erred: number | null;
  n_not_run: number | null;
  n_cancelled: number | null;
  compute: number | null;
  transfer: number | null;
  disk: number | null;
  nbytes: number | null;
  updated: number;
  cursor: string;
}

export interface TaskGroupRow {
  name: string;
  prefix: string | null;
  states: Record<string, number> | null;
  n_tasks: number | null;
  n_done: number | null;
  n_erred: number | null;
  n_not_run: number | null;
  n_cancelled: number | null;
  compute: number | null;
  transfer: number | null;
  disk_read: number | null;
  disk_write: number | null;
  nbytes: number | null;
  dependencies: string[] | null;
}

/** A code snippet as sent; `text` is null when its `code` message never arrived. */
export interface CodeSnippet {
  hash: string;
  text: string | null;
  filename: string | null;
  lineno_frame: number | null;
  lineno_relative: number | null;
}

/** GET /computations/{id}: the row with its groups, code and fine metrics. */
export interface ComputationDetail extends ComputationRow {
  groups: TaskGroupRow[] | null;
  code: CodeSnippet[] | null;
  metrics: ViewRow[] | null;
}

/** One distinct failure with its count; computation_id is null when not tied to one. */
export interface ExceptionRow {
  id: number;
  cluster_id: string;
  computation_id: string | null;
  count: number;
}

export interface EventRow {
  topic: string;
  time: number;
  msg: unknown;
}

/** A stored report as a reader sees it (reports/rows.py public_row). */
export interface ReportRow {
  title: string | null;
  filename: string | null;
  user: string | null;
  created: number;
  private: boolean;
  summary: { duration?: number | null; n_tasks?: number | null } | null;
  url: string;
  json_url: string;
}

/** GET /costs: one row per user, day or month; key null when unknown. */
export interface CostRow {
  key: string | null;
  clusters: number;
  computations: number;
  core_hours: number;
  cost: number | null;
}

/** Dask's profile tree, as the flamegraph view reads it; `count` is its samples. */
export interface ProfileTree {
  count: number;
}

export interface Whoami {
  account: string | null;
  user: string | null;
  via: string;
  token_required: boolean;
}

/** A row a page hands as it came to a notebook view (samples, task stream, metrics). */
export type ViewRow = Record<string, unknown>;
