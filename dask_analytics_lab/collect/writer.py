"""The shipper's writer thread: it takes batches from the head of the shipper's buffer,
checks each message against the contract once, writes them, retries with jittered
backoff while the store is down, and writes a heartbeat with each write (alone when the
cluster is quiet).  It shares the shipper's lock, buffer and flags (collect/shipper.py):
the two are one unit, the event loop's half there and the thread's here."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from dask.utils import format_bytes

from ..messages import BEAT, Envelope, MessageError, check
from .buffer import built, measure
from .drops import BYTES_KEY
from .sinks import Sink

logger = logging.getLogger("dask_analytics_lab")

BATCH = 500  # messages of one batch at most (and BATCH_BYTES, the shipper's)
# Seconds between the idle thread's checks that its owner still runs (see `alive`).
ALIVE_CHECK = 1.0


def retry_delay(failures: int, min_delay: float, max_delay: float) -> float:
    """Seconds to wait before retrying after `failures` consecutive failures: doubling from
    min_delay, capped at max_delay, and jittered over the upper half of that range so the
    schedulers a store outage stopped together do not all come back at the same instant."""
    ceiling = min(max_delay, min_delay * 2.0 ** min(failures, 64))
    return random.uniform(max(min_delay, ceiling / 2), ceiling)


def next_delay(failures: int, min_delay: float, max_delay: float, error: Any) -> float:
    """retry_delay, or longer where a busy server said how long to wait (a 503's
    Retry-After, the error's `retry_after`): no sooner, and never past max_delay."""
    asked = min(getattr(error, "retry_after", None) or 0.0, max_delay)
    return max(retry_delay(failures, min_delay, max_delay), asked)


class Writer:
    """The thread's state and loop, for the shipper `q`."""

    def __init__(
        self,
        q: Any,
        open_sink: Callable[[], Sink],
        *,
        min_delay: float,
        max_delay: float,
        alive: Callable[[], bool] | None,
        heartbeat: Callable[[], dict[str, Any]] | None,
        after_write: Callable[[list[Envelope]], None] | None,
    ):
        self._q = q
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
        self._sink: Sink | None = None  # this thread's alone
        self._min_delay = min_delay
        self._max_delay = max_delay
        self._error: Exception | None = None  # why the last write failed
        self.stored = 0
        self.failing_since: float | None = None
        self.check = _Check()
        self.opened = threading.Event()  # the first attempt to open the sink is over

    def run(self) -> None:
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
            self.opened.set()
        failures = 0
        while True:
            self._measure()
            entries = self._next_batch()
            if entries is None:
                return
            if self._write(entries):
                failures = 0
            else:
                failures += 1
                self._back_off(next_delay(failures, self._min_delay, self._max_delay, self._error))

    def _next_batch(self) -> list[tuple[int, dict[str, Any] | None]] | None:
        """Wait for messages (or a heartbeat's turn), then take the next batch out of the
        buffer's head: (number, message) each; None when closing."""
        with self._q._cond:
            while not len(self._q._buffer) and not self._q._closing:
                if self._alive is not None and not self._alive():
                    self._q._closing = True
                    break
                quiet = time.monotonic() - self._written_at
                if self._heartbeat is not None and quiet >= BEAT:
                    break  # a batch of the heartbeat alone
                wait = ALIVE_CHECK if self._alive is not None else None
                if self._heartbeat is not None:
                    wait = min(wait or BEAT, BEAT - quiet)
                self._q._idle = True
                self._q._cond.wait(wait)
                self._q._idle = False
            self._linger()
            if self._q._closing:
                return None
            # The messages themselves: a drop meanwhile lets go of its entry's message.
            entries = [
                (e.number, e.message) for e in self._q._buffer.head(BATCH, self._q._batch_bytes)
            ]
            # What stays behind (a batch's worth came at once) goes next, without lingering.
            self._q._since = 0.0 if len(self._q._buffer) > len(entries) else None
            self._q._hurry = False
            # Entries are numbered from 1: 0 takes none out (a heartbeat alone).
            self._q._in_flight = entries[-1][0] if entries else 0
            self._q._busy = True
            return entries

    def _linger(self) -> None:
        """(The lock held.)  Wait until the oldest message has waited `linger` seconds,
        unless a batch is full, or a flush, a close or an urgent message says go.  Not
        while the store fails: a retry goes once its backoff is over, and the backoff
        measures what put asks meanwhile (a wait here would leave the buffer's bound to
        provisional sizes)."""
        q = self._q
        while q._since is not None and q._linger > 0 and self.failing_since is None:
            left = q._since + q._linger - time.monotonic()
            if left <= 0 or q._closing or q._hurry:
                return
            if len(q._buffer) >= BATCH or q._buffer.bytes >= q._batch_bytes:
                return
            q._cond.wait(left)

    def _write(self, entries: list[tuple[int, dict[str, Any] | None]]) -> bool:
        """Write the batch (and a heartbeat made now); False when the store failed."""
        last = self._q._in_flight
        batch = self.check.batch(entries)
        started = time.monotonic()
        beat = self.check.beat(self._heartbeat) if self._heartbeat is not None else []
        try:
            if self._sink is None:
                self._sink = self._open_sink()
            if batch or beat:
                self.stored += self._sink.write(batch + beat)
        except MessageError as e:
            # Retrying a batch the store cannot read would wedge the queue.
            logger.error(
                "dask-analytics: %s rejected %d messages: %s", self._q._describe, len(batch), e
            )
            self.check.rejected += len(batch)
            self._done(last)
            return True
        except Exception as e:
            self._error = e
            self._failed(e)
            with self._q._cond:
                self._q._busy = False
                self._q._drops.unsure_lost(self._q._buffer)  # they were not written after all
                self._q._cond.notify_all()
            return False
        # Before _done: flush() returns once the readers have the batch too (the process's
        # end flushes the store, then what the readers hold: endings.py).
        if self._after_write is not None and batch:
            try:
                self._after_write(batch)
            except Exception:
                logger.exception("dask-analytics: a reader of the written record failed")
        self._done(last, started)
        if self.failing_since is not None:
            self._recovered(self.failing_since)
        return True

    def _recovered(self, since: float) -> None:
        with self._q._cond:
            self.failing_since = None
            lost = self._q._drops.recovered()
        logger.warning(
            "dask-analytics: %s is reachable again after %.0f s; %d messages were dropped meanwhile%s",
            self._q._describe,
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
            with self._q._cond:
                left = deadline - time.monotonic()
                if self._q._closing or self._q._retry_now or left <= 0:
                    self._q._retry_now = False
                    return
                self._q._cond.wait(left)

    def _measure(self) -> None:
        """Size the free-form messages put since the last time, then trim to the bound."""
        with self._q._cond:
            unsized = self._q._buffer.unsized
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
        with self._q._cond:  # no batch is in flight: this is the writer thread, between writes
            for (entry, _), size in zip(todo, sizes):
                if size is not None and entry.queued:
                    self._q._buffer.resize(entry, size)
                    if size > self._q._buffer.max_bytes:
                        self._q._too_large(entry)
            self._q._trim()

    def _done(self, last: int, started: float | None = None) -> None:
        with self._q._cond:
            # put() may have pushed part of the batch out meanwhile: it was written all the same.
            self._q._buffer.remove_through(last)
            self._q._drops.unsure.clear()
            if started is not None:  # a batch the store refused says nothing
                self._written_at = started
            self.check.clear()  # it held this batch only
            self._q._busy = False
            self._q._cond.notify_all()

    def _failed(self, error: Exception) -> None:
        if self.failing_since is None:
            self.failing_since = time.time()
            logger.warning(
                "dask-analytics: cannot write to %s (%s: %s); keeping up to %s of messages (%s) and retrying",
                self._q._describe,
                type(error).__name__,
                error,
                format_bytes(self._q._buffer.max_bytes),
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


class _Check:
    """Each message of a batch checked against the contract once (messages.check): a
    batch retried through an outage is not checked (nor a refused message counted) on
    every attempt."""

    def __init__(self) -> None:
        self.typed: dict[int, Envelope | None] = {}  # number -> typed message, None if refused
        self.rejected = 0

    def batch(self, entries: list[tuple[int, dict[str, Any] | None]]) -> list[Envelope]:
        numbers = {number for number, _ in entries}
        for number in [n for n in self.typed if n not in numbers]:  # dropped meanwhile
            del self.typed[number]
        batch: list[Envelope] = []
        for number, message in entries:
            if number not in self.typed:
                try:
                    self.typed[number] = check(built(message))
                except MessageError as e:
                    # A collector's bug: lose that message, not the batch it came in.
                    logger.error("dask-analytics: dropped a message the store would refuse: %s", e)
                    self.rejected += 1
                    self.typed[number] = None
            typed = self.typed[number]
            if typed is not None:
                batch.append(typed)
        return batch

    @staticmethod
    def beat(heartbeat: Callable[[], dict[str, Any]]) -> list[Envelope]:
        """A heartbeat made now; none if it cannot be made (a bug: the thread goes on)."""
        try:
            return [check(heartbeat())]
        except Exception:
            logger.exception("dask-analytics: could not make a heartbeat")
            return []

    def clear(self) -> None:
        self.typed.clear()
