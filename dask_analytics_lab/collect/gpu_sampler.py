"""The worker side of GPU monitoring: a WorkerPlugin that samples NVML on a thread.

Workers carry nothing of this until a Monitor starts: the scheduler's GPU monitor
then registers the plugin, with the run's settings, in the scheduler's worker-plugin
registry, so every worker has it and a worker that joins during the run gets it
(and starts sampling) as it registers, with no call of its own to the scheduler.
When the run stops, the scheduler takes the plugin off every worker again.
Monitor.attach looks at GPUs with `probe_gpus`, run out of band: it installs nothing.

While a run is on, a daemon thread reads every device each `interval` and notes
which task groups are executing on this worker then; the event loop only moves
finished batches into the worker's batched stream to the scheduler, so nothing
here can block the worker's event loop.

The scheduler talks to it through three worker RPC handlers:
  analytics_gpu_probe  -> what GPUs this worker has
  analytics_gpu_start  -> start sampling for a monitor run
  analytics_gpu_stop   -> stop; returns the last, unsent batch and the count of
                          batches sent, so the scheduler can wait for all of them.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections import deque
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import key_split_group

from . import gpu_nvml
from .gpu_sample import WAIT_INPUTS, WAIT_MEMORY, WAIT_NOTHING, Sample

logger = logging.getLogger("dask_analytics_lab.gpu")

PLUGIN_NAME = "dask-analytics-lab-gpu"
STREAM_OP = "analytics-gpu-samples"

# Samples kept on the worker when the event loop cannot ship them (stalled loop, no
# connection): past this the oldest go and are counted.
MAX_BUFFERED_SAMPLES = 10_000
# Keys sent with a sample when at most this many tasks run (GPU workers run one or
# a few); past it, groups only.
MAX_KEYS = 32


class SamplingRun:
    """One monitor run on one worker: the thread, its buffer and its counters."""

    def __init__(
        self,
        worker: Any,
        reader: gpu_nvml.GPUReader,
        *,
        monitor_id: str,
        interval: float,
        metrics: list[str],
        flush_interval: float,
    ):
        self.worker = worker
        self.reader = reader
        self.monitor_id = monitor_id
        self.interval = interval
        self.metrics = frozenset(metrics)
        self.flush_interval = flush_interval
        self.host = socket.gethostname()
        self.loop = worker.loop  # tornado IOLoop: add_callback is the thread-safe way in
        self._lock = threading.Lock()
        self._buffer: deque[Sample] = deque(maxlen=MAX_BUFFERED_SAMPLES)
        self._stop = threading.Event()
        self._closed = False
        self._flush_pending = False
        # task key -> (group name, key as text), so a long task is parsed once
        self._group_of: dict[Any, tuple[str, str]] = {}
        self.dropped = 0
        self.batches_sent = 0
        self.samples_taken = 0
        self.cpu_seconds = 0.0  # the sampler thread's own CPU time (benchmarks/gpu_check.py)
        self.thread = threading.Thread(
            target=self._run, name=f"dask-analytics-gpu-{monitor_id[:8]}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    # --- on the sampling thread ----------------------------------------------------
    def _run(self) -> None:
        cpu0 = time.thread_time()
        last_flush = time.monotonic()
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                self._sample_once()
                now = time.monotonic()
                if now - last_flush >= self.flush_interval:
                    last_flush = now
                    self._request_flush()
                self.cpu_seconds = time.thread_time() - cpu0
                if not self.reader.devices:
                    logger.warning(
                        "every GPU of worker %s vanished; GPU sampling stops", self.worker.address
                    )
                    break
                next_at += self.interval
                if next_at < now:  # fell behind (suspended VM, slow driver): skip, don't burst
                    next_at = now + self.interval
                self._stop.wait(next_at - time.monotonic())
        except Exception:
            logger.exception("GPU sampling on worker %s failed; it stops", self.worker.address)
        finally:
            self.cpu_seconds = time.thread_time() - cpu0
            self.reader.close()

    def _sample_once(self) -> None:
        t = time.time()
        groups, keys = self._executing()
        gpus = self.reader.read(self.metrics)
        sample: Sample = {"time": t, "task_groups": groups, "gpus": gpus}
        if keys:
            sample["keys"] = keys
        if not groups:
            sample["waiting"] = self._waiting_on()
        with self._lock:
            if len(self._buffer) == self._buffer.maxlen:
                self.dropped += 1
            self._buffer.append(sample)
        self.samples_taken += 1

    def _executing(self) -> tuple[list[str], list[str]]:
        """Task groups (and, up to MAX_KEYS, keys) running on this worker now, read
        from another thread.  Keys let the scheduler tell apart two submissions of
        the same group; they are not stored.

        The event loop mutates these sets while we read: copying a set is one C call
        under the GIL, but a free-threaded build can still raise "changed size during
        iteration", so retry; after that, report nothing rather than fail.
        """
        state = self.worker.state
        tasks: list[Any] = []
        for _ in range(5):
            try:
                tasks = [*state.executing.copy(), *state.long_running.copy()]
                break
            except RuntimeError:
                continue
        names: set[str] = set()
        keys: list[str] = []
        group_of = self._group_of
        for ts in tasks:
            key = ts.key
            found = group_of.get(key)
            if found is None:
                if len(group_of) > 4096:
                    group_of.clear()
                found = group_of[key] = (key_split_group(key), str(key))
            names.add(found[0])
            keys.append(found[1])
        return sorted(names), (sorted(keys) if len(keys) <= MAX_KEYS else [])

    def _waiting_on(self) -> str:
        """What this worker, running no task, waits on.  O(1): counters and set sizes
        of the worker's state machine, read without a lock (a stale answer by one event
        loop step is as good as any at 10 Hz)."""
        state = self.worker.state
        try:
            if not state.running:
                return WAIT_MEMORY
            if state.in_flight_tasks or state.fetch_count or state.waiting:
                return WAIT_INPUTS
        except (AttributeError, RuntimeError):
            pass
        return WAIT_NOTHING

    def _request_flush(self) -> None:
        with self._lock:
            if self._flush_pending or not self._buffer:
                return
            self._flush_pending = True
        self.loop.add_callback(self.flush)

    # --- on the event loop ----------------------------------------------------------
    def take(self) -> list[Sample]:
        with self._lock:
            batch = list(self._buffer)
            self._buffer.clear()
            self._flush_pending = False
        return batch

    def flush(self) -> None:
        """Move buffered samples into the batched stream (non-blocking; event loop only)."""
        if self._closed:
            return
        batch = self.take()
        if not batch:
            return
        self.batches_sent += 1
        self.worker.batched_send(
            {
                "op": STREAM_OP,
                "monitor_id": self.monitor_id,
                "host": self.host,
                "batch": self.batches_sent,
                "samples": batch,
                "dropped": self.dropped,
            }
        )

    def request_stop(self) -> None:
        self._stop.set()

    def close(self) -> dict[str, Any]:
        """After the thread ended: the unsent samples and the counters, for the stop reply."""
        self._closed = True
        return {
            "monitor_id": self.monitor_id,
            "host": self.host,
            "samples": self.take(),
            "batches_sent": self.batches_sent,
            "samples_taken": self.samples_taken,
            "dropped": self.dropped,
            "cpu_seconds": self.cpu_seconds,
            "interval": self.interval,
        }


async def probe_gpus() -> dict[str, Any]:
    """What GPUs this worker has, for Monitor.attach.  Module level: the scheduler runs
    it on each worker out of band (the "run" op), so attach installs nothing there."""
    # nvmlInit can take seconds without persistence mode: off the event loop.
    result = await asyncio.to_thread(gpu_nvml.probe)
    result["host"] = socket.gethostname()
    return result


class GPUSamplerPlugin(WorkerPlugin):
    """Registered on the workers by the scheduler's GPUMonitorPlugin when a Monitor
    starts, with that run's settings (monitor_id, interval, metrics,
    flush_interval); without them it idles until told to start."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings = dict(settings) if settings else None
        self.run: SamplingRun | None = None

    def setup(self, worker: Any) -> None:
        self.worker = worker
        self.run = None
        self._starting = asyncio.Lock()
        worker.handlers["analytics_gpu_probe"] = self.probe
        worker.handlers["analytics_gpu_start"] = self.start_sampling
        worker.handlers["analytics_gpu_stop"] = self.stop_sampling
        # A worker that joins while a monitor runs gets this plugin, settings included,
        # from the scheduler's registry: it starts sampling without asking anything.
        # A task, so that opening NVML does not hold up the worker's registration.
        self._join_task = asyncio.ensure_future(self._join_running_monitor())

    async def teardown(self, worker: Any) -> None:
        for op in ("analytics_gpu_probe", "analytics_gpu_start", "analytics_gpu_stop"):
            worker.handlers.pop(op, None)
        # A start still opening NVML would leave a thread behind: let it finish first.
        join = getattr(self, "_join_task", None)
        if join is not None and not join.done():
            try:
                await join
            except Exception:
                pass
        await self.stop_sampling()

    async def _join_running_monitor(self) -> None:
        if self.settings:
            await self.start_sampling(**self.settings)

    # --- RPC handlers -------------------------------------------------------------------
    async def probe(self) -> dict[str, Any]:
        return await probe_gpus()

    async def start_sampling(
        self,
        monitor_id: str,
        interval: float = 0.1,
        metrics: list[str] | None = None,
        flush_interval: float = 1.0,
        **_: Any,
    ) -> dict[str, Any]:
        async with self._starting:
            if self.run is not None:
                if self.run.monitor_id == monitor_id:
                    return {
                        "ok": True,
                        "devices": self.run.reader.describe(),
                        "host": self.run.host,
                    }
                await self.stop_sampling()
            try:
                # nvmlInit can take seconds without persistence mode: off the event loop.
                reader = await asyncio.to_thread(gpu_nvml.GPUReader)
            except gpu_nvml.NVMLUnavailable as e:
                return {"ok": False, "error": str(e), "host": socket.gethostname()}
            except Exception as e:
                return {
                    "ok": False,
                    "host": socket.gethostname(),
                    "error": f"{gpu_nvml.NO_GPU}: NVML failed unexpectedly ({type(e).__name__}: {e})",
                }
            self.run = SamplingRun(
                self.worker,
                reader,
                monitor_id=monitor_id,
                interval=float(interval),
                metrics=list(metrics or gpu_nvml.DEFAULT_METRICS),
                flush_interval=float(flush_interval),
            )
            self.run.start()
            logger.info(
                "GPU sampling started on %s every %.3fs: %s",
                self.worker.address,
                interval,
                ", ".join(d.uuid for d in reader.devices),
            )
            return {"ok": True, "devices": reader.describe(), "host": self.run.host}

    async def stop_sampling(self, monitor_id: str | None = None, **_: Any) -> dict[str, Any] | None:
        run = self.run
        if run is None or (monitor_id is not None and run.monitor_id != monitor_id):
            return None
        self.run = None
        run.request_stop()
        # A sample in progress may sit in a slow driver call: wait off the event loop.
        await asyncio.to_thread(run.thread.join, 10)
        return run.close()
