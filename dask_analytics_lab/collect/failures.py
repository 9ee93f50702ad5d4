"""What failed, recorded as it failed: a task's exception, a task whose workers kept
dying under it (KilledWorker), a task a departed worker took that Dask runs again, and
an attempt that retries= ran again.  Rows go to the error counter (errors.py); the
hook and the plugin's worker events call in here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import sources
from .errors import ErrorCounter
from .lost import TEXTS as LOST_TEXTS
from .lost import LostTasks
from .workers import WorkerLifecycle

# Our own event topics: recorded when in analytics.events.allow, like any other topic.
WORKER_LOST_TOPIC = "analytics-worker-lost"
KILLED_WORKER_TOPIC = "analytics-killed-worker"
# Keys remembered at most, for each bounded map here.
_MAX_KEYS = 10_000

Event = Callable[..., None]  # (topic, msg, when=None)


class Failures:
    """The failure rows of one scheduler's tasks."""

    def __init__(
        self,
        scheduler: Any,
        tracker: Any,
        errors: ErrorCounter,
        lost: LostTasks,
        lifecycle: WorkerLifecycle,
        event: Event,
    ):
        self._scheduler = scheduler
        self._computations = sources.computations(scheduler)
        self._owner_id = tracker.owner_id
        self._errors = errors
        self._lost = lost
        self._lifecycle = lifecycle
        self._event = event
        # Workers that died while running a key, for KilledWorker rows (bounded).
        self.suspects: dict[Any, list[str]] = {}
        self._gave_up: list[Any] = []  # keys Dask just gave up on for a worker's death

    def _owner(self, tg: Any) -> str:
        owner: str = self._owner_id(tg, self._computations)
        return owner

    def erred(self, key: Any, tg: Any, counts: Any, kwargs: dict[str, Any]) -> None:
        """A task went to erred (the transition hook): its exception, or KilledWorker."""
        text = kwargs.get("exception_text")
        if text is not None:
            counts.raised += 1
            self._errors.record(
                self._owner(tg), tg.name, key, text, kwargs.get("traceback_text"), counts.last
            )
        elif kwargs.get("cause") == key and "exception" in kwargs:
            # The task's workers kept dying under it: distributed gives up with KilledWorker
            # and passes no text.
            counts.raised += 1
            self._killed_worker(key, tg, counts, kwargs.get("worker"))
        # else: a dependent of a failed task, which never ran: the summary counts it so

    def _killed_worker(self, key: Any, tg: Any, counts: Any, worker: Any) -> None:
        # Dask gives up before it logs the departure: that death is a failure too,
        # recorded with the departure (worker_removed).
        if len(self._gave_up) < _MAX_KEYS:
            self._gave_up.append(key)
        owner = self._owner(tg)
        workers = self.suspects.pop(key, [])
        if worker and worker not in workers:
            workers.append(worker)
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

    def retried(self, key: Any, ts: Any, msg: dict[str, Any]) -> Any:
        """A failed attempt Dask will run again (retries=): a failure, counted as retried;
        the key of its row.  The task's own outcome is counted when it has one."""
        tg = ts.group
        worker = msg.get("worker")
        return self._errors.record(
            self._owner(tg),
            tg.name,
            key,
            str(msg.get("exception_text") or "Exception"),
            msg.get("traceback_text"),
            time.time(),
            workers=[worker] if isinstance(worker, str) else (),
            retried=True,
        )

    def rerun(self, key: Any, tg: Any, lost: Any) -> None:
        """Dask runs again (or gives up on) a task a departed worker took with it: now it
        is a failure, unless the worker was closing."""
        departure = lost.departure
        if departure.closing:
            return
        self._errors.record(
            self._owner(tg),
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

    def worker_removed(self, msg: dict[str, Any]) -> None:
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
        tasks = self._scheduler.tasks
        self._lost.departed(
            msg,
            time.time(),
            closing=expected or self._lifecycle.is_closing(worker),
            tasks=tasks,
        )
        if expected:
            return
        gave_up, self._gave_up = self._gave_up, []
        for key in gave_up:
            lost = self._lost.started(key)
            ts = tasks.get(key)
            if lost is not None and ts is not None:
                self.rerun(key, ts.group, lost)
        for key in msg.get("processing-tasks") or ():
            if len(self.suspects) >= _MAX_KEYS:
                break
            self.suspects.setdefault(key, []).append(worker)

    def clear(self) -> None:
        """`client.restart()`: every task is forgotten."""
        self._errors.clear()
        self.suspects.clear()
        self._lost.clear()
