"""What each source of computations (collect/sources.py) costs a submitted graph.

    python benchmarks/source_cost.py [--groups 4000] [--graphs 300] [--rounds 3]

An in-process cluster holds --groups live task groups (one held future each), then
--graphs small graphs are submitted one at a time, twice: while a long task keeps the
cluster busy (each joins the running computation) and while it is idle (each begins a
new one, after the one before finished).  The figure is the recorder's update_graph
CPU per graph (its meter's "graph" part: claims, GPU jobs and, on spans, the source's
own work), for Dask's Computation objects and for computations made from spans,
alternating in each round; the median of the rounds, and spans over Computation.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import dask
from distributed import Client, LocalCluster, wait

import dask_analytics_lab as dal


def inc(x: int) -> int:
    return x + 1


def nap(seconds: float) -> None:
    time.sleep(seconds)


def graph_seconds(client: Client) -> float:
    return float(dal.status(client)["graph_cpu_seconds"])


def one_round(source: str, groups: int, graphs: int, store: str) -> tuple[float, float]:
    """(busy, idle) update_graph CPU microseconds per graph."""
    config = {"analytics.computation.source": source, "analytics.interval": "100ms"}
    with (
        dask.config.set(config),
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        dal.register(client, store=store)
        held = client.map(inc, range(groups), key=[f"live{g}-0" for g in range(groups)])
        wait(held)
        long = client.submit(nap, 3600, pure=False)
        while not any(ws.processing for ws in cluster.scheduler.workers.values()):
            time.sleep(0.01)
        before = graph_seconds(client)
        for i in range(graphs):
            wait(client.submit(inc, i, key=f"busy-{i}"))
        busy = (graph_seconds(client) - before) / graphs * 1e6
        client.cancel(long)
        while any(ws.processing for ws in cluster.scheduler.workers.values()):
            time.sleep(0.01)
        before = graph_seconds(client)
        for i in range(graphs):
            wait(client.submit(inc, i, key=f"idle-{i}"))
        idle = (graph_seconds(client) - before) / graphs * 1e6
        assert dal.status(client)["computation_source"] == source
        del held
        return busy, idle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=4000)
    ap.add_argument("--graphs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    store = "sqlite:///" + str(Path(tempfile.mkdtemp()) / "bench.db")
    results: dict[str, list[tuple[float, float]]] = {"computation": [], "spans": []}
    for r in range(a.rounds):
        order = ["computation", "spans"] if r % 2 == 0 else ["spans", "computation"]
        for source in order:
            results[source].append(one_round(source, a.groups, a.graphs, store))
    print(
        f"\n{a.groups:,} live task groups, {a.graphs} one-task graphs each way, {a.rounds} rounds:"
        " the recorder's update_graph CPU per graph (us, median of the rounds)"
    )
    print(f"{'source':<14} {'while busy':>11} {'while idle':>11}")
    med = {s: [statistics.median(x[i] for x in v) for i in (0, 1)] for s, v in results.items()}
    for source, (busy, idle) in med.items():
        print(f"{source:<14} {busy:>11.1f} {idle:>11.1f}")
    (cb, ci), (sb, si) = med["computation"], med["spans"]
    print(f"{'spans / comp.':<14} {sb / cb:>10.2f}x {si / ci:>10.2f}x")


if __name__ == "__main__":
    main()
