"""Plain-text tables and human-readable figures for the command line and the demo."""
from __future__ import annotations

import datetime as _dt
from typing import Any, Iterable, Sequence


def when(t: float | None) -> str:
    if not t:
        return "-"
    return _dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def nbytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "kiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def clusters(rows: list[dict]) -> str:
    return render(
        [
            (
                r["cluster_id"], r.get("name"), r.get("user"), when(r.get("started")),
                when(r.get("stopped")) if r.get("stopped") else "running",
                r.get("n_workers"), seconds(r.get("worker_seconds")), f"{r.get('cost') or 0:.4f}",
            )
            for r in rows
        ],
        ["cluster", "name", "user", "started", "stopped", "workers", "worker time", "cost"],
    )


def computations(rows: list[dict]) -> str:
    return render(
        [
            (
                r["computation_id"], when(r.get("start")), r.get("state"), r.get("n_tasks"), r.get("n_groups"),
                r.get("n_erred"), seconds(r.get("compute")), nbytes(r.get("nbytes")),
            )
            for r in rows
        ],
        ["computation", "start", "state", "tasks", "groups", "erred", "compute", "bytes"],
    )


def exceptions(rows: list[dict]) -> str:
    return render(
        [
            (
                r.get("computation_id"), r.get("task_group"), r.get("count"),
                (r.get("exception_text") or "").splitlines()[0][:80] if r.get("exception_text") else "",
                when(r.get("last_time")),
            )
            for r in rows
        ],
        ["computation", "task group", "count", "exception", "last seen"],
    )


def events(rows: list[dict]) -> str:
    return render(
        [(when(r.get("time")), r.get("topic"), str(r.get("msg"))[:100]) for r in rows],
        ["time", "topic", "message"],
    )
