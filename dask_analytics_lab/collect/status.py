"""What `dal.status(client)` shows of a scheduler's recording: the shipper's counters,
each part's, and what analytics has cost the scheduler (collect/accounting.py)."""

from __future__ import annotations

import logging
from typing import Any

from ..urls import mask_url

logger = logging.getLogger("dask_analytics_lab")


def info(plugin: Any) -> dict[str, Any]:
    """The started `plugin`'s counters (collect/plugin.py's AnalyticsPlugin)."""
    shipper, profiles, stream = plugin._shipper, plugin._profiles, plugin._stream
    metrics, workers = plugin._metrics, plugin._workers
    found = {
        "cluster_id": plugin.cluster_id,
        "store": mask_url(plugin.settings["store"]),
        "computation_source": plugin.source.name,  # collect/sources.py
        "pending": shipper.pending,
        "stored": shipper.stored,
        "dropped": shipper.dropped,
        "dropped_by_kind": shipper.drop_counts(),  # samples go first (collect/buffer.py)
        "buffer_bytes": shipper.buffered_bytes,
        "buffer_max_bytes": shipper.max_bytes,
        "rejected": shipper.rejected,
        "failing_since": shipper.failing_since,
        "ticks": plugin._ticks.count,
        "tick_cpu_seconds": plugin._meter.seconds["ticks"],
        "graph_cpu_seconds": plugin._meter.seconds["graph"],
        "profiles_fetched": profiles.fetched,
        "profiles_dropped": profiles.dropped,
        "profile_merge_seconds": profiles.merge_seconds,
        "profile_rpcs": profiles.rpcs,  # worker RPCs of all fetches: one per worker a fetch
        "task_stream_tasks": stream.recorded if stream is not None else 0,
        "task_stream_dropped": stream.dropped if stream is not None else 0,
        "metrics_rows": metrics.sent if metrics is not None else 0,
        "metrics_dropped": metrics.dropped if metrics is not None else 0,
        "metrics_seconds": metrics.seconds if metrics is not None else 0.0,
        "worker_samples": workers.sent if workers is not None else 0,
        # Every CPU second analytics costs this scheduler, by part (collect/accounting.py).
        "cost": cost(plugin),
    }
    for part in plugin.info_parts:
        try:
            found.update(part())
        except Exception:
            logger.exception("dask-analytics: %r failed to report", part)
    return found


def cost(plugin: Any) -> dict[str, Any]:
    """The cost meter's report, with what only the scheduler knows: its transitions
    since the plugin started, and our other plugins Dask calls for each."""
    meter, scheduler = plugin._meter, plugin.scheduler
    meter.transition_calls = scheduler.transition_counter - plugin._counter0
    meter.other_plugins = sum(
        1
        for p in scheduler.plugins.values()
        if p is not plugin and type(p).__module__.startswith("dask_analytics_lab")
    )
    metrics = plugin._metrics
    report: dict[str, Any] = meter.report(
        extra={"metrics": metrics.heartbeat_seconds} if metrics is not None else None,
        threads={"profile-merge": plugin._profiles.merge_seconds},
    )
    return report
