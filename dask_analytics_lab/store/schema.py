"""The tables, as SQLAlchemy Core metadata: what the queries are written against.

The database itself is made and changed only by the Alembic migrations in
`migrations/versions/`; a test checks that they and this file agree.  Change both
together: edit this file, then add a migration (see migrations/README).

Conventions: times are float seconds since the epoch (Double), bytes and counts
BigInteger, code and tracebacks Text.  "" stands for "no computation" / "no task
group" in key columns, because NULLs never collide in a unique constraint.

The team server's tables (accounts, tokens, reports ...) are in team_schema.py, which
builds on this module and adds them to the same `metadata`: whatever needs every table
(Alembic's env.py, the schema test) imports team_schema, never the other way round.

On PostgreSQL, task_stream, worker_samples, gpu_samples and events are partitioned by
time (partitions.py, migration 0011): there their primary key also holds the partition
key, (id, start) or (id, time); ids still come from one sequence each.
"""

from __future__ import annotations

import sqlalchemy as sa

# Named constraints: Alembic can only alter (and SQLite batch mode only rebuild) what
# it can name.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

# SQLite only autoincrements an INTEGER PRIMARY KEY, PostgreSQL wants a BIGINT.
RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Time = sa.Double
Json = sa.JSON(none_as_null=True)


def _cluster_fk() -> sa.Column[str]:
    return sa.Column("cluster_id", sa.Text, sa.ForeignKey("clusters.cluster_id"), nullable=False)


def _cluster_id() -> sa.Column[str]:
    # A time-series table's rows name their cluster without a foreign key: checked per
    # row, it cost PostgreSQL a third of a task stream row's insert, and what it guarded
    # holds without it (ingest writes the cluster's row first in the same transaction,
    # prune deletes by cluster_id).  Migration 0012.
    return sa.Column("cluster_id", sa.Text, nullable=False)


clusters = sa.Table(
    "clusters",
    metadata,
    sa.Column("cluster_id", sa.Text, primary_key=True),
    sa.Column("name", sa.Text),
    sa.Column("address", sa.Text),
    sa.Column("user", sa.Text),
    sa.Column("account", sa.Text),
    # A stub row (made by a message that came before the `cluster` one) holds the
    # time of the first message seen here, until the `cluster` message replaces it.
    sa.Column("started", Time, nullable=False),
    sa.Column("stopped", Time),
    sa.Column("stop_reason", sa.Text),
    sa.Column("idle_shutdown", sa.Boolean),
    sa.Column("versions", Json),
    sa.Column("platform", Json),
    sa.Column("settings", Json),
    sa.Column("price_per_core_hour", sa.Double),
    # Latest figures, from the newest cluster_sample (sample_time).
    sa.Column("n_workers", sa.BigInteger),
    sa.Column("n_threads", sa.BigInteger),
    sa.Column("memory_used", sa.BigInteger),
    sa.Column("memory_total", sa.BigInteger),
    sa.Column("processing", sa.BigInteger),
    sa.Column("worker_seconds", sa.Double),
    sa.Column("core_seconds", sa.Double),
    sa.Column("cost", sa.Double),
    sa.Column("idle_since", Time),
    sa.Column("last_activity", Time),
    sa.Column("dropped_messages", sa.BigInteger),
    sa.Column("sample_time", Time),
    # How big it got: a stopped cluster reads 0 workers, these say what it was.
    sa.Column("peak_workers", sa.BigInteger),
    sa.Column("peak_threads", sa.BigInteger),
    sa.Column("peak_memory", sa.BigInteger),
    # What the client said its user was, when a token decided `user` (team server).
    sa.Column("reported_user", sa.Text),
    sa.Column("first_seen", Time, nullable=False),
    sa.Column("last_seen", Time, nullable=False),
    # Seconds its scheduler promised never to be silent longer while it lives (NULL:
    # a release before heartbeats; messages.LEGACY_HEARTBEAT).  Lost after N of them.
    sa.Column("heartbeat", sa.Double),
    # Time of the `cluster` message the descriptive columns come from; NULL for a stub.
    sa.Column("updated", Time),
    sa.Index(None, "started"),
    sa.Index(None, "account", "started"),
    sa.Index(None, "user", "started"),
)

cluster_samples = sa.Table(
    "cluster_samples",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    _cluster_id(),
    sa.Column("time", Time, nullable=False),
    sa.Column("n_workers", sa.BigInteger),
    sa.Column("n_threads", sa.BigInteger),
    sa.Column("memory_used", sa.BigInteger),
    sa.Column("memory_total", sa.BigInteger),
    sa.Column("processing", sa.BigInteger),
    sa.Column("worker_seconds", sa.Double),
    sa.Column("core_seconds", sa.Double),
    sa.Column("cost", sa.Double),
    sa.Column("idle_since", Time),
    sa.Column("last_activity", Time),
    sa.Column("dropped_messages", sa.BigInteger),
    sa.Index(None, "cluster_id", "time"),
)

computations = sa.Table(
    "computations",
    metadata,
    sa.Column("computation_id", sa.Text, primary_key=True),
    _cluster_fk(),
    sa.Column("start", Time, nullable=False),
    sa.Column("stop", Time),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("code_hashes", Json),
    # Per computation: [{hash, lineno_frame, lineno_relative}]; the snippet's text is
    # stored once in code_snippets, the line that made this computation here.
    sa.Column("code_frames", Json),
    sa.Column("code_line", sa.Text),
    # What it ran, from its task groups (e.g. "read_parquet → groupby-agg"), made once.
    sa.Column("label", sa.Text),
    # The runs of the same code share it: see messages.fingerprint.
    sa.Column("fingerprint", sa.Text),
    # Totals kept on the row so "the last 100 computations with their totals" never
    # touches task_groups (limit-first: ~10 ms instead of ~650 ms over 1M groups).
    sa.Column("n_tasks", sa.BigInteger),
    sa.Column("n_groups", sa.BigInteger),
    sa.Column("n_erred", sa.BigInteger),
    sa.Column("n_done", sa.BigInteger),
    sa.Column("n_not_run", sa.BigInteger),
    sa.Column("n_cancelled", sa.BigInteger),
    sa.Column("compute", sa.Double),
    sa.Column("transfer", sa.Double),
    sa.Column("disk", sa.Double),
    sa.Column("nbytes", sa.BigInteger),
    # How busy the scheduler's host was while it ran (percent of all its cores), and
    # its cores: tells waiting for a free core from waiting on I/O.
    sa.Column("host_cpu", sa.Double),
    sa.Column("host_cores", sa.BigInteger),
    sa.Column("updated", Time, nullable=False),
    sa.Index(None, "start", "computation_id"),
    sa.Index(None, "cluster_id", "start", "computation_id"),
    sa.Index(None, "fingerprint", "start"),
)

task_groups = sa.Table(
    "task_groups",
    metadata,
    # cluster_id leads the key so one cluster can never overwrite another's groups.
    sa.Column("cluster_id", sa.Text, sa.ForeignKey("clusters.cluster_id"), primary_key=True),
    sa.Column("computation_id", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("prefix", sa.Text),
    sa.Column("states", Json),
    sa.Column("n_tasks", sa.BigInteger),
    # Of n_tasks: finished, raised, never ran (a dependency failed, released, cancelled
    # before they ran), running when cancelled.
    sa.Column("n_done", sa.BigInteger),
    sa.Column("n_erred", sa.BigInteger),
    sa.Column("n_not_run", sa.BigInteger),
    sa.Column("n_cancelled", sa.BigInteger),
    sa.Column("compute", sa.Double),
    sa.Column("transfer", sa.Double),
    sa.Column("disk_read", sa.Double),
    sa.Column("disk_write", sa.Double),
    sa.Column("nbytes", sa.BigInteger),
    sa.Column("start", Time),
    sa.Column("stop", Time),
    sa.Column("dependencies", Json),
    sa.Column("updated", Time, nullable=False),
)

# Each distinct snippet once per account: a notebook cell is sent again with every
# computation.  Scoped by account, so a computation can only show code its own account
# sent: a hash is no oracle for another account's code.
code_snippets = sa.Table(
    "code_snippets",
    metadata,
    # The default: what migration 0004 gave the rows it found (each was then copied to
    # the accounts that used it).
    sa.Column("account", sa.Text, primary_key=True, server_default=""),
    sa.Column("hash", sa.Text, primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("filename", sa.Text),
    sa.Column("lineno_frame", sa.BigInteger),
    sa.Column("lineno_relative", sa.BigInteger),
)

exceptions = sa.Table(
    "exceptions",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    _cluster_fk(),
    sa.Column("computation_id", sa.Text, nullable=False),  # "" = not tied to one
    sa.Column("task_group", sa.Text, nullable=False),  # "" = unknown
    # One row per failure: exception type + the frame that raised it + the message
    # with its literals masked (`pattern`); `hash` is of those three.
    sa.Column("hash", sa.Text, nullable=False),
    sa.Column("exc_type", sa.Text),
    sa.Column("location", sa.Text),
    sa.Column("pattern", sa.Text),
    sa.Column("examples", Json),
    sa.Column("workers", Json),
    sa.Column("exception_text", sa.Text),
    sa.Column("traceback_text", sa.Text),
    sa.Column("example_key", sa.Text),
    sa.Column("count", sa.BigInteger, nullable=False),
    # Of count, the attempts Dask ran again (retries=), and the tasks that then succeeded.
    sa.Column("retried", sa.BigInteger),
    sa.Column("recovered", sa.BigInteger),
    sa.Column("first_time", Time, nullable=False),
    sa.Column("last_time", Time, nullable=False),
    sa.Column("updated", Time, nullable=False),
    sa.UniqueConstraint("cluster_id", "computation_id", "task_group", "hash"),
    sa.Index(None, "cluster_id", "last_time"),
    sa.Index(None, "computation_id", "last_time"),
    sa.Index(None, "last_time"),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    _cluster_id(),
    sa.Column("topic", sa.Text, nullable=False),
    sa.Column("time", Time, nullable=False),
    sa.Column("msg", Json),
    sa.Index(None, "cluster_id", "time"),
    sa.Index(None, "cluster_id", "topic", "time"),
    sa.Index(None, "topic", "time"),
    sa.Index(None, "time"),
)

profiles = sa.Table(
    "profiles",
    metadata,
    sa.Column("cluster_id", sa.Text, sa.ForeignKey("clusters.cluster_id"), primary_key=True),
    sa.Column("computation_id", sa.Text, primary_key=True),  # "" = the whole cluster
    # One task prefix's samples; "" = the whole computation's (as recorded before 0006).
    sa.Column("prefix", sa.Text, primary_key=True, server_default=""),
    sa.Column("tree", Json, nullable=False),
    sa.Column("count", sa.BigInteger),
    sa.Column("updated", Time, nullable=False),
)

# Dask's fine performance metrics, per computation and task prefix: how much of each
# activity (thread-cpu, thread-noncpu, executor, disk-read, serialize ...) in each
# context (execute, gather-dep ...), in seconds or bytes.  Values are the
# computation's totals so far (an upsert replaces them).  prefix "" = not tied to one.
computation_metrics = sa.Table(
    "computation_metrics",
    metadata,
    sa.Column("cluster_id", sa.Text, primary_key=True),  # no foreign key: _cluster_id()
    sa.Column("computation_id", sa.Text, primary_key=True),
    sa.Column("prefix", sa.Text, primary_key=True),
    sa.Column("context", sa.Text, primary_key=True),
    sa.Column("activity", sa.Text, primary_key=True),
    sa.Column("unit", sa.Text, primary_key=True),
    sa.Column("value", sa.Double, nullable=False),
    sa.Column("updated", Time, nullable=False),
)

# Each worker over the cluster's life: memory as Dask splits it, CPU, tasks processing.
worker_samples = sa.Table(
    "worker_samples",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    _cluster_id(),
    sa.Column("worker", sa.Text, nullable=False),
    sa.Column("time", Time, nullable=False),
    sa.Column("name", sa.Text),
    sa.Column("host", sa.Text),
    sa.Column("nthreads", sa.BigInteger),
    sa.Column("memory_limit", sa.BigInteger),
    sa.Column("managed", sa.BigInteger),
    sa.Column("unmanaged", sa.BigInteger),
    sa.Column("spilled", sa.BigInteger),
    sa.Column("cpu", sa.Double),
    sa.Column("processing", sa.BigInteger),
    sa.Index(None, "cluster_id", "time"),
    sa.Index(None, "cluster_id", "worker", "time"),
)

# A computation's task stream: one row per task (n_tasks 1, binned false), or, past the
# collector's limit, one row per (worker, prefix, time bin): n_tasks that ran in it and
# `busy` seconds of execution inside [start, stop).
task_stream = sa.Table(
    "task_stream",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    _cluster_id(),
    sa.Column("computation_id", sa.Text, nullable=False),
    sa.Column("worker", sa.Text),
    sa.Column("thread", sa.BigInteger),
    sa.Column("prefix", sa.Text),
    sa.Column("task_group", sa.Text),
    sa.Column("state", sa.Text),
    sa.Column("start", Time, nullable=False),
    sa.Column("stop", Time, nullable=False),
    sa.Column("n_tasks", sa.BigInteger, nullable=False),
    sa.Column("busy", sa.Double),
    sa.Column("binned", sa.Boolean, nullable=False),
    sa.Index(None, "cluster_id", "computation_id", "start"),
)

# Each computation's task stream lies in [first_start, last_start] (of its rows' start,
# widened by every message, never narrowed): a read of it names that range, so PostgreSQL
# reads only the time partitions it falls in (partitions.py).  No row: read them all.
task_stream_spans = sa.Table(
    "task_stream_spans",
    metadata,
    sa.Column("cluster_id", sa.Text, sa.ForeignKey("clusters.cluster_id"), primary_key=True),
    sa.Column("computation_id", sa.Text, primary_key=True),
    sa.Column("first_start", Time, nullable=False),
    sa.Column("last_start", Time, nullable=False),
)

# One row per sample per GPU.  A GPU is known by (host, gpu_uuid): indexes get
# renumbered by CUDA_VISIBLE_DEVICES, uuids do not.
gpu_samples = sa.Table(
    "gpu_samples",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    _cluster_id(),
    sa.Column("worker", sa.Text),
    sa.Column("host", sa.Text),
    sa.Column("monitor_id", sa.Text),
    sa.Column("timestamp", sa.Double),
    sa.Column("time", Time, nullable=False),
    sa.Column("gpu_uuid", sa.Text),
    sa.Column("gpu_index", sa.BigInteger),
    sa.Column("gpu_name", sa.Text),
    sa.Column("mem_used", sa.BigInteger),
    sa.Column("mem_total", sa.BigInteger),
    sa.Column("mem_util", sa.Double),
    sa.Column("compute_util", sa.Double),
    sa.Column("power_w", sa.Double),
    sa.Column("temperature_c", sa.Double),
    sa.Column("job", sa.Text),
    sa.Column("dag", sa.Text),
    sa.Column("task_groups", Json),
    # What workers running no task waited on; every [job, dag] when several ran; the
    # workers that share this GPU (its rows come from one of them: collect/gpu_monitor.py).
    sa.Column("waiting", sa.Text),
    sa.Column("jobs", Json),
    sa.Column("shared_by", Json),
    sa.Index(None, "cluster_id", "time"),
    sa.Index(None, "monitor_id", "time"),
    sa.Index(None, "host", "gpu_uuid", "time"),
)

# Bookkeeping: every (cluster_id, seq) stored, so a retried message is stored once.
ingested = sa.Table(
    "ingested",
    metadata,
    sa.Column("cluster_id", sa.Text, primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True),
    sa.Column("time", Time, nullable=False),
    # What the message added to its account's storage usage (usage.py: its kind's code
    # and its bytes as ingested), given back when prune deletes this row; null where
    # nothing was counted (no account: an embedded store; or before migration 0013).
    sa.Column("kind", sa.SmallInteger),
    sa.Column("bytes", sa.BigInteger),
)

# Alerts fired (dask_analytics_lab/alerts/): one row per rule, subject (a computation or
# a cluster's idle period) and webhook.  Whoever inserts the row sends it, so with several
# server replicas (or a server and a scheduler) on one database each alert goes once; the
# row then carries its delivery, so a delivery that fails is never lost silently.
alerts = sa.Table(
    "alerts",
    metadata,
    sa.Column("rule", sa.Text, primary_key=True),
    sa.Column("subject", sa.Text, primary_key=True),
    sa.Column("webhook", sa.Text, primary_key=True),
    sa.Column("cluster_id", sa.Text, nullable=False),
    sa.Column("computation_id", sa.Text, nullable=False),  # "" for a cluster's alert
    sa.Column("account", sa.Text),
    sa.Column("fired", Time, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("link", sa.Text),
    sa.Column("body", Json),  # what is sent, so a retry sends the same
    sa.Column("state", sa.Text, nullable=False),  # pending, delivered or failed
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("last_error", sa.Text),
    sa.Column("next_try", Time),
    sa.Column("delivered", Time),
    sa.Index(None, "fired"),
    sa.Index(None, "cluster_id"),  # prune deletes by cluster
)

# Findings kept with their computation (findings/kept.py), so "which computations
# spilled" is a query, not an explain of every computation: one `explained` row per
# computation explained and one `findings` row per finding it gave (none: a healthy
# one).  `settings` fingerprints the thresholds and the rules' release: other thresholds
# explain it again.  `final`: its record can no longer change (ended, settled, and its
# cluster moved on), else it is explained again when next asked.  Derived from the
# record, so not exported; prune deletes them with their cluster.
explained = sa.Table(
    "explained",
    metadata,
    sa.Column("computation_id", sa.Text, primary_key=True),
    sa.Column("cluster_id", sa.Text, nullable=False),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("final", sa.Boolean, nullable=False),
    sa.Column("kept", Time, nullable=False),
    sa.Index(None, "cluster_id"),
)

findings = sa.Table(
    "findings",
    metadata,
    sa.Column("computation_id", sa.Text, primary_key=True),
    sa.Column("rank", sa.Integer, primary_key=True),  # 0: the most costly
    sa.Column("cluster_id", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("impact", sa.Double, nullable=False),
    sa.Column("body", Json, nullable=False),  # the finding as explain() gives it
    sa.Index(None, "kind", "computation_id"),
    sa.Index(None, "cluster_id"),
)

# Tables a user's export holds, in an order where every row's cluster comes first.
DATA_TABLES = (
    clusters,
    cluster_samples,
    computations,
    task_groups,
    code_snippets,
    exceptions,
    events,
    profiles,
    gpu_samples,
    computation_metrics,
    worker_samples,
    task_stream,
)
