"""Scheduler preload for scheduler_overhead.py --parts: analytics with parts of it
switched off, to find where its cost on the event loop goes.

DAL_BENCH_OFF is a comma-separated list of:
  hook      the analytics plugin's transition hook does nothing (Dask still calls it)
  graph     the update_graph hook does nothing
  ticks     no snapshots (cluster samples, computations, errors, task stream sends)
  emit      messages are dropped before they are built and shipped
Profile fetches, the task stream, fine metrics and worker samples have their own settings
(analytics.profile.transmit, analytics.task-stream.transmit, analytics.metrics.transmit,
analytics.workers.transmit), passed by the benchmark as environment variables.
"""

from __future__ import annotations

import os
from typing import Any

from dask_analytics_lab.api import dask_setup as _setup
from dask_analytics_lab.collect.plugin import PLUGIN_NAME


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def dask_setup(scheduler: Any) -> None:
    _setup(scheduler)
    off = set(filter(None, os.environ.get("DAL_BENCH_OFF", "").split(",")))
    plugin = scheduler.plugins[PLUGIN_NAME]
    if "hook" in off:
        # The plugin sets its hook when it starts (after this preload): replace it then.
        start = plugin.start

        async def start_without_hook(scheduler: Any) -> None:
            await start(scheduler)
            plugin.transition = _nothing

        plugin.start = start_without_hook
    if "graph" in off:
        plugin.update_graph = _nothing
    if "ticks" in off:
        plugin._tick = _nothing
    if "emit" in off:
        plugin.emit = _nothing
