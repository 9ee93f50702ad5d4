"""Scheduler preload for scheduler_overhead.py --side-by-side: one of Dask's own plugins
(or one that overrides nothing), registered as the dashboard would register it.
DAL_BENCH_OWN names it: noop, task-stream or all-progress."""

from __future__ import annotations

import os
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.diagnostics.progress import AllProgress
from distributed.diagnostics.task_stream import TaskStreamPlugin


class Nothing(SchedulerPlugin):
    name = "nothing"


def dask_setup(scheduler: Any) -> None:
    which = os.environ["DAL_BENCH_OWN"]
    if which == "noop":
        scheduler.add_plugin(Nothing())
    elif which == "task-stream":
        scheduler.add_plugin(TaskStreamPlugin(scheduler))
    elif which == "all-progress":
        AllProgress(scheduler)  # it adds itself
    else:
        raise ValueError(f"DAL_BENCH_OWN={which!r}: expected noop, task-stream or all-progress")
