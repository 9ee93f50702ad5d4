"""The shipper's buffer: messages waiting for the store, bounded in bytes and in number,
giving up samples before the record.

Full, it drops the oldest message of the most expendable tier that holds one:
1. samples (worker_samples, cluster_sample, gpu_samples, heartbeat): points of a time
   series taken again at the next interval.  Losing old ones leaves a gap in a chart, no
   wrong figure: the cluster row's latest figures and its cumulative counters
   (worker-seconds, cost, dropped_messages) come from the newest cluster_sample, and a
   heartbeat only moves last_seen, which any later message moves too.
2. details (profile, metrics, task_stream): the large drill-down of a computation.
   Profiles and metrics carry totals so far (the next one of the same computation
   supersedes them); a task stream's rows would leave that view short, but not the
   computation's own figures.
3. the record (cluster, cluster_stop, computation, code, exception, event, and any kind
   not named here): each is sent once, or when its row changes, and nothing later
   repeats it.  A computation's message holds only its groups changed since the last
   one; a failure's count, a worker's loss, a user's event are said once.

Each tier is a deque in the order of `add`: dropping its oldest is a popleft, O(1).  The
writer reads the tiers' heads merged by number, which is the order of `add`, so what is
kept reaches the store in the order it was put.

Sizes estimate the Python memory a message holds (what the scheduler's memory pays,
3-5x its JSON) from what `len` tells in O(1): rows times a per-row figure, lengths of
texts.  The figures were measured with a deep `sys.getsizeof` of real messages
(tests/integration/test_shipper_buffer.py checks them against that).  Free-form JSON (a profile
tree, an event's msg, the cluster's versions) has no O(1) size: those start at a
provisional figure and the writer thread measures them (`measure`), off the event loop.
Not thread-safe: the shipper holds its lock around every call.
"""

from __future__ import annotations

import heapq
import sys
from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

SAMPLES, DETAILS, RECORD = 0, 1, 2
TIER_OF = {
    "worker_samples": SAMPLES,
    "cluster_sample": SAMPLES,
    "gpu_samples": SAMPLES,
    "heartbeat": SAMPLES,
    "profile": DETAILS,
    "metrics": DETAILS,
    "task_stream": DETAILS,
}

# Bytes: the envelope (its dict, cluster id, numbers, the data dict) and the entry.
ENVELOPE = 900
# kind: (bytes besides the rows, bytes a row, the data's list of rows)
_ROWS = {
    "worker_samples": (100, 1050, "samples"),
    "gpu_samples": (1600, 850, "samples"),
    "task_stream": (1500, 400, "rows"),
    "metrics": (600, 460, "rows"),
    "computation": (4100, 1100, "groups"),
}
# kind: (bytes besides its texts, the data's text fields)
_TEXTS = {
    "cluster_sample": (1400, ()),
    "cluster_stop": (400, ("reason",)),
    "heartbeat": (100, ()),
    "code": (700, ("text", "filename")),
    "exception": (2100, ("exception_text", "traceback_text", "pattern", "location")),
}
# Free-form JSON: a first figure until the writer has measured the message.
PROVISIONAL = {"profile": 16_384, "event": 2_048, "cluster": 6_144}
_UNKNOWN = 4_096


class Later:
    """A message's rows that the writer thread builds, not the event loop: a task stream's
    replace carries up to max-bins rows, whose dicts took the loop milliseconds to make
    at 100 workers.  `n` (the rows it will give) sizes the message when it is put;
    `build()` gives them when the writer checks it (`built`)."""

    __slots__ = ("n", "build")

    def __init__(self, n: int, build: Callable[[], list[dict[str, Any]]]):
        self.n = n
        self.build = build

    def __len__(self) -> int:
        return self.n


def built(message: Any) -> Any:
    """`message` with each Later in its data built (the writer thread's first step)."""
    data = message.get("data") if message.__class__ is dict else None
    if data.__class__ is dict and any(v.__class__ is Later for v in data.values()):
        data = {k: v.build() if v.__class__ is Later else v for k, v in data.items()}
        message = {**message, "data": data}
    return message


def _text(value: Any) -> int:
    if value.__class__ is not str:
        return 0
    # str.isascii() reads a flag: O(1).  Other text takes up to 4 bytes a character.
    return len(value) if value.isascii() else 4 * len(value)


def estimate(kind: str, data: Any) -> tuple[int, bool]:
    """(bytes, exact enough): O(1) in the message's content.  False: free-form JSON,
    to be measured on the writer thread."""
    if data.__class__ is not dict:
        return ENVELOPE, False
    rows = _ROWS.get(kind)
    if rows is not None:
        base, per_row, field = rows
        listed = data.get(field)
        n = len(listed) if listed.__class__ is list or listed.__class__ is Later else 0
        extra = (
            _text(data.get("label")) + _text(data.get("code_line")) if kind == "computation" else 0
        )
        return ENVELOPE + base + per_row * n + extra, True
    texts = _TEXTS.get(kind)
    if texts is not None:
        size = ENVELOPE + texts[0]
        for field in texts[1]:
            size += _text(data.get(field))
        return size, True
    return ENVELOPE + PROVISIONAL.get(kind, _UNKNOWN), False


def measure(obj: Any) -> int:
    """Bytes of Python memory `obj` holds: a deep sys.getsizeof, each object once.
    O(objects): for the writer thread, never the event loop."""
    seen: set[int] = set()
    stack = [obj]
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if o.__class__ is dict:
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
    return total


class Entry:
    __slots__ = ("number", "kind", "tier", "size", "message", "queued")

    def __init__(
        self, number: int, kind: str, tier: int, size: int, message: dict[str, Any] | None
    ):
        self.number, self.kind, self.tier, self.size, self.message = (
            number,
            kind,
            tier,
            size,
            message,
        )
        self.queued = True


class Buffer:
    """Messages in tiers, with their estimated bytes; `over()` says when to drop."""

    def __init__(self, max_bytes: int, max_messages: int):
        self.max_bytes = max_bytes
        self.max_messages = max_messages
        self._tiers: tuple[deque[Entry], ...] = (deque(), deque(), deque())
        self.bytes = 0
        self.count = 0
        self._numbered = 0
        # Entries whose size is provisional, for the writer thread to measure.
        self.unsized: deque[Entry] = deque()

    def add(self, message: dict[str, Any]) -> Entry:
        """O(1)."""
        if message.__class__ is dict:
            kind, data = message.get("kind"), message.get("data")
        else:
            kind = data = None
        if kind.__class__ is not str:
            kind = "(malformed)"  # the writer's check refuses it; until then it is held like the record
        size, exact = estimate(kind, data)
        self._numbered += 1
        entry = Entry(self._numbered, kind, TIER_OF.get(kind, RECORD), size, message)
        self._tiers[entry.tier].append(entry)
        self.bytes += size
        self.count += 1
        if not exact:
            self.unsized.append(entry)
        return entry

    def over(self) -> bool:
        return self.bytes > self.max_bytes or self.count > self.max_messages

    def drop_oldest(self) -> Entry:
        """The oldest entry of the most expendable tier, taken out.  O(1)."""
        for tier in self._tiers:
            if tier:
                return self._take(tier)
        raise IndexError("the buffer is empty")

    def resize(self, entry: Entry, size: int) -> None:
        if entry.queued:
            self.bytes += size - entry.size
            entry.size = size

    def head(self, max_messages: int, max_bytes: int) -> list[Entry]:
        """The oldest entries in order of `add`, up to either limit (at least one).
        O(result): the three tiers' heads are merged."""
        entries: list[Entry] = []
        total = 0
        for entry in islice(heapq.merge(*self._tiers, key=_number), max_messages):
            if entries and total + entry.size > max_bytes:
                break
            entries.append(entry)
            total += entry.size
        return entries

    def remove_through(self, last: int) -> None:
        """Take out every entry numbered `last` or lower (a batch the writer sent)."""
        for tier in self._tiers:
            while tier and tier[0].number <= last:
                self._take(tier)

    def discard(self, entry: Entry) -> None:
        """Take out one entry: O(1) for the newest of its tier, O(n) otherwise (only a
        message larger than the whole buffer, once measured, is taken out that way)."""
        tier = self._tiers[entry.tier]
        if tier and tier[-1] is entry:
            tier.pop()
        else:
            tier.remove(entry)
        self._gone(entry)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Entry]:
        """Every entry, in order of `add`."""
        return heapq.merge(*self._tiers, key=_number)

    def _take(self, tier: deque[Entry]) -> Entry:
        entry = tier.popleft()
        self._gone(entry)
        return entry

    def _gone(self, entry: Entry) -> None:
        entry.queued = False
        # `unsized` may still hold the entry: not its message.
        entry.message = None
        self.bytes -= entry.size
        self.count -= 1


def _number(entry: Entry) -> int:
    return entry.number
