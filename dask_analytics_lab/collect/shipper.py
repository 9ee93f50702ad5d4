"""A bounded buffer and a writer thread between the scheduler and the store.

`put` is what the event loop calls: O(1), never blocks, never raises.  The thread
lingers a moment after the first message (analytics.buffer.linger), so a tick's
messages leave together, except a computation's end and what a flush asks for, then
makes what a message left for it to make (buffer.Later), checks each message against
the contract once (messages.check: a message the store would refuse is dropped
alone, and logged, instead of costing its whole batch), writes the typed messages in
batches, retries with jittered backoff while the store is down, and, once the buffer
is full (analytics.buffer.max-bytes or max-messages), drops the oldest samples
first, computations and failures last (collect/buffer.py), counts what it drops by
kind, and says so once per outage.

The sink is opened as the shipper starts, not at the first write: the store's
connections and files are open before the scheduler serves anything and stay
the same for its life (distributed's tests count a scheduler's descriptors
before and after a worker comes and goes).  Only the writer thread touches the
sink, and it closes it on its way out: a sink is never closed under a write.
The thread's half is collect/writer.py; what a full buffer drops, collect/drops.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..messages import Envelope
from ..urls import mask_url
from .buffer import Buffer, Entry
from .drops import BYTES_KEY, MESSAGES_KEY, DropLog
from .sinks import Sink, open_sink
from .writer import BATCH, Writer

logger = logging.getLogger("dask_analytics_lab")

# Bytes of one batch at most (a quarter of the buffer when that is smaller): the batch in
# flight, and its typed copy, are what the buffer's bound does not count.
BATCH_BYTES = 4 << 20
DEFAULT_MAX_BYTES = 64 << 20
# Longest the constructor waits for the sink to open (on the writer thread).  Opening
# a local SQLite store takes milliseconds; the bound only matters when the store is
# slow to answer, and then the thread goes on trying in the background.
OPEN_WAIT = 2.0
# Longest close() waits for the thread to end once it has stopped flushing.
JOIN_WAIT = 1.0


class Shipper:
    def __init__(
        self,
        open_sink: Callable[[], Sink],
        *,
        max_messages: int = 10_000,
        max_bytes: int = DEFAULT_MAX_BYTES,
        min_delay: float = 0.2,
        max_delay: float = 30.0,
        linger: float = 0.0,
        describe: str = "the analytics store",
        alive: Callable[[], bool] | None = None,
        heartbeat: Callable[[], dict[str, Any]] | None = None,
        after_write: Callable[[list[Envelope]], None] | None = None,
    ):
        self._buffer = Buffer(max_bytes, max_messages)
        self._batch_bytes = max(1, min(BATCH_BYTES, max_bytes // 4))
        self._describe = describe
        self._cond = threading.Condition()
        self._closing = False
        self._idle = False  # the thread waits for messages: put must wake it
        self._retry_now = False  # flush asks the thread not to wait out its backoff
        self._busy = False  # a batch is out of the buffer's head and being written
        self._in_flight = 0  # number of the batch's last entry while _busy
        # The writer holds the first message `linger` seconds before writing, so what one
        # tick makes goes in one batch (one POST to a team server, not one per message);
        # `_since`: when the oldest message not yet taken was put (None: none since the
        # last batch was taken).  `_hurry`: a flush, or a computation's end, goes now.
        self._linger = linger
        self._since: float | None = None
        self._hurry = False
        self._drops = DropLog(describe)
        self._writer = Writer(
            self,
            open_sink,
            min_delay=min_delay,
            max_delay=max_delay,
            alive=alive,
            heartbeat=heartbeat,
            after_write=after_write,
        )
        self._thread = threading.Thread(
            target=self._writer.run, name="dask-analytics-shipper", daemon=True
        )
        self._thread.start()
        self._writer.opened.wait(OPEN_WAIT)

    # --- called on the scheduler's event loop -------------------------------
    def put(self, message: dict[str, Any], *, urgent: bool = False) -> None:
        """O(1) amortised: an estimate of the size, an append, and each drop a popleft.
        urgent: written without lingering (a computation's end: the record is whole
        the moment Dask is done)."""
        with self._cond:
            buffer = self._buffer
            entry = buffer.add(message)
            if self._since is None:
                self._since = time.monotonic()
            if entry.size > buffer.max_bytes:
                self._too_large(entry)
            elif buffer.over():
                self._trim()
            if urgent:
                self._hurry = True
            if self._idle or buffer.unsized or urgent or len(buffer) == BATCH:
                self._cond.notify()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    @property
    def buffered_bytes(self) -> int:
        """Estimated bytes of the messages held (collect/buffer.py)."""
        return self._buffer.bytes

    @property
    def max_bytes(self) -> int:
        return self._buffer.max_bytes

    @property
    def stored(self) -> int:
        """Messages the store took."""
        return self._writer.stored

    @property
    def failing_since(self) -> float | None:
        """When the store began failing (None while it takes what is written)."""
        return self._writer.failing_since

    @property
    def rejected(self) -> int:
        """Messages the contract or the store refused as malformed."""
        return self._writer.check.rejected

    @property
    def dropped(self) -> int:
        """Messages pushed out of a full buffer so far, all kinds."""
        return self._drops.dropped

    def drop_counts(self) -> dict[str, int]:
        """Messages dropped so far, by kind."""
        with self._cond:
            return dict(self._drops.by_kind)

    def held(self) -> list[dict[str, Any]]:
        """The messages held, oldest first (a copy, O(n): for tests and diagnostics)."""
        with self._cond:
            # An entry keeps its message while queued (and every entry here is).
            return [entry.message for entry in self._buffer if entry.message is not None]

    # --- called from other threads -------------------------------------------
    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every message put so far is written; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._retry_now = self._hurry = True
            self._cond.notify_all()
            while len(self._buffer) or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Write what can be written within `timeout`, then stop the thread.  The thread
        closes the sink as it ends, after the write in progress if there is one."""
        flushed = self.flush(timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=JOIN_WAIT)
        if not flushed and len(self._buffer):
            logger.warning(
                "dask-analytics: %d messages could not be written to %s before shutdown; "
                "%d were dropped earlier",
                len(self._buffer),
                self._describe,
                self.dropped,
            )

    # --- dropping (the caller holds the lock) -----------------------------------------
    def _trim(self) -> None:
        buffer = self._buffer
        while buffer.over():
            key = BYTES_KEY if buffer.bytes > buffer.max_bytes else MESSAGES_KEY
            self._dropped(buffer.drop_oldest(), key)

    def _too_large(self, entry: Entry) -> None:
        """A message larger than the whole buffer would push everything else out: it goes alone."""
        self._buffer.discard(entry)
        self._drops.count(entry.kind, "too-large", BYTES_KEY, self._buffer)

    def _dropped(self, entry: Entry, key: str) -> None:
        if self._busy and entry.number <= self._in_flight:
            self._drops.unsure.append((entry.kind, entry.tier, key))  # the write in progress tells
        else:
            self._drops.count(entry.kind, entry.tier, key, self._buffer)


def open_shipper(
    settings: dict[str, Any],
    *,
    alive: Callable[[], bool],
    heartbeat: Callable[[], Any],
    after_write: Callable[[list[Any]], None],
) -> Shipper:
    """The scheduler plugin's shipper into the store its `settings` name (config.py's
    analytics settings); it opens the store before it returns: call it off the loop."""
    url = settings["store"]
    return Shipper(
        lambda: open_sink(
            url,
            token=settings.get("token"),
            ca_file=settings.get("ca_file"),
            retention=settings.get("retention"),
        ),
        max_messages=settings["buffer_max_messages"],
        max_bytes=settings.get("buffer_max_bytes", DEFAULT_MAX_BYTES),
        min_delay=settings["retry_min_delay"],
        max_delay=settings["retry_max_delay"],
        linger=settings.get("buffer_linger", 0.0),
        describe=mask_url(url),
        alive=alive,
        heartbeat=heartbeat,
        after_write=after_write,
    )
