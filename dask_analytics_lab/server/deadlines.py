"""When an ingest request stops being worth doing, and when to refuse one at once.

A batch nobody waits for any more is wasted work twice over: the plugin gave up on it
and sends it again.  So the plugin says how long it waits (`X-Request-Timeout`,
seconds: remote.py's socket timeout), HAProxy says when it took the request
(`X-Request-Start: t=<microseconds since the epoch>`, trusted from a proxy of
`forwarded_allow_ips` only: deploy/haproxy.cfg), and the server

- answers 503 with Retry-After at once, from the headers, when the batches already
  handed to the body threads would keep this one past its deadline (`IngestQueue`:
  how many wait, and what one has cost lately);
- waits for its memory budgets no longer than the deadline leaves;
- drops it on the body thread, before decoding or storing anything, when the deadline
  passed while it queued (the client has given up: its 503 reaches no one).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping

from .errors import ApiError

TIMEOUT_HEADER = "X-Request-Timeout"
START_HEADER = "X-Request-Start"
# A client that says nothing waits this long (the plugin's own timeout, remote.py).
DEFAULT_TIMEOUT = 10.0
# A longer wait than this is read as this: past it a request is no longer "waited for".
MAX_TIMEOUT = 300.0
# A proxy's stamp older than this is a clock that disagrees, not a request that waited.
MAX_PROXY_AGE = 600.0
# What one batch costs a body thread at first, before any was measured (seconds).
FIRST_COST = 0.005


def deadline(headers: Mapping[str, str], *, from_proxy: bool) -> float:
    """The time.monotonic() by which the client stops waiting, or ApiError 400 for a
    header that is not a number of seconds."""
    now_wall, now = time.time(), time.monotonic()
    given = headers.get(TIMEOUT_HEADER)
    timeout = DEFAULT_TIMEOUT
    if given is not None:
        try:
            timeout = float(given)
        except ValueError:
            timeout = math.nan
        if not timeout > 0:  # NaN too
            raise ApiError(
                400,
                f"{TIMEOUT_HEADER} must be the seconds the client waits for an answer, a number "
                f"more than 0; got {given[:40]!r}",
            )
        timeout = min(timeout, MAX_TIMEOUT)
    waited = 0.0
    stamp = headers.get(START_HEADER) if from_proxy else None
    if stamp:
        try:
            started = int(stamp.removeprefix("t=")) / 1e6
        except ValueError:
            started = now_wall  # a proxy we trust wrote it: unreadable means unknown
        if 0 <= now_wall - started <= MAX_PROXY_AGE:
            waited = now_wall - started
    return now - waited + timeout


class IngestQueue:
    """Ingest batches handed to the body threads and not yet started, and an average of
    what one costs there, to tell a new request at once how long it would wait."""

    def __init__(self, threads: int):
        self.threads = max(1, threads)
        self.waiting = 0
        self.cost = FIRST_COST
        self._running: dict[int, float] = {}  # thread id -> when its batch started
        self._lock = threading.Lock()

    def wait(self) -> float:
        """Seconds a batch handed over now would wait before a thread starts it.  A
        batch running longer than the average counts as that long: a store that stalls
        shows at once, not after the stalled batches end."""
        now = time.perf_counter()
        with self._lock:
            running = list(self._running.values())
            waiting = self.waiting
        per = max(self.cost, max((now - t for t in running), default=0.0))
        ahead = waiting + (1 if len(running) >= self.threads else 0)
        return ahead * per / self.threads

    def refuse_if_late(self, deadline: float) -> None:
        """503 + Retry-After when the queue, and the batch's own work, would keep it past
        `deadline`."""
        wait = self.wait()
        if time.monotonic() + wait + self.cost <= deadline:
            return
        raise ApiError(
            503,
            f"the server is busy: {self.waiting} batches wait to be stored, about {wait:.1f} s of "
            "work, longer than this request waits; try again later",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )

    def handed(self) -> None:
        with self._lock:
            self.waiting += 1

    def started(self) -> float:
        t0 = time.perf_counter()
        with self._lock:
            self.waiting -= 1
            self._running[threading.get_ident()] = t0
        return t0

    def done(self, t0: float, *, worked: bool = True) -> None:
        """The batch started at `t0` is over; worked=False: dropped unread (its near-zero
        time would make a stalled queue look fast)."""
        cost = time.perf_counter() - t0
        with self._lock:
            self._running.pop(threading.get_ident(), None)
            if worked:  # an average over the last ~20 batches: quick to follow a slow store
                self.cost += (cost - self.cost) / 20
