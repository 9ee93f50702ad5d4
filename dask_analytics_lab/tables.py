"""Plain-text tables and human-readable figures for the command line and the demo.

Every recorded string goes through `escaped` before it reaches a terminal: task
names, messages and tracebacks come from whatever ran on a cluster, and an escape
sequence in one (ESC [ ..., an OSC 8 link, a title change, a bidi override) would
otherwise act on the reader's terminal.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Sequence
from typing import Any

from dask.utils import format_bytes

from .figures import duration
from .ids import shorten

# C0 and C1 control characters (ESC, CSI, BEL, backspace, carriage return ...), DEL, and
# the invisible bidi and zero-width characters that can reorder or hide text.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_UNSAFE_KEEP_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


def _escape(m: re.Match) -> str:
    c = m.group()
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def escaped(text: Any, *, lines: bool = False) -> str:
    """`text` with control characters shown as escapes (ESC as \\x1b), safe to print.
    lines=True keeps newlines and tabs (for tracebacks)."""
    text = "" if text is None else str(text)
    return (_UNSAFE_KEEP_LINES if lines else _UNSAFE).sub(_escape, text)


def when(t: float | None) -> str:
    if not t:
        return "-"
    try:
        return _dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError, TypeError):
        return escaped(repr(t))  # stored before the store bounded times: show it, do not fail


def seconds(s: float | None) -> str:
    try:
        return "-" if s is None else duration(float(s))
    except (OverflowError, ValueError, TypeError):
        return escaped(repr(s))


def nbytes(n: float | None) -> str:
    try:
        return "-" if n is None else format_bytes(int(n))
    except (OverflowError, ValueError, TypeError):
        return escaped(repr(n))


def _first_line(text: str | None) -> str:
    if not text:
        return ""
    text = str(text)
    return escaped(text.strip().splitlines()[0].strip() if text.strip() else "")


def short(text: str | None, width: int) -> str:
    """The first line of `text`, made printable, cut to `width` characters (… marks a cut)."""
    line = _first_line(text)
    return line if len(line) <= width else line[: width - 1] + "…"


def short_location(text: str | None, width: int) -> str:
    """`path:line in function` cut at its start (… marks the cut): the file's name, the
    line and the function tell a location, not the folders above it."""
    line = _first_line(text)
    return line if len(line) <= width else "…" + line[len(line) - width + 1 :]


def render(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    """A table; every cell is made printable (one line, control characters escaped)."""
    cells = [[str(c) for c in headers]] + [
        ["" if c is None else escaped(c) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _size(r: dict) -> tuple[Any, Any, str]:
    """(workers, threads, memory): now while live; how big it got once it ended (the
    current figures of an ended cluster are zeros)."""
    if r.get("status") == "live":
        return r.get("n_workers"), r.get("n_threads"), nbytes(r.get("memory_total"))
    return (
        r.get("peak_workers") if r.get("peak_workers") is not None else r.get("n_workers"),
        r.get("peak_threads") if r.get("peak_threads") is not None else r.get("n_threads"),
        nbytes(r.get("peak_memory") if r.get("peak_memory") is not None else r.get("memory_total")),
    )


def _cost(value: Any) -> str:
    try:
        return (
            f"{float(value or 0):.4f}" if abs(float(value or 0)) < 1e12 else f"{float(value):.4g}"
        )
    except (TypeError, ValueError):
        return escaped(repr(value))


def clusters(rows: list[dict]) -> str:
    """Status, end and duration come from the rows (the store decides them)."""
    ids = shorten(r["cluster_id"] for r in rows)
    table = render(
        [
            (
                ids[r["cluster_id"]],
                r.get("name"),
                r.get("user"),
                r.get("status"),
                when(r.get("started")),
                when(r.get("ended")),
                seconds(r.get("duration")),
                *_size(r),
                seconds(r.get("worker_seconds")),
                _cost(r.get("cost")),
            )
            for r in rows
        ],
        [
            "cluster",
            "name",
            "user",
            "status",
            "started",
            "ended",
            "duration",
            "workers",
            "threads",
            "memory",
            "worker time",
            "cost",
        ],
    )
    if any(r.get("status") != "live" for r in rows):
        table += "\n(workers, threads, memory: now for a live cluster, the most it had for a stopped or lost one)"
    return table


def computations(rows: list[dict]) -> str:
    def took(r: dict) -> str:
        return (
            seconds(r["stop"] - r["start"])
            if r.get("stop") is not None and r.get("start") is not None
            else "-"
        )

    ids = shorten(r["computation_id"] for r in rows)
    return render(
        [
            (
                ids[r["computation_id"]],
                when(r.get("start")),
                r.get("state"),
                took(r),
                short(r.get("label"), 40),
                short(r.get("code_line"), 50),
                r.get("n_tasks"),
                r.get("n_done"),
                r.get("n_erred"),
                r.get("n_cancelled") or 0,
                r.get("n_not_run"),
                seconds(r.get("compute")),
                nbytes(r.get("nbytes")),
            )
            for r in rows
        ],
        [
            "computation",
            "start",
            "state",
            "took",
            "what",
            "code",
            "tasks",
            "done",
            "erred",
            "cancelled",
            "never ran",
            "compute",
            "bytes",
        ],
    )


def example(r: dict) -> str:
    """One message of this failure: the first kept example (rows recorded before examples
    were kept have only exception_text)."""
    examples = r.get("examples") or []
    return examples[0] if examples else (r.get("exception_text") or "")


def exceptions(rows: list[dict]) -> str:
    """One row per failure (exception type + the frame that raised it + the message
    with its literals masked), with its count and an example message."""
    ids = shorten(r["computation_id"] for r in rows if r.get("computation_id"))
    return render(
        [
            (
                r.get("count"),
                r.get("exc_type") or "",
                short_location(r.get("location"), 50),
                short(r.get("pattern"), 50),
                short(example(r), 60),
                r.get("task_group"),
                ids.get(r.get("computation_id") or "", r.get("computation_id")),
                when(r.get("last_time")),
            )
            for r in rows
        ],
        [
            "count",
            "type",
            "location",
            "pattern",
            "example",
            "task group",
            "computation",
            "last seen",
        ],
    )


def events(rows: list[dict]) -> str:
    return render(
        [(when(r.get("time")), r.get("topic"), str(r.get("msg"))[:100]) for r in rows],
        ["time", "topic", "message"],
    )


def runs(rows: list[dict]) -> str:
    """The runs of one computation's code, newest first."""
    ids = shorten(r["computation_id"] for r in rows)
    return render(
        [
            (
                ids[r["computation_id"]],
                short(r.get("cluster_name") or r.get("cluster_id"), 30),
                when(r.get("start")),
                r.get("state"),
                seconds(r.get("wall")),
                r.get("n_tasks"),
                seconds(r.get("compute")),
                nbytes(r.get("nbytes")),
                "-" if r.get("cost") is None else _cost(r.get("cost")),
            )
            for r in rows
        ],
        ["computation", "cluster", "start", "state", "wall", "tasks", "compute", "bytes", "cost"],
    )


def costs(rows: list[dict], by: str) -> str:
    """cost_report's rows: one per user, UTC day or month."""
    return render(
        [
            (
                r["key"] if r["key"] is not None else "(unknown)",
                r["clusters"],
                r["computations"],
                f"{r['core_hours']:.2f}",
                "-" if r["cost"] is None else _cost(r["cost"]),
            )
            for r in rows
        ],
        [by, "clusters", "computations", "core-hours", "cost"],
    )


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def comparison(result: dict) -> str:
    """A run against its baseline: the findings, then one row per task prefix."""
    wall = result["wall"]
    ids = shorten(x for x in (result["computation_id"], result["baseline_id"]) if x is not None)
    head = [f"computation {escaped(ids[result['computation_id']])}"]
    if result["baseline_id"] is None:
        head.append("no baseline")
    else:
        head.append(
            f"against {escaped(ids[result['baseline_id']])}: wall {seconds(wall['before'])} → "
            f"{seconds(wall['after'])} ({_ratio(wall['ratio'])})"
        )
    lines = [", ".join(head)]
    lines += [f"  - {escaped(f)}" for f in result["findings"]]

    def figure(side: dict | None, key: str, show: Any) -> str:
        return "-" if side is None else show(side.get(key))

    table = render(
        [
            (
                g["prefix"],
                figure(g["before"], "compute", seconds),
                figure(g["after"], "compute", seconds),
                _ratio(g["ratio"]),
                figure(g["before"], "n_tasks", str),
                figure(g["after"], "n_tasks", str),
                figure(g["before"], "nbytes", nbytes),
                figure(g["after"], "nbytes", nbytes),
            )
            for g in result["groups"]
        ],
        [
            "task prefix",
            "compute before",
            "compute after",
            "ratio",
            "tasks before",
            "tasks after",
            "bytes before",
            "bytes after",
        ],
    )
    return "\n".join(lines) + "\n\n" + table


def findings(rows: list[dict]) -> str:
    """`explain`'s findings: title and cost, then evidence and advice, most costly first."""
    if not rows:
        return "no findings: nothing here cost enough time to mention (analytics.findings.* thresholds)"
    out = []
    for i, f in enumerate(rows, 1):
        out.append(
            f"{i}. [{escaped(f['kind'])}] {escaped(f['title'])} (~{seconds(f['impact'])} lost)"
        )
        out.append(f"   evidence: {escaped(f['evidence'])}")
        out.append(f"   advice:   {escaped(f['advice'])}")
    return "\n".join(out)


def cluster_findings(rows: list[dict]) -> str:
    """`explain --cluster`: each kind over the cluster's computations, the costliest first,
    then its costliest computations (short ids: `explain ID` tells each one's story)."""
    if not rows:
        return "no findings: none of its computations cost enough time to mention"
    out = []
    ids = shorten(c["computation_id"] for k in rows for c in k["computations"])
    for i, k in enumerate(rows, 1):
        n = k["n_computations"]
        out.append(
            f"{i}. [{escaped(k['kind'])}] in {n} computation{'s' if n != 1 else ''} "
            f"(~{seconds(k['impact'])} lost in all): {escaped(k['why'])}"
        )
        for c in k["computations"]:
            label = f" {short(c['label'], 40)}" if c.get("label") else ""
            out.append(
                f"   {ids[c['computation_id']]}{label}: {escaped(c['title'])} "
                f"(~{seconds(c['impact'])})"
            )
        if n > len(k["computations"]):
            out.append(f"   ... and {n - len(k['computations'])} more")
        out.append(f"   advice:   {escaped(k['advice'])}")
    return "\n".join(out)
