"""The scheduler plugin: every `interval`, read what the scheduler aggregates and
turn it into messages for the store.

Everything here runs on the scheduler's event loop, so each step is O(task
groups + workers) and nothing blocks: writing happens on the shipper's thread,
profiles arrive by RPC.  No hook may raise into the scheduler.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import dask.config
from dask.utils import parse_timedelta
from distributed.diagnostics.plugin import SchedulerPlugin

from .. import messages
from ..urls import mask_url
from . import endings, sources, status
from .accounting import CostMeter
from .cluster import ClusterSampler, describe
from .computations import ComputationTracker
from .errors import ErrorCounter
from .events import EventLog, no_event
from .failures import Failures
from .gpu_jobs import JobTracker
from .hook import transition_hook
from .lost import LostTasks
from .metrics import MetricsRecorder
from .offloop import off_loop
from .profiles import ProfileFetcher
from .recording_end import RecordingEnd
from .retries import Retries
from .shipper import open_shipper
from .task_stream import TaskStreamRecorder
from .ticks import Ticks
from .workers import WorkerLifecycle, WorkerSampler

logger = logging.getLogger("dask_analytics_lab")

PLUGIN_NAME = "dask-analytics-lab"


def _optional_parts(
    emit: Callable[..., None], scheduler: Any, s: dict[str, Any]
) -> tuple[TaskStreamRecorder | None, MetricsRecorder | None, WorkerSampler | None]:
    """The parts a setting turns off (None then): each computation's task stream
    (analytics.task-stream.transmit), its share of Dask's fine performance metrics
    (analytics.metrics.transmit), each worker over time (analytics.workers.transmit)."""
    stream = (
        TaskStreamRecorder(
            emit,
            max_tasks=s.get("task_stream_max_tasks", 10_000),
            max_bins=s.get("task_stream_max_bins", 2_000),
        )
        if s.get("task_stream_transmit", True)
        else None
    )
    metrics = MetricsRecorder(emit, scheduler) if s.get("metrics_transmit", True) else None
    workers = (
        WorkerSampler(s.get("workers_interval", 5.0)) if s.get("workers_transmit", True) else None
    )
    return stream, metrics, workers


def _close_when_idle(scheduler: Any, seconds: float) -> None:
    """The scheduler's own idle timeout does the closing (Scheduler.check_idle); a
    shorter one set in distributed's config still wins.  Set last and counted from now:
    the time the store took to open, or a registering client's round trips, is not the
    user's idleness."""
    own = scheduler.idle_timeout
    scheduler.idle_timeout = seconds if not own else min(own, seconds)
    scheduler.idle_since = None


def _loop_running(loop: asyncio.AbstractEventLoop) -> Callable[[], bool]:
    """Whether the scheduler's event loop still runs (held weakly: the shipper's thread
    must not keep a closed scheduler's loop alive)."""
    ref = weakref.ref(loop)

    def alive() -> bool:
        current = ref()
        return current is not None and not current.is_closed()

    return alive


class AnalyticsPlugin(SchedulerPlugin):
    """Records a cluster's computations, task groups, errors, events and profiles.

    The hooks Dask calls are here, each O(1) and never raising into the scheduler; the
    work is in the parts they hand to: the transition hook (hook.py), the tracker of
    computations (computations.py), failures (failures.py), events (events.py), the
    ticks (ticks.py) and the shipper's thread (shipper.py)."""

    name = PLUGIN_NAME
    # register() twice on one cluster keeps the first plugin: nothing is recorded twice.
    idempotent = True

    def __init__(self, settings: dict[str, Any]):
        self.settings = settings
        self._started = False
        # Called on the shipper's thread with each batch the store took (_written).
        self.written_readers: list[Callable[[list[messages.Envelope]], None]] = []
        # More counters for analytics_info (dal.status) from the plugins of those readers.
        self.info_parts: list[Callable[[], dict[str, Any]]] = []
        # Hooks are no-ops until start() has made the state they use (a preload adds the
        # plugin before the scheduler starts, and the scheduler logs events meanwhile).
        self._ready = False

    # --- lifecycle -----------------------------------------------------------
    async def start(self, scheduler: Any) -> None:
        if self._started:  # a preload's dask_setup and an explicit start()
            return
        self._started = True
        s = self.settings
        self.scheduler = scheduler
        self.cluster_id: str = scheduler.id
        self._seq = 0
        self.source = sources.of(scheduler, s.get("computation_source"))  # sources.py
        self._make_parts(scheduler, s)
        # The shipper opens the store before it returns (the scheduler's descriptors stay
        # constant from here): a thread's wait, not the event loop's.
        self._shipper = await asyncio.to_thread(
            open_shipper,
            s,
            alive=_loop_running(asyncio.get_running_loop()),
            heartbeat=lambda: messages.make(self.cluster_id, 0, "heartbeat", time.time(), {}),
            after_write=self._written,
        )
        cycle = parse_timedelta(
            dask.config.get("distributed.worker.profile.cycle", "1s"), default="ms"
        )
        self._profiles = ProfileFetcher(
            scheduler, self.emit, timeout=s["profile_timeout"], cycle=cycle + 0.1, meter=self._meter
        )
        self._ending = RecordingEnd(self, asyncio.get_running_loop())
        self._ready = True
        # Dask calls plugin.transition: from now on the hook, a closure over what it moves.
        self.transition = transition_hook(self)  # type: ignore[method-assign]
        self._retries.install()
        self.emit("cluster", await describe(scheduler, s, self.cluster_id, self._event.allow))
        self._lifecycle.present(scheduler.workers, time.time())
        self._lost.workers.update(scheduler.workers)
        scheduler.handlers["analytics_flush"] = self._handle_flush
        scheduler.handlers["analytics_info"] = self._handle_info
        self._callback = self._ticks.start(s["interval"])
        if s["idle_timeout"] is not None:
            _close_when_idle(scheduler, s["idle_timeout"])
        # A scheduler in the process of a script or a kernel ends with it (exit, SIGTERM).
        endings.track(self)
        logger.info(
            "dask-analytics: recording cluster %s into %s", self.cluster_id, mask_url(s["store"])
        )

    def _make_parts(self, scheduler: Any, s: dict[str, Any]) -> None:
        """The parts the hooks hand their work to, each off when its setting says so."""
        self._errors = ErrorCounter()
        # GPU samples' job and dag (collect/gpu_jobs.py): the GPU monitor reads it.
        self.jobs = JobTracker()
        self._computations = ComputationTracker(self.emit, code_transmit=s["code_transmit"])
        self._touched = self._computations.touched  # the transition hook marks moved groups here
        self._tasks = scheduler.tasks  # emptied in place by Dask, never replaced
        self._stream, self._metrics, self._workers = _optional_parts(self.emit, scheduler, s)
        self._event = EventLog(self.emit, s["events_allow"])
        # Always there: which workers were closing tells a loss from a failure; its
        # worker-joined/-left events are recorded only with the workers' samples.
        self._lifecycle = WorkerLifecycle(self._event if self._workers is not None else no_event)
        # What departed workers took with them, a failure only once Dask runs it again.
        self._lost = LostTasks()
        self._failures = Failures(
            scheduler, self._computations, self._errors, self._lost, self._lifecycle, self._event
        )
        # Failures that retries= hid (read from the workers' task-erred messages).
        self._retries = Retries(scheduler, self._retried)
        self._sampler = ClusterSampler(s["price_per_core_hour"], time.time())
        # What analytics costs this scheduler's event loop, by part (dal.status shows it).
        self._meter = CostMeter(watch_gc=True, hooks_timed=bool(s.get("accounting")))
        self._counter0 = scheduler.transition_counter  # the hook sees every transition from here
        self._random = random.Random()  # the metered hook's gaps between timed calls
        self._ticks = Ticks(self)

    async def close(self) -> None:
        if not self._started:
            return
        endings.untrack(self)
        try:
            self._ending.closing()
        except Exception:
            logger.exception("dask-analytics: recording the cluster's end failed")
        finally:
            self._stop_hooks()
            self._retries.uninstall()
            # Inline when the interpreter exits (atexit closing a LocalCluster): the
            # writer thread is still there to drain, the executors are not.
            await off_loop(self._shipper.close, 10.0)
            self._meter.close()
            self._started = False

    def _stop_hooks(self) -> None:
        self._ready = False
        self.__dict__.pop("transition", None)  # the class's no-op again

    def _written(self, batch: list[messages.Envelope]) -> None:
        """The shipper's thread, after the store took `batch`: each reader of the written
        record in turn (never the event loop's work; one that fails costs only itself)."""
        for reader in self.written_readers:
            try:
                reader(batch)
            except Exception:
                logger.exception("dask-analytics: %r failed on a written batch", reader)

    def end_now(self, at: float, reason: str, timeout: float) -> bool:
        """The process this scheduler lives in ends (collect/endings.py): record the end
        as of `at`; True once the store has it (collect/recording_end.py)."""
        return self._started and self._ending.end_now(at, reason, timeout)

    # --- the one way anything becomes a message --------------------------------
    def emit(self, kind: str, data: Mapping[str, Any]) -> None:
        """Queue one message for the store.  O(1); safe on the event loop; never raises."""
        try:
            self._seq += 1
            message = messages.make(self.cluster_id, self._seq, kind, time.time(), data)
            self._shipper.put(message, urgent=ends_computation(kind, data))
        except Exception:
            logger.exception("dask-analytics: could not queue a %s message", kind)

    # --- scheduler hooks: O(1) each ----------------------------------------------
    def update_graph(
        self, scheduler: Any, *, keys: Any = (), tasks: Any = (), **kwargs: Any
    ) -> None:
        # Before any of the new tasks moves: the moment a group's baseline is exact.
        if not self._ready:
            return
        token = self._meter.enter("graph")
        try:
            computations = self.source.observe_graph(scheduler, tasks)
            if computations:
                lost = bool(self._lost.keys)
                self._computations.observe_graph(
                    computations[-1], scheduler.tasks, tasks, lost=lost
                )
            self.jobs.graph_submitted(scheduler, tasks)
        except Exception:
            logger.exception("dask-analytics: could not follow a submitted graph")
        finally:
            self._meter.leave(token)

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        # Until start() has set the hook (collect/hook.py) on the instance, and after
        # close() took it away: nothing to do.
        return None

    def _retried(self, key: Any, ts: Any, msg: dict[str, Any]) -> Any:
        # Retries (retries.py) calls this from the workers' task-erred messages.
        return self._failures.retried(key, ts, msg) if self._ready else None

    def restart(self, scheduler: Any) -> None:
        """`client.restart()`: every task is forgotten; finish the record and start afresh."""
        if not self._ready:
            return
        try:
            now = time.time()
            self.source.restart()
            self._computations.finalize(now)
            for row in self._errors.drain():
                self.emit("exception", row)
            self._failures.clear()
            self._retries.pending.clear()
            if self._stream is not None:
                self._stream.restart(now)
        except Exception:
            logger.exception("dask-analytics: restart hook failed")

    def add_worker(self, scheduler: Any, worker: str) -> None:
        if not self._ready:
            return
        token = self._meter.enter("events")
        try:
            ws = scheduler.workers.get(worker)
            if ws is not None:
                self._lifecycle.joined(worker, ws, time.time())
                self._lost.workers[worker] = ws
        except Exception:
            logger.exception("dask-analytics: add_worker hook failed for %r", worker)
        finally:
            self._meter.leave(token)

    def remove_worker(
        self, scheduler: Any, worker: str, *, stimulus_id: str | None = None, **kwargs: Any
    ) -> None:
        if not self._ready:
            return
        token = self._meter.enter("events")
        try:
            self._lost.workers.pop(worker, None)  # after its remove-worker event (log_event)
            self._lifecycle.left(worker, stimulus_id, time.time())
        except Exception:
            logger.exception("dask-analytics: remove_worker hook failed for %r", worker)
        finally:
            self._meter.leave(token)

    def log_event(self, topic: str, msg: Any) -> None:
        if not self._ready:
            return
        token = self._meter.enter("events")
        try:
            if isinstance(msg, dict):
                action = msg.get("action")
                if topic == "all" and action == "remove-worker":
                    self._failures.worker_removed(msg)
                    self._lifecycle.removing(msg)
                # Why a worker is about to leave: it is closing (Dask logs its status
                # changes on its own topic), or its nanny kills it for its memory.
                elif action == "worker-status-change":
                    self._lifecycle.status_changed(topic, msg)
                elif topic == "worker-restart-memory":
                    self._lifecycle.memory_killed(msg, time.time())
            self._event(topic, msg)
        except Exception:
            logger.exception("dask-analytics: could not record an event on topic %r", topic)
        finally:
            self._meter.leave(token)

    # --- ticks, and the handlers clients call ---------------------------------------
    def _tick(self, force: bool = False, again: bool = False) -> None:
        self._ticks.tick(force=force, again=again)

    async def _handle_flush(self, timeout: float = 10.0) -> dict[str, Any]:
        """Snapshot now, wait for pending profiles, then for the store to have it all."""
        self._tick(force=True)
        await self._profiles.join(timeout)
        written = await asyncio.to_thread(self._shipper.flush, timeout)
        return {**self._handle_info(), "flushed": written}

    def _handle_info(self) -> dict[str, Any]:
        return status.info(self)


def ends_computation(kind: str, data: Mapping[str, Any]) -> bool:
    """A computation's end is written at once: the shipper's linger would hold it (the
    plugin's `emit`; benchmarks/_shipper_model.py follows the same rule)."""
    return kind == "computation" and data.get("state") not in (None, "running")
