"""Store rows as the views show them, the same in the kernel (widgets), the servers
(JSON answers) and stored reports."""

from __future__ import annotations

import json
import math
from typing import Any


def clean(value: Any) -> Any:
    """JSON that browsers parse: NaN and infinities (only a direct writer can store
    them) become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """JSON text browsers parse (see clean); anything else JSON lacks is written as str."""
    try:
        return json.dumps(value, allow_nan=False, default=str)
    except ValueError:
        return json.dumps(clean(value), default=str)


def label_of(groups: list[dict]) -> str:
    """A short name for a computation recorded before the store kept its `label`: its
    final task groups' prefixes, biggest first."""
    # Dask's own last step ("finalize-...") says nothing about the work: look past it.
    groups = [
        g for g in groups if not (g.get("prefix") or g["name"]).startswith("finalize")
    ] or groups
    if not groups:
        return ""
    needed = {d for g in groups for d in (g.get("dependencies") or [])}
    final = [g for g in groups if g["name"] not in needed] or groups
    final.sort(key=lambda g: -(g.get("n_tasks") or 0))
    names: list[str] = []
    for g in final:
        p = g.get("prefix") or g["name"]
        if p not in names:
            names.append(p)
    return ", ".join(names[:2]) + (f" +{len(names) - 2}" if len(names) > 2 else "")


def downsample(rows: list[dict], most: int, time_key: str = "time") -> list[dict]:
    """At most `most` rows, evenly spread over time, always keeping the newest."""
    if len(rows) <= most:
        return rows
    step = len(rows) / most
    picked = [rows[math.floor(i * step)] for i in range(most - 1)]
    picked.append(rows[-1])
    return picked


def gpu_series(rows: list[dict], most: int) -> list[dict]:
    """GPU samples downsampled per GPU, each series at most `most` points.  A GPU is
    (host, uuid) wherever it is seen: workers sharing it make one series, not one each."""
    by_gpu: dict[tuple, list[dict]] = {}
    for r in rows:
        by_gpu.setdefault((r.get("host"), r.get("gpu_uuid")), []).append(r)
    return [r for series in by_gpu.values() for r in downsample(series, most)]


# What the task stream view draws of a stored row (list_task_stream's).
STREAM_KEYS = (
    "id",
    "start",
    "stop",
    "worker",
    "thread",
    "prefix",
    "state",
    "n_tasks",
    "busy",
    "binned",
)


def stream_rows(rows: list[dict]) -> list[dict]:
    """A task stream as the views take it: the drawn fields only (a widget's comm and a
    report carry up to tens of thousands of them)."""
    return clean([{k: r.get(k) for k in STREAM_KEYS} for r in rows])


WORKER_TOPICS = ("worker-joined", "worker-left")


def worker_peaks(rows: list[dict], most: int) -> list[dict]:
    """Worker samples, at most 3 x `most` per worker: a longer series is cut in `most`
    stretches, of each the rows with the most memory, CPU and tasks processing kept (a
    chart read for its peaks must not lose them); a shorter one whole, so thinning what
    was thinned changes nothing.  By time."""
    by_worker: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: r["time"]):
        by_worker.setdefault(r["worker"], []).append(r)
    kept: list[dict] = []
    for series in by_worker.values():
        if len(series) <= 3 * most:  # what thinning would leave: thinning again changes nothing
            kept.extend(series)
            continue
        step = len(series) / most
        for i in range(most):
            part = series[math.floor(i * step) : math.floor((i + 1) * step)]
            if part:
                tops = {
                    id(r): r
                    for r in (
                        max(part, key=_memory),
                        max(part, key=lambda r: r.get("cpu") or 0),
                        max(part, key=lambda r: r.get("processing") or 0),
                    )
                }
                kept.extend(tops.values())
    return sorted(kept, key=lambda r: r["time"])


def _memory(row: dict) -> int:
    # The worker process's memory, what its limit bounds: spilled data is on disk.
    return (row.get("managed") or 0) + (row.get("unmanaged") or 0)
