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

Runs in the scheduler's hooks: a departure is O(its keys), a transition O(1).
"""

from __future__ import annotations

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
    processing: int  # tasks it was running
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


class LostTasks:
    def __init__(self, max_keys: int = MAX_KEYS):
        # Public so the transition hook can test it without a call: `if lost.keys`.
        self.keys: dict[Any, _Lost] = {}
        self._max = max_keys

    def departed(self, msg: dict[str, Any], now: float, *, closing: bool) -> None:
        """A remove-worker event of a worker that left without being retired."""
        processing = msg.get("processing-tasks") or ()
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
