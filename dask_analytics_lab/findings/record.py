"""What the rules read: one computation's record, gathered through a reader's read methods
(the Store's, scoped to an account on a team server) - the queries every view uses, no
SQL of its own.  Everything a rule needs is read here once, bounded, so explaining a
computation of 100,000 tasks stays a handful of reads (its task stream is then binned).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ..store_errors import NotFound
from .stream import Columns, columns

# A worker-left event lands up to a few seconds after the departure it reports
# (collect/workers.py waits for a late reason): read a little past the computation.
EVENT_SLACK = 10.0
STREAM_LIMIT = 100_000
SAMPLE_LIMIT = 20_000
# What the rules read of each row of the task stream (stream.py): not its id or state.
STREAM_FIELDS = (
    "worker",
    "thread",
    "prefix",
    "task_group",
    "start",
    "stop",
    "n_tasks",
    "busy",
    "binned",
)
RUNS_LIMIT = 20  # runs of the same code read: the spread of the recent ones
# A long computation's worker samples are read at its start, middle and end, one sample
# interval each (which workers were there, their threads, what they had spilled), not
# every one: 100 workers sampled every 5 s for 10 minutes are 12,000 rows, ~150 ms to read.
SAMPLE_MOMENTS = 3


@dataclass
class Record:
    comp: dict
    cluster: dict
    stream: list[dict]
    samples: list[dict]
    exceptions: list[dict]
    events: list[dict]
    compare: dict | None  # None without two earlier runs (slower-than-before needs them)
    # Earlier finished runs of the same code with as many tasks, newest first (list_runs).
    runs: list[dict]
    later: list[dict]
    settings: dict
    # GPU samples (list_gpu_metrics) of the computation's cluster during it, if a Monitor ran
    gpu: list[dict] = field(default_factory=list)
    memo: dict = field(default_factory=dict)  # what the rules derive once and share

    @property
    def start(self) -> float:
        return self.comp["start"]

    @property
    def stop(self) -> float:
        """When it ended; for one still running, the last thing it did (or now)."""
        if self.comp.get("stop") is not None:
            return self.comp["stop"]
        ends = [g["stop"] for g in self.comp.get("groups") or [] if g.get("stop")]
        return max(ends) if ends else time.time()

    @property
    def wall(self) -> float:
        return max(0.0, self.stop - self.start)

    @property
    def ideal(self) -> float:
        """The wall time the work needed at best: its CPU time (execute thread-cpu, fine
        metrics; the task groups' compute without them) over the threads.  Waiting - for
        the GIL, a free core, I/O - is not work, so it is not in the ideal."""
        cpu = sum(self.metric("thread-cpu", context="execute").values())
        if cpu <= 0:
            cpu = sum(g.get("compute") or 0.0 for g in self.groups)
        return cpu / self.threads

    @property
    def groups(self) -> list[dict]:
        return self.comp.get("groups") or []

    @property
    def metrics(self) -> list[dict]:
        return self.comp.get("metrics") or []

    def worker_threads(self) -> dict[str, int]:
        """Threads of each worker that was there during the computation (worker samples;
        without them, the workers the task stream names, with the threads it saw)."""
        if "threads" not in self.memo:
            threads: dict[str, int] = {}
            for s in self.samples:
                if s.get("nthreads"):
                    threads[s["worker"]] = max(threads.get(s["worker"], 0), int(s["nthreads"]))
            if not threads:
                seen: dict[str, set] = {}
                for r in self.stream:
                    if r.get("worker"):
                        seen.setdefault(r["worker"], set()).add(r.get("thread"))
                threads = {w: len(t) for w, t in seen.items()}
            self.memo["threads"] = threads
        return self.memo["threads"]

    @property
    def threads(self) -> int:
        """Threads the computation could use: of the workers there, else the cluster's peak."""
        n = sum(self.worker_threads().values())
        return n or int(self.cluster.get("peak_threads") or self.cluster.get("n_threads") or 1)

    @property
    def columns(self) -> Columns:
        """The task stream as columns (stream.py), built at the first rule that asks."""
        if "columns" not in self.memo:
            self.memo["columns"] = columns(self.stream)
        return self.memo["columns"]

    def medians(self) -> dict[str, float]:
        """Each task group's median task time ({} when the stream is binned)."""
        return self.columns.medians()

    def metric(
        self, activity: str, *, unit: str = "seconds", context: str | None = None
    ) -> dict[str | None, float]:
        """A fine performance metric summed by prefix (None: not tied to a task)."""
        if "metrics" not in self.memo:  # one pass: the rules ask for dozens
            sums: dict[tuple, dict[str | None, float]] = {}
            for m in self.metrics:
                for ctx in (m["context"], None):
                    by = sums.setdefault((m["activity"], m["unit"], ctx), {})
                    by[m["prefix"]] = by.get(m["prefix"], 0.0) + float(m["value"] or 0.0)
            self.memo["metrics"] = sums
        return dict(self.memo["metrics"].get((activity, unit, context), {}))


def _seconds(value: Any) -> float | None:
    """A recorded interval or timeout: a positive finite number of seconds, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _with_settings_checked(cluster: dict) -> dict:
    """The cluster with the settings the rules compute with made numbers or None.

    `settings` is the cluster message's free JSON object, stored as sent: anyone who may
    ingest can send a string, a list or an object there, and a rule must not fail (a 500
    for every computation of that cluster) on it."""
    settings = cluster.get("settings")
    settings = dict(settings) if isinstance(settings, dict) else {}
    for key in ("interval", "workers_interval", "idle_timeout"):
        settings[key] = _seconds(settings.get(key))
    return {**cluster, "settings": settings}


def _samples(
    reader: Any, cluster_id: str, start: float, stop: float, cluster: dict, account: str | None
) -> list[dict]:
    """The workers' samples during [start, stop]: all of them for a computation of up
    to 10 sample intervals, else those of SAMPLE_MOMENTS evenly spread moments (one
    interval's worth each)."""
    interval = (cluster.get("settings") or {}).get("workers_interval") or 5.0
    if stop - start <= 10 * interval:
        return reader.list_worker_samples(
            cluster_id, account=account, since=start, until=stop, limit=SAMPLE_LIMIT
        )
    out: list[dict] = []
    for k in range(SAMPLE_MOMENTS):
        at = start + (stop - start - interval) * k / (SAMPLE_MOMENTS - 1)
        out += reader.list_worker_samples(
            cluster_id,
            account=account,
            since=at,
            until=at + interval,
            limit=SAMPLE_LIMIT // SAMPLE_MOMENTS,
        )
    return out


def read(reader: Any, computation_id: str, *, account: str | None = None, settings: dict) -> Record:
    """The record of one computation; NotFound (like every read) for an id the caller
    may not see."""
    comp = reader.get_computation(computation_id, account=account)
    # The stored id from here on: the one asked for may be a short prefix of it, and every
    # read after this one must see the same computation.
    computation_id = comp["computation_id"]
    cluster = _with_settings_checked(reader.get_cluster(comp["cluster_id"], account=account))
    start = comp["start"]
    stop = comp.get("stop") or cluster.get("ended") or time.time()
    stream = reader.list_task_stream(
        computation_id, account=account, limit=STREAM_LIMIT, fields=STREAM_FIELDS
    )
    samples = _samples(reader, comp["cluster_id"], start, stop, cluster, account)
    exceptions = reader.list_exceptions(computation_id=computation_id, account=account, limit=100)
    events = reader.list_events(
        cluster_id=comp["cluster_id"],
        account=account,
        since=start,
        until=stop + EVENT_SLACK,
        limit=1000,
    )
    runs = [
        r
        for r in reader.list_runs(computation_id, account=account, limit=RUNS_LIMIT)
        if r["computation_id"] != computation_id
        and r.get("state") == "finished"
        and (r.get("start") or 0) < start
        and r.get("n_tasks") == comp.get("n_tasks")
        and r.get("wall")
    ]
    compared = None
    if len(runs) >= 2:  # what slower-than-before needs before it reads the comparison
        try:
            compared = reader.compare(computation_id, account=account)
        except NotFound:  # recorded without a fingerprint: no earlier run to name
            pass
    # Two: is there any computation after this one on its cluster?
    later = [
        c
        for c in reader.list_computations(
            cluster_id=comp["cluster_id"], account=account, since=start, limit=2
        )
        if c["computation_id"] != computation_id
    ]
    # The same read every GPU view makes; a reader without it (an older server) has none.
    list_gpu = getattr(reader, "list_gpu_metrics", None)
    gpu = (
        list_gpu(
            cluster_id=comp["cluster_id"],
            account=account,
            since=start,
            until=stop,
            limit=SAMPLE_LIMIT,
        )
        if list_gpu is not None
        else []
    )
    return Record(
        comp=comp,
        cluster=cluster,
        stream=stream,
        samples=samples,
        exceptions=exceptions,
        events=events,
        compare=compared,
        runs=runs,
        later=later,
        settings=settings,
        gpu=gpu,
    )
