"""One cluster's shipper (collect/shipper.py and collect/writer.py) as rules on a clock
the caller gives: what the load generator (team_scale.py) and the virtual-clock
simulation (recorder_traffic.py) both follow, so what they send is what a real
recorder's writer thread sends.

The rules, as the writer thread applies them at the default settings:
- a message put while nothing is queued starts the linger (analytics.buffer.linger,
  200 ms): the writer takes a batch once the oldest queued message is that old, unless
  a computation's end (a `computation` message whose state is not "running", put with
  urgent=True by the plugin: its `ends_computation`), a flush or close, or a full batch (BATCH messages or
  BATCH_BYTES of estimated size) says go at once;
- a batch is the queue's head, at most BATCH messages and BATCH_BYTES (at least one);
  what stays behind goes next without lingering; what is put while a batch is in
  flight lingers from its own put (and goes at once if that is over when the write
  returns);
- every write carries a heartbeat made as it starts; with nothing queued, a heartbeat
  goes alone BEAT seconds after the last successful write started;
- a failed write leaves its batch queued; the retry takes the head again (what came
  meanwhile included) without lingering.

Not thread-safe: the generator holds its lock around every call.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from dask_analytics_lab.collect.buffer import estimate
from dask_analytics_lab.collect.plugin import ends_computation
from dask_analytics_lab.collect.shipper import BATCH_BYTES
from dask_analytics_lab.collect.writer import BATCH
from dask_analytics_lab.messages import BEAT

EPS = 1e-6  # seconds: "due now" on float clocks


def urgent(message: dict[str, Any]) -> bool:
    """The plugin's rule, the plugin's own function (collect/plugin.py)."""
    return ends_computation(message["kind"], message["data"])


class ShipperModel:
    """The queue and the writer's state of one cluster's shipper."""

    def __init__(self, linger: float, *, batch: int = BATCH, batch_bytes: int = BATCH_BYTES):
        self.linger = linger
        self.max_messages = batch
        self.max_bytes = batch_bytes
        self.pending: deque[tuple[float, int, dict]] = deque()  # (time put, bytes, message)
        self.bytes = 0
        self.since: float | None = None  # when the oldest message not yet taken was put
        self.hurry = False  # an urgent message, a flush or a close: go now
        self.busy = False  # a writer owns the queue (a batch in flight, or about to be)
        self.written_at: float | None = None  # when the last successful write started
        self.closed = False  # the cluster stopped: no heartbeat alone any more

    # --- the event loop's half: put ---------------------------------------------------
    def put(self, messages: list[dict], now: float, *, hurry: bool = False) -> None:
        for m in messages:
            size = estimate(m["kind"], m["data"])[0]
            self.pending.append((now, size, m))
            self.bytes += size
            if urgent(m):
                self.hurry = True
        if messages and self.since is None:
            self.since = now
        if hurry:
            self.hurry = True

    # --- the writer thread's half -----------------------------------------------------
    def due(self, now: float) -> float | None:
        """When an idle writer takes the next batch: `now` or later (the linger's end),
        None when nothing is queued (see `beat_due`)."""
        if not self.pending:
            return None
        if (
            self.hurry
            or self.since is None
            or self.linger <= 0
            or len(self.pending) >= self.max_messages
            or self.bytes >= self.max_bytes
        ):
            return now
        return max(now, self.since + self.linger)

    def beat_due(self) -> float | None:
        """When a heartbeat goes alone if nothing is put meanwhile (None: closed)."""
        if self.closed or self.written_at is None:
            return None
        return self.written_at + BEAT

    def ready(self, now: float) -> bool:
        """An idle writer writes now: a batch whose linger is over, or a heartbeat alone."""
        if self.busy:
            return False
        due = self.due(now)
        if due is not None:
            return due <= now + EPS
        beat = self.beat_due()
        return beat is not None and beat <= now + EPS

    def take(self) -> list[tuple[float, int, dict]]:
        """The next batch, as the writer takes the buffer's head: at most max_messages
        and max_bytes of estimated size (at least one); [] for a heartbeat alone.  The
        entries stay queued until done() (a failed write leaves them there)."""
        batch, total = [], 0
        for entry in self.pending:
            if len(batch) >= self.max_messages or (batch and total + entry[1] > self.max_bytes):
                break
            batch.append(entry)
            total += entry[1]
        # What stays behind goes next, without lingering; what is put meanwhile lingers.
        self.since = 0.0 if len(self.pending) > len(batch) else None
        self.hurry = False
        self.busy = True
        return batch

    def done(self, n: int, started: float) -> None:
        """The store took the first `n` queued messages, in a write started at `started`."""
        for _ in range(n):
            self.bytes -= self.pending.popleft()[1]
        self.written_at = started
        self.busy = False

    def failed(self) -> None:
        """The write failed: its batch stays queued and goes again without lingering
        (what is put during the backoff, into an emptied queue's `since`, lingers)."""
        self.busy = False

    def next_wakeup(self, now: float) -> float | None:
        """When the idle writer next has something to do (the linger's end or a
        heartbeat's turn); None when it waits for a put."""
        if self.busy:
            return None
        due = self.due(now)
        return due if due is not None else self.beat_due()
