"""How a live view polls the store, in one place for the notebook monitor (widgets/_feed.py)
and the JupyterLab panel (js/lab/model.ts).

The rules are data, in polling.json next to this file: intervals, what each read asks
for, and how much of each series a view keeps.  The Lab panel's bundle carries the same
file (js/lab/polling.ts imports it), so the two cannot drift apart.  What the rules
need as code, `Kept` (merging reads and thinning), is written twice, here and in
js/lab/polling.ts, to one spec; tests/unit/test_polling.py runs both on the same reads and
compares what they keep.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .display import downsample, worker_peaks

RULES: dict[str, Any] = json.loads((Path(__file__).with_name("polling.json")).read_text())

LIVE: float = RULES["poll"]["live"]  # the notebook monitor's default interval too


def history_period(interval: float) -> float:
    """Seconds between polls once everything shown is history."""
    return max(RULES["poll"]["history"], interval)


def every_polls(seconds: float, interval: float) -> int:
    """Polls of `interval` seconds between reads meant every `seconds`: at least 1."""
    # Halves round up, as in JavaScript (Python's round() would round them to even).
    return max(1, math.floor(seconds / max(interval, 0.001) + 0.5))


def thin(kind: str, rows: list[dict]) -> list[dict]:
    """What a view keeps of a series of `kind`, by time (the spec js/lab/polling.ts
    follows: a stable sort by time, then the kind's rule)."""
    keep = RULES[kind]["keep"]
    rows = sorted(rows, key=lambda r: r["time"])
    if kind == "workers":
        return worker_peaks(rows, keep)
    if kind == "samples":
        # Hysteresis: thinning a thinned series at every read would drop a row each time.
        return downsample(rows, keep) if len(rows) > 2 * keep else rows
    if kind == "gpu":
        by_gpu: dict[tuple, list[dict]] = {}
        for r in rows:
            by_gpu.setdefault((r.get("worker"), r.get("gpu_uuid")), []).append(r)
        kept = [
            r
            for series in by_gpu.values()
            for r in (downsample(series, keep) if len(series) > 2 * keep else series)
        ]
        return sorted(kept, key=lambda r: r["time"])
    if kind == "events":
        return rows[-keep:]
    raise ValueError(f"no thinning rule for {kind!r}")


class Kept:
    """What a view keeps of one series that it reads again and again (a cluster's samples,
    workers, GPU samples, the events of one topic), and where its next read starts.

    A row is new when its id is above every id read before: one writer stores a
    cluster's rows, in order, so the ids grow as they land.  A since= read starts at the
    newest time read less the kind's `late` seconds, so a row that lands after newer ones
    (GPU samples come in per-worker batches) is still found, and read once.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self.rule: dict[str, Any] = RULES[kind]
        self.rows: list[dict] = []
        self.reads = 0
        self.done = False  # read once after the cluster ended: nothing more comes
        self._time: float | None = None
        self._id: float | None = None

    def due(self, polls: int, interval: float, ended: bool) -> bool:
        """Whether to read at this poll: the first time, every `every` seconds while the
        cluster is live, once more after it ended (its end is stored after its last
        rows), then never."""
        if self.done:
            return False
        return self.reads == 0 or ended or polls % every_polls(self.rule["every"], interval) == 0

    def since(self) -> float | None:
        """since= of the next read; None: the first read, of the newest `limit` rows."""
        if self._time is None or not self.rule.get("since"):
            return None
        return self._time - self.rule.get("late", 0.0)

    def limit(self) -> int:
        if "limit" in self.rule:
            return self.rule["limit"]
        return self.rule["first"] if self.reads == 0 else self.rule["tail"]

    def merge(self, read: list[dict], *, ended: bool = False) -> list[dict]:
        """Add what a read found to what is kept; returns what is kept now, by time."""
        newest = self._id
        new = [r for r in read if newest is None or r["id"] > newest]
        if new:
            self._id = max(r["id"] for r in new)
            newest_time = max(r["time"] for r in new)
            self._time = newest_time if self._time is None else max(self._time, newest_time)
        self.rows = thin(self.kind, self.rows + new)
        self.reads += 1
        self.done = ended
        return self.rows
