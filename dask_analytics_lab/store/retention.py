"""Applying `analytics.retention`: prune (prune.py) on a background thread, now and then
every `every` seconds, until stopped.

Who runs it: the team server (hourly, on its own store, under its writer lock) and a
scheduler that writes straight into a SQLite/PostgreSQL store (`first_delay()` after it
starts, then daily, through a Store of its own so the shipper's single connection is
never held up).  Not at a scheduler's start: a prune's first query and its deletes
would compete with the scheduler's own start and first writes, a short-lived cluster
need not prune at all (the next long-lived one or the server will), and the schedulers
of a batch of jobs started together would all prune the same rows at the same moment.
Many schedulers pruning at once is harmless all the same: each batch re-checks and
locks what it deletes, and with nothing old a run is one indexed query.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from .prune import prune

logger = logging.getLogger("dask_analytics_lab.retention")

DAY = 86400.0
HOUR = 3600.0
# A scheduler's first prune: FIRST_DELAY after it starts, plus up to FIRST_JITTER at random.
FIRST_DELAY = HOUR
FIRST_JITTER = HOUR


def first_delay() -> float:
    """Seconds from a scheduler's start to its first prune: in [FIRST_DELAY, FIRST_DELAY + FIRST_JITTER)."""
    return FIRST_DELAY + random.uniform(0.0, FIRST_JITTER)


class Retention:
    """store: an open Store, or a callable opening one (closed after each run)."""

    def __init__(
        self,
        store: Any,
        seconds: float,
        *,
        every: float = DAY,
        delay: float = 0.0,
        lock: Callable[[], AbstractContextManager[object]] | None = None,
        on_result: Callable[[dict[str, Any]], None] | None = None,
        name: str = "dask-analytics-retention",
    ):
        self.seconds, self.every, self.delay = float(seconds), float(every), float(delay)
        self._store, self._lock, self._on_result = store, lock, on_result
        self._stop = threading.Event()
        self.runs = 0
        self.last: dict[str, Any] | None = None
        # time.monotonic() of the next run (the schedule, for status and tests).
        self.next_at: float | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> Retention:
        self.next_at = time.monotonic() + self.delay
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the batch in progress (prune never holds a transaction across batches)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def run_once(self) -> dict[str, Any]:
        opened = callable(self._store)
        store = self._store() if opened else self._store
        try:
            result = prune(store, self.seconds, lock=self._lock, stop=self._stop.is_set)
        finally:
            if opened:
                store.close()
        self.runs += 1
        self.last = result
        if result.get("clusters") or result.get("code_snippets"):
            logger.info(
                "dask-analytics retention: deleted %s", {k: v for k, v in result.items() if v}
            )
        if self._on_result is not None:
            self._on_result(result)
        return result

    def _loop(self) -> None:
        next_at = self.next_at
        assert next_at is not None  # start() sets it before it starts this thread
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            try:
                self.run_once()
            except Exception as e:  # a store outage: try again next time, the service goes on
                logger.warning(
                    "dask-analytics retention: prune failed (will try again in %.0f s): %s",
                    self.every,
                    e,
                )
            next_at = self.next_at = time.monotonic() + self.every
