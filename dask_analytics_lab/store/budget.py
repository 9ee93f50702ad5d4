"""A byte budget for the rows one read may bring into memory (the team server's answers).

A server that bounds answers only in rows lets one request hold gigabytes (a task stream
of a million rows).  The server sets a budget around a read (`answer_budget`); while one
is set, `collect` stops taking rows from a list query once their estimated JSON size
passes it (the answer is then a page: `Budget.truncated` says how many rows it holds),
and any other query of the read that passes it raises AnswerTooLarge, so no answer is
ever missing part of one record.  Without a budget (the CLI, the widgets, embedded
stores) nothing changes.  The estimate is of the JSON the rows become, so the budget
also bounds the answer's size; it is computed as rows arrive, so a result set is never
held whole (PostgreSQL reads then use a server-side cursor: store.Store.reading).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any


class AnswerTooLarge(Exception):
    """A read's rows passed the answer budget where they cannot be cut into pages."""

    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(
            f"this answer would be larger than the server's maximum of {limit:,} bytes"
        )


class Budget:
    def __init__(self, limit: int):
        self.limit = int(limit)
        self.used = 0
        self.truncated: int | None = None  # rows a cut list query kept, when it was cut

    def take(self, result: Any, *, page: bool) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        keys = tuple(result.keys())
        for r in result:
            row = dict(zip(keys, r))
            self.used += json_size(row)
            if self.used > self.limit:
                if page and out:
                    self.truncated = len(out)
                    break
                raise AnswerTooLarge(self.limit)
            out.append(row)
        return out


_current: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "dal_answer_budget", default=None
)


def current() -> Budget | None:
    return _current.get()


@contextlib.contextmanager
def answer_budget(limit: int) -> Iterator[Budget]:
    """Bound the rows read in this block (this thread) to about `limit` bytes of JSON."""
    budget = Budget(limit)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def collect(result: Any, *, page: bool = False, plain: bool = False) -> list[dict[str, Any]]:
    """The rows of a result as dicts, within the current budget (if any).  page: a list
    query whose rows may be cut short (the caller pages on); else too many is an error.
    plain: no column's type converts what the driver gives (no JSON; a Boolean on SQLite
    comes as 0 or 1: the caller converts it), so the driver's rows are taken as they come.
    """
    budget = _current.get()
    if budget is None:
        # The column names once, not a mapping per row, and the rows some hundreds a
        # fetch, not one fetch per row: a 10,000-row task stream read for the findings
        # spent most of its time in those two.  Not all in one fetch: 10,000 live row
        # objects outlive the garbage collector's young generations, and every other read
        # then paid for a full collection of the process (60 ms; the dicts kept hold no
        # containers, so the collector does not track them).
        keys = tuple(result.keys())
        out: list[dict[str, Any]] = []
        if plain:  # the driver's tuples, cheaper than SQLAlchemy's rows
            with contextlib.closing(result):
                # Bigger fetches: a PostgreSQL read (a server-side cursor) makes a round
                # trip of each, and a plain tuple costs the collector less than a row.
                while part := result.cursor.fetchmany(2000):
                    out += [dict(zip(keys, r)) for r in part]
            return out
        for part in result.partitions(250):
            out += [dict(zip(keys, r)) for r in part]
        return out
    try:
        return budget.take(result, page=page)
    finally:
        result.close()  # a cut result: stop the cursor rather than read it to its end


def json_size(value: Any, depth: int = 0) -> int:
    """About how many bytes `value` takes as JSON (an estimate: escapes not counted)."""
    if isinstance(value, str):
        return len(value) + 2
    if value is None or isinstance(value, bool):
        return 5
    if isinstance(value, (int, float)):
        return 12
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value) * 2
    if depth > 50:  # deeper than any record the store checks in: count it, do not recurse
        return 16
    if isinstance(value, dict):
        return 2 + sum(len(str(k)) + 4 + json_size(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return 2 + sum(json_size(v, depth + 1) + 1 for v in value)
    return 16
