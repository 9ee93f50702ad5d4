"""Worker RPCs per profile fetch, by number of task prefixes, measured in one run.

    python benchmarks/profile_rpcs.py [--workers 2] [--prefixes 30 [300 ...]] [--repeats 10]

A LocalCluster of worker processes records one computation with N task prefixes.
Then the same window is fetched two ways, repeatedly, on the idle cluster:
  old: Dask's way, what the collector did before issue 19: `Scheduler.get_profile(
       key=prefix, start=, stop=)` once per prefix (one RPC per prefix per worker);
  new: the collector's way: `prefix_trees` run once on each worker.
RPCs are counted where they arrive, in each worker's `run` and `profile` handlers.  The
scheduler's event-loop CPU per fetch is thread time on the loop around the RPCs (an
upper bound: whatever else the idle loop did meanwhile is in it).  The collector's own
fetches of the computation (final, and live ones) are counted too, with its
`profile_rpcs` counter beside the workers' count.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import dask
from distributed import Client, LocalCluster
from distributed.protocol.pickle import loads

import dask_analytics_lab as dal


def _count_calls(dask_worker: Any = None) -> None:
    w = dask_worker
    run, prof = w.handlers["run"], w.handlers["profile"]
    # On the worker: functions sent from __main__ travel by value, each with its own globals.
    calls = w.analytics_bench_calls = []  # (op, what) of each call

    async def counted_run(comm: Any, **msg: Any) -> Any:
        calls.append(("run", loads(msg["function"]).__name__))
        return await run(comm, **msg)

    async def counted_profile(**msg: Any) -> Any:
        calls.append(("profile", str(msg.get("key"))))
        return await prof(**msg)

    w.handlers["run"], w.handlers["profile"] = counted_run, counted_profile


def _calls(dask_worker: Any = None) -> list[tuple[str, str]]:
    return list(dask_worker.analytics_bench_calls)


def _rpcs(client: Client) -> int:
    """Profile RPCs the workers got so far (our own `_calls` runs left out)."""
    return sum(
        op == "profile" or what == "prefix_trees"
        for calls in client.run(_calls).values()
        for op, what in calls
    )


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def _fetch(
    prefixes: list[str],
    start: float,
    stop: float,
    way: str,
    repeats: int,
    dask_scheduler: Any = None,
) -> float:
    """Loop CPU seconds of one fetch, median of `repeats`."""
    fetcher = dask_scheduler.plugins["dask-analytics-lab"]._profiles
    cpus = []
    for _ in range(repeats):
        cpu = time.thread_time()
        if way == "old":
            # What profiles.py did before: one get_profile per prefix, all at once.
            await asyncio.gather(
                *(
                    dask_scheduler.get_profile(key=p, start=start, stop=stop, merge_workers=False)
                    for p in prefixes
                )
            )
        else:
            await fetcher._ask_workers(dict.fromkeys(prefixes, start), stop)
        cpus.append(time.thread_time() - cpu)
    return statistics.median(cpus)


def measure(client: Client, store: str, prefixes: int, workers: int, repeats: int) -> None:
    info0 = client.sync(client.scheduler.analytics_info)
    rpcs0 = _rpcs(client)
    tag = uuid.uuid4().hex[:6]
    parts = [
        dask.delayed(_spin)(0.05, dask_key_name=f"p{tag}x{i}-{j}")
        for i in range(prefixes)
        for j in range(2)
    ]
    client.compute(parts, sync=True)
    info1 = dal.flush(client, timeout=120)
    own_rpcs = _rpcs(client) - rpcs0
    fetches = info1["profiles_fetched"] - info0["profiles_fetched"]
    counter = info1["profile_rpcs"] - info0["profile_rpcs"]
    comp = max(dal.list_computations(info1["cluster_id"], store=store), key=lambda c: c["start"])
    names = [f"p{tag}x{i}" for i in range(prefixes)]
    row = [f"{prefixes:>8} {workers:>7}"]
    for way in ("old", "new"):
        before = _rpcs(client)
        cpu = client.run_on_scheduler(_fetch, names, comp["start"], comp["stop"], way, repeats)
        per_fetch = (_rpcs(client) - before) / repeats
        row.append(f"{per_fetch:>12.0f} {cpu * 1e3:>10.2f}")
    row.append(
        f"{fetches:>8} {own_rpcs / max(fetches, 1):>12.1f} {counter / max(fetches, 1):>10.1f}"
    )
    print("  ".join(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--prefixes", type=int, nargs="+", default=[30])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    store = str(Path(tempfile.mkdtemp()) / "analytics.db")
    with (
        dask.config.set({"distributed.logging.distributed": "error"}),
        LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        dal.register(client, store=store)
        client.run(_count_calls)
        print(
            "Worker RPCs per profile fetch of one computation's window (counted in the workers' handlers)"
            " and the scheduler loop's CPU per fetch (median of repeats)\n"
        )
        print(
            f"{'prefixes':>8} {'workers':>7}  {'old RPCs':>12} {'old ms':>10}  {'new RPCs':>12} {'new ms':>10}"
            f"  {'fetches':>8} {'RPCs/fetch':>12} {'counter':>10}"
        )
        print(
            f"{'':>17}  {'(get_profile per prefix)':>23}  {'(prefix_trees)':>23}  {'(the collector, this run)':>32}"
        )
        for n in args.prefixes:
            measure(client, store, n, args.workers, args.repeats)


if __name__ == "__main__":
    main()
