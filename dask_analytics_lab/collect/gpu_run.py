"""One GPU monitoring run on the scheduler (a Monitor's start()..stop()): its settings,
the rows of the GPUs each worker owns, each GPU's peak memory, and what each worker
said.  Free of Dask: the plugin (gpu_monitor.py) hands it the workers' sample batches
and a function that tags a time with its (job, dag) pairs (gpu_jobs.py).

A GPU is one device wherever it is seen, known by (host, uuid): two workers that share
one both sample it, and only the first to report it (its owner, until its samples
stop) makes its rows.  Those rows carry the task groups of every worker sharing it,
each taken from that worker's sample nearest in time, and name the workers in
`shared_by`.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypedDict

from .gpu_nvml import Reading
from .gpu_sample import WAIT_INPUTS, WAIT_MEMORY, WAIT_NOTHING, Sample

# Row layout kept on the scheduler (tuples: a third of the memory of dicts).
ROW_FIELDS = (
    "timestamp",
    "time",
    "gpu_uuid",
    "gpu_index",
    "gpu_name",
    "mem_used",
    "mem_total",
    "mem_util",
    "compute_util",
    "power_w",
    "temperature_c",
    "job",
    "dag",
    "task_groups",
    "waiting",
    "jobs",
    "shared_by",
)

# Which wait a row of several workers says, when none of them ran a task.
_WAIT_ORDER = (WAIT_INPUTS, WAIT_MEMORY, WAIT_NOTHING)

# Recent samples kept per worker, to merge into the rows of a GPU it shares.
RECENT_SAMPLES = 64


class Peak(TypedDict):
    """One GPU's peak memory in a run."""

    worker: str  # the worker whose rows it is in (the GPU's first owner)
    index: int | None
    name: str | None
    peak: int | None
    mem_total: int | None


class MonitorRun:
    """One start()..stop() on the scheduler: settings, rows, peaks, per-worker facts."""

    def __init__(self, *, metrics: list[str], interval: float, keep_rows: int, client: str | None):
        self.id = uuid.uuid4().hex
        self.metrics = metrics
        self.interval = interval
        self.started = time.time()
        self.stopped: float | None = None
        self.client = client
        self.rows: dict[
            str, deque[tuple[Any, ...]]
        ] = {}  # worker -> rows (tuples in ROW_FIELDS order)
        self.n_rows = 0
        self.kept = 0
        self.keep_rows = keep_rows
        self.dropped_rows = 0  # rows past keep_rows, gone from the scheduler (not from the store)
        self.worker_dropped: dict[str, int] = {}  # samples the workers could not ship
        self.peaks: dict[tuple[str | None, str], Peak] = {}  # (host, gpu uuid) -> its peak
        # (host, gpu uuid) -> {worker that samples it: time of its latest sample}
        self.seen_by: dict[tuple[str | None, str], dict[str, float]] = {}
        # (host, gpu uuid) -> the worker whose samples make its rows
        self.owner: dict[tuple[str | None, str], str] = {}
        # worker -> its recent (time, task groups, keys, waiting), for GPUs it shares
        self.recent: dict[str, deque[tuple[float, list[str], list[str], str | None]]] = {}
        self.workers: dict[str, Any] = {}  # worker -> start reply (devices or error)
        self.hosts: dict[str, str] = {}  # worker -> host name, as the worker says
        self.batches: dict[str, int] = {}  # worker -> batches received on the stream
        self.sampler_cpu: dict[str, dict[str, Any]] = {}  # worker -> {cpu_seconds, samples}

    def trim(self) -> None:
        """Over the bound: every worker keeps its newest equal share (a tenth below
        the bound, so this runs rarely rather than on every batch)."""
        share = max(1, int(self.keep_rows * 0.9) // max(1, len(self.rows)))
        for rows in self.rows.values():
            while len(rows) > share:
                rows.popleft()
                self.dropped_rows += 1
                self.kept -= 1

    def config(self) -> dict[str, Any]:
        return {"monitor_id": self.id, "interval": self.interval, "metrics": self.metrics}

    def info(self) -> dict[str, Any]:
        return {
            "monitor_id": self.id,
            "metrics": self.metrics,
            "interval": self.interval,
            "started": self.started,
            "stopped": self.stopped,
            "running": self.stopped is None,
            "client": self.client,
            "n_rows": self.n_rows,
            "kept_rows": self.kept,
            "dropped_rows": self.dropped_rows,
            "worker_dropped_samples": dict(self.worker_dropped),
            "workers": self.workers,
            "hosts": self.hosts,
            "sampler_cpu": self.sampler_cpu,
            "shared": self.shared(),
        }

    def shared(self) -> list[dict[str, Any]]:
        """The GPUs more than one worker saw: [{host, gpu_uuid, owner, workers}]."""
        return [
            {"host": host, "gpu_uuid": u, "owner": self.owner.get((host, u)), "workers": sorted(ws)}
            for (host, u), ws in self.seen_by.items()
            if len(ws) > 1
        ]

    def rows_by_worker(self) -> dict[str, Any]:
        """Kept rows per worker, as tuples in ROW_FIELDS order."""
        return {
            "info": self.info(),
            "fields": list(ROW_FIELDS),
            "rows": {w: list(r) for w, r in self.rows.items()},
        }

    def peaks_by_worker(self) -> dict[str, Any]:
        """Each GPU's peak memory once, under the worker whose rows it is in; the others
        sharing it are named, not counted again."""
        out: dict[str, list[dict[str, Any]]] = {w: [] for w in self.workers}
        for (host, gpu_uuid), p in self.peaks.items():
            entry = {k: v for k, v in p.items() if k != "worker"}
            seen = sorted(self.seen_by.get((host, gpu_uuid), ()))
            sharers = seen if len(seen) > 1 else []
            out.setdefault(p["worker"], []).append(
                {**entry, "uuid": gpu_uuid, "host": host, "shared_by": sharers}
            )
        for gpus in out.values():
            gpus.sort(key=lambda g: (g["index"] if g["index"] is not None else 1 << 30, g["uuid"]))
        return {"monitor_id": self.id, "workers": out}


def ingest(
    run: MonitorRun,
    worker: str,
    host: str | None,
    samples: list[Sample],
    dropped: int,
    tag: Callable[[float, list[str], list[str]], list[tuple[Any, Any]]],
) -> list[dict[str, Any]]:
    """A worker's batch of samples into `run`: the rows of the GPUs it owns (kept, and
    returned for the store), each tagged with its (job, dag) pairs by `tag(time,
    groups, keys)` (gpu_jobs.JobTracker.tag)."""
    if dropped:
        run.worker_dropped[worker] = dropped
    if host:
        run.hosts[worker] = host
    host = run.hosts.get(worker, host)
    if worker not in run.workers:  # joined after start() and started sampling by itself
        run.workers[worker] = {"ok": True, "host": host, "joined_later": True}
    rows = run.rows.get(worker)
    if rows is None:
        rows = run.rows[worker] = deque()
    recent = run.recent.get(worker)
    if recent is None:
        recent = run.recent[worker] = deque(maxlen=RECENT_SAMPLES)
    out: list[dict[str, Any]] = []
    for sample in samples:
        t = sample["time"]
        groups = list(sample.get("task_groups") or ())
        keys = list(sample.get("keys") or ())
        waiting = None if groups else sample.get("waiting")
        recent.append((t, groups, keys, waiting))
        # Once per sample and set of workers sharing (not per GPU): tagging reads the
        # job windows.
        tagged: dict[tuple[str, ...], tuple[Any, ...]] = {}
        for g, seen in _owned(run, worker, host, t, sample.get("gpus") or ()):
            others = tuple(sorted(w for w in seen if w != worker))
            if others not in tagged:
                near = 1.5 + 2 * run.interval  # a sharer's sample this near in time is merged
                g_groups, g_keys, g_waiting = _merged(run, t, groups, keys, waiting, others, near)
                tagged[others] = (g_groups, g_waiting, tag(t, g_groups, g_keys))
            g_groups, g_waiting, pairs = tagged[others]
            row = _row(run, t, g, g_groups, g_waiting, pairs, seen)
            out.append(row)
            rows.append(tuple(row[f] for f in ROW_FIELDS))
            _peak(run, worker, host, row)
    run.n_rows += len(out)
    run.kept += len(out)
    if run.kept > run.keep_rows:
        run.trim()
    return out


def _owned(
    run: MonitorRun, worker: str, host: str | None, t: float, gpus: Iterable[Reading]
) -> list[tuple[Reading, dict[str, float]]]:
    """The GPUs of a sample whose rows `worker` makes (each with the workers that see
    it): a device's first reporter owns it until it is silent for a while."""
    stale = max(5.0, 20 * run.interval)  # an owner this long silent hands its GPUs on
    mine = []
    for g in gpus:
        device = (host, g["gpu_uuid"])
        seen = run.seen_by.get(device)
        if seen is None:
            seen = run.seen_by[device] = {}
        seen[worker] = t
        owner = run.owner.get(device)
        if owner is None or (owner != worker and t - seen.get(owner, t) > stale):
            owner = run.owner[device] = worker
        if owner == worker:
            mine.append((g, seen))
    return mine


def _row(
    run: MonitorRun,
    t: float,
    g: Reading,
    groups: list[str],
    waiting: str | None,
    pairs: list[tuple[Any, Any]],
    seen: dict[str, float],
) -> dict[str, Any]:
    job, dag = pairs[0] if pairs else (None, None)
    return {
        "timestamp": round(t - run.started, 6),
        "time": t,
        "gpu_uuid": g.get("gpu_uuid"),
        "gpu_index": g.get("gpu_index"),
        "gpu_name": g.get("gpu_name"),
        "mem_used": g.get("mem_used"),
        "mem_total": g.get("mem_total"),
        "mem_util": g.get("mem_util"),
        "compute_util": g.get("compute_util"),
        "power_w": g.get("power_w"),
        "temperature_c": g.get("temperature_c"),
        "job": job,
        "dag": None if dag is None else str(dag),  # the store keeps dag as text
        "task_groups": groups,
        "waiting": waiting,
        "jobs": (
            [[j, None if d is None else str(d)] for j, d in pairs] if len(pairs) > 1 else None
        ),
        "shared_by": sorted(seen) if len(seen) > 1 else None,
    }


def _peak(run: MonitorRun, worker: str, host: str | None, row: dict[str, Any]) -> None:
    used = row["mem_used"]
    key = (host, row["gpu_uuid"])
    p = run.peaks.get(key)
    if p is None:
        p = run.peaks[key] = {
            "worker": worker,
            "index": row["gpu_index"],
            "name": row["gpu_name"],
            "peak": None,
            "mem_total": row["mem_total"],
        }
    if used is not None and (p["peak"] is None or used > p["peak"]):
        p["peak"] = used


def _merged(
    run: MonitorRun,
    t: float,
    groups: list[str],
    keys: list[str],
    waiting: str | None,
    others: tuple[str, ...],
    near: float,
) -> tuple[list[str], list[str], str | None]:
    """Task groups, keys and wait of a GPU's row: its owner's sample at `t` and, for each
    other worker sharing the GPU, that worker's sample nearest `t` (within `near` s)."""
    if not others:
        return groups, keys, waiting
    all_groups, all_keys, waits = set(groups), list(keys), [waiting]
    for other in others:
        best = None
        for entry in reversed(run.recent.get(other, ())):
            if best is None or abs(entry[0] - t) < abs(best[0] - t):
                best = entry
            elif entry[0] < t:
                break  # older still: farther
        if best is not None and abs(best[0] - t) <= near:
            all_groups.update(best[1])
            all_keys += best[2]
            waits.append(best[3])
    if all_groups:
        return sorted(all_groups), all_keys, None
    return [], [], next((w for w in _WAIT_ORDER if w in waits), waiting)
