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

A run's rows and peaks are gpu_run.py's (free of Dask); the word with the workers
(installing the sampler, probing, asking each) is gpu_workers.py's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from . import gpu_nvml, sources
from .gpu_jobs import JobTracker
from .gpu_run import ROW_FIELDS, MonitorRun, ingest
from .gpu_sample import Sample
from .gpu_sampler import PLUGIN_NAME as WORKER_PLUGIN_NAME
from .gpu_sampler import STREAM_OP
from .gpu_workers import broadcast, install_sampler, probe, remove_sampler

__all__ = ["ROW_FIELDS", "GPUMonitorPlugin", "MonitorRun", "validate_metrics"]

logger = logging.getLogger("dask_analytics_lab.gpu")

PLUGIN_NAME = "dask-analytics-lab-gpu"

ANALYTICS_PLUGIN = "dask-analytics-lab"


# Rows of one run kept on the scheduler for Monitor.to_csv; the store has them all.
DEFAULT_KEEP_ROWS = 200_000

# Stopped runs kept for reading back (to_csv / peak_memory from another client).
KEEP_RUNS = 4


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
            sources.of(scheduler).observe_graph(scheduler, tasks)
            self._jobs.graph_submitted(scheduler, tasks)
        except Exception:  # a hook must never raise into the scheduler
            logger.exception("dask-analytics: GPU job tracking failed")

    def restart(self, scheduler: Any) -> None:
        """`client.restart()`: the computations made from spans go as Dask's own do (the
        recorder does the same; twice is harmless)."""
        if not self._started:
            return
        try:
            sources.of(scheduler).restart()
        except Exception:  # a hook must never raise into the scheduler
            logger.exception("dask-analytics: GPU job tracking failed at a restart")

    # --- handlers (called by Monitor through the client) --------------------------------
    # Refusals are answered as {"error": ...} (the Monitor raises them on the client)
    # rather than raised here, where distributed would log each as a scheduler error.
    async def attach(self, metrics: list[str] | None = None, timeout: float = 30) -> dict[str, Any]:
        try:
            metrics = validate_metrics(metrics)
        except ValueError as e:
            return {"error": str(e)}
        replies = await probe(self.scheduler, timeout)
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
            await install_sampler(self.scheduler, cfg, timeout)
            # Workers that set the plugin up are sampling already (same monitor id: a
            # no-op there); this collects each one's devices or why it has none.
            run.workers = await broadcast(
                self.scheduler, dict(cfg, op="analytics_gpu_start"), timeout
            )
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
            replies = await broadcast(
                self.scheduler, {"op": "analytics_gpu_stop", "monitor_id": run.id}, timeout
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
            await remove_sampler(self.scheduler, timeout)
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
        return run.rows_by_worker() if run is not None else None

    def get_peaks(self, monitor_id: str | None = None) -> dict[str, Any] | None:
        run = self._run(monitor_id)
        return run.peaks_by_worker() if run is not None else None

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
        """A worker's batch into the run's rows (gpu_run.py), and on to the store."""
        jobs, scheduler = self.jobs, self.scheduler
        if samples:
            try:
                jobs.observe(scheduler)
            except Exception:  # a fake or odd Computation: tag by the groups alone
                logger.debug("dask-analytics: GPU job windows not updated", exc_info=True)
        out = ingest(
            run, worker, host, samples, dropped, lambda t, g, k: jobs.tag(scheduler, t, g, k)
        )
        analytics = scheduler.plugins.get(ANALYTICS_PLUGIN)
        if analytics is not None and out:
            analytics.emit(
                "gpu_samples",
                {
                    "worker": worker,
                    "host": run.hosts.get(worker, host),
                    "monitor_id": run.id,
                    "samples": out,
                },
            )


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
