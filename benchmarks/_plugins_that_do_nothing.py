"""Scheduler preload for scheduler_overhead.py --dispatch: DAL_BENCH_PLUGINS scheduler
plugins that override nothing.  Dask still calls each one's (inherited, empty)
transition hook for every transition, with its keyword arguments: what any plugin pays."""

from __future__ import annotations

import os
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin


def dask_setup(scheduler: Any) -> None:
    for i in range(int(os.environ.get("DAL_BENCH_PLUGINS", "0"))):
        # A class of its own each, as separate plugins would be.
        plugin = type(f"Nothing{i}", (SchedulerPlugin,), {"name": f"nothing-{i}"})()
        scheduler.add_plugin(plugin)
