"""Count failed tasks as failures: one row per (computation, task group, exception type,
the frame that raised it, the message with its literals masked).

500 `KeyError('key-<i>')` or `KeyError('k<i>')` raised on one line are one row with count
500 and a few example messages.  A kind of failure is its exception type and the frame
that raised it first, then its masked message: the bound on kinds applies to the
messages of one (type, frame), so a new exception type or a new line is always a row of
its own.  Past the bound, a (type, frame)'s further messages are counted in one overflow
row of that type and frame, which says how many distinct messages it holds and shows
some of them.

`record` runs inside the scheduler's transition hook, so it is O(1) in the number of
rows: no scan, no eviction.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, TypedDict

# Longest message text we mask and keep: the regex is linear, keep its input bounded.
MAX_TEXT = 2000
EXAMPLES = 3
# The type of the last-resort row of a task group, used only once analytics already keeps
# `max_places` distinct (type, frame) pairs: memory stays bounded whatever the tasks raise.
OVERFLOW_TYPE = "(other failures)"
# Marks an overflow row in its fingerprint; no masked message can be this.
_OVERFLOW_MARK = "\0(overflow)"

_TYPE = re.compile(r"[A-Za-z_][\w.]*")
_FRAME = re.compile(r'File "([^"]*)", line (\d+), in (.*)')
# What differs between failures of one kind: hex numbers, tokens such as Dask's key
# hashes (`key-a3f9c0…`), and numbers, also inside identifiers (`k12`, `user42`,
# `shard7`, `col_3`), so each of those families is one kind.  Letters stay: they say
# what failed.
_LITERAL = re.compile(
    r"(?=[0-9a-f])(?:0x[0-9a-fA-F]+"  # the lookahead: most positions fail at once
    r"|(?<![A-Za-z0-9])(?:\d+(?:\.\d+)?[eE][-+]?\d+|[0-9a-f]*\d[0-9a-f]*(?:\.\d+)?)(?![A-Za-z0-9])"
    r"|\d+(?:\.\d+)?)"
)


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
    """The message with its literals masked: `KeyError('key-12')` -> `KeyError('key-…')`,
    `KeyError('k12')` -> `KeyError('k…')`."""
    return _LITERAL.sub("…", text[:MAX_TEXT])


def fingerprint(exc_type: str, location: str, pattern: str) -> str:
    return hashlib.sha256(f"{exc_type}\0{location}\0{pattern}".encode()).hexdigest()[:32]


def overflow_pattern(distinct: int, *, at_least: bool = False, what: str = "message") -> str:
    """The pattern of an overflow row: how many distinct messages (kinds, for the
    last-resort row) it counts together."""
    more = "+" if at_least else ""
    return f"({distinct:,}{more} other distinct {what}{'' if distinct == 1 else 's'}, counted together)"


class FailureRow(TypedDict):
    """One row: the data of an `exception` message (messages.Failure)."""

    computation_id: str
    group: str
    hash: str
    exc_type: str
    location: str
    pattern: str
    examples: list[str]
    workers: list[str]
    exception_text: str
    traceback_text: str
    key: str
    count: int
    retried: int  # of count: attempts Dask ran again (retries=)
    recovered: int  # tasks that succeeded after a retried attempt
    first_time: float
    last_time: float


# What a row's first failure says: (computation id, group, key, text, traceback, time).
_Fields = tuple[str, str, str, str, str, float]


class _Place:
    """One (computation, task group, exception type, frame): how many rows of masked
    messages it has, and its overflow row once it has too many."""

    __slots__ = ("kinds", "overflow", "folded", "at_least")

    def __init__(self) -> None:
        self.kinds = 0
        self.overflow: tuple[str, str, str] | None = None
        self.folded: set[int] = set()  # hash() of each distinct pattern in the overflow row
        self.at_least = False  # folded stopped growing: its size is a lower bound


class ErrorCounter:
    def __init__(
        self,
        *,
        kinds_per_place: int = 20,
        max_rows: int = 10_000,
        max_places: int = 10_000,
        max_folded: int = 100_000,
    ):
        """`kinds_per_place` rows of distinct messages per (type, frame) of a task group;
        `max_rows` such rows in all, past which a new message of a known (type, frame)
        is counted in its overflow row (the first message of a new one still gets its
        row); `max_places` (type, frame) pairs in all; `max_folded` distinct messages
        remembered across all overflow rows to count them."""
        self._rows: dict[tuple[str, str, str], FailureRow] = {}
        self._places: dict[tuple[str, str, str, str], _Place] = {}
        self._dirty: set[tuple[str, str, str]] = set()
        # computation id -> the keys of its rows and places: forgetting one is O(its own).
        self._row_keys: dict[str, list[tuple[str, str, str]]] = {}
        self._place_keys: dict[str, list[tuple[str, str, str, str]]] = {}
        self._kinds_per_place = kinds_per_place
        self._max_rows = max_rows
        self._max_places = max_places
        self._message_rows = 0  # rows of one masked message (not overflow rows)
        self._folded_left = max_folded

    def record(
        self,
        computation_id: str,
        group: str,
        key: Any,
        exception_text: str,
        traceback_text: str | None,
        t: float,
        *,
        exc_type: str | None = None,
        location: str | None = None,
        workers: Iterable[str] = (),
        count: int = 1,
        retried: bool = False,
    ) -> tuple[str, str, str]:
        """Count `count` failures (`retried`: Dask runs them again); the key of the row
        they went to.  O(1) in the number of rows; runs in the transition hook."""
        text = exception_text[:MAX_TEXT]
        exc_type = exc_type or exception_type(text)
        location = raising_frame(traceback_text) if location is None else location
        pattern = mask(text)
        digest = fingerprint(exc_type, location, pattern)
        row_key = (computation_id, group, digest)
        row = self._rows.get(row_key)
        example = True
        if row is None:
            fields = (computation_id, group, str(key), text, traceback_text or "", t)
            row_key, row, example = self._new_row(
                row_key, fields, digest, exc_type, location, pattern
            )
        row["count"] += count
        if retried:
            row["retried"] += count
        row["last_time"] = t
        if example and len(row["examples"]) < EXAMPLES and text not in row["examples"]:
            row["examples"].append(text)
        for w in workers:
            if len(row["workers"]) < 20 and w not in row["workers"]:
                row["workers"].append(w)
        self._dirty.add(row_key)
        return row_key

    def _new_row(
        self,
        row_key: tuple[str, str, str],
        fields: _Fields,
        digest: str,
        exc_type: str,
        location: str,
        pattern: str,
    ) -> tuple[tuple[str, str, str], FailureRow, bool]:
        """The row a failure of a new (type, frame, message) goes to: its own, or its
        place's overflow row when the place or the counter is full; (its key, the row,
        whether its text is an example)."""
        computation_id, group = fields[0], fields[1]
        place_key = (computation_id, group, exc_type, location)
        place = self._places.get(place_key)
        if place is None and len(self._places) >= self._max_places:
            # Memory's last resort: one row per task group for every further (type, frame).
            place_key = (computation_id, group, OVERFLOW_TYPE, "")
            place = self._places.get(place_key)
            if place is None:
                place = self._new_place(place_key)
            row_key, row = self._overflow_row(place, fields, OVERFLOW_TYPE, "", "kind of failure")
            return (
                row_key,
                row,
                self._fold(place, row, hash((exc_type, location, pattern)), "kind of failure"),
            )
        if place is None:
            place = self._new_place(place_key)
        if place.kinds < self._kinds_per_place and (
            place.kinds == 0 or self._message_rows < self._max_rows
        ):
            place.kinds += 1
            self._message_rows += 1
            row = self._rows[row_key] = _row(fields, digest, exc_type, location, pattern)
            self._row_keys.setdefault(computation_id, []).append(row_key)
            return row_key, row, True
        row_key, row = self._overflow_row(place, fields, exc_type, location, "message")
        return row_key, row, self._fold(place, row, hash(pattern), "message")

    def recovered(self, row_key: tuple[str, str, str]) -> None:
        """A task whose retried failure `row_key` counted succeeded in the end."""
        row = self._rows.get(row_key)
        if row is not None:
            row["recovered"] += 1
            self._dirty.add(row_key)

    def _overflow_row(
        self, place: _Place, fields: _Fields, exc_type: str, location: str, what: str
    ) -> tuple[tuple[str, str, str], FailureRow]:
        computation_id, group = fields[0], fields[1]
        if place.overflow is None:
            digest = fingerprint(exc_type, location, _OVERFLOW_MARK)
            place.overflow = (computation_id, group, digest)
            self._rows[place.overflow] = _row(
                fields, digest, exc_type, location, overflow_pattern(0, what=what)
            )
            self._row_keys.setdefault(computation_id, []).append(place.overflow)
        return place.overflow, self._rows[place.overflow]

    def _new_place(self, place_key: tuple[str, str, str, str]) -> _Place:
        place = self._places[place_key] = _Place()
        self._place_keys.setdefault(place_key[0], []).append(place_key)
        return place

    def _fold(self, place: _Place, row: FailureRow, item: int, what: str) -> bool:
        """Count `item` among the overflow row's distinct messages; True when it is new
        there (its message is worth showing as an example)."""
        if item in place.folded:
            return False
        if self._folded_left > 0:
            place.folded.add(item)
            self._folded_left -= 1
            new = True
        else:
            # No memory left to tell messages apart: this one is new, later ones may not be.
            new = not place.at_least
            place.at_least = True
        row["pattern"] = overflow_pattern(
            len(place.folded) + place.at_least, at_least=place.at_least, what=what
        )
        return new

    def drain(self) -> list[FailureRow]:
        """Rows changed since the last drain (copies: they go to another thread)."""
        out: list[FailureRow] = [
            {
                **self._rows[k],
                "examples": list(self._rows[k]["examples"]),
                "workers": list(self._rows[k]["workers"]),
            }
            for k in self._dirty
        ]
        self._dirty.clear()
        return out

    def forget(self, computation_ids: set[str]) -> None:
        """Drop the rows of computations no longer tracked (already sent)."""
        if not computation_ids:
            return
        for cid in computation_ids:
            for row_key in self._row_keys.pop(cid, ()):
                self._rows.pop(row_key)
                self._dirty.discard(row_key)
            for place_key in self._place_keys.pop(cid, ()):
                place = self._places.pop(place_key)
                self._message_rows -= place.kinds
                self._folded_left += len(place.folded)

    def clear(self) -> None:
        self._folded_left += sum(len(p.folded) for p in self._places.values())
        self._rows.clear()
        self._places.clear()
        self._dirty.clear()
        self._row_keys.clear()
        self._place_keys.clear()
        self._message_rows = 0


def _row(fields: _Fields, digest: str, exc_type: str, location: str, pattern: str) -> FailureRow:
    computation_id, group, key, text, traceback_text, t = fields
    return {
        "computation_id": computation_id,
        "group": group,
        "hash": digest,
        "exc_type": exc_type,
        "location": location,
        "pattern": pattern,
        "examples": [],
        "workers": [],
        "exception_text": text,
        "traceback_text": traceback_text,
        "key": key,
        "count": 0,
        "retried": 0,
        "recovered": 0,
        "first_time": t,
        "last_time": t,
    }
