"""What analytics costs the scheduler it watches.

    python benchmarks/scheduler_overhead.py [--repeats 5] [--tasks 20000]

1. Scheduler event-loop CPU per task, with and without analytics, alternating in
   one run (two real clusters: `dask scheduler` processes, one with
   `--preload dask_analytics_lab`), medians of several runs, for client.map,
   a dask.array reduction and a dask.bag pipeline.  Wall-clock tasks/s swings
   20-50% on a small machine; thread CPU time is the stable figure.
2. One snapshot's cost at 10, 100, 1,000 task groups, and at 10k vs 1M tasks in
   10 groups (real TaskGroup/Computation objects, counts set directly).
3. The plugin's memory after 50, 100 and 200 computations.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import dask
import dask.array as da
import dask.bag as db
from distributed import Client


def inc(x):
    return x + 1


WORKLOADS = {
    "client.map": lambda c, n: c.gather(c.map(inc, range(n), key=[f"inc-{uuid.uuid4().hex[:8]}-{i}" for i in range(n)])),
    # c.compute, not .compute(): the latter goes to the newest client, i.e. the other cluster.
    "array reduction": lambda c, n: c.compute(da.ones(n * 10, chunks=10).sum(), sync=True),
    "bag map/sum": lambda c, n: c.compute(db.from_sequence(range(n * 4), npartitions=n).map(inc).sum(), sync=True),
}


def _tasks_in_last(client: Client) -> int:
    return client.run_on_scheduler(
        lambda dask_scheduler: sum(sum(g.states.values()) for g in dask_scheduler.computations[-1].groups)
    )


def _loop_cpu(client: Client) -> float:
    # Runs on the scheduler's event-loop thread: that thread's own CPU time.
    return client.run_on_scheduler(time.thread_time)


def _process_cpu(client: Client) -> float:
    return client.run_on_scheduler(time.process_time)


class Cluster:
    def __init__(self, analytics: bool, store: str, workers: int = 2):
        self.dir = tempfile.mkdtemp()
        env = {**os.environ, "DASK_ANALYTICS__STORE": store, "DASK_ANALYTICS__INTERVAL": "1s",
               "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "error"}
        sf = Path(self.dir) / "scheduler.json"
        cmd = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
               "--dashboard-address", ":0", "--scheduler-file", str(sf)]
        if analytics:
            cmd += ["--preload", "dask_analytics_lab"]
        self.procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        while not sf.exists():
            time.sleep(0.1)
        for _ in range(workers):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sf), "--nthreads", "1",
                 "--no-nanny", "--dashboard-address", ":0"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.client = Client(scheduler_file=str(sf), timeout=60)
        self.client.wait_for_workers(workers, timeout=60)

    def close(self):
        self.client.close()
        for p in reversed(self.procs):
            p.terminate()
            p.wait()


def overhead(repeats: int, n: int, store: str) -> None:
    off, on = Cluster(False, store), Cluster(True, store)
    try:
        for c in (off, on):  # warm up: imports, first-graph costs
            WORKLOADS["client.map"](c.client, 500)
        print(f"\n1. Scheduler CPU per task ({repeats} alternating runs each, median; ~{n} tasks a run)\n")
        print(f"{'workload':<16} {'tasks':>7} {'loop us/task off':>17} {'on':>8} {'extra':>7} "
              f"{'process us/task off':>20} {'on':>8} {'extra':>7}")
        for name, work in WORKLOADS.items():
            samples: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
            tasks = 0
            for _ in range(repeats):
                for label, c in (("off", off), ("on", on)):
                    loop0, proc0 = _loop_cpu(c.client), _process_cpu(c.client)
                    work(c.client, n)
                    time.sleep(1.2)  # let analytics take its snapshot of this work
                    loop1, proc1 = _loop_cpu(c.client), _process_cpu(c.client)
                    tasks = _tasks_in_last(c.client)
                    samples[label].append(((loop1 - loop0) / tasks * 1e6, (proc1 - proc0) / tasks * 1e6))
            lo = statistics.median(s[0] for s in samples["off"])
            ln = statistics.median(s[0] for s in samples["on"])
            po = statistics.median(s[1] for s in samples["off"])
            pn = statistics.median(s[1] for s in samples["on"])
            print(f"{name:<16} {tasks:>7} {lo:>17.1f} {ln:>8.1f} {(ln / lo - 1) * 100:>6.1f}% "
                  f"{po:>20.1f} {pn:>8.1f} {(pn / po - 1) * 100:>6.1f}%")
        print("\n(loop: the scheduler's event-loop thread; process: all its threads, the shipper's included;"
              " each run includes 1.2 s idle, so the plugin's ticks are counted)")
        own_share(on.client, n)
        memory(on.client)
    finally:
        off.close()
        on.close()


# The transitions of one task that runs and is released, with the arguments Dask passes.
_TASK_LIFE = (
    ("released", "waiting", {}),
    ("waiting", "processing", {}),
    ("processing", "memory", {"worker": "tcp://127.0.0.1:1", "nbytes": 28, "type": b"int", "typename": "int"}),
    ("memory", "released", {}),
    ("released", "forgotten", {}),
)


def _hook_cost(dask_scheduler, key: str, tasks: int = 40_000) -> float:
    """Seconds of the plugin's transition hook per task: the five calls of one task's
    life, on a live task (so the counting path runs), called as the scheduler calls it."""
    import time as t

    plugin = dask_scheduler.plugins["dask-analytics-lab"]
    t0 = t.thread_time()
    for _ in range(tasks):
        for start, finish, kwargs in _TASK_LIFE:
            for p in [plugin]:
                try:
                    p.transition(key, start, finish, stimulus_id="task-finished-1", **kwargs)
                except Exception:
                    pass
    empty = t.thread_time()
    for _ in range(tasks):
        for start, finish, kwargs in _TASK_LIFE:
            for p in []:
                pass
    baseline = t.thread_time() - empty
    return ((empty - t0) - baseline) / tasks


def _fetch_cost(client: Client, fetches: int = 20) -> float:
    """Event-loop CPU seconds of one profile fetch as the plugin makes it (one RPC per
    worker for one prefix), measured on an idle cluster: an upper bound."""
    async def fetch(dask_scheduler, n):
        import time as t

        t0 = t.thread_time()
        for _ in range(n):
            await dask_scheduler.get_profile(key="inc", start=t.time() - 60, stop=t.time(), merge_workers=False)
        return (t.thread_time() - t0) / n

    return client.run_on_scheduler(fetch, n=fetches)


def own_share(client: Client, n: int) -> None:
    """The plugin's own event-loop time per task: hook calls x measured cost per call,
    plus its snapshots' CPU (thread time around each tick).  Steadier than the
    difference of two noisy totals above."""
    live = client.submit(inc, 1, key=f"live-{uuid.uuid4().hex}")  # its own group: not one a workload reuses
    live.result()
    per_task = client.run_on_scheduler(_hook_cost, key=live.key)
    per_fetch = _fetch_cost(client)
    print(f"\n1b. The plugin's whole cost, as a share of the scheduler's event-loop CPU"
          f" (hook: {per_task * 1e6:.2f} us a task; one profile fetch: {per_fetch * 1e3:.2f} ms of loop CPU;"
          f" both measured in the scheduler)\n")
    print(f"{'workload':<16} {'tasks':>7} {'loop CPU s':>11} {'hook s':>8} {'ticks s':>8} {'fetch s':>8}"
          f" {'merge s*':>9} {'share':>7} {'us/task':>8}")
    for name, work in WORKLOADS.items():
        s0 = client.sync(client.scheduler.analytics_info)
        loop0 = _loop_cpu(client)
        work(client, n)
        time.sleep(1.2)
        client.sync(client.scheduler.analytics_flush)  # the profile fetch of this work
        loop1 = _loop_cpu(client)
        s1 = client.sync(client.scheduler.analytics_info)
        tasks = _tasks_in_last(client)
        hook = tasks * per_task
        ticks = s1["tick_cpu_seconds"] - s0["tick_cpu_seconds"]
        fetch = (s1["profiles_fetched"] - s0["profiles_fetched"]) * per_fetch
        merge = s1["profile_merge_seconds"] - s0["profile_merge_seconds"]
        loop = loop1 - loop0
        cost = hook + ticks + fetch
        print(f"{name:<16} {tasks:>7} {loop:>11.2f} {hook:>8.3f} {ticks:>8.3f} {fetch:>8.3f} {merge:>9.4f}"
              f" {cost / loop * 100:>6.2f}% {cost / tasks * 1e6:>8.2f}")
    print("\n(* merging and subtracting profile trees runs on a thread, off the event loop)")


def memory(client: Client) -> None:
    print("\n3. The plugin's state after N computations (bounded by distributed's computations deque)\n")
    print(f"{'computations':>12} {'tracked':>8} {'group map':>10} {'error rows':>11} {'scheduler RSS MiB':>18}")

    def state(dask_scheduler):
        import psutil

        p = dask_scheduler.plugins["dask-analytics-lab"]
        return (len(p._computations._tracked), len(p._computations.counts), len(p._errors._rows),
                psutil.Process().memory_info().rss / 2**20)

    done = 0
    for target in (50, 100, 200):
        while done < target:
            client.submit(inc, done, key=f"m-{uuid.uuid4().hex}").result()
            client.run_on_scheduler(lambda dask_scheduler: None)  # let the scheduler go idle between submits
            done += 1
        time.sleep(1.2)
        tracked, groups, errors, rss = client.run_on_scheduler(state)
        print(f"{target:>12} {tracked:>8} {groups:>10} {errors:>11} {rss:>18.1f}")


def snapshot_cost() -> None:
    from distributed.scheduler import Computation, TaskGroup, TaskPrefix

    from dask_analytics_lab.collect.computations import ComputationTracker

    def computation(groups: int, tasks_per_group: int):
        comp = Computation()
        prefix = TaskPrefix("work")
        previous = None
        for i in range(groups):
            tg = TaskGroup(f"work-{i}", prefix)
            tg.states["memory"] = tasks_per_group
            tg.all_durations["compute"] = 1.5
            tg.nbytes_total = 1000 * tasks_per_group
            tg.start, tg.stop = time.time() - 1, time.time()
            if previous is not None:
                tg.dependencies.add(previous)
            previous = tg
            comp.groups.add(tg)
        return comp

    def time_poll(comp, repeats=20):
        times = []
        for _ in range(repeats):
            tracker = ComputationTracker(lambda kind, data: None, code_transmit=False)
            t0 = time.perf_counter()
            tracker.poll([comp], {}, changed=True)
            times.append(time.perf_counter() - t0)
        first = statistics.median(times)
        tracker = ComputationTracker(lambda kind, data: None, code_transmit=False)
        tracker.poll([comp], {}, changed=True)
        t0 = time.perf_counter()
        for _ in range(repeats):
            tracker.poll([comp], {}, changed=True)
        unchanged = (time.perf_counter() - t0) / repeats
        return first, unchanged

    print("\n2. One snapshot of one computation (median; 'unchanged': the next tick when nothing moved)\n")
    print(f"{'groups':>7} {'tasks':>9} {'snapshot ms':>12} {'unchanged ms':>13} {'ratio to 10 groups':>19}")
    base = None
    for groups, tasks in ((10, 100), (100, 100), (1000, 100)):
        first, unchanged = time_poll(computation(groups, tasks))
        base = base or first
        print(f"{groups:>7} {groups * tasks:>9} {first * 1e3:>12.3f} {unchanged * 1e3:>13.3f} {first / base:>19.1f}")
    for tasks in (1_000, 100_000):
        first, unchanged = time_poll(computation(10, tasks))
        print(f"{10:>7} {10 * tasks:>9} {first * 1e3:>12.3f} {unchanged * 1e3:>13.3f} {first / base:>19.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per workload run (approximate)")
    parser.add_argument("--store", default=None, help="store URL (default: a temporary SQLite file)")
    args = parser.parse_args()
    store = args.store or "sqlite:///" + os.path.join(tempfile.mkdtemp(), "bench.db")
    dask.config.set({"distributed.admin.tick.limit": "1h"})
    snapshot_cost()
    overhead(args.repeats, args.tasks, store)


if __name__ == "__main__":
    main()
