"""The cluster: what it is (its `cluster` message), and its figures over time: workers,
threads, memory, worker-seconds, cost, idle."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from .. import messages

# A sample is sent when a figure changes, and at least this often (seconds), so the
# cluster's time series has no gap longer than that (liveness is the shipper's heartbeat).
SAMPLE_EVERY = 30.0


class ClusterSampler:
    def __init__(self, price_per_core_hour: float, start: float):
        self._price = price_per_core_hour
        self._last_time = start
        self._last_sent: tuple[int, int, int, int, int, int] | None = None
        self._last_sent_time = 0.0
        self.worker_seconds = 0.0
        self.core_seconds = 0.0
        self.last_activity: float | None = None

    def sample(
        self, scheduler: Any, now: float, dropped: int, *, force: bool = False
    ) -> dict[str, Any] | None:
        """O(workers).  None when nothing changed and no heartbeat is due."""
        workers = scheduler.workers.values()
        n_workers = len(workers)
        n_threads = scheduler.total_nthreads
        dt = max(now - self._last_time, 0.0)
        self._last_time = now
        self.worker_seconds += n_workers * dt
        self.core_seconds += n_threads * dt
        processing = sum(len(ws.processing) for ws in workers)
        if processing:
            self.last_activity = now
        memory_used = sum(ws.memory.process for ws in workers)
        memory_total = sum(ws.memory_limit or 0 for ws in workers)
        figures = (n_workers, n_threads, processing, memory_used >> 20, memory_total, dropped)
        if not force and figures == self._last_sent and now - self._last_sent_time < SAMPLE_EVERY:
            return None
        self._last_sent = figures
        self._last_sent_time = now
        return {
            "n_workers": n_workers,
            "n_threads": n_threads,
            "memory_used": memory_used,
            "memory_total": memory_total,
            "processing": processing,
            "worker_seconds": self.worker_seconds,
            "core_seconds": self.core_seconds,
            "cost": self.core_seconds / 3600 * self._price,
            "idle_since": scheduler.idle_since,
            "last_activity": self.last_activity,
            "dropped_messages": dropped,
        }


async def describe(
    scheduler: Any, s: dict[str, Any], cluster_id: str, allow: Iterable[str]
) -> dict[str, Any]:
    """The `cluster` message: what the cluster is, where it runs, and with what
    (`s`: the plugin's settings, `allow`: the event topics it records)."""
    from .environment import platform_info, versions

    # importlib.metadata reads files: keep it off the event loop.
    found_versions, found_platform = await asyncio.to_thread(lambda: (versions(), platform_info()))
    return {
        "name": s.get("name") or cluster_id,
        "address": scheduler.address,
        "user": s["user"],
        "account": s["account"],
        "started": scheduler.time_started,
        "price_per_core_hour": s["price_per_core_hour"],
        "heartbeat": messages.HEARTBEAT,
        "versions": found_versions,
        "platform": found_platform,
        "settings": {
            "interval": s["interval"],
            "code_transmit": s["code_transmit"],
            "profile_transmit": s["profile_transmit"],
            "events_allow": sorted(allow),
        },
    }
