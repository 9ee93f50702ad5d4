"""A bounded queue and a writer thread between the scheduler and the store.

`put` is what the event loop calls: O(1), never blocks, never raises.  The
thread checks each message against the contract once (messages.check: a message
the store would refuse is dropped alone, and logged, instead of costing its whole
batch), writes the typed messages in batches, retries with jittered backoff while
the store is down, drops the oldest messages once the buffer is full, and says so,
once per outage.

The sink is opened as the shipper starts, not at the first write: the store's
connections and files are open before the scheduler serves anything and stay
the same for its life (distributed's tests count a scheduler's descriptors
before and after a worker comes and goes).
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from itertools import islice
from typing import Callable

from ..messages import HEARTBEAT, Envelope, MessageError, check
from .sinks import Sink

logger = logging.getLogger("dask_analytics_lab")

BATCH = 500
# Longest the constructor waits for the sink to open (on the writer thread).  Opening
# a local SQLite store takes milliseconds; the bound only matters when the store is
# slow to answer, and then the thread goes on trying in the background.
OPEN_WAIT = 2.0
# Seconds between the idle thread's checks that its owner still runs (see `alive`).
ALIVE_CHECK = 1.0


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
        min_delay: float = 0.2,
        max_delay: float = 30.0,
        describe: str = "the analytics store",
        alive: Callable[[], bool] | None = None,
        heartbeat: Callable[[], dict] | None = None,
    ):
        # alive(): False once the owner is gone without calling close() (a scheduler
        # stopped with Server.stop(), whose event loop then closes): the thread writes
        # what it holds, closes the store and ends rather than outliving it.
        self._alive = alive
        # heartbeat(): a `heartbeat` message, queued by the thread when nothing was written
        # for HEARTBEAT seconds.  The thread sends it, not the event loop: a scheduler busy
        # for a while with a large graph is not dead, and readers must not call it lost.
        self._heartbeat = heartbeat
        self._written_at = time.monotonic()
        self._open_sink = open_sink
        self._sink: Sink | None = None
        # (number, message): numbers tell which entries a finished batch covered.
        self._queue: deque[tuple[int, dict]] = deque()
        self._numbered = 0
        self._max = max_messages
        self._min_delay = min_delay
        self._max_delay = max_delay
        self._describe = describe
        self._cond = threading.Condition()
        self._closing = False
        self._busy = False  # a batch is out of the queue's head and being written
        self.dropped = 0  # oldest messages pushed out of a full buffer
        self.rejected = 0  # messages the contract or the store refused as malformed
        self.stored = 0
        self.failing_since: float | None = None
        self._dropped_at_outage = 0
        # {number: typed message, or None if refused}: a batch retried through an outage
        # is checked (and a refused message counted) once, not on every attempt.
        self._typed: dict[int, Envelope | None] = {}
        self._opened = threading.Event()  # the first attempt to open the sink is over
        self._thread = threading.Thread(target=self._run, name="dask-analytics-shipper", daemon=True)
        self._thread.start()
        self._opened.wait(OPEN_WAIT)

    # --- called on the scheduler's event loop -------------------------------
    def put(self, message: dict) -> None:
        with self._cond:
            if len(self._queue) >= self._max:
                self._queue.popleft()
                self.dropped += 1
                if self.dropped - self._dropped_at_outage == 1:
                    logger.warning(
                        "dask-analytics: buffer of %d messages is full while %s is unreachable; "
                        "dropping the oldest (raise analytics.buffer.max-messages to keep more)",
                        self._max, self._describe,
                    )
            self._numbered += 1
            self._queue.append((self._numbered, message))
            self._cond.notify()

    @property
    def pending(self) -> int:
        return len(self._queue)

    # --- called from other threads -------------------------------------------
    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every message put so far is written; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Write what can be written within `timeout`, then stop the thread."""
        flushed = self.flush(timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=1)
        if not flushed and self._queue:
            logger.warning(
                "dask-analytics: %d messages could not be written to %s before shutdown; "
                "%d were dropped earlier", len(self._queue), self._describe, self.dropped,
            )
        self._close_sink()

    def _close_sink(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:
            try:
                sink.close()
            except Exception:
                pass

    # --- the writer thread ---------------------------------------------------
    def _run(self) -> None:
        try:
            self._sink = self._open_sink()
        except Exception as e:
            self._failed(e)  # says so once; writing retries with backoff
        finally:
            self._opened.set()
        failures = 0
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    if self._alive is not None and not self._alive():
                        self._closing = True
                        self._close_sink()
                        break
                    quiet = time.monotonic() - self._written_at
                    if self._heartbeat is not None and quiet >= HEARTBEAT:
                        self._numbered += 1
                        self._queue.append((self._numbered, self._heartbeat()))
                        break
                    wait = ALIVE_CHECK if self._alive is not None else None
                    if self._heartbeat is not None:
                        wait = min(wait or HEARTBEAT, HEARTBEAT - quiet)
                    self._cond.wait(wait)
                if self._closing:
                    return
                entries = list(islice(self._queue, BATCH))
                self._busy = True
            batch = self._checked(entries)
            last = entries[-1][0]
            try:
                if self._sink is None:
                    self._sink = self._open_sink()
                if batch:
                    self.stored += self._sink.write(batch)
            except MessageError as e:
                # Retrying a batch the store cannot read would wedge the queue.
                logger.error("dask-analytics: %s rejected %d messages: %s", self._describe, len(batch), e)
                self.rejected += len(batch)
                self._done(last)
            except Exception as e:
                self._failed(e)
                failures += 1
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
                    if not self._closing:
                        self._cond.wait(retry_delay(failures, self._min_delay, self._max_delay))
                continue
            else:
                self._done(last)
                if self.failing_since is not None:
                    logger.warning(
                        "dask-analytics: %s is reachable again after %.0f s; %d messages were dropped "
                        "while it was down", self._describe, time.time() - self.failing_since,
                        self.dropped - self._dropped_at_outage,
                    )
                    self.failing_since = None
                failures = 0

    def _checked(self, entries: list[tuple[int, dict]]) -> list[Envelope]:
        first = entries[0][0]
        for number in [n for n in self._typed if n < first]:  # pushed out of a full buffer
            del self._typed[number]
        batch = []
        for number, message in entries:
            if number not in self._typed:
                try:
                    self._typed[number] = check(message)
                except MessageError as e:
                    # A collector's bug: lose that message, not the batch it came in.
                    logger.error("dask-analytics: dropped a message the store would refuse: %s", e)
                    self.rejected += 1
                    self._typed[number] = None
            typed = self._typed[number]
            if typed is not None:
                batch.append(typed)
        return batch

    def _done(self, last: int) -> None:
        with self._cond:
            # put() may have pushed part of the batch out meanwhile: pop only what we sent.
            while self._queue and self._queue[0][0] <= last:
                self._queue.popleft()
            self._written_at = time.monotonic()
            self._typed.clear()  # it held this batch only
            self._busy = False
            self._cond.notify_all()

    def _failed(self, error: Exception) -> None:
        if self.failing_since is None:
            self.failing_since = time.time()
            self._dropped_at_outage = self.dropped
            logger.warning(
                "dask-analytics: cannot write to %s (%s: %s); keeping up to %d messages and retrying",
                self._describe, type(error).__name__, error, self._max,
            )
        if self._sink is not None:
            try:
                self._sink.close()
            except Exception:
                pass
            self._sink = None
