"""The rows every read answers with (reads.py), typed: the read side's contract, beside
the ingest contract (messages.py).

Readers hand rows out as plain dicts (what the store's queries make and what JSON
carries); these Structs say what those dicts hold, for three uses: the TypeScript row
types (scripts/gen_reads.py writes js/common/reads.gen.ts from them), the read
protocol's documentation, and the test that converts every row every store answers
(tests/integration/test_reads.py: a column a query adds and no Struct declares fails it).

A field with default None may be null (a nullable column; or missing from a report or
store an older release made: the views show "–"); one with default UNSET is never null
but may be absent (a row a view has not read yet); one without default is always there.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "ClusterFinding",
    "ClusterRow",
    "ClusterSample",
    "CodeSnippet",
    "Compare",
    "ComputationDetail",
    "ComputationRow",
    "CostRow",
    "EventRow",
    "ExceptionRow",
    "Finding",
    "FindingComputation",
    "GpuSample",
    "MetricRow",
    "ProfileTree",
    "RunRow",
    "RunSummary",
    "StreamRow",
    "TaskGroupRow",
    "TopicRow",
    "WorkerSample",
]


class Row(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Rows are dicts at run time; a Struct of this base describes one."""


class ClusterRow(Row, kw_only=True):
    """A cluster, with the lifecycle the store works out (store/queries.py)."""

    cluster_id: str | UnsetType = UNSET
    name: str | None = None
    address: str | None = None
    user: str | None = None
    account: str | None = None
    started: float | None = None
    stopped: float | None = None
    stop_reason: str | None = None
    idle_shutdown: bool | None = None
    versions: dict[str, Any] | None = None
    platform: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    price_per_core_hour: float | None = None
    n_workers: int | None = None
    n_threads: int | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    processing: int | None = None
    worker_seconds: float | None = None
    core_seconds: float | None = None
    cost: float | None = None
    idle_since: float | None = None
    last_activity: float | None = None
    dropped_messages: int | None = None
    # The newest sample's time: the samples moved when it did.
    sample_time: float | None = None
    peak_workers: int | None = None
    peak_threads: int | None = None
    peak_memory: int | None = None
    # With a token, `user` is the token's; this is what the cluster's client said.
    reported_user: str | None = None
    first_seen: float | None = None
    last_seen: float | None = None
    heartbeat: float | None = None
    updated: float | None = None
    status: str | None = None  # "live" | "stopped" | "lost"
    ended: float | None = None
    duration: float | None = None
    cursor: str | None = None  # where the next (older) page starts: before=cursor


class ClusterSample(Row, kw_only=True):
    """One sample of a cluster's totals over time."""

    id: int | UnsetType = UNSET
    cluster_id: str | UnsetType = UNSET
    time: float
    n_workers: int | None = None
    n_threads: int | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    processing: int | None = None
    worker_seconds: float | None = None
    core_seconds: float | None = None
    cost: float | None = None
    idle_since: float | None = None
    last_activity: float | None = None
    dropped_messages: int | None = None


class ComputationRow(Row, kw_only=True):
    computation_id: str | UnsetType = UNSET
    cluster_id: str | UnsetType = UNSET
    start: float | None = None
    stop: float | None = None
    # "running", "finished", "erred", "cancelled"; "lost" on an ended cluster
    state: str | None = None
    code_hashes: list[str] | None = None
    code_frames: list[dict[str, Any]] | None = None
    code_line: str | None = None
    # The server's: why code_line reads null (no key here opens it).
    code_error: str | None = None
    label: str | None = None
    fingerprint: str | None = None
    states: dict[str, int | None] | None = None
    n_tasks: int | None = None
    n_groups: int | None = None
    n_erred: int | None = None
    n_done: int | None = None
    n_not_run: int | None = None
    n_cancelled: int | None = None
    compute: float | None = None
    transfer: float | None = None
    disk: float | None = None
    nbytes: int | None = None
    # The scheduler's host while it ran: percent of its cores busy, and its cores.
    host_cpu: float | None = None
    host_cores: int | None = None
    updated: float | None = None
    cursor: str | None = None


class TaskGroupRow(Row, kw_only=True):
    name: str
    cluster_id: str | UnsetType = UNSET
    computation_id: str | UnsetType = UNSET
    prefix: str | None = None
    states: dict[str, int | None] | None = None
    n_tasks: int | None = None
    n_done: int | None = None
    n_erred: int | None = None
    n_not_run: int | None = None
    n_cancelled: int | None = None
    compute: float | None = None
    transfer: float | None = None
    disk_read: float | None = None
    disk_write: float | None = None
    nbytes: int | None = None
    start: float | None = None
    stop: float | None = None
    dependencies: list[str] | None = None
    updated: float | None = None


class CodeSnippet(Row, kw_only=True):
    """A code snippet that made a computation; `text` is null when its `code` message
    never arrived."""

    hash: str | UnsetType = UNSET
    text: str | None = None
    filename: str | None = None
    lineno_frame: int | None = None
    lineno_relative: int | None = None
    name: str | None = None
    # The server's: why text reads null (no key here opens it).
    error: str | None = None


class MetricRow(Row, kw_only=True):
    """One of Dask's fine performance metrics of a computation, summed per prefix."""

    prefix: str | None = None  # null: not tied to a task group
    context: str
    activity: str
    unit: str
    value: float


class ComputationDetail(ComputationRow, kw_only=True):
    """A computation with its groups, code and fine metrics."""

    groups: list[TaskGroupRow]
    code: list[CodeSnippet]
    metrics: list[MetricRow]


class ExceptionRow(Row, kw_only=True):
    """One kind of failure: the tasks that raised the same type at the same frame."""

    id: int | None = None
    cluster_id: str | UnsetType = UNSET
    computation_id: str | None = None  # null or "": not tied to one
    task_group: str | UnsetType = UNSET
    hash: str | UnsetType = UNSET
    exc_type: str | None = None
    location: str | None = None
    pattern: str | None = None
    examples: list[str | None] | None = None
    workers: list[str] | None = None
    exception_text: str | None = None
    traceback_text: str | None = None
    example_key: str | None = None
    count: int | None = None
    # Of count: attempts Dask ran again (retries=), and tasks that then succeeded.
    retried: int | None = None
    recovered: int | None = None
    first_time: float | None = None
    last_time: float | None = None
    updated: float | None = None
    # Where the traceback placed it before the stored code placed it better.
    recorded_location: str | None = None
    recorded_traceback_text: str | None = None


class EventRow(Row, kw_only=True):
    """An event as stored: a topic's message at a time (worker-joined, worker-left, ...)."""

    id: int | UnsetType = UNSET
    cluster_id: str | UnsetType = UNSET
    topic: str
    time: float
    msg: Any


class TopicRow(Row, kw_only=True):
    """An event topic a cluster recorded: how many events, and the newest's time."""

    topic: str
    events: int
    last_time: float


class WorkerSample(Row, kw_only=True):
    """A worker at one moment of its cluster's life."""

    id: int | UnsetType = UNSET
    cluster_id: str | UnsetType = UNSET
    worker: str
    time: float
    name: str | int | None = None
    host: str | None = None
    nthreads: int | None = None
    memory_limit: int | None = None
    managed: int | None = None
    unmanaged: int | None = None
    spilled: int | None = None
    cpu: float | None = None
    processing: int | None = None


class GpuSample(Row, kw_only=True):
    """One GPU at one moment, with the task groups running then."""

    id: int | UnsetType = UNSET
    cluster_id: str | UnsetType = UNSET
    monitor_id: str | None = None
    timestamp: float | None = None  # the sampler's clock (NVML's reading), as sent
    time: float
    worker: str | None = None
    host: str | None = None
    gpu_uuid: str | None = None
    gpu_index: int | None = None
    gpu_name: str | None = None
    mem_used: int | None = None
    mem_total: int | None = None
    mem_util: float | None = None
    compute_util: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    task_groups: list[str] | None = None
    # No task ran on its workers: what they waited on ("inputs", "memory", "nothing").
    waiting: str | None = None
    job: str | None = None
    dag: str | None = None
    # Every [job, dag] running then, when more than one.
    jobs: list[tuple[str, str | None]] | None = None
    # The workers that see this GPU, when more than one (its rows come from one).
    shared_by: list[str] | None = None


class StreamRow(Row, kw_only=True):
    """A task of the task stream, or past the collector's limit a bin of a worker's tasks
    of one prefix (binned: n_tasks started in it, busy seconds of work)."""

    id: int | UnsetType = UNSET
    cluster_id: str | UnsetType = UNSET
    computation_id: str | UnsetType = UNSET
    start: float
    stop: float
    worker: str | None = None
    thread: int | None = None
    prefix: str | None = None
    task_group: str | None = None
    state: str | None = None
    n_tasks: int | None = None
    busy: float | None = None
    binned: bool | None = None


class CostRow(Row, kw_only=True):
    """One user's, day's or month's clusters; key null when unknown."""

    key: str | None
    clusters: int
    computations: int
    core_hours: float
    cost: float | None


class RunRow(Row, kw_only=True):
    """One run of a computation's code (store/compare.py)."""

    computation_id: str
    cluster_id: str
    cluster_name: str | None = None
    label: str | None = None
    state: str | None = None
    start: float | None = None
    stop: float | None = None
    wall: float | None = None
    compute: float | None = None
    transfer: float | None = None
    disk: float | None = None
    nbytes: int | None = None
    n_tasks: int | None = None
    n_erred: int | None = None
    cost: float | None = None


class Compare(Row, kw_only=True):
    """A computation against an earlier run of the same code (store/compare.py)."""

    computation_id: str
    baseline_id: str | None
    before: RunRow | None = None
    after: RunRow | None = None
    wall: dict[str, float | None] | None = None
    groups: list[dict[str, Any]] | None = None
    inputs_differ: dict[str, Any] | None = None
    findings: list[str] | None = None


class RunSummary(Row, kw_only=True):
    """What the views show of compare: ratios, findings, the recent runs' wall times."""

    computation_id: str | UnsetType = UNSET
    baseline_id: str | None = None
    wall: dict[str, float | None] | None = None
    findings: list[str] | None = None
    inputs_differ: dict[str, Any] | None = None
    groups: dict[str, float | None] | None = None
    runs: list[dict[str, Any]] | None = None


class Finding(Row, kw_only=True):
    """Why a computation was slow and what to change (findings/)."""

    kind: str
    title: str
    evidence: str
    advice: str
    impact: float  # seconds of wall time the advice would save, an estimate
    groups: list[str]
    workers: list[str]
    why: str = ""  # why this kind matters, in one line (a server before it sends none)


class FindingComputation(Row, kw_only=True):
    """A computation with a finding of the kind a ClusterFinding sums."""

    computation_id: str
    label: str | None
    impact: float  # its findings of the kind (seconds)
    title: str  # the costliest one's


class ClusterFinding(Row, kw_only=True):
    """One kind of finding over a cluster's computations (findings/across.py)."""

    kind: str
    why: str
    n_computations: int  # its computations with this finding
    impact: float  # their impacts summed: seconds the advice would have saved
    # The computations with it, the most costly first (at most across.TOP): their findings
    # say what to change.
    computations: list[FindingComputation]
    advice: str  # the most costly one's


class ProfileTree(Row, kw_only=True):
    """Dask's profile tree (distributed/profile.py); {} when nothing was recorded."""

    count: int | UnsetType = UNSET
    identifier: str | UnsetType = UNSET
    description: dict[str, Any] | UnsetType = UNSET
    children: dict[str, Any] | UnsetType = UNSET
