"""Count failed tasks as failures: one row per (computation, task group, exception type,
the frame that raised it, the message with its literals masked).

500 `KeyError('key-<i>')` raised on one line are one row with count 500 and a few
example messages.  `record` runs inside the scheduler's transition hook, so it is O(1)
in the number of rows: no scan, no eviction; past a bound, a group's further kinds of
failure go to one overflow row, so counts stay exact and nothing is dropped silently.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable

# Longest message text we mask and keep: the regex is linear, keep its input bounded.
MAX_TEXT = 2000
EXAMPLES = 3
OVERFLOW_TYPE = "(other failures)"
OVERFLOW_PATTERN = ("more distinct kinds of failure in this task group than analytics keeps "
                    "apart; each is counted here")

_TYPE = re.compile(r"[A-Za-z_][\w.]*")
_FRAME = re.compile(r'File "([^"]*)", line (\d+), in (.*)')
# Numbers, hex and tokens such as Dask's key hashes: what differs between failures of
# one kind (`KeyError('key-12')`, `bad value 3.5`).  Words stay: they say what failed.
_LITERAL = re.compile(r"0x[0-9a-fA-F]+|(?<![A-Za-z])[0-9a-f]*\d[0-9a-f]*(?:\.\d+)?(?![A-Za-z])")


def exception_type(exception_text: str) -> str:
    """`KeyError('x')` -> KeyError; a message that names no type -> Exception."""
    m = _TYPE.match(exception_text)
    if m and (m.end() == len(exception_text) or exception_text[m.end()] in "(:"):
        return m.group(0)
    return "Exception"


def raising_frame(traceback_text: str | None) -> str:
    """The innermost frame of a formatted traceback, as `path:line in function`."""
    if not traceback_text:
        return ""
    i = traceback_text.rfind('File "')
    m = _FRAME.match(traceback_text, i) if i >= 0 else None
    return f"{m.group(1)}:{m.group(2)} in {m.group(3).strip()}" if m else ""


def mask(text: str) -> str:
    """The message with its literals masked: `KeyError('key-12')` -> `KeyError('key-…')`."""
    return _LITERAL.sub("…", text[:MAX_TEXT])


def fingerprint(exc_type: str, location: str, pattern: str) -> str:
    return hashlib.sha256(f"{exc_type}\0{location}\0{pattern}".encode()).hexdigest()[:32]


class ErrorCounter:
    def __init__(self, *, kinds_per_group: int = 20, max_rows: int = 10_000):
        self._rows: dict[tuple[str, str, str], dict] = {}
        self._kinds: dict[tuple[str, str], int] = {}  # distinct rows per (computation, group)
        self._dirty: set[tuple[str, str, str]] = set()
        self._kinds_per_group = kinds_per_group
        self._max_rows = max_rows

    def record(self, computation_id: str, group: str, key: Any, exception_text: str,
               traceback_text: str | None, t: float, *, exc_type: str | None = None,
               location: str | None = None, workers: Iterable[str] = (), count: int = 1) -> None:
        """Count `count` failures.  O(1) in the number of rows; runs in the transition hook."""
        text = exception_text[:MAX_TEXT]
        exc_type = exc_type or exception_type(text)
        location = raising_frame(traceback_text) if location is None else location
        pattern = mask(text)
        digest = fingerprint(exc_type, location, pattern)
        row_key = (computation_id, group, digest)
        row = self._rows.get(row_key)
        if row is None:
            kinds_key = (computation_id, group)
            kinds = self._kinds.get(kinds_key, 0)
            if kinds >= self._kinds_per_group or len(self._rows) >= self._max_rows:
                exc_type, location, pattern = OVERFLOW_TYPE, "", OVERFLOW_PATTERN
                digest = fingerprint(exc_type, location, pattern)
                row_key = (computation_id, group, digest)
                row = self._rows.get(row_key)
            if row is None:
                self._kinds[kinds_key] = kinds + 1
                row = self._rows[row_key] = {
                    "computation_id": computation_id, "group": group, "hash": digest,
                    "exc_type": exc_type, "location": location, "pattern": pattern,
                    "examples": [], "workers": [], "exception_text": text,
                    "traceback_text": traceback_text or "", "key": str(key), "count": 0,
                    "first_time": t, "last_time": t,
                }
        row["count"] += count
        row["last_time"] = t
        if len(row["examples"]) < EXAMPLES and text not in row["examples"]:
            row["examples"].append(text)
        for w in workers:
            if len(row["workers"]) < 20 and w not in row["workers"]:
                row["workers"].append(w)
        self._dirty.add(row_key)

    def drain(self) -> list[dict]:
        """Rows changed since the last drain (copies: they go to another thread)."""
        out = [{**self._rows[k], "examples": list(self._rows[k]["examples"]),
                "workers": list(self._rows[k]["workers"])} for k in self._dirty]
        self._dirty.clear()
        return out

    def forget(self, computation_ids: set[str]) -> None:
        """Drop the rows of computations no longer tracked (already sent)."""
        if not computation_ids:
            return
        for row_key in [k for k in self._rows if k[0] in computation_ids]:
            self._rows.pop(row_key)
            self._dirty.discard(row_key)
        for kinds_key in [k for k in self._kinds if k[0] in computation_ids]:
            del self._kinds[kinds_key]

    def clear(self) -> None:
        self._rows.clear()
        self._kinds.clear()
        self._dirty.clear()
