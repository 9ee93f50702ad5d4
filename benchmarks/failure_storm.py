"""A failure storm: N tasks that all fail, each with a different message.

    python benchmarks/failure_storm.py [--tasks 100000]

Runs the storm on two real LocalClusters in this process, one without analytics (the
baseline) and one recording into a temporary SQLite store, and prints the scheduler's
event-loop CPU per task each way, the time the analytics transition hook took (total
and the slowest single call), the plugin's snapshot CPU, and what was stored: failures
with literals masked are one row per (group, type, frame, pattern), counted exactly.

Before issue 8 (one row per exact message, a scan of every row on each new one), 20,000
distinct failures cost 29.5 s of event-loop time with a single transition at 262 ms.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

import dask
from distributed import Client, LocalCluster, wait

import dask_analytics_lab as dal


def fail(i: int) -> None:
    raise KeyError(f"missing key-{i}")


def storm(n: int, store: str | None) -> dict:
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        timings = {"hook": 0.0, "max": 0.0, "calls": 0}
        if store:
            dal.register(client, store=store)
            plugin = cluster.scheduler.plugins["dask-analytics-lab"]
            hook = plugin.transition

            def timed(*args, **kwargs):
                # Thread CPU, not wall time: worker threads share this process and can
                # hold the GIL in the middle of a call.
                t0 = time.thread_time()
                try:
                    return hook(*args, **kwargs)
                finally:
                    dt = time.thread_time() - t0
                    timings["hook"] += dt
                    timings["calls"] += 1
                    if dt > timings["max"]:
                        timings["max"] = dt

            plugin.transition = timed
        loop0 = client.run_on_scheduler(time.thread_time)
        t0 = time.time()
        futures = client.map(fail, range(n), pure=False)
        wait(futures)
        wall = time.time() - t0
        time.sleep(1.5)  # one more snapshot
        loop1 = client.run_on_scheduler(time.thread_time)
        out = {"loop": loop1 - loop0, "wall": wall, **timings}
        if store:
            info = dal.flush(client, timeout=120)
            out["ticks"] = info["tick_cpu_seconds"]
            cluster_id = info["cluster_id"]
            rows = dal.list_exceptions(cluster_id, limit=None, store=store)
            out["rows"] = len(rows)
            out["counted"] = sum(r["count"] for r in rows)
            (comp,) = dal.list_computations(cluster_id, store=store)
            out["n_erred"] = comp["n_erred"]
        del futures
        return out


def one(n: int, analytics: bool) -> dict:
    # 100,000 "Compute Failed" lines would measure the logger, not the scheduler.
    logging.getLogger("distributed.worker").setLevel(logging.CRITICAL)
    logging.getLogger("distributed.scheduler").setLevel(logging.CRITICAL)
    store = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "storm.db") if analytics else None
    with dask.config.set({"analytics.interval": "1s"}):
        return storm(n, store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument(
        "--repeats", type=int, default=1, help="alternating runs each way (medians)"
    )
    parser.add_argument("--one", choices=["off", "on"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.tasks
    if args.one:
        print(json.dumps(one(n, args.one == "on")))
        return
    # Each run in a fresh process, alternating: no run inherits another's heap.
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    for _ in range(args.repeats):
        for label in ("off", "on"):
            out = subprocess.run(
                [sys.executable, __file__, "--tasks", str(n), "--one", label],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            runs[label].append(json.loads(out.strip().splitlines()[-1]))

    def median(label: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[label])

    off = {k: median("off", k) for k in ("wall", "loop")}
    on = {k: median("on", k) for k in runs["on"][0]}
    print(
        f"\nFailure storm: {n} tasks, each raising KeyError with its own message "
        f"(2 workers, threads; {args.repeats} alternating runs each way, each in a fresh process, medians)\n"
    )
    print(f"{'':<28} {'no analytics':>14} {'analytics':>12} {'ratio':>7}")
    print(
        f"{'wall s':<28} {off['wall']:>14.1f} {on['wall']:>12.1f} {on['wall'] / off['wall']:>7.2f}"
    )
    print(
        f"{'event-loop CPU s':<28} {off['loop']:>14.1f} {on['loop']:>12.1f} {on['loop'] / off['loop']:>7.2f}"
    )
    print(
        f"{'event-loop CPU us/task':<28} {off['loop'] / n * 1e6:>14.1f} {on['loop'] / n * 1e6:>12.1f}"
    )
    print(
        f"\n{'transition hook, total s':<34} {on['hook']:.3f}  ({on['hook'] / on['loop'] * 100:.2f}% of the loop;"
        f" {on['hook'] / n * 1e6:.2f} us/task over {on['calls']} calls)"
    )
    print(f"{'transition hook, slowest call ms':<34} {on['max'] * 1e3:.3f}")
    print(f"{'snapshots (ticks), CPU s':<34} {on['ticks']:.3f}")
    print(
        f"{'exception rows stored':<34} {on['rows']}  (failures counted: {on['counted']}, "
        f"computation n_erred: {on['n_erred']})"
    )


if __name__ == "__main__":
    main()
