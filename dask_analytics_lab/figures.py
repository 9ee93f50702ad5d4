"""Figures as every view shows them, for the Python side (the CLI's tables, the
comparison's findings): one way to write a duration, the views' (js/common/format.ts).

A base module: store/ uses it too, and it imports nothing of the package."""

from __future__ import annotations

import math
import re

from dask.utils import format_bytes as _format_bytes

# A group's name ends in its graph's token ("random_sample-78306eba..."): the views show
# the prefix and the token's first 6 digits (js/widgets/taskgroups.ts splitName).
_TOKEN = re.compile(r"-([0-9a-f]{8,})$")


def group_name(name: str) -> str:
    """A task group's name as the task-group table shows it: "random_sample-78306e"."""
    return _TOKEN.sub(lambda m: "-" + m.group(1)[:6], name)


def duration(s: float) -> str:
    """A duration as every view shows it ("850 ms", "12.5 s", "4m 00s", "2h 03m", "3d 4h"):
    the Python twin of js/common/format.ts `duration`, so the CLI, the findings and the
    UI print one figure one way (tests/integration/test_cli_edges.py runs both)."""
    if not math.isfinite(s):
        return "-"
    s = max(s, 0.0)
    if s < 1e-3:
        return "0 s" if s == 0 else f"{_round(s * 1e6)} µs"
    if s < 1:
        return f"{_round(s * 1e3)} ms"
    if s < 10:
        return f"{s:.2f} s"
    if s < 59.95:
        return f"{s:.1f} s"
    # Round once, then split: 239.6 s is "4m 00s", never "3m 60s".
    whole = _round(s)
    m = whole // 60
    if m < 60:
        return f"{m}m {whole % 60:02d}s"
    hrs = m // 60
    if hrs < 48:
        return f"{hrs}h {m % 60:02d}m"
    return f"{hrs // 24}d {hrs % 24}h"


_CELL = re.compile(r"ipykernel_\d+[\\/]\d+\.py$")
_PLACE = re.compile(r"^(.*?)(:\d+ in .*)?$", re.S)


def short_location(location: str | None) -> str:
    """Where a failure was raised, as the failures tables show it: the file's last two
    parts ("project/etl.py:42 in parse"), a Jupyter cell's file as "notebook cell:2 in
    f" (as the Code tab names it): the Python twin of js/common/failures.ts
    `shortLocation`."""
    m = _PLACE.match(location or "")
    assert m is not None  # the pattern matches any text
    path, where = m.group(1), m.group(2) or ""
    if _CELL.search(path):
        return f"notebook cell{where}"
    parts = re.split(r"[\\/]", path)
    return ("/".join(parts[-2:]) if len(parts) > 2 else path) + where


def format_bytes(n: float) -> str:
    """Bytes as dask writes them ("1.50 MiB"), of any number: byte figures are often
    sums of floats (fine metrics, a run's groups)."""
    # dask annotates its `n` as int, but formats any number.
    return _format_bytes(n)  # type: ignore[arg-type]


def _round(x: float) -> int:
    # JavaScript's Math.round: halves go up (Python's round() goes to even).
    return math.floor(x + 0.5)
