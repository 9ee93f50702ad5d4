"""A bounded buffer and a writer thread between the scheduler and the store.

`put` is what the event loop calls: O(1), never blocks, never raises.  The thread
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
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from dask.utils import format_bytes

from ..messages import BEAT, Envelope, MessageError, check
from .buffer import DETAILS, SAMPLES, Buffer, Entry, built, measure
from .sinks import Sink

logger = logging.getLogger("dask_analytics_lab")

BATCH = 500
# Bytes of one batch at most (a quarter of the buffer when that is smaller): the batch in
# flight, and its typed copy, are what the buffer's bound does not count.
BATCH_BYTES = 4 << 20
DEFAULT_MAX_BYTES = 64 << 20
# Longest the constructor waits for the sink to open (on the writer thread).  Opening
# a local SQLite store takes milliseconds; the bound only matters when the store is
# slow to answer, and then the thread goes on trying in the background.
OPEN_WAIT = 2.0
# Seconds between the idle thread's checks that its owner still runs (see `alive`).
ALIVE_CHECK = 1.0
# Longest close() waits for the thread to end once it has stopped flushing.
JOIN_WAIT = 1.0
BYTES_KEY = "analytics.buffer.max-bytes"
MESSAGES_KEY = "analytics.buffer.max-messages"


def retry_delay(failures: int, min_delay: float, max_delay: float) -> float:
    """Seconds to wait after the `failures`-th write in a row failed: exponential from
    min_delay, capped at max_delay, and jittered over the upper half of that range so the
    schedulers a store outage stopped together do not all come back at the same instant."""
    ceiling = min(max_delay, min_delay * 2.0 ** min(failures, 64))
    return random.uniform(max(min_delay, ceiling / 2), ceiling)


class Shipper:
    def __init__(
        self,
        open_sink: Callable[[], Sink],
        *,
        max_messages: int = 10_000,
        max_bytes: int = DEFAULT_MAX_BYTES,
        min_delay: float = 0.2,
        max_delay: float = 30.0,
        describe: str = "the analytics store",
        alive: Callable[[], bool] | None = None,
        heartbeat: Callable[[], dict[str, Any]] | None = None,
        after_write: Callable[[list[Envelope]], None] | None = None,
    ):
        # alive(): False once the owner is gone without calling close() (a scheduler
        # stopped with Server.stop(), whose event loop then closes): the thread writes
        # what it holds, closes the store and ends rather than outliving it.
        self._alive = alive
        # heartbeat(): a `heartbeat` message, made by the thread as each write starts and
        # written alone BEAT seconds after the last write started.  The thread sends it,
        # not the event loop: a scheduler busy for a while with a large graph is not dead,
        # and readers must not call it lost.  With every write: a batch of a backlog holds
        # messages made long ago, which would leave the cluster's last_seen behind.
        self._heartbeat = heartbeat
        # after_write(batch): on this thread, after each batch the store took (what reacts
        # to the record, such as alerts and trace export, sees exactly what was stored).
        # It must hand its work on, not do it here: the next write waits for it.
        self._after_write = after_write
        self._written_at = time.monotonic()  # when the last successful write started
        self._open_sink = open_sink
        self._sink: Sink | None = None  # the writer thread's alone
        self._buffer = Buffer(max_bytes, max_messages)
        self._batch_bytes = max(1, min(BATCH_BYTES, max_bytes // 4))
        self._min_delay = min_delay
        self._max_delay = max_delay
        self._describe = describe
        self._cond = threading.Condition()
        self._closing = False
        self._idle = False  # the thread waits for messages: put must wake it
        self._retry_now = False  # flush asks the thread not to wait out its backoff
        self._busy = False  # a batch is out of the buffer's head and being written
        self._in_flight = 0  # number of the batch's last entry while _busy
        # Dropped from the batch in flight: lost only if that write fails.
        self._unsure: list[tuple[str, int, str]] = []
        self.dropped = 0  # messages pushed out of a full buffer, all kinds
        self.dropped_by_kind: dict[str, int] = {}
        self.rejected = 0  # messages the contract or the store refused as malformed
        self.stored = 0
        self.failing_since: float | None = None
        # Drops by kind when the store was last reachable again: what the next recovery reports.
        self._dropped_before: dict[str, int] = {}
        # Why drops were logged (a tier, or "too-large") since the store was last reachable again.
        self._warned: set[int | str] = set()
        # {number: typed message, or None if refused}: a batch retried through an outage
        # is checked (and a refused message counted) once, not on every attempt.
        self._typed: dict[int, Envelope | None] = {}
        self._opened = threading.Event()  # the first attempt to open the sink is over
        self._thread = threading.Thread(
            target=self._run, name="dask-analytics-shipper", daemon=True
        )
        self._thread.start()
        self._opened.wait(OPEN_WAIT)

    # --- called on the scheduler's event loop -------------------------------
    def put(self, message: dict[str, Any]) -> None:
        """O(1) amortised: an estimate of the size, an append, and each drop a popleft."""
        with self._cond:
            buffer = self._buffer
            entry = buffer.add(message)
            if entry.size > buffer.max_bytes:
                self._too_large(entry)
            elif buffer.over():
                self._trim()
            if self._idle or buffer.unsized:
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

    def drop_counts(self) -> dict[str, int]:
        """Messages dropped so far, by kind."""
        with self._cond:
            return dict(self.dropped_by_kind)

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
            self._retry_now = True
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
        self._count_drop(entry.kind, "too-large", BYTES_KEY)

    def _dropped(self, entry: Entry, key: str) -> None:
        if self._busy and entry.number <= self._in_flight:
            self._unsure.append((entry.kind, entry.tier, key))  # the write in progress tells
        else:
            self._count_drop(entry.kind, entry.tier, key)

    def _count_drop(self, kind: str, why: int | str, key: str) -> None:
        self.dropped += 1
        self.dropped_by_kind[kind] = self.dropped_by_kind.get(kind, 0) + 1
        if why in self._warned:
            return
        self._warned.add(why)
        buffer = self._buffer
        if why == "too-large":
            logger.warning(
                "dask-analytics: dropped a %s message larger than the whole buffer (%s = %s). "
                "Raise %s to keep such messages",
                kind,
                key,
                format_bytes(buffer.max_bytes),
                key,
            )
            return
        full = (
            f"{key} = {format_bytes(buffer.max_bytes) if key == BYTES_KEY else buffer.max_messages}"
        )
        if why == SAMPLES:
            what = (
                "the oldest samples first (worker_samples, cluster_sample, gpu_samples, heartbeat), "
                "computations and failures last"
            )
        elif why == DETAILS:
            what = "the oldest profiles, metrics and task streams, as no samples are left to drop"
        else:
            what = (
                "the oldest computations, failures, events and code, as nothing else is left to drop: "
                "the cluster's record will miss them"
            )
        logger.warning(
            "dask-analytics: the buffer is full (%s) while %s is unreachable or slow; dropping %s "
            "(now a %s message). Raise %s to keep more",
            full,
            self._describe,
            what,
            kind,
            key,
        )

    # --- the writer thread ---------------------------------------------------
    def _run(self) -> None:
        try:
            self._serve()
        finally:
            # Only this thread writes, so only it may close: after its last write returned.
            self._close_sink()

    def _serve(self) -> None:
        try:
            self._sink = self._open_sink()
        except Exception as e:
            self._failed(e)  # says so once; writing retries with backoff
        finally:
            self._opened.set()
        failures = 0
        while True:
            self._measure()
            with self._cond:
                while not len(self._buffer) and not self._closing:
                    if self._alive is not None and not self._alive():
                        self._closing = True
                        break
                    quiet = time.monotonic() - self._written_at
                    if self._heartbeat is not None and quiet >= BEAT:
                        break  # a batch of the heartbeat alone
                    wait = ALIVE_CHECK if self._alive is not None else None
                    if self._heartbeat is not None:
                        wait = min(wait or BEAT, BEAT - quiet)
                    self._idle = True
                    self._cond.wait(wait)
                    self._idle = False
                if self._closing:
                    return
                # The messages themselves: a drop meanwhile lets go of its entry's message.
                entries = [
                    (e.number, e.message) for e in self._buffer.head(BATCH, self._batch_bytes)
                ]
                # Entries are numbered from 1: 0 takes none out (a heartbeat alone).
                last = self._in_flight = entries[-1][0] if entries else 0
                self._busy = True
            batch = self._checked(entries)
            started = time.monotonic()
            beat = self._beat() if self._heartbeat is not None else []
            try:
                if self._sink is None:
                    self._sink = self._open_sink()
                if batch or beat:
                    self.stored += self._sink.write(batch + beat)
            except MessageError as e:
                # Retrying a batch the store cannot read would wedge the queue.
                logger.error(
                    "dask-analytics: %s rejected %d messages: %s", self._describe, len(batch), e
                )
                self.rejected += len(batch)
                self._done(last)
            except Exception as e:
                self._failed(e)
                failures += 1
                with self._cond:
                    self._busy = False
                    for kind, tier, key in self._unsure:  # they were not written after all
                        self._count_drop(kind, tier, key)
                    self._unsure.clear()
                    self._cond.notify_all()
                self._back_off(retry_delay(failures, self._min_delay, self._max_delay))
                continue
            else:
                # Before _done: flush() returns once the readers have the batch too (the
                # process's end flushes the store, then what the readers hold: endings.py).
                if self._after_write is not None and batch:
                    try:
                        self._after_write(batch)
                    except Exception:
                        logger.exception("dask-analytics: a reader of the written record failed")
                self._done(last, started)
                if self.failing_since is not None:
                    self._recovered(self.failing_since)
                failures = 0

    def _recovered(self, since: float) -> None:
        with self._cond:
            self.failing_since = None
            self._warned.clear()
            lost = {k: n - self._dropped_before.get(k, 0) for k, n in self.dropped_by_kind.items()}
            lost = {k: n for k, n in lost.items() if n}
            self._dropped_before = dict(self.dropped_by_kind)
        logger.warning(
            "dask-analytics: %s is reachable again after %.0f s; %d messages were dropped meanwhile%s",
            self._describe,
            time.time() - since,
            sum(lost.values()),
            f" ({lost})" if lost else "",
        )

    def _back_off(self, delay: float) -> None:
        """Wait `delay` seconds before the next attempt, measuring what put asks meanwhile;
        flush and close cut it short."""
        deadline = time.monotonic() + delay
        while True:
            self._measure()
            with self._cond:
                left = deadline - time.monotonic()
                if self._closing or self._retry_now or left <= 0:
                    self._retry_now = False
                    return
                self._cond.wait(left)

    def _measure(self) -> None:
        """Size the free-form messages put since the last time, then trim to the bound."""
        with self._cond:
            unsized = self._buffer.unsized
            if not unsized:
                return
            todo = [(entry, entry.message) for entry in unsized if entry.queued]
            unsized.clear()
        sizes: list[int | None] = []
        for _, message in todo:
            try:
                sizes.append(measure(message))
            except Exception:  # the provisional figure stays
                sizes.append(None)
        with self._cond:  # no batch is in flight: this is the writer thread, between writes
            for (entry, _), size in zip(todo, sizes):
                if size is not None and entry.queued:
                    self._buffer.resize(entry, size)
                    if size > self._buffer.max_bytes:
                        self._too_large(entry)
            self._trim()

    def _checked(self, entries: list[tuple[int, dict[str, Any] | None]]) -> list[Envelope]:
        numbers = {number for number, _ in entries}
        for number in [n for n in self._typed if n not in numbers]:  # dropped meanwhile
            del self._typed[number]
        batch: list[Envelope] = []
        for number, message in entries:
            if number not in self._typed:
                try:
                    self._typed[number] = check(built(message))
                except MessageError as e:
                    # A collector's bug: lose that message, not the batch it came in.
                    logger.error("dask-analytics: dropped a message the store would refuse: %s", e)
                    self.rejected += 1
                    self._typed[number] = None
            typed = self._typed[number]
            if typed is not None:
                batch.append(typed)
        return batch

    def _beat(self) -> list[Envelope]:
        """A heartbeat made now; none if it cannot be made (a bug: the thread goes on)."""
        try:
            assert self._heartbeat is not None
            return [check(self._heartbeat())]
        except Exception:
            logger.exception("dask-analytics: could not make a heartbeat")
            return []

    def _done(self, last: int, started: float | None = None) -> None:
        with self._cond:
            # put() may have pushed part of the batch out meanwhile: it was written all the same.
            self._buffer.remove_through(last)
            self._unsure.clear()
            if started is not None:  # a batch the store refused says nothing
                self._written_at = started
            self._typed.clear()  # it held this batch only
            self._busy = False
            self._cond.notify_all()

    def _failed(self, error: Exception) -> None:
        if self.failing_since is None:
            self.failing_since = time.time()
            logger.warning(
                "dask-analytics: cannot write to %s (%s: %s); keeping up to %s of messages (%s) and retrying",
                self._describe,
                type(error).__name__,
                error,
                format_bytes(self._buffer.max_bytes),
                BYTES_KEY,
            )
        self._close_sink()

    def _close_sink(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:
            try:
                sink.close()
            except Exception:
                pass
