"""The task stream as columns, built once per record: the rules' sums, medians and
sweeps over 10,000 rows are array operations, not 10,000 dict lookups each (issue 43:
`explain` within 50 ms of a 10,000-task computation).

A row is a task, or past the collector's limit a bin of one worker's tasks of one
prefix (binned: `n_tasks` started in it, `busy` seconds of work).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np


@dataclass
class Columns:
    rows: list[dict]  # as read: a rule that names a row (its worker) reads it here
    start: np.ndarray
    stop: np.ndarray
    work: np.ndarray  # seconds of work: a task's run time, a bin's busy seconds
    # Threads it kept busy while it lasted: 1, or a bin's busy seconds over its width (a
    # bin holds a worker's tasks of one prefix: several threads' worth, so maybe over 1).
    weight: np.ndarray
    n: np.ndarray  # tasks: 1, or a bin's n_tasks
    group: np.ndarray  # codes into `names`: the task group (the prefix without one)
    names: list[str]
    worker: np.ndarray  # codes into `workers`
    workers: list[str | None]
    binned: bool  # any row a bin: no one task's time is known
    _memo: dict = field(default_factory=dict, repr=False)

    def code(self, name: str) -> int | None:
        return self._codes().get(name)

    def _codes(self) -> dict[str, int]:
        if "codes" not in self._memo:
            self._memo["codes"] = {n: i for i, n in enumerate(self.names)}
        return self._memo["codes"]

    def of(self, name: str) -> np.ndarray:
        """Indices of the group's rows."""
        if "of" not in self._memo:
            order = np.argsort(self.group, kind="stable")
            bounds = np.searchsorted(self.group[order], np.arange(len(self.names) + 1))
            self._memo["of"] = (order, bounds)
        order, bounds = self._memo["of"]
        c = self.code(name)
        return order[bounds[c] : bounds[c + 1]] if c is not None else order[:0]

    def slots(self) -> np.ndarray:
        """Codes of (worker, thread): one per thread the stream names (few rules ask)."""
        if "slots" not in self._memo:
            thread, threads = _codes(_column(self.rows, "thread"))
            self._memo["slots"] = _codes((self.worker * max(1, len(threads)) + thread).tolist())[0]
        return self._memo["slots"]

    def durations(self) -> np.ndarray:
        return self.stop - self.start

    def medians(self) -> dict[str, float]:
        """Each group's median task time ({} when binned)."""
        if "medians" not in self._memo:
            out: dict[str, float] = {}
            if not self.binned and len(self.rows):
                d = self.durations()
                order = np.lexsort((d, self.group))
                sorted_d = d[order]
                counts = np.bincount(self.group, minlength=len(self.names))
                firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))
                for c, (a, k) in enumerate(zip(firsts.tolist(), counts.tolist())):
                    if k:
                        out[self.names[c]] = float(
                            (sorted_d[a + (k - 1) // 2] + sorted_d[a + k // 2]) / 2
                        )
            self._memo["medians"] = out
        return self._memo["medians"]

    def counts(self) -> dict[str, int]:
        """Rows of each group."""
        counts = np.bincount(self.group, minlength=len(self.names))
        return {n: int(k) for n, k in zip(self.names, counts.tolist()) if k}


def _codes(values: list) -> tuple[np.ndarray, list]:
    index: dict = {}
    codes = np.fromiter(map(index.setdefault, values, itertools.count()), np.int64, len(values))
    # setdefault kept each value's first count: renumber them 0, 1, 2... in order seen.
    firsts = np.fromiter(index.values(), np.int64, len(index))
    rank = np.empty(int(firsts.max()) + 1 if len(firsts) else 0, np.int64)
    rank[firsts] = np.arange(len(firsts))
    return rank[codes], list(index)


def _column(rows: list[dict], key: str) -> list:
    try:  # every row has it, as the store reads them
        return list(map(itemgetter(key), rows))
    except KeyError:  # rows as a team server's JSON gives them, their nulls left out
        return [r.get(key) for r in rows]


def _floats(rows: list[dict], key: str, default: float) -> np.ndarray:
    """A column of floats; a missing or null value (None: NaN) is `default`."""
    column = np.array(_column(rows, key), dtype=float)
    column[np.isnan(column)] = default
    return column


def columns(rows: list[dict]) -> Columns:
    """The stream's rows as columns: one pass per column, building no container per
    row (10,000 live tuples would outlive the garbage collector's young generations and
    bring on a full collection of the process, 60 ms)."""
    n = len(rows)
    start = np.fromiter(map(itemgetter("start"), rows), float, n)
    stop = np.fromiter(map(itemgetter("stop"), rows), float, n)
    binned = _floats(rows, "binned", 0.0) > 0
    busy = _floats(rows, "busy", 0.0)
    tasks = _floats(rows, "n_tasks", 1.0)
    span = stop - start
    share = np.where(span > 0, busy / np.where(span > 0, span, 1.0), 0.0)
    named = [g or p or "" for g, p in zip(_column(rows, "task_group"), _column(rows, "prefix"))]
    group, names = _codes(named)
    worker, workers = _codes(_column(rows, "worker"))
    return Columns(
        rows=rows,
        start=start,
        stop=stop,
        work=np.where(binned, busy, span),
        weight=np.where(binned, share, 1.0),
        n=np.where(binned, tasks, 1.0),
        group=group,
        names=names,
        worker=worker,
        workers=workers,
        binned=bool(binned.any()),
    )
