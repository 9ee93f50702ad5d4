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
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import dask.config
from dask.utils import format_time, parse_timedelta
from distributed.diagnostics.plugin import SchedulerPlugin
from tornado.ioloop import PeriodicCallback

from .. import messages
from ..urls import mask_url
from . import endings
from .accounting import CostMeter
from .cluster import ClusterSampler
from .computations import NOT_DONE, ComputationTracker
from .errors import ErrorCounter
from .gpu_jobs import JobTracker
from .hook import transition_hook
from .lost import TEXTS as LOST_TEXTS
from .lost import WORKER_DIED, LostTasks
from .metrics import MetricsRecorder
from .offloop import off_loop
from .profiles import LIVE_EVERY, LIVE_MAX, ProfileFetcher
from .retries import Retries
from .shipper import DEFAULT_MAX_BYTES, Shipper
from .sinks import open_sink
from .task_stream import TaskStreamRecorder
from .workers import WorkerLifecycle, WorkerSampler

logger = logging.getLogger("dask_analytics_lab")

PLUGIN_NAME = "dask-analytics-lab"
# Seconds of work one tick may hold the event loop for (each part does a little more at
# most); the rest follows in the next turns of the loop, each as short.
TICK_SLICE = 0.001
# Our own event topics: recorded when in analytics.events.allow, like any other topic.
IDLE_TOPIC = "analytics-idle-shutdown"
WORKER_LOST_TOPIC = "analytics-worker-lost"
KILLED_WORKER_TOPIC = "analytics-killed-worker"
# Topics Dask itself publishes on every cluster: not worth a line in the log when they
# are not recorded (worker addresses and client ids are Dask's too).
_DASK_TOPICS = frozenset(
    {
        "all",
        "scheduler",
        "stealing",
        "worker-get-client",
        "p2p",
        "invalid-worker-transition",
        "invalid-task-states",
        "worker-fail-hard",
        "lost-data",
        "task-erred",
        "spans",
        "memory",
        # The nanny's, at each memory restart: read for the worker-left event's reason.
        "worker-restart-memory",
    }
)


def _jsonable(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 20:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return repr(value)


def _no_event(topic: str, msg: Any, when: float | None = None) -> None:
    pass


def _loop_running(loop: asyncio.AbstractEventLoop) -> Callable[[], bool]:
    """Whether the scheduler's event loop still runs (held weakly: the shipper's thread
    must not keep a closed scheduler's loop alive)."""
    ref = weakref.ref(loop)

    def alive() -> bool:
        current = ref()
        return current is not None and not current.is_closed()

    return alive


class AnalyticsPlugin(SchedulerPlugin):
    """Records a cluster's computations, task groups, errors, events and profiles."""

    name = PLUGIN_NAME
    # register() twice on one cluster keeps the first plugin: nothing is recorded twice.
    idempotent = True

    def __init__(self, settings: dict[str, Any]):
        self.settings = settings
        self._started = False
        self._ended = False  # the process ended the recording (collect/endings.py)
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
        self._allow = frozenset(s["events_allow"])
        self._errors = ErrorCounter()
        # GPU samples' job and dag (collect/gpu_jobs.py): the GPU monitor reads it.
        self.jobs = JobTracker()
        self._computations = ComputationTracker(self.emit, code_transmit=s["code_transmit"])
        self._touched = self._computations.touched  # the transition hook marks moved groups here
        self._counts = self._computations.counts  # and moves their counts (both changed in place)
        self._tasks = scheduler.tasks  # emptied in place by Dask, never replaced
        # Each computation's task stream (None: analytics.task-stream.transmit off).
        self._stream = (
            TaskStreamRecorder(
                self.emit,
                max_tasks=s.get("task_stream_max_tasks", 10_000),
                max_bins=s.get("task_stream_max_bins", 2_000),
            )
            if s.get("task_stream_transmit", True)
            else None
        )
        # Each computation's share of Dask's fine performance metrics (None: analytics.metrics.transmit off).
        self._metrics = (
            MetricsRecorder(self.emit, scheduler) if s.get("metrics_transmit", True) else None
        )
        # Each worker over time, and its joining and leaving (None: analytics.workers.transmit off).
        self._workers = (
            WorkerSampler(s.get("workers_interval", 5.0))
            if s.get("workers_transmit", True)
            else None
        )
        # Always there: which workers were closing tells a loss from a failure; its
        # worker-joined/-left events are recorded only with the workers' samples.
        self._lifecycle = WorkerLifecycle(self._event if self._workers is not None else _no_event)
        # Workers that died while running a key, for KilledWorker rows (bounded).
        self._suspects: dict[Any, list[str]] = {}
        # What departed workers took with them, a failure only once Dask runs it again.
        self._lost = LostTasks()
        self._gave_up: list[Any] = []  # keys Dask just gave up on for a worker's death
        # Failures that retries= hid (read from the workers' task-erred messages).
        self._retries = Retries(scheduler, self._retried)
        self._unlisted_topics: set[str] = set()
        self._sampler = ClusterSampler(s["price_per_core_hour"], time.time())
        self._last_counter = -1
        # What analytics costs this scheduler's event loop, by part (dal.status shows it).
        self._meter = CostMeter(watch_gc=True, hooks_timed=bool(s.get("accounting")))
        self._counter0 = scheduler.transition_counter  # the hook sees every transition from here
        self._random = random.Random()  # the hook's gaps between timed calls
        self._ticks = 0
        self._again = (
            False  # a tick is due in the next turn of the loop (the last one ran out of time)
        )
        url = s["store"]
        # The shipper opens the store before it returns (the scheduler's descriptors stay
        # constant from here): a thread's wait, not the event loop's.
        self._shipper = await asyncio.to_thread(
            Shipper,
            lambda: open_sink(
                url, token=s.get("token"), ca_file=s.get("ca_file"), retention=s.get("retention")
            ),
            max_messages=s["buffer_max_messages"],
            max_bytes=s.get("buffer_max_bytes", DEFAULT_MAX_BYTES),
            min_delay=s["retry_min_delay"],
            max_delay=s["retry_max_delay"],
            describe=mask_url(url),
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
        self._live_profiles_at = 0.0
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        # Reentrant: a signal handler may interrupt its holder on the same thread.
        self._end_lock = threading.RLock()
        self._ended = False
        self._ready = True
        # Dask calls plugin.transition: from now on the hook, a closure over what it moves.
        self.transition = transition_hook(self)  # type: ignore[method-assign]
        self._retries.install()

        from .environment import platform_info, versions

        # importlib.metadata reads files: keep it off the event loop.
        found_versions, found_platform = await asyncio.to_thread(
            lambda: (versions(), platform_info())
        )
        self.emit(
            "cluster",
            {
                "name": s.get("name") or self.cluster_id,
                "address": scheduler.address,
                "user": s["user"],
                "account": s["account"],
                "started": scheduler.time_started,
                "price_per_core_hour": s["price_per_core_hour"],
                "heartbeat": messages.HEARTBEAT,
                "versions": found_versions,
                "platform": found_platform,
                "settings": {
                    "interval": s["interval"],
                    "code_transmit": s["code_transmit"],
                    "profile_transmit": s["profile_transmit"],
                    "events_allow": sorted(self._allow),
                },
            },
        )
        self._lifecycle.present(scheduler.workers, time.time())
        self._lost.workers.update(scheduler.workers)
        scheduler.handlers["analytics_flush"] = self._handle_flush
        scheduler.handlers["analytics_info"] = self._handle_info
        self._tick()
        self._callback = PeriodicCallback(self._tick, s["interval"] * 1000)
        self._callback.start()
        if s["idle_timeout"] is not None:
            # The scheduler's own idle timeout does the closing (Scheduler.check_idle); a
            # shorter one set in distributed's config still wins. Set last and counted from
            # now: the time the store took to open, or a registering client's round trips,
            # is not the user's idleness.
            own = scheduler.idle_timeout
            scheduler.idle_timeout = s["idle_timeout"] if not own else min(own, s["idle_timeout"])
            scheduler.idle_since = None
        # A scheduler in the process of a script or a kernel ends with it (exit, SIGTERM).
        endings.track(self)
        logger.info("dask-analytics: recording cluster %s into %s", self.cluster_id, mask_url(url))

    async def close(self) -> None:
        if not self._started:
            return
        endings.untrack(self)
        try:
            with self._end_lock:
                ended, self._ended = self._ended, True
            if not ended:
                self._record_end(time.time())
        except Exception:
            logger.exception("dask-analytics: recording the cluster's end failed")
        finally:
            self._ready = False
            self.__dict__.pop("transition", None)  # the class's no-op again
            self._retries.uninstall()
            # Inline when the interpreter exits (atexit closing a LocalCluster): the
            # writer thread is still there to drain, the executors are not.
            await off_loop(self._shipper.close, 10.0)
            self._meter.close()
            self._started = False

    def _written(self, batch: list[messages.Envelope]) -> None:
        """The shipper's thread, after the store took `batch`: each reader of the written
        record in turn (never the event loop's work; one that fails costs only itself)."""
        for reader in self.written_readers:
            try:
                reader(batch)
            except Exception:
                logger.exception("dask-analytics: %r failed on a written batch", reader)

    def _record_end(self, now: float, reason: str | None = None) -> None:
        self._callback.stop()
        self._profiles.close()
        self._lifecycle.scheduler_closing(now)
        self._tick(force=True)
        self._computations.closing(now)
        idle = reason is None and self._closed_for_idleness()
        self.emit(
            "cluster_stop",
            {
                "stopped": now,
                "reason": reason or ("idle-timeout" if idle else "closed"),
                "idle_shutdown": idle,
            },
        )

    def end_now(self, at: float, reason: str, timeout: float) -> bool:
        """The process this scheduler lives in ends (interpreter exit, SIGTERM): record
        the end as of `at` and wait (at most `timeout` seconds) until the store has it.
        Called from any thread (atexit, a signal handler).  True when written."""
        deadline = time.monotonic() + timeout
        if not self._ready or self._ended:
            return False
        done = threading.Event()

        def end() -> None:
            try:
                self._end(at, reason)
            finally:
                done.set()

        loop = self._loop
        if threading.get_ident() == self._loop_thread or loop.is_closed() or not loop.is_running():
            end()  # the loop cannot run it (or this is the loop's thread, interrupted)
        else:
            try:
                loop.call_soon_threadsafe(end)
            except RuntimeError:  # closed meanwhile
                end()
            if not done.wait(timeout / 2):
                # The loop is stuck (or busy for longer than the process has left): end
                # from here; the lock lets only one of the two record it.
                end()
        return self._shipper.flush(max(0.0, deadline - time.monotonic()))

    def _end(self, at: float, reason: str) -> None:
        with self._end_lock:
            if self._ended or not self._ready:
                return
            self._ended = True
        try:
            self._cancel_unfinished(at)
            self._record_end(at, reason)
        except Exception:
            logger.exception("dask-analytics: recording the end of the process failed")
        finally:
            # Nothing after the end belongs to this recording: the workers' closing, the
            # client's last releases.  close() still closes the shipper.
            self._ready = False
            self.__dict__.pop("transition", None)

    def _cancel_unfinished(self, at: float) -> None:
        """Count what has not finished as a `client.cancel` at `at` would: cancelled, those
        processing then as cancelled while running.  O(task groups)."""
        counts_for = self._computations.counts_for
        for tg in list(self.scheduler.task_groups.values()):
            states = tg.states
            running = states.get("processing", 0)
            unfinished = sum(states.get(s, 0) for s in NOT_DONE)
            if not unfinished:
                continue
            counts = counts_for(tg)
            # Done once and wanted again after a worker left with it: done, not cancelled.
            counts.cancelled += max(0, unfinished - counts.lost_waiting)
            counts.cancelled_running += running
            counts.cancelled_at = at
        # A task that was running on a worker that left just before (a terminal's Ctrl-C
        # reaches the workers too) is back to waiting: it ran, and was cancelled so.
        # O(keys lost, bounded by lost.MAX_KEYS).
        for key, entry in self._lost.keys.items():
            ts = self.scheduler.tasks.get(key) if entry.kind == WORKER_DIED else None
            if ts is not None and ts.state in NOT_DONE and ts.state != "processing":
                counts_for(ts.group).cancelled_running += 1

    # --- the one way anything becomes a message --------------------------------
    def emit(self, kind: str, data: Mapping[str, Any]) -> None:
        """Queue one message for the store.  O(1); safe on the event loop; never raises."""
        try:
            self._seq += 1
            self._shipper.put(messages.make(self.cluster_id, self._seq, kind, time.time(), data))
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
            if scheduler.computations:
                self._computations.observe_graph(
                    scheduler.computations[-1],
                    scheduler.tasks,
                    tasks,
                    lost=bool(self._lost.keys),
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

    def _erred(self, key: Any, tg: Any, counts: Any, kwargs: dict[str, Any]) -> None:
        text = kwargs.get("exception_text")
        if text is not None:
            counts.raised += 1
            owner = self._computations.owner_id(tg, self.scheduler.computations)
            self._errors.record(
                owner, tg.name, key, text, kwargs.get("traceback_text"), counts.last
            )
        elif kwargs.get("cause") == key and "exception" in kwargs:
            # The task's workers kept dying under it: distributed gives up with KilledWorker
            # and passes no text.
            counts.raised += 1
            # Dask gives up before it logs the departure: that death is a failure too,
            # recorded with the departure (_worker_removed).
            if len(self._gave_up) < 10_000:
                self._gave_up.append(key)
            owner = self._computations.owner_id(tg, self.scheduler.computations)
            workers = self._suspects.pop(key, [])
            if kwargs.get("worker") and kwargs["worker"] not in workers:
                workers.append(kwargs["worker"])
            text = (
                f"KilledWorker: attempted to run task {key!r} on {len(workers)} different workers, "
                f"but all those workers died while running it"
            )
            self._errors.record(
                owner,
                tg.name,
                key,
                text,
                None,
                counts.last,
                exc_type="KilledWorker",
                location="",
                workers=workers,
            )
            self._event(
                KILLED_WORKER_TOPIC,
                {"key": str(key), "group": tg.name, "computation_id": owner, "workers": workers},
            )
        # else: a dependent of a failed task, which never ran: the summary counts it so

    def _retried(self, key: Any, ts: Any, msg: dict[str, Any]) -> Any:
        """A failed attempt Dask will run again (retries=): a failure, counted as retried;
        the key of its row.  The task's own outcome is counted when it has one."""
        if not self._ready:
            return None
        tg = ts.group
        owner = self._computations.owner_id(tg, self.scheduler.computations)
        worker = msg.get("worker")
        return self._errors.record(
            owner,
            tg.name,
            key,
            str(msg.get("exception_text") or "Exception"),
            msg.get("traceback_text"),
            time.time(),
            workers=[worker] if isinstance(worker, str) else (),
            retried=True,
        )

    def _rerun(self, key: Any, tg: Any, lost: Any) -> None:
        """Dask runs again (or gives up on) a task a departed worker took with it: now it
        is a failure, unless the worker was closing."""
        departure = lost.departure
        if departure.closing:
            return
        owner = self._computations.owner_id(tg, self.scheduler.computations)
        self._errors.record(
            owner,
            tg.name,
            key,
            LOST_TEXTS[lost.kind],
            None,
            time.time(),
            exc_type=lost.kind,
            location="",
            workers=[departure.worker],
        )
        departure.groups[tg.name] = departure.groups.get(tg.name, 0) + 1
        if not departure.announced:
            departure.announced = True
            self._event(
                WORKER_LOST_TOPIC,
                {
                    "worker": departure.worker,
                    "processing": departure.processing,
                    "lost": departure.lost,
                    "groups": dict(departure.groups),
                    "stimulus_id": departure.stimulus_id,
                },
                when=departure.time,
            )

    def restart(self, scheduler: Any) -> None:
        """`client.restart()`: every task is forgotten; finish the record and start afresh."""
        if not self._ready:
            return
        try:
            now = time.time()
            self._computations.finalize(now)
            for row in self._errors.drain():
                self.emit("exception", row)
            self._errors.clear()
            self._retries.pending.clear()
            self._suspects.clear()
            self._lost.clear()
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
                    self._worker_removed(msg)
                    self._lifecycle.removing(msg)
                else:
                    # Why a worker is about to leave: it is closing (Dask logs its status
                    # changes on its own topic), or its nanny kills it for its memory.
                    if action == "worker-status-change":
                        self._lifecycle.status_changed(topic, msg)
                    elif topic == "worker-restart-memory":
                        self._lifecycle.memory_killed(msg, time.time())
            self._event(topic, msg)
        except Exception:
            logger.exception("dask-analytics: could not record an event on topic %r", topic)
        finally:
            self._meter.leave(token)

    def _event(self, topic: str, msg: Any, when: float | None = None) -> None:
        if topic in self._allow:
            self.emit("event", {"topic": topic, "time": when or time.time(), "msg": _jsonable(msg)})
        elif topic not in self._unlisted_topics and len(self._unlisted_topics) < 1000:
            self._unlisted_topics.add(topic)
            if topic in _DASK_TOPICS or "://" in topic or topic.startswith("Client-"):
                return
            logger.warning(
                "dask-analytics: events on topic %r are not recorded; to record them add it to "
                "analytics.events.allow (e.g. dask.config.set({'analytics.events.allow': [..., %r]}) "
                "before register())",
                topic,
                topic,
            )

    def _worker_removed(self, msg: dict[str, Any]) -> None:
        """A worker left without being asked to while it ran or held tasks.  Nothing is a
        failure yet (collect/lost.py): only what Dask runs again is.  (An idle worker
        that goes away cost nothing: Dask's own log has it.)"""
        if not (msg.get("processing-tasks") or msg.get("lost-computed-tasks")):
            return
        worker = msg.get("worker", "")
        # A worker Dask expected to go (retired, or closed with its cluster while a client
        # still held results) is remembered too: a result it took that is then let go of
        # was done, not cancelled.
        expected = bool(msg.get("expected"))
        self._lost.departed(
            msg,
            time.time(),
            closing=expected or self._lifecycle.is_closing(worker),
            tasks=self.scheduler.tasks,
        )
        if expected:
            return
        gave_up, self._gave_up = self._gave_up, []
        for key in gave_up:
            lost = self._lost.started(key)
            ts = self.scheduler.tasks.get(key)
            if lost is not None and ts is not None:
                self._rerun(key, ts.group, lost)
        for key in msg.get("processing-tasks") or ():
            if len(self._suspects) >= 10_000:
                break
            self._suspects.setdefault(key, []).append(worker)

    # --- the periodic snapshot ---------------------------------------------------
    def _tick(self, force: bool = False, again: bool = False) -> None:
        """`again`: the rest of a tick that ran out of time: only the parts it left behind
        (the others wait for the next tick: a continuation per turn of the loop while a
        large computation runs must not summarise and send everything each time)."""
        token = self._meter.enter("ticks")
        try:
            now = time.time()
            sample = (
                None
                if again
                else self._sampler.sample(self.scheduler, now, self._shipper.dropped, force=force)
            )
            if sample is not None:
                self.emit("cluster_sample", sample)
            counter = self.scheduler.transition_counter
            changed = force or counter != self._last_counter
            self._last_counter = counter
            # Each part stops at the deadline (after some work) and goes on at the next tick.
            deadline = None if force else time.perf_counter() + TICK_SLICE
            ended = (
                self._computations.poll(
                    self.scheduler.computations,
                    self.scheduler.task_groups,
                    changed=changed,
                    now=now,
                    deadline=deadline,
                )
                if not again or self._computations.behind
                else []
            )
            for row in self._errors.drain():
                self.emit("exception", row)
            if self._lost.keys:
                self._lost.expire(now)
            gone = self._computations.forget_gone()
            self._errors.forget(gone)
            if self._stream is not None:
                self._stream.forget(gone)
            if self._stream is not None and (not again or self._stream.behind):
                computations = self.scheduler.computations
                self._stream.tick(
                    str(computations[-1].id) if computations else None,
                    now,
                    force=force,
                    deadline=deadline,
                )
            if self._workers is not None:
                workers = self._workers.sample(self.scheduler.workers, now, force=force)
                if workers is not None:
                    self.emit("worker_samples", workers)
            self._lifecycle.flush(now, force=force)
            if self._metrics is not None and (not again or self._metrics.behind):
                self._metrics.tick(
                    self.scheduler.cumulative_worker_metrics, self.scheduler.computations, deadline
                )
            if self.settings["profile_transmit"]:
                for computation_id, start, stop, prefixes in ended:
                    self._profiles.put(computation_id, start, stop, prefixes)
                if now - self._live_profiles_at >= LIVE_EVERY:
                    self._live_profiles_at = now
                    for computation_id, start, prefixes in self._computations.running()[:LIVE_MAX]:
                        self._profiles.put(computation_id, start, now, prefixes, live=True)
            self._profiles.tick()
        except Exception:
            logger.exception("dask-analytics: snapshot failed; will try again next interval")
        finally:
            self._meter.leave(token)
            self._ticks += 1
        try:
            behind = (
                self._computations.behind
                or (self._stream is not None and self._stream.behind)
                or (self._metrics is not None and self._metrics.behind)
            )
            if behind and not self._again:
                # The rest of the summaries in a later turn of the loop, not after `interval`.
                asyncio.get_running_loop().call_soon(self._tick_again)
                self._again = True
        except Exception:
            logger.exception("dask-analytics: could not schedule the rest of a snapshot")

    def _tick_again(self) -> None:
        self._again = False
        if self._ready:
            self._tick(again=True)

    def _closed_for_idleness(self) -> bool:
        """Whether the scheduler closes because its idle timeout ran out (any other close
        would come before that moment: check_idle closes as soon as it has passed)."""
        scheduler = self.scheduler
        timeout, idle_since = scheduler.idle_timeout, scheduler.idle_since
        if not timeout or idle_since is None or time.time() < idle_since + timeout:
            return False
        logger.warning(
            "dask-analytics: scheduler closing after %s idle (its idle timeout)",
            format_time(timeout),
        )
        self._event(IDLE_TOPIC, {"idle_since": idle_since, "timeout": timeout})
        return True

    # --- handlers clients call ------------------------------------------------------
    async def _handle_flush(self, timeout: float = 10.0) -> dict[str, Any]:
        """Snapshot now, wait for pending profiles, then for the store to have it all."""
        self._tick(force=True)
        await self._profiles.join(timeout)
        written = await asyncio.to_thread(self._shipper.flush, timeout)
        return {**self._handle_info(), "flushed": written}

    def _handle_info(self) -> dict[str, Any]:
        info = {
            "cluster_id": self.cluster_id,
            "store": mask_url(self.settings["store"]),
            "pending": self._shipper.pending,
            "stored": self._shipper.stored,
            "dropped": self._shipper.dropped,
            "dropped_by_kind": self._shipper.drop_counts(),  # samples go first (collect/buffer.py)
            "buffer_bytes": self._shipper.buffered_bytes,
            "buffer_max_bytes": self._shipper.max_bytes,
            "rejected": self._shipper.rejected,
            "failing_since": self._shipper.failing_since,
            "ticks": self._ticks,
            "tick_cpu_seconds": self._meter.seconds["ticks"],
            "graph_cpu_seconds": self._meter.seconds["graph"],
            "profiles_fetched": self._profiles.fetched,
            "profiles_dropped": self._profiles.dropped,
            "profile_merge_seconds": self._profiles.merge_seconds,
            "profile_rpcs": self._profiles.rpcs,  # worker RPCs of all fetches: one per worker a fetch
            "task_stream_tasks": self._stream.recorded if self._stream is not None else 0,
            "task_stream_dropped": self._stream.dropped if self._stream is not None else 0,
            "metrics_rows": self._metrics.sent if self._metrics is not None else 0,
            "metrics_dropped": self._metrics.dropped if self._metrics is not None else 0,
            "metrics_seconds": self._metrics.seconds if self._metrics is not None else 0.0,
            "worker_samples": self._workers.sent if self._workers is not None else 0,
            # Every CPU second analytics costs this scheduler, by part (collect/accounting.py).
            "cost": self._cost(),
        }
        for part in self.info_parts:
            try:
                info.update(part())
            except Exception:
                logger.exception("dask-analytics: %r failed to report", part)
        return info

    def _cost(self) -> dict[str, Any]:
        self._meter.transition_calls = self.scheduler.transition_counter - self._counter0
        self._meter.other_plugins = sum(
            1
            for p in self.scheduler.plugins.values()
            if p is not self and type(p).__module__.startswith("dask_analytics_lab")
        )
        return self._meter.report(
            extra={"metrics": self._metrics.heartbeat_seconds}
            if self._metrics is not None
            else None,
            threads={"profile-merge": self._profiles.merge_seconds},
        )
