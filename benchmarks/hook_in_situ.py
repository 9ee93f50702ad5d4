"""The transition hook's cost by kind of transition, timed where it runs: inside a real
scheduler, between Dask's own steps (its caches cold), not in a replay.

    python benchmarks/hook_in_situ.py [--tasks 20000]

A LocalCluster (2 worker processes, the scheduler in this process) runs client.map
twice with analytics registered.  In one run every call of the plugin's transition hook
is timed by the thread's CPU clock and by the wall clock; in the other the same wrapper
times a no-op hook instead (the baseline: the wrapper's own call, its second pass of
Dask's keyword arguments, the clocks).  Printed per (start, finish): calls, the hook's
and the baseline's mean CPU microseconds, the difference, the median, and its share of
the hook's time; then the wall clock's mean beside the CPU clock's (on a busy machine a
wall clock also runs while the thread waits for a core: the accounting in
collect/accounting.py samples by wall clock and leaves out calls over OUTLIER).
`hook_replay.py` times the same hook replayed in a tight loop (its caches warm).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab.collect.plugin import PLUGIN_NAME

Samples = dict[tuple[str, str], list[tuple[float, float]]]  # kind: [(cpu s, wall s)]


def inc(x: int) -> int:
    return x + 1


def noop(key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
    return None


def timed(hook: Any, samples: Samples) -> Any:
    cpu, wall = time.thread_time, time.perf_counter

    def transition(key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        c0, w0 = cpu(), wall()
        hook(key, start, finish, *args, **kwargs)
        w1, c1 = wall(), cpu()
        samples[(start, finish)].append((c1 - c0, w1 - w0))

    return transition


def run(client: Client, plugin: Any, hook: Any, n: int) -> Samples:
    """client.map of n tasks with `hook` timed in place of the plugin's own."""
    own = plugin.transition
    samples: Samples = defaultdict(list)
    plugin.transition = timed(hook, samples)
    try:
        client.gather(client.map(inc, range(n), pure=False))
    finally:
        plugin.transition = own
    return samples


def mean_us(values: list[float]) -> float:
    return statistics.fmean(values) * 1e6 if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    args = parser.parse_args()
    store = "sqlite:///" + str(Path(tempfile.mkdtemp()) / "in_situ.db")
    with (
        LocalCluster(n_workers=2, threads_per_worker=2, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        dal.register(client, store=store)
        plugin = cluster.scheduler.plugins[PLUGIN_NAME]
        while getattr(plugin.transition, "__name__", "") != "transition":  # set at start
            time.sleep(0.05)
        client.gather(client.map(inc, range(200), pure=False))  # warm up
        base = run(client, plugin, noop, args.tasks)
        hook = run(client, plugin, plugin.transition, args.tasks)

    total = sum(c for xs in hook.values() for c, _ in xs) - sum(
        mean_us([c for c, _ in base.get(k, [])]) / 1e6 * len(xs) for k, xs in hook.items()
    )
    calls = sum(len(xs) for xs in hook.values())
    print(
        f"client.map, {args.tasks:,} tasks, {calls:,} transitions ({calls / args.tasks:.2f} a task)\n"
    )
    print(
        f"{'transition':<26} {'calls':>7} {'hook us':>8} {'no-op us':>8} {'body us':>8}"
        f" {'median':>7} {'share':>6}"
    )
    for kind, xs in sorted(hook.items(), key=lambda kv: -sum(c for c, _ in kv[1])):
        cpu = [c for c, _ in xs]
        b = mean_us([c for c, _ in base.get(kind, [])])
        body = mean_us(cpu) - b
        median = statistics.median(cpu) * 1e6 - b
        share = body * len(xs) / (total * 1e6) if total > 0 else 0.0
        name = f"{kind[0]} -> {kind[1]}"
        print(
            f"{name:<26} {len(xs):>7,} {mean_us(cpu):>8.2f} {b:>8.2f} {body:>8.2f}"
            f" {median:>7.2f} {share:>6.1%}"
        )
    cpu_all = [c for xs in hook.values() for c, _ in xs]
    wall_all = [w for xs in hook.values() for _, w in xs]
    print(
        f"\nhook body {total / args.tasks * 1e6:.2f} us a task (CPU, less the baseline);"
        f" mean per call: CPU clock {mean_us(cpu_all):.2f} us, wall clock {mean_us(wall_all):.2f} us"
        f" ({sum(w > 50e-6 for w in wall_all)} calls over 50 us of wall time)"
    )


if __name__ == "__main__":
    main()
