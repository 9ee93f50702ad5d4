"""Per-account storage quotas: the bytes of stored reports and of recorded events.

Without one, any account can fill the team's disk.  Each kind has its own limit
(settings quota_report_bytes, quota_event_bytes; None or 0: none).  A write that would
take an account past it is refused whole: 413 when it alone is larger than the quota,
else 507, saying which quota, how much is used and how to raise it.  What an account
uses is read from the store at most every USAGE_TTL seconds (a sum over its rows) and
counted up in between, so a busy ingest does not sum the events table per batch.
Blocking: call off the loop.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..display import dumps
from ..messages import EventMessage
from .errors import ApiError

USAGE_TTL = 60.0
FLAGS = {"reports": "--report-quota-bytes", "events": "--event-quota-bytes"}
KEYS = {"reports": "quota_report_bytes", "events": "quota_event_bytes"}


def event_bytes(batch: list) -> int:
    """The bytes a checked batch's events add (their messages as JSON, as stored)."""
    return sum(
        len(dumps(m.data.msg))
        for m in batch
        if isinstance(m, EventMessage) and m.data.msg is not None
    )


class Quota:
    def __init__(self, team: Any, limits: dict[str, int | None]):
        self.team = team
        self.limits = {k: (int(v) if v else None) for k, v in limits.items()}
        self._used: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def charge(self, account: str | None, kind: str, n: int) -> None:
        """Count `n` more bytes of `kind` for `account`, or refuse (413/507) and count nothing."""
        limit = self.limits.get(kind)
        if not limit or account is None or n <= 0:
            return
        how = f"raise it with the server setting {KEYS[kind]} (`dask-analytics server {FLAGS[kind]} N`)"
        if n > limit:
            raise ApiError(
                413,
                f"this upload holds {n:,} bytes of {kind}, more than account {account!r}'s whole "
                f"{kind} quota of {limit:,} bytes; send less, or {how}",
            )
        key = (account, kind)
        with self._lock:
            hit = self._used.get(key)
            now = time.monotonic()
            if hit is None or now - hit[0] >= USAGE_TTL:
                hit = (now, self.team.stored_bytes(account, kind))
            used = hit[1]
            if used + n > limit:
                self._used[key] = hit
                raise ApiError(
                    507,
                    f"account {account!r} has used {used:,} of its {limit:,}-byte {kind} quota and "
                    f"this needs {n:,} more; delete old {kind} (retention: `--retention`), or {how}",
                )
            if len(self._used) > 100_000:
                self._used.clear()
            self._used[key] = (hit[0], used + n)
