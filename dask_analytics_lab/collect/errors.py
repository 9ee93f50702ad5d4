"""Count failed tasks by (task group, exception), so 10,000 alike failures are one row."""
from __future__ import annotations

import hashlib
from typing import Any


class ErrorCounter:
    def __init__(self, max_rows: int = 10_000):
        self._rows: dict[tuple[str, str], dict] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._max_rows = max_rows
        # Tasks that raised, per task group (the tracker prunes it with its groups).
        self.erred_groups: dict[str, int] = {}

    def record(self, group: str, key: Any, exception_text: str, traceback_text: str | None, t: float) -> None:
        """O(1): runs inside the scheduler's transition hook."""
        self.erred_groups[group] = self.erred_groups.get(group, 0) + 1
        row_key = (group, exception_text)
        row = self._rows.get(row_key)
        if row is None:
            if len(self._rows) >= self._max_rows:
                self._evict()
            row = self._rows[row_key] = {
                "group": group,
                "hash": hashlib.sha256(exception_text.encode()).hexdigest()[:32],
                "exception_text": exception_text,
                "traceback_text": traceback_text or "",
                "key": str(key),
                "count": 0,
                "first_time": t,
                "last_time": t,
            }
        row["count"] += 1
        row["last_time"] = t
        self._dirty.add(row_key)

    def drain(self, group_owner: dict[str, str]) -> list[dict]:
        """Rows changed since the last drain whose computation is known."""
        out = []
        for row_key in list(self._dirty):
            row = self._rows[row_key]
            computation_id = group_owner.get(row["group"])
            if computation_id is None:
                continue  # its computation has not been summarised yet: next tick
            self._dirty.discard(row_key)
            out.append({**row, "computation_id": computation_id})
        return out

    def _evict(self) -> None:
        for row_key in list(self._rows):
            if row_key not in self._dirty:
                del self._rows[row_key]
                return
        self._rows.pop(next(iter(self._rows)))
