"""Notebook views of what dask-analytics recorded (anywidget: a tiny Python class and
one ES module per view, built from js/widgets/ into dask_analytics_lab/static/).

    from dask_analytics_lab import monitor
    monitor()            # the current cluster, live; history after

Importing this package stays cheap and works without anywidget installed (scheduler
images): the classes load on first use.
"""

from __future__ import annotations

from typing import Any

from ..polling import LIVE

_CLASSES = {
    "MonitorWidget": "monitor_widget",
    "TaskGroups": "views",
    "TimeBreakdown": "views",
    "TaskStream": "views",
    "Flamegraph": "views",
    "CodeSnippets": "views",
    "ClusterSummary": "views",
    "GpuMetrics": "views",
    "ShareButton": "views",
}

__all__ = ["monitor", *_CLASSES]


def monitor(
    client: Any = None,
    *,
    cluster_id: str | None = None,
    computation_id: str | None = None,
    store: str | None = None,
    interval: float = LIVE,
) -> Any:
    """The analytics of a cluster as an inline widget, live while work runs; history after.

    With no arguments: the current Client's cluster (analytics is registered on it if it
    was not), else the newest cluster in the store, following newer ones as they start.
    `cluster_id=` / `computation_id=` open a past one; `store=` reads another store.
    """
    from .monitor_widget import monitor as _monitor

    return _monitor(
        client, cluster_id=cluster_id, computation_id=computation_id, store=store, interval=interval
    )


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_CLASSES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
