"""The scheduler side of GPU monitoring.

`GPUMonitorPlugin` keeps the monitor's state on the scheduler, so any client (also
one that connects later) can stop it or read it; while a monitor runs (and only
then) keeps the worker sampler in the scheduler's worker-plugin registry, so every
worker, also one that joins later, samples; receives the workers' sample batches
on the batched stream; tags each sample with its `job` and `dag`; keeps the current run's rows (bounded) and
each GPU's peak memory; and forwards every batch to the store through the
analytics plugin's `emit("gpu_samples", ...)` when that plugin is registered.

job: the id of the Computation the executing task groups belong to (the one the
     store's `computation` rows carry).  Dask adds every graph submitted while the
     cluster is busy to the running Computation, so a task that submits tasks
     stays in its parent's job.
dag: the index of the graph submission within that computation, from the
     `update_graph` hook, as text ("0", "1", ...: the store's column is text).  None
     where it cannot be known (groups submitted before the monitor started).
jobs: every (job, dag) running on the cluster then, when more than one (the row's job
     and dag are the first): a sample taken while a computation runs belongs to it,
     also when its worker ran no task then (gpu_jobs.py).
waiting: on a sample whose workers ran no task, what they waited on (inputs, memory,
     nothing: gpu_sampler.py).

A GPU is one device wherever it is seen, known by (host, uuid): two workers that
share one (CUDA_VISIBLE_DEVICES shared, as in a LocalCluster on a one-GPU machine) both
sample it, and only the first to report it (its owner, until its samples stop) makes
its rows.  Those rows carry the task groups of every worker sharing it, each taken
from that worker's sample nearest in time (batches arrive about a second apart, so a
sharer's groups may be that old), and name the workers in `shared_by`.  Peaks, CSVs,
charts and the store then count the device once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict, deque
from typing import Any, TypedDict

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps
from distributed.protocol.serialize import Serialized, deserialize

from . import gpu_nvml
from .gpu_jobs import JobTracker
from .gpu_sampler import PLUGIN_NAME as WORKER_PLUGIN_NAME
from .gpu_sampler import (
    STREAM_OP,
    WAIT_INPUTS,
    WAIT_MEMORY,
    WAIT_NOTHING,
    GPUSamplerPlugin,
    Sample,
    probe_gpus,
)

logger = logging.getLogger("dask_analytics_lab.gpu")

PLUGIN_NAME = "dask-analytics-lab-gpu"
ANALYTICS_PLUGIN = "dask-analytics-lab"

# Rows of one run kept on the scheduler for Monitor.to_csv; the store has them all.
DEFAULT_KEEP_ROWS = 200_000
# Stopped runs kept for reading back (to_csv / peak_memory from another client).
KEEP_RUNS = 4
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


class GPUMonitorPlugin(SchedulerPlugin):
    name = PLUGIN_NAME
    idempotent = True

    def __init__(self) -> None:
        self._started = False

    # --- lifecycle ---------------------------------------------------------------------
    async def start(self, scheduler: Any) -> None:
        if self._started:
            return
        self._started = True
        self.scheduler = scheduler
        # Used only on a scheduler without the recorder (which counts graphs from its start).
        self._jobs = JobTracker()
        if self._recorder_jobs() is None:
            self._jobs.joined_late(scheduler)
        self.active: MonitorRun | None = None
        self.runs: OrderedDict[str, MonitorRun] = OrderedDict()
        self._lock = asyncio.Lock()  # start/stop one at a time, from any number of clients
        scheduler.stream_handlers[STREAM_OP] = self._on_samples
        scheduler.handlers.update(
            {
                "analytics_gpu_attach": self.attach,
                "analytics_gpu_start": self.start_monitor,
                "analytics_gpu_stop": self.stop_monitor,
                "analytics_gpu_info": self.info,
                "analytics_gpu_rows": self.get_rows,
                "analytics_gpu_peaks": self.get_peaks,
            }
        )
        # Nothing goes to the workers here: registering analytics must leave them as
        # they are (issue 14).  start_monitor installs the sampler, stop_monitor removes it.

    async def close(self) -> None:
        self.active = None

    def _recorder_jobs(self) -> JobTracker | None:
        return getattr(self.scheduler.plugins.get(ANALYTICS_PLUGIN), "jobs", None)

    @property
    def jobs(self) -> JobTracker:
        return self._recorder_jobs() or self._jobs

    def update_graph(
        self, scheduler: Any, *, tasks: list[Any] | None = None, **kwargs: Any
    ) -> None:
        if not self._started or self._recorder_jobs() is not None:
            return  # the recorder counts
        try:
            self._jobs.graph_submitted(scheduler, tasks)
        except Exception:  # a hook must never raise into the scheduler
            logger.exception("dask-analytics: GPU job tracking failed")

    # --- handlers (called by Monitor through the client) --------------------------------
    # Refusals are answered as {"error": ...} (the Monitor raises them on the client)
    # rather than raised here, where distributed would log each as a scheduler error.
    async def attach(self, metrics: list[str] | None = None, timeout: float = 30) -> dict[str, Any]:
        try:
            metrics = validate_metrics(metrics)
        except ValueError as e:
            return {"error": str(e)}
        replies = await self._probe(timeout)
        return {"metrics": metrics, "workers": replies}

    async def start_monitor(
        self,
        metrics: list[str] | None = None,
        interval: float = 0.1,
        keep_rows: int = DEFAULT_KEEP_ROWS,
        client: str | None = None,
        flush_interval: float = 1.0,
        timeout: float = 30,
    ) -> dict[str, Any]:
        try:
            metrics = validate_metrics(metrics)
        except ValueError as e:
            return {"error": str(e)}
        if not (isinstance(interval, (int, float)) and 0.001 <= interval <= 3600):
            return {"error": f"GPU sampling interval must be between 1ms and 1h, got {interval!r}"}
        async with self._lock:
            if self.active is not None:
                a = self.active
                return {
                    "error": (
                        f"a GPU monitor is already running on this cluster (id {a.id}, started "
                        f"{time.strftime('%H:%M:%S', time.localtime(a.started))}); stop it first: Monitor(client).stop()"
                    )
                }
            run = MonitorRun(
                metrics=metrics, interval=float(interval), keep_rows=int(keep_rows), client=client
            )
            self.jobs.seed(self.scheduler)
            self.jobs.active = True
            self.active = run
            self.runs[run.id] = run
            while len(self.runs) > KEEP_RUNS + 1:
                self.runs.popitem(last=False)
            cfg = dict(run.config(), flush_interval=flush_interval)
            await self._install_sampler(cfg, timeout)
            # Workers that set the plugin up are sampling already (same monitor id: a
            # no-op there); this collects each one's devices or why it has none.
            run.workers = await self._broadcast(dict(cfg, op="analytics_gpu_start"), timeout)
            return run.info()

    async def stop_monitor(
        self, monitor_id: str | None = None, timeout: float = 30
    ) -> dict[str, Any] | None:
        async with self._lock:
            run = self.active
            if run is None or (monitor_id is not None and run.id != monitor_id):
                return None
            # Out of the registry first, so no worker joining from now on samples.
            self.scheduler.worker_plugins.pop(WORKER_PLUGIN_NAME, None)
            replies = await self._broadcast(
                {"op": "analytics_gpu_stop", "monitor_id": run.id}, timeout
            )
            # Batches already on the stream arrive on another connection than the
            # replies: wait (briefly) until each worker's count is in, so the rows are
            # complete when stop() returns.
            expected = {
                w: r["batches_sent"]
                for w, r in replies.items()
                if isinstance(r, dict) and "batches_sent" in r
            }
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(
                run.batches.get(w, 0) < n for w, n in expected.items()
            ):
                await asyncio.sleep(0.02)
            for worker, reply in replies.items():
                if isinstance(reply, dict) and "samples" in reply:
                    self._ingest(
                        run, worker, reply.get("host"), reply["samples"], reply.get("dropped", 0)
                    )
                    run.sampler_cpu[worker] = {
                        "cpu_seconds": reply.get("cpu_seconds"),
                        "samples": reply.get("samples_taken"),
                        "interval": reply.get("interval"),
                    }
            run.stopped = time.time()
            self.active = None
            self.jobs.active = False
            await self._remove_sampler(timeout)
            return run.info()

    def _run(self, monitor_id: str | None) -> MonitorRun | None:
        if monitor_id is not None:
            return self.runs.get(monitor_id)
        return self.active or (next(reversed(self.runs.values())) if self.runs else None)

    def info(self, monitor_id: str | None = None) -> dict[str, Any] | None:
        run = self._run(monitor_id)
        return run.info() if run is not None else None

    def get_rows(self, monitor_id: str | None = None) -> dict[str, Any] | None:
        """Kept rows of a run (the latest when no id), per worker, as tuples in ROW_FIELDS order."""
        run = self._run(monitor_id)
        if run is None:
            return None
        return {
            "info": run.info(),
            "fields": list(ROW_FIELDS),
            "rows": {w: list(rows) for w, rows in run.rows.items()},
        }

    def get_peaks(self, monitor_id: str | None = None) -> dict[str, Any] | None:
        run = self._run(monitor_id)
        if run is None:
            return None
        # Each GPU once, under the worker whose rows it is in; the others sharing it
        # are named, not counted again.
        out: dict[str, list[dict[str, Any]]] = {w: [] for w in run.workers}
        for (host, gpu_uuid), p in run.peaks.items():
            entry = {k: v for k, v in p.items() if k != "worker"}
            seen = sorted(run.seen_by.get((host, gpu_uuid), ()))
            sharers = seen if len(seen) > 1 else []
            out.setdefault(p["worker"], []).append(
                {**entry, "uuid": gpu_uuid, "host": host, "shared_by": sharers}
            )
        for gpus in out.values():
            gpus.sort(key=lambda g: (g["index"] if g["index"] is not None else 1 << 30, g["uuid"]))
        return {"monitor_id": run.id, "workers": out}

    async def _install_sampler(self, settings: dict[str, Any], timeout: float) -> None:
        """Put the sampler, with this run's settings, on every worker now and on every
        worker that joins while it is registered (the scheduler sends registered worker
        plugins to each worker as it joins)."""
        try:
            # idempotent=False: replaces a sampler left by an earlier run (its settings).
            await asyncio.wait_for(
                self.scheduler.register_worker_plugin(
                    None,
                    dumps(GPUSamplerPlugin(settings)),
                    name=WORKER_PLUGIN_NAME,
                    idempotent=False,
                ),
                timeout,
            )
        except Exception:
            # The start broadcast then names each worker that lacks it.
            logger.exception("dask-analytics: could not install the GPU sampler on every worker")

    async def _remove_sampler(self, timeout: float) -> None:
        self.scheduler.worker_plugins.pop(WORKER_PLUGIN_NAME, None)
        workers = list(self.scheduler.workers)
        if not workers:
            return
        try:
            await asyncio.wait_for(
                self.scheduler.broadcast(
                    msg={"op": "plugin-remove", "name": WORKER_PLUGIN_NAME},
                    workers=workers,
                    on_error="ignore",
                ),
                timeout,
            )
        except Exception as e:
            logger.info("dask-analytics: could not take the GPU sampler off every worker: %r", e)

    async def _ask_every_worker(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Each worker's reply to `msg`, asked at once; an exception as the reply of a
        worker that failed, or of every worker when no answer came within `timeout`."""
        workers = list(self.scheduler.workers)
        if not workers:
            return {}
        try:
            replies: dict[str, Any] = await asyncio.wait_for(
                self.scheduler.broadcast(msg=msg, workers=workers, on_error="return"), timeout
            )
            return replies
        except TimeoutError:
            return {w: TimeoutError(f"no answer within {timeout}s") for w in workers}

    async def _probe(self, timeout: float) -> dict[str, Any]:
        """Each worker's GPUs, looked at by running `probe_gpus` out of band (as
        client.run does): attach installs nothing on the workers."""
        out: dict[str, Any] = {}
        for w, reply in (
            await self._ask_every_worker({"op": "run", "function": dumps(probe_gpus)}, timeout)
        ).items():
            if isinstance(reply, dict) and reply.get("status") == "OK":
                result = reply.get("result")
                if isinstance(result, Serialized):  # the scheduler's comms do not deserialize
                    result = deserialize(result.header, result.frames)
                reply = result
            elif isinstance(reply, dict) and reply.get("status") == "error":
                reply = {
                    "ok": False,
                    "error": f"the GPU probe failed there: {reply.get('text') or reply.get('exception')}",
                }
            elif isinstance(reply, Exception):
                reply = {"ok": False, "error": f"{type(reply).__name__}: {reply}"}
            if not isinstance(reply, dict):
                reply = {"ok": False, "error": f"unexpected answer to the GPU probe: {reply!r}"}
            out[w] = self._with_heartbeat(w, reply)
        return out

    async def _broadcast(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Ask every worker; a worker that fails or lacks the sampler gets an error entry."""
        out: dict[str, Any] = {}
        for w, reply in (await self._ask_every_worker(msg, timeout)).items():
            if reply is None and msg["op"] != "analytics_gpu_stop":
                # A worker without the handler answers None (and logs "No handler").
                reply = {
                    "ok": False,
                    "error": "the dask-analytics-lab GPU sampler is not installed on this worker",
                }
            elif isinstance(reply, Exception):
                reply = {"ok": False, "error": f"{type(reply).__name__}: {reply}"}
            out[w] = self._with_heartbeat(w, reply)
        return out

    def _with_heartbeat(self, worker: str, reply: Any) -> Any:
        if isinstance(reply, dict) and reply.get("ok") is False:
            # Reuse what distributed already knows: a heartbeat with GPU figures
            # means a GPU is there and only our sampler is missing or failing.
            hb = heartbeat_gpu(self.scheduler, worker)
            if hb:
                reply["heartbeat_gpu"] = hb
        return reply

    # --- samples from the workers (batched stream; event loop) -----------------------------
    def _on_samples(
        self,
        worker: str,
        monitor_id: str | None = None,
        host: str | None = None,
        samples: list[Sample] | None = None,
        dropped: int = 0,
        **_: Any,
    ) -> None:
        try:
            # A late batch of a stopped run still counts.
            run = self.runs.get(monitor_id) if monitor_id is not None else None
            if run is None:
                return
            run.batches[worker] = run.batches.get(worker, 0) + 1
            self._ingest(run, worker, host, samples or [], dropped)
        except Exception:
            logger.exception("dask-analytics: bad GPU sample batch from %s", worker)

    def _ingest(
        self, run: MonitorRun, worker: str, host: str | None, samples: list[Sample], dropped: int
    ) -> None:
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
        if not samples:
            return
        jobs = self.jobs
        try:
            jobs.observe(self.scheduler)
        except Exception:  # a fake or odd Computation: tag by the groups alone
            logger.debug("dask-analytics: GPU job windows not updated", exc_info=True)
        recent = run.recent.get(worker)
        if recent is None:
            recent = run.recent[worker] = deque(maxlen=RECENT_SAMPLES)
        stale = max(5.0, 20 * run.interval)  # an owner this long silent hands its GPUs on
        near = 1.5 + 2 * run.interval  # a sharer's sample this near in time is merged
        out: list[dict[str, Any]] = []
        for sample in samples:
            t = sample["time"]
            groups = list(sample.get("task_groups") or ())
            keys = list(sample.get("keys") or ())
            waiting = None if groups else sample.get("waiting")
            recent.append((t, groups, keys, waiting))
            mine = []
            for g in sample.get("gpus") or ():
                device = (host, g.get("gpu_uuid"))
                seen = run.seen_by.get(device)
                if seen is None:
                    seen = run.seen_by[device] = {}
                seen[worker] = t
                owner = run.owner.get(device)
                if owner is None or (owner != worker and t - seen.get(owner, t) > stale):
                    owner = run.owner[device] = worker
                if owner == worker:
                    mine.append((g, seen))
            if not mine:
                continue
            # Once per sample and set of workers sharing (not per GPU): tagging reads
            # the job windows.
            tagged: dict[tuple[str, ...], tuple[Any, ...]] = {}
            for g, seen in mine:
                others = tuple(sorted(w for w in seen if w != worker))
                if others not in tagged:
                    g_groups, g_keys, g_waiting = _merged(
                        run, t, groups, keys, waiting, others, near
                    )
                    pairs = jobs.tag(self.scheduler, t, g_groups, g_keys)
                    tagged[others] = (g_groups, g_waiting, pairs)
                g_groups, g_waiting, pairs = tagged[others]
                job, dag = pairs[0] if pairs else (None, None)
                row: dict[str, Any] = {
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
                    "task_groups": g_groups,
                    "waiting": g_waiting,
                    "jobs": (
                        [[j, None if d is None else str(d)] for j, d in pairs]
                        if len(pairs) > 1
                        else None
                    ),
                    "shared_by": sorted(seen) if len(seen) > 1 else None,
                }
                out.append(row)
                rows.append(tuple(row[f] for f in ROW_FIELDS))
                self._peak(run, worker, host, row)
        run.n_rows += len(out)
        run.kept += len(out)
        if run.kept > run.keep_rows:
            run.trim()
        analytics = self.scheduler.plugins.get(ANALYTICS_PLUGIN)
        if analytics is not None and out:
            analytics.emit(
                "gpu_samples",
                {"worker": worker, "host": host, "monitor_id": run.id, "samples": out},
            )

    @staticmethod
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


def heartbeat_gpu(scheduler: Any, worker: str) -> dict[str, Any] | None:
    """The one GPU distributed itself reports in the worker's heartbeats, if any.

    distributed's SystemMonitor puts the first visible GPU's figures into every
    heartbeat (WorkerState.metrics: gpu_utilization, gpu_memory_used,
    gpu-memory-total; 2026.8 no longer fills metrics["gpu"]).  One GPU, no UUID,
    heartbeat rate: not enough to sample from, but proof that NVML works there.
    """
    ws = scheduler.workers.get(worker)
    if ws is None:
        return None
    m = ws.metrics
    legacy = m.get("gpu")  # older distributed: {"utilization", "memory-used"}
    if isinstance(legacy, dict) and legacy:
        return dict(legacy)
    if m.get("gpu_memory_used") is None and m.get("gpu_utilization") is None:
        return None
    return {
        "utilization": m.get("gpu_utilization"),
        "memory-used": m.get("gpu_memory_used"),
        "memory-total": m.get("gpu-memory-total"),
    }


def validate_metrics(metrics: list[str] | tuple[str, ...] | None) -> list[str]:
    """The dask-metrics names, checked: a wrong name fails here, naming the allowed ones."""
    if metrics is None:
        return list(gpu_nvml.DEFAULT_METRICS)
    if isinstance(metrics, str):
        metrics = [metrics]
    bad = [m for m in metrics if m not in gpu_nvml.METRICS]
    if bad:
        raise ValueError(
            f"unknown GPU metric(s) {bad}; choose from {list(gpu_nvml.METRICS)} "
            "(job, dag and timestamp are always recorded)"
        )
    return list(dict.fromkeys(metrics))
