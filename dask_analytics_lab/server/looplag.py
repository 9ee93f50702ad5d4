"""How late the event loop runs its callbacks: the server's own stall detector.

A request that does heavy work on the loop (decrypting a report, encoding a big answer)
delays every other request by as long; so does a read thread that holds the GIL (parsing
or rendering a big document), while the loop's own thread does nothing.  The probe asks
to run every INTERVAL seconds and counts a stall when it ran more than STALL seconds
late, whatever held it; a busy stall when, besides, the loop's own thread spent more
than STALL seconds of CPU in between (heavy work on the loop itself, not a wait for the
GIL or for a CPU of a loaded machine).  /metrics shows both counts, the worst lag and
the worst busy time; the tests check that a flood of reads leaves the busy count at 0.
"""

from __future__ import annotations

import asyncio
import threading
import time

INTERVAL = 0.1
STALL = 0.5


class LoopLag:
    def __init__(self, stall: float = STALL, interval: float = INTERVAL):
        self.stall, self.interval = stall, interval
        self.stalls = 0  # callbacks run more than `stall` seconds late
        self.busy_stalls = 0  # of those, with the loop's thread busy `stall` seconds between
        self.worst = 0.0  # the largest lag seen, seconds
        self.worst_busy = 0.0  # the most CPU the loop's thread used between two ticks, seconds
        self._cpu = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due = 0.0
        self._stopped = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start probing the running loop (idempotent; call on the loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop or self._stopped:
            return
        self._loop = loop  # a new loop (a host app restarted): probe that one
        self._schedule(loop)

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        self._cpu = time.thread_time()  # this thread's CPU clock: the loop's
        self._due = loop.time() + self.interval
        loop.call_at(self._due, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._stopped or loop is not self._loop:
            return
        lag = loop.time() - self._due
        busy = time.thread_time() - self._cpu
        with self._lock:
            self.worst = max(self.worst, lag)
            self.worst_busy = max(self.worst_busy, busy)
            if lag > self.stall:
                self.stalls += 1
                if busy > self.stall:
                    self.busy_stalls += 1
        self._schedule(loop)

    def stop(self) -> None:
        self._stopped = True
