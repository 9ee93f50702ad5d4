"""A real workload on a LocalCluster, recorded into the default store, then read back.

python -m dask_analytics_lab.demo [--store PATH_OR_URL]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time

FAILURE = "demo: multiples of 3 are not allowed"


def _fails(x: int) -> int:
    if x % 3 == 0:
        raise ValueError(FAILURE)
    return x


def _logs_event(x: int) -> int:
    from distributed import get_worker

    get_worker().log_event("demo-progress", {"step": x, "message": "user events are recorded too"})
    return x


class _DeliberateFailures(logging.Filter):
    """Drops a worker's "Compute Failed" log of the demo's own failing tasks: they fail on
    purpose, and the demo prints what was recorded of them; any other failure is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        return FAILURE not in record.getMessage()


def run(store: str | None = None) -> str:
    import dask
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster, wait

    import dask_analytics_lab as dal
    from dask_analytics_lab import config, tables

    # The demo's own topic on top of the default ones (the plugin's lifecycle topics among
    # them: leaving those out would make it say so).
    allow = config.get("analytics.events.allow") + ["demo-progress"]
    worker_log = logging.getLogger("distributed.worker")
    with dask.config.set({"analytics.events.allow": allow}), contextlib.ExitStack() as done:
        quiet = _DeliberateFailures()
        worker_log.addFilter(quiet)
        done.callback(worker_log.removeFilter, quiet)
        with (
            # Workers in this process, where the filter is: worker processes on a busy
            # machine can outlive the nanny's patience at close, which then warns.
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            info = dal.register(client, store=store)
            print(f"Recording cluster {info['cluster_id']} into {info['store']}\n")

            pdf = pd.DataFrame({"key": [i % 10 for i in range(100_000)], "value": range(100_000)})
            df = dd.from_pandas(pdf, npartitions=8)
            df.groupby("key").value.mean().compute()

            x = da.random.random((4000, 4000), chunks=(500, 500))
            (x + x.T).mean(axis=0).sum().compute()

            futures = client.map(_fails, range(30))
            wait(futures)  # ten fail alike: one exception row with a count of 10
            print(f"{sum(f.status == 'error' for f in futures)} tasks failed on purpose\n")
            del futures
            client.gather(client.map(_logs_event, range(3)))
            time.sleep(1.5)  # let the workers' profiler finish a cycle
            dal.flush(client)
            cluster_id = info["cluster_id"]

    print("Clusters\n" + tables.clusters(dal.list_clusters(limit=5, store=store)) + "\n")
    print(
        "Computations\n"
        + tables.computations(dal.list_computations(cluster_id, store=store))
        + "\n"
    )
    print("Exceptions\n" + tables.exceptions(dal.list_exceptions(cluster_id, store=store)) + "\n")
    print("Events\n" + tables.events(dal.list_events(cluster_id, store=store)) + "\n")
    profile = dal.get_profile(cluster_id=cluster_id, store=store)
    print(f"Profile: {profile.get('count', 0)} samples across the cluster's computations")
    print(f"\nEverything is kept in {dal.where(store)}; try `dask-analytics clusters`.")
    return cluster_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store", help="store path or URL (default: analytics.store, a SQLite file)"
    )
    run(parser.parse_args().store)


if __name__ == "__main__":
    main()
