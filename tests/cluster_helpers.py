"""Real LocalClusters with analytics registered, for the end-to-end tests."""
from __future__ import annotations

import contextlib
from typing import Iterator

import dask
from distributed import Client, LocalCluster

import dask_analytics_lab as dal

FAST = {
    "analytics.interval": "100ms",
    "analytics.retry.min-delay": "50ms",
    "analytics.retry.max-delay": "200ms",
}


@contextlib.contextmanager
def recorded_cluster(store: str, *, processes: bool = False, n_workers: int = 2,
                     config: dict | None = None) -> Iterator[tuple[Client, dict]]:
    """A LocalCluster whose scheduler records into `store`; yields (client, register info)."""
    overrides = {**FAST, **(config or {})}
    with dask.config.set(overrides):
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            info = dal.register(client, store=store)
            yield client, info
