"""How busy the scheduler's host was while a computation ran: the share of all its cores
that ran anything (this program or any other), as `top` counts it.

A rule can then tell threads that waited for a free core (an oversubscribed machine)
from threads that waited on I/O or sleep, which leave the host idle.  Reads the kernel's
CPU counters (psutil, /proc/stat): microseconds, twice per computation.  Workers on
other hosts are not measured: this is the scheduler's host, where a LocalCluster runs.
"""

from __future__ import annotations

import psutil

CORES: int = psutil.cpu_count() or 1


def reading() -> tuple[float, float]:
    """(busy, total) CPU seconds of all cores since boot; iowait counts as idle."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    total = sum(t)
    return total - idle, total


def busy_percent(since: tuple[float, float] | None) -> float | None:
    """Percent of all cores busy from `since` (a `reading()`) to now; None when too
    little time passed for the counters (ticks of 10 ms per core) to tell."""
    if since is None:
        return None
    busy, total = reading()
    elapsed = total - since[1]
    if elapsed < 0.1 * CORES:
        return None
    return round(min(100.0, max(0.0, 100.0 * (busy - since[0]) / elapsed)), 1)
