"""Failed authentications counted in the database, so that replicas agree.

Each server process counts failures with a credential from an address in its own
memory (context.py) and refuses that credential there, before any look-up, once it
failed `limit` times in the window.  Behind a load balancer one process sees only a
share of the tries, so each failure is also counted in the database (one upsert, on a
thread of its own, off the event loop) and the count it returns is the whole's: once
that count reaches the limit, this process refuses the credential too for the rest
of the window, and the request whose failure was counted past the limit is answered
429 as one server would answer it.  A replica learns of a credential refused elsewhere
from its own next failure with it, so all replicas together let at most one more try
per replica through a window than one process would, and the check before each
look-up never waits on the database.

A flood of failures cannot queue database writes without bound: past MAX_PENDING
waiting writes a failure is counted in memory only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

logger = logging.getLogger("dask_analytics_lab.server")

MAX_PENDING = 1000


class SharedFailures:
    """`count(address, fingerprint)` after each failure; `refused(...)` before a look-up."""

    def __init__(self, team: Any, limit: int, window: float, write_lock: Callable[[], Any]):
        self.team, self.limit, self.window = team, limit, window
        self._write_lock = write_lock
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="dal-server-throttle")
        self._lock = threading.Lock()
        self._pending = 0
        # (address, fingerprint) -> time.monotonic() when the database's window ends, for
        # credentials whose count there reached the limit.
        self._over: dict[tuple[str, str], float] = {}
        self._forgotten = time.time()

    def refused(self, address: str, fingerprint: str) -> float:
        """Seconds until the database's count lets this credential be tried from `address` again (0: now)."""
        until = self._over.get((address, fingerprint))
        if until is None:
            return 0.0
        left = until - time.monotonic()
        if left <= 0:
            self._over.pop((address, fingerprint), None)
            return 0.0
        return left

    def count(self, address: str, fingerprint: str) -> Future | None:
        """Count one failure in the database; a future of the window's count there, or
        None when too many writes wait already (then it is counted in memory only)."""
        with self._lock:
            if self._pending >= MAX_PENDING:
                return None
            self._pending += 1
        try:
            return self._executor.submit(self._count, address, fingerprint)
        except RuntimeError:  # shutting down
            with self._lock:
                self._pending -= 1
            return None

    def _count(self, address: str, fingerprint: str) -> int | None:
        try:
            now = time.time()
            with self._write_lock():
                n, since = self.team.count_auth_failure(
                    address, fingerprint, now=now, window=self.window
                )
                if now - self._forgotten > self.window:
                    self._forgotten = now
                    self.team.forget_auth_failures(now - self.window)
            if n >= self.limit:
                if len(self._over) > 100_000:
                    self._over.clear()
                self._over[address, fingerprint] = time.monotonic() + max(
                    0.0, since + self.window - now
                )
            return n
        except Exception as e:  # the store down: the failure still counts in this process
            logger.debug(
                "dask-analytics server: could not count a failed authentication in the store: %s", e
            )
            return None
        finally:
            with self._lock:
                self._pending -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=True)
