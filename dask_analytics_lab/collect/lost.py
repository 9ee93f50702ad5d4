"""Tasks a departed worker took with it, until Dask runs them again.

A worker that leaves without being asked to (its process died, or it was closed with
its cluster while a client still held results) takes with it the tasks it was running
and the only copies of the results it held.  Dask runs those again only if somebody
still wants them, and when a program ends nobody does: its held keys are released and
the workers close with the cluster.  So a loss becomes a failure (WorkerDied, LostData)
the moment Dask starts the task again, never at the departure, and never for a worker
that was closing (its cluster closes, or scales down): a finished computation stays
finished, and a program's end creates no failures.

A lost result that Dask wants again still counts as done (it was), not as pending work
of its computation, until Dask has computed it again (`GroupCounts.lost_waiting`).

Only a task the worker was running counts as WorkerDied.  Dask's `processing` set of a
worker (the remove-worker event's "processing-tasks") also holds the tasks sent to it
that waited there for a thread: those lost nothing but their place in its queue.  The
scheduler is not told when a worker starts a task; what it knows is `running`'s to read.

Runs in the scheduler's hooks: a departure is O(its keys), a transition O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

WORKER_DIED = "WorkerDied"
LOST_DATA = "LostData"
TEXTS = {
    WORKER_DIED: (
        "WorkerDied: the worker died while running this task; Dask ran it again elsewhere, "
        "or gave up on it (KilledWorker)"
    ),
    LOST_DATA: "LostData: the only copy of this result was on a worker that died; Dask computed it again",
}
MAX_KEYS = 10_000  # keys remembered; a departure past this loses only the bookkeeping
# A key Dask has not run again after this long (it was released, or forgotten) is let go.
MAX_AGE = 3600.0


@dataclass(eq=False)
class Departure:
    worker: str
    time: float
    processing: int  # tasks it was running (not those queued on it)
    lost: int  # results it held the only copy of
    stimulus_id: str | None
    closing: bool  # the worker was told to stop: what it took is no failure
    groups: dict[str, int]  # tasks Dask ran again so far, by group
    announced: bool = False  # its analytics-worker-lost event was sent


@dataclass(eq=False)
class _Lost:
    kind: str
    departure: Departure
    waiting: bool = False  # a lost result wanted again (counted in lost_waiting)
    started: bool = False  # Dask runs it again


def running(ws: Any, keys: Iterable[Any], tasks: Mapping[Any, Any]) -> list[Any]:
    """Of `keys`, the tasks processing on the departed worker `ws` (a WorkerState), those
    it was running when it went.

    Running: what the worker's last heartbeat said it was executing
    (`WorkerState.executing`), or a task that seceded (`long_running`: the worker said
    so).  A heartbeat comes every 0.5 s to a few s, so a task that killed its worker as
    it started is in none: each thread the known ones leave free goes to the task the
    worker would have started on it, highest priority first (as the worker picks from
    its ready tasks).  O(keys log keys), once per departure.
    """
    if ws is None:  # a worker the plugin never saw join: nothing tells what it ran
        return []
    executing = getattr(ws, "executing", None) or {}
    seceded = getattr(ws, "long_running", None) or set()
    known: list[Any] = []
    waiting: list[tuple[Any, Any]] = []
    threads = getattr(ws, "nthreads", 0) or 0
    for key in keys:
        ts = tasks.get(key)
        if ts is not None and (ts in executing or ts in seceded):
            known.append(key)
            if ts not in seceded:  # a seceded task gave its thread back
                threads -= 1
        elif ts is not None:
            waiting.append((ts, key))
    if threads > 0 and waiting:
        try:
            waiting.sort(key=lambda item: _priority(item[0]))
        except TypeError:  # priorities that do not compare: Dask's order of the set
            pass
        known += [key for _, key in waiting[:threads]]
    return known


def _priority(ts: Any) -> tuple[Any, ...]:
    # The worker runs its ready tasks by the priority the scheduler sent with each.
    priority = getattr(ts, "priority", None)
    return (0, priority) if priority is not None else (1, ())


class LostTasks:
    def __init__(self, max_keys: int = MAX_KEYS):
        # Public so the transition hook can test it without a call: `if lost.keys`.
        self.keys: dict[Any, _Lost] = {}
        self._max = max_keys
        # {address: WorkerState} of the workers there (the plugin keeps it as they come
        # and go): Dask's remove-worker event names the worker it already forgot.
        self.workers: dict[str, Any] = {}

    def departed(
        self,
        msg: dict[str, Any],
        now: float,
        *,
        closing: bool,
        tasks: Mapping[Any, Any] | None = None,
    ) -> None:
        """A remove-worker event of a worker that left without being retired; `tasks`:
        the scheduler's, to tell the tasks it ran from those queued on it (without them,
        every processing task counts as running)."""
        processing = msg.get("processing-tasks") or ()
        if tasks is not None:
            processing = running(self.workers.get(str(msg.get("worker", ""))), processing, tasks)
        lost = msg.get("lost-computed-tasks") or ()
        departure = Departure(
            str(msg.get("worker", "")),
            now,
            len(processing),
            len(lost),
            msg.get("stimulus_id"),
            closing,
            {},
        )
        for kind, keys in ((WORKER_DIED, processing), (LOST_DATA, lost)):
            for key in keys:
                entry = self.keys.get(key)
                if entry is not None and entry.waiting:
                    # A lost result Dask was computing again, lost again (as when a
                    # program ends and its workers close one after the other): still a
                    # result done once and wanted again, whatever the new loss was.
                    entry.departure, entry.started = departure, False
                    continue
                if len(self.keys) >= self._max:
                    return
                self.keys[key] = _Lost(kind, departure)

    def wanted_again(self, key: Any) -> bool:
        """The key went back to waiting: True for a lost result (done once, now pending
        again only because its copy is gone), the first time."""
        entry = self.keys.get(key)
        if entry is None or entry.kind != LOST_DATA or entry.waiting:
            return False
        entry.waiting = True
        return True

    def started(self, key: Any) -> _Lost | None:
        """Dask runs the key again (or gives up on it): the loss, the first time; None for
        a key not lost.  A lost result stays until it is done again (`finished`)."""
        entry = self.keys.get(key)
        if entry is None or entry.started:
            return None
        entry.started = True
        if not entry.waiting:
            del self.keys[key]
        return entry

    def let_go(self, key: Any) -> bool:
        """The key was released: True for a lost result wanted again until then (it
        counted as done, and still does)."""
        entry = self.keys.get(key)
        if entry is None or not entry.waiting:
            return False
        del self.keys[key]
        return True

    def finished(self, key: Any) -> _Lost | None:
        """A lost result is in memory (or erred) again."""
        return self.keys.pop(key, None)

    def expire(self, now: float) -> None:
        """Let go of keys Dask never ran again (oldest first: the dict keeps order)."""
        while self.keys:
            key, entry = next(iter(self.keys.items()))
            if now - entry.departure.time < MAX_AGE:
                return
            del self.keys[key]

    def clear(self) -> None:
        self.keys.clear()
