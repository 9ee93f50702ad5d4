"""Each computation's task stream: when each task ran, on which worker and thread.

The transition hook hands over each finished task's compute interval (from its
`startstops`, what distributed's own TaskStreamPlugin keeps) with one append: its
computation's record, TaskGroup, state, worker, thread, start and stop.  O(1), nothing
else on the scheduler's hot path: each tick folds what came in into per-computation
streams (the names cut once per group and worker) and sends it.

Bounded, whatever the computation's size:

- A computation's first `max_tasks` tasks are kept one row each (its compute
  interval, worker, thread, prefix, group and final state), sent as they come.
- Past that, the computation switches to *bins*: per (worker, prefix, time bin), the
  tasks that started in the bin and the seconds of execution inside it (a task that
  crosses bins is split between them).  Bins start `FIRST_WIDTH` wide; whenever a
  computation holds more than `max_bins` of them, the width doubles and neighbours
  merge (exactly: bins are aligned on multiples of their width).  A `replace`
  message then carries all of its bins, at most every `replace_every` seconds
  while it runs and once more when it is sealed (the bins copied on the loop, their
  rows made on the shipper's thread), so stored rows stay under
  max(max_tasks, max_bins) per computation and nothing is dropped.
- To switch, the computation's bins are kept from its first task; only the newest
  computation (the only one Dask adds tasks to) holds them.  An older one is sealed:
  its bins are sent and let go.  Tasks that still reach a sealed computation (Dask
  recomputing a lost result) are appended as rows, at most `LATE_ROWS` of them.

Nothing here raises into the scheduler: the plugin guards each call.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any, cast

from .buffer import Later

Emit = Callable[[str, dict[str, Any]], None]
# A finished task's compute interval, as the hook hands it over: (its computation's
# record or id, its TaskGroup or (prefix, group), state, worker, thread, start, stop)
_Task = tuple[Any, Any, str, Any, Any, float, float]

FIRST_WIDTH = 2.0**-7  # seconds (~8 ms): fine enough for a short computation
MAX_WIDTH = 2.0**20  # about 12 days: past that no doubling is needed
CHUNK = 5000  # rows per message
LATE_ROWS = 1000  # rows a sealed, binned computation still takes
MAX_PENDING = 100_000  # tasks held between ticks before they are folded in at once
FOLD_CHUNK = 128  # tasks a tick with a deadline folds in between two looks at the clock
_NAME = 200  # characters of a worker, prefix or group name kept (a key in the store)
_START = itemgetter("start")


class Bins:
    """Tasks and busy seconds per (worker, prefix, time bin), at most about `max_bins`
    bins: the width doubles (neighbouring bins merge) whenever there are more."""

    __slots__ = ("width", "max_bins", "cells")

    def __init__(self, max_bins: int, width: float = FIRST_WIDTH):
        self.width = width
        self.max_bins = max(1, int(max_bins))
        # (worker, prefix, index) -> [n_tasks, busy seconds]; bin i is [i*width, (i+1)*width)
        self.cells: dict[tuple[Any, Any, int], list[float]] = {}

    def __len__(self) -> int:
        return len(self.cells)

    def add(
        self,
        worker: Any,
        prefix: Any,
        start: float,
        stop: float,
        n: int = 1,
        busy: float | None = None,
    ) -> None:
        """`n` tasks that started at `start` (counted in that bin) and `busy` seconds of
        execution spread evenly over [start, stop) (default: all of it)."""
        span = stop - start
        if span < 0:
            start, stop, span = stop, start, -span
        if busy is None:
            busy = span
        while span / self.width > self.max_bins and self.width < MAX_WIDTH:
            self._coarsen()  # one long task must not cost a loop over thousands of bins
        w = self.width
        cells = self.cells
        first = math.floor(start / w)
        last = math.floor(stop / w) if span > 0 else first
        if last > first and stop == last * w:
            last -= 1  # [start, stop) ends exactly on a boundary
        cell = cells.get((worker, prefix, first))
        if cell is None:
            cell = cells[(worker, prefix, first)] = [0, 0.0]
        cell[0] += n
        if last == first or span <= 0:
            cell[1] += busy
        else:
            rate = busy / span
            cell[1] += ((first + 1) * w - start) * rate
            for i in range(first + 1, last):
                c = cells.get((worker, prefix, i))
                if c is None:
                    c = cells[(worker, prefix, i)] = [0, 0.0]
                c[1] += w * rate
            c = cells.get((worker, prefix, last))
            if c is None:
                c = cells[(worker, prefix, last)] = [0, 0.0]
            c[1] += (stop - last * w) * rate
        if len(cells) > self.max_bins:
            self.bound()

    def bound(self) -> None:
        """Double the width until at most max_bins bins are held (or merging no longer
        helps: one bin per worker and prefix is as coarse as it gets)."""
        while len(self.cells) > self.max_bins and self.width < MAX_WIDTH:
            before = len(self.cells)
            self._coarsen()
            if len(self.cells) == before:
                break

    def _coarsen(self) -> None:
        merged: dict[tuple[Any, Any, int], list[float]] = {}
        get = merged.get
        for (worker, prefix, i), cell in self.cells.items():
            key = (worker, prefix, i // 2)
            c = get(key)
            if c is None:
                merged[key] = cell  # the old dict goes: its cells can be reused
            else:
                c[0] += cell[0]
                c[1] += cell[1]
        self.cells = merged
        self.width *= 2

    def rows(self) -> list[dict[str, Any]]:
        """The bins as task_stream rows (binned), by start."""
        return _bin_rows(self.width, self.cells.items())


class _Snapshot:
    """A computation's bins as a replace sends them, copied on the loop in steps that run
    in C (the keys, and each cell's two figures: the fold goes on changing the cells), and
    made into rows on the shipper's writer thread (collect/buffer.py's Later): at 2,000
    bins the rows' dicts took the loop milliseconds, the copy a tenth of that."""

    __slots__ = ("width", "keys", "cells", "_rows")

    def __init__(self, bins: Bins):
        self.width = bins.width
        self.keys = list(bins.cells)
        self.cells = list(map(tuple, bins.cells.values()))
        self._rows: list[dict[str, Any]] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def chunk(self, begin: int) -> list[dict[str, Any]]:
        """Rows [begin, begin + CHUNK) by start (all are made at the first call)."""
        if self._rows is None:
            self._rows = _bin_rows(self.width, zip(self.keys, self.cells))
        return self._rows[begin : begin + CHUNK]


def _bin_rows(
    width: float, cells: Iterable[tuple[tuple[Any, Any, int], Any]]
) -> list[dict[str, Any]]:
    out = [
        {
            "start": i * width,
            "stop": (i + 1) * width,
            "worker": worker,
            "prefix": prefix,
            "n_tasks": n,
            "busy": busy,
            "binned": True,
        }
        for (worker, prefix, i), (n, busy) in cells
    ]
    out.sort(key=_START)
    return out


def bin_rows(
    rows: Iterable[Mapping[str, Any]], max_bins: int, width: float = FIRST_WIDTH
) -> list[dict[str, Any]]:
    """Stored rows, raw or binned, as at most about `max_bins` bins (readers use it to
    bound what they draw or send).  Counts and busy seconds add up to the rows'."""
    bins = Bins(max_bins, width)
    for r in rows:
        start, stop = r["start"], r["stop"]
        busy, n = r.get("busy"), r.get("n_tasks")
        bins.add(
            r.get("worker"),
            r.get("prefix"),
            start,
            stop,
            1 if n is None else int(n),
            (stop - start) if busy is None else busy,
        )
    return bins.rows()


class _Stream:
    __slots__ = ("cid", "n_raw", "raw", "bins", "binned", "dirty", "sent_at", "sealed", "late")

    def __init__(self, cid: str, max_bins: int):
        self.cid = cid
        self.n_raw = 0  # raw rows taken (sent or about to be)
        self.raw: list[dict[str, Any]] = []  # raw rows not sent yet
        self.bins: Bins | None = Bins(max_bins)
        self.binned = False
        self.dirty = False  # bins changed since last sent
        self.sent_at = 0.0
        self.sealed = False
        self.late = 0


def _names_of(tg: Any) -> tuple[str | None, str | None]:
    """(prefix, group) names of a TaskGroup, or of a (prefix, group) pair."""
    prefix, group = tg if tg.__class__ is tuple else (tg.prefix.name, tg.name)
    return _name(prefix), _name(group)


def _to_bins(stream: _Stream) -> None:
    """Past its limit of rows: from now on bins, which replace the rows sent so far."""
    stream.binned = True
    stream.dirty = True
    stream.sent_at = 0.0
    stream.raw = []


def _name(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= _NAME else text[:_NAME]


class TaskStreamRecorder:
    """Per computation, the task stream: rows while few, bins past `max_tasks`."""

    def __init__(
        self,
        emit: Emit,
        *,
        max_tasks: int = 10_000,
        max_bins: int = 2_000,
        replace_every: float = 5.0,
    ):
        self._emit = emit
        self.max_tasks = max(0, int(max_tasks))
        self.max_bins = max(1, int(max_bins))
        self.replace_every = replace_every
        # (computation record or id, TaskGroup or (prefix, group), state, worker, thread,
        # start, stop): the hook appends to this very list (it is never replaced).
        self.incoming: list[_Task] = []
        # Tasks a tick with a deadline has not folded in yet, from `_at` on (older than incoming).
        self._folding: list[_Task] = []
        self._at = 0
        self.behind = False  # the last tick ran out of time: tick again soon
        self._streams: dict[str, _Stream] = {}
        self.recorded = 0  # tasks taken
        self.dropped = 0  # tasks of a sealed computation past LATE_ROWS

    # --- the hook's half: O(1) ----------------------------------------------------
    def record(
        self,
        cid: str,
        worker: Any,
        thread: Any,
        prefix: str,
        group: str,
        state: str,
        startstops: Any,
    ) -> None:
        """A task finished (state "memory") or raised ("erred"); its compute interval(s).
        (The plugin's hook appends to `incoming` itself, in the same form.)"""
        pair = (prefix, group)
        for ss in startstops:
            if ss.get("action") == "compute":
                self.incoming.append((cid, pair, state, worker, thread, ss["start"], ss["stop"]))
        if len(self.incoming) > MAX_PENDING:
            self._fold(None)  # amortised: once per MAX_PENDING tasks

    def bound(self, meter: Any = None) -> None:
        """Fold in what came when more than MAX_PENDING tasks wait (ticks stalled, or far
        apart): the hook calls this now and then, the loop CPU charged to ticks."""
        if len(self.incoming) > MAX_PENDING:
            token = meter.enter("ticks") if meter is not None else None
            try:
                self._fold(None)
            finally:
                if token is not None:
                    meter.leave(token)

    # --- the tick's half: O(tasks since the last tick) ------------------------------
    def tick(
        self, newest: str | None, now: float, *, force: bool = False, deadline: float | None = None
    ) -> None:
        """Fold in what came, send new rows and changed bins; seal every computation
        but `newest` (Dask's newest Computation: the only one that still grows).
        `deadline` (time.perf_counter()): fold no more after it and set `behind`; the
        next tick goes on, and seals and sends once everything that came is folded in."""
        self.behind = not self._fold(deadline)
        if self.behind:
            return
        for stream in self._streams.values():
            if not stream.sealed and stream.cid != newest:
                self._seal(stream, now)
            else:
                self._send(stream, now, force)

    def forget(self, cids: Iterable[str]) -> None:
        """Computations the tracker let go of: their tasks are gone from the scheduler."""
        for cid in cids:
            self._streams.pop(cid, None)

    def restart(self, now: float) -> None:
        """`client.restart()`: send what ran, then start afresh."""
        self._fold(None)
        for stream in self._streams.values():
            self._seal(stream, now)
        self._streams.clear()
        self.incoming.clear()
        self.behind = False

    @property
    def pending(self) -> int:
        return len(self.incoming) + len(self._folding) - self._at

    def held_bins(self) -> int:
        """Bins held in memory, all computations together (bounded: see the module doc)."""
        return sum(len(s.bins) for s in self._streams.values() if s.bins is not None)

    # --- internals ---------------------------------------------------------------------
    def _fold(self, deadline: float | None) -> bool:
        """Fold in the tasks that came, oldest first; False when `deadline` came first."""
        while True:
            if self._at >= len(self._folding):
                if not self.incoming:
                    return True
                # A copy: the hook holds `incoming` itself.
                self._folding, self._at = self.incoming.copy(), 0
                self.incoming.clear()
            end = (
                len(self._folding)
                if deadline is None
                else min(len(self._folding), self._at + FOLD_CHUNK)
            )
            self._at = self._fold_part(self._folding, self._at, end, deadline)
            if self._at >= len(self._folding):
                self._folding, self._at = [], 0
            if (
                deadline is not None
                and time.perf_counter() > deadline
                and (self._folding or self.incoming)
            ):
                return False

    def _fold_part(self, pending: list[_Task], begin: int, end: int, deadline: float | None) -> int:
        """Fold in pending[begin:end]; where it stopped (before `end` when the bins of a
        computation were coarsened past the deadline: each time is O(its bins))."""
        max_tasks, max_bins = self.max_tasks, self.max_bins
        # A few workers and groups name thousands of tasks: each name is cut once.
        workers: dict[Any, str | None] = {}
        groups: dict[Any, tuple[str | None, str | None]] = {}
        floor = math.floor
        last_cid: str | None = None
        stream = cast(_Stream, None)  # last_cid's: set before first use (cid is never None)
        for i in range(begin, end):
            who, tg, state, worker, thread, start, stop = pending[i]
            cid = who if who.__class__ is str else who.cid
            if not cid:
                continue
            if cid != last_cid:
                stream, last_cid = self._stream_of(cid), cid
            names = groups.get(tg)
            if names is None:
                names = groups[tg] = _names_of(tg)
            prefix, group = names
            w = workers.get(worker)
            if w is None:
                w = workers[worker] = _name(worker)
            worker = w
            if stream.sealed:
                self._late(stream, _row(worker, thread, prefix, group, state, start, stop))
                continue
            self.recorded += 1
            bins = cast(Bins, stream.bins)  # only a sealed stream lets go of its bins
            width = bins.width
            # Most tasks fall in one bin: Bins.add's arithmetic for that case, inline.
            first = floor(start / width)
            last = floor(stop / width)
            if start <= stop and (last == first or (last == first + 1 and stop == last * width)):
                cells = bins.cells
                cell = cells.get((worker, prefix, first))
                if cell is None:
                    cells[(worker, prefix, first)] = [1, stop - start]
                else:
                    cell[0] += 1
                    cell[1] += stop - start
                if len(cells) > max_bins:
                    bins.bound()
            else:
                bins.add(worker, prefix, start, stop)
            if stream.binned:
                stream.dirty = True
            elif stream.n_raw < max_tasks:
                stream.n_raw += 1
                stream.raw.append(_row(worker, thread, prefix, group, state, start, stop))
            else:
                _to_bins(stream)
            # Coarsened past the deadline (each time is O(its bins)): stop after this task.
            if bins.width != width and deadline is not None and time.perf_counter() > deadline:
                return i + 1
        return end

    def _stream_of(self, cid: str) -> _Stream:
        found = self._streams.get(cid)
        if found is None:
            found = self._streams[cid] = _Stream(cid, self.max_bins)
        return found

    def _late(self, stream: _Stream, row: dict[str, Any]) -> None:
        """A task of a computation already sealed (Dask moved on to a newer one): a row
        while it is under its limit, then LATE_ROWS more; dropped after that."""
        if stream.binned or stream.n_raw >= self.max_tasks:
            if stream.late >= LATE_ROWS:
                self.dropped += 1
                return
            stream.late += 1
        stream.n_raw += 1
        stream.raw.append(row)
        self.recorded += 1

    def _send(self, stream: _Stream, now: float, force: bool) -> None:
        if stream.raw:
            raw, stream.raw = stream.raw, []
            for i in range(0, len(raw), CHUNK):
                self._emit(
                    "task_stream", {"computation_id": stream.cid, "rows": raw[i : i + CHUNK]}
                )
        if (
            stream.dirty
            and stream.bins is not None
            and (force or now - stream.sent_at >= self.replace_every)
        ):
            snapshot = _Snapshot(stream.bins)
            n = len(snapshot)
            for i in range(0, max(n, 1), CHUNK):
                rows = Later(min(CHUNK, n - i), functools.partial(snapshot.chunk, i))
                self._emit(
                    "task_stream", {"computation_id": stream.cid, "rows": rows, "replace": i == 0}
                )
            stream.dirty = False
            stream.sent_at = now

    def _seal(self, stream: _Stream, now: float) -> None:
        self._send(stream, now, True)
        stream.sealed = True
        stream.bins = None


def _row(
    worker: Any, thread: Any, prefix: Any, group: Any, state: str, start: float, stop: float
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "start": start,
        "stop": stop,
        "worker": worker,
        "prefix": prefix,
        "task_group": group,  # cut by the fold, as the prefix and worker
        "state": state,
    }
    if isinstance(thread, int):
        row["thread"] = thread
    return row
