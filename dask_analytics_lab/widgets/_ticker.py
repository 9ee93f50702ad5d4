"""One background thread that polls the store for every live widget in the kernel.

A thread, not the kernel's event loop: while a cell blocks in `compute()` the loop
does not run, and that is exactly when a live view must keep updating.  Widgets are
held weakly; each says when it wants its next tick.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

logger = logging.getLogger("dask_analytics_lab")


class Ticker:
    def __init__(self) -> None:
        self._feeds: weakref.WeakSet[Any] = weakref.WeakSet()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.cpu_seconds = 0.0  # thread CPU time spent polling: benchmarks/widget_cpu.py reads it

    def add(self, feed: Any) -> None:
        with self._lock:
            self._feeds.add(feed)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="dask-analytics-widgets", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def has(self, feed: Any) -> bool:
        with self._lock:
            return feed in self._feeds

    def discard(self, feed: Any) -> None:
        with self._lock:
            self._feeds.discard(feed)

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while True:
            cpu0 = time.thread_time()
            now = time.monotonic()
            with self._lock:
                feeds = list(self._feeds)
            next_due = now + 5.0
            for feed in feeds:
                if feed.due <= now:
                    try:
                        feed.tick()
                    except Exception:  # a widget's bug must not stop every other widget
                        logger.exception("dask-analytics: widget update failed")
                    feed.due = time.monotonic() + feed.period()
                next_due = min(next_due, feed.due)
            del feeds
            self.cpu_seconds += time.thread_time() - cpu0
            self._wake.wait(max(0.01, next_due - time.monotonic()))
            self._wake.clear()


TICKER = Ticker()
