"""What analytics costs the scheduler it watches.

    python benchmarks/scheduler_overhead.py [--repeats 15] [--tasks 20000]
    python benchmarks/scheduler_overhead.py --parts [client.map ...]   # where the cost goes

1. Scheduler event-loop CPU per task, with and without analytics, alternating in
   one run (two real clusters: `dask scheduler` processes, one with
   `--preload dask_analytics_lab`), medians of several runs, for client.map,
   a dask.array reduction and a dask.bag pipeline.  Wall-clock tasks/s swings
   20-50% on a small machine; thread CPU time is the stable figure.
2. One snapshot's cost at 10, 100, 1,000 task groups, and at 10k vs 1M tasks in
   10 groups (real TaskGroup/Computation objects, counts set directly).
3. The plugin's memory after 50, 100 and 200 computations.
(1c, --parts: the with/without difference with one part of analytics off at a time;
1d, --gc: the garbage collector's CPU on the event loop, with and without;
1e, --dispatch N: Dask's cost of calling N plugins that do nothing, per plugin;
1f, --side-by-side [N ...]: the scheduler process's CPU per task with no plugin, a
plugin that does nothing, Dask's TaskStreamPlugin, Dask's AllProgress and analytics
with everything on, interleaved in each round; the budget is TaskStreamPlugin's.)
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

from dask_analytics_lab.collect.accounting import hook_seconds, sums_between


def inc(x):
    return x + 1


def _shuffle(c: Client, n: int):
    import dask.dataframe as dd
    import pandas as pd

    # A task-based shuffle of n/10 partitions: about n tasks (three stages of splits and joins).
    parts = max(2, n // 10)
    df = dd.from_pandas(
        pd.DataFrame({"k": range(parts * 4), "v": range(parts * 4)}), npartitions=parts
    )
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        return c.compute(df.shuffle("k").v.sum(), sync=True)


WORKLOADS = {
    "client.map": lambda c, n: c.gather(
        c.map(inc, range(n), key=[f"inc-{uuid.uuid4().hex[:8]}-{i}" for i in range(n)])
    ),
    # c.compute, not .compute(): the latter goes to the newest client, i.e. the other cluster.
    "array reduction": lambda c, n: c.compute(da.ones(n * 10, chunks=10).sum(), sync=True),
    "bag map/sum": lambda c, n: c.compute(
        db.from_sequence(range(n * 4), npartitions=n).map(inc).sum(), sync=True
    ),
    "dataframe shuffle": _shuffle,
}


def _tasks_in_last(client: Client) -> int:
    return client.run_on_scheduler(
        lambda dask_scheduler: sum(
            sum(g.states.values()) for g in dask_scheduler.computations[-1].groups
        )
    )


def _loop_cpu(client: Client) -> float:
    # Runs on the scheduler's event-loop thread: that thread's own CPU time.
    return client.run_on_scheduler(time.thread_time)


class Cluster:
    def __init__(
        self,
        analytics: bool,
        store: str,
        workers: int = 2,
        *,
        preload: str = "dask_analytics_lab",
        env: dict | None = None,
    ):
        self.dir = tempfile.mkdtemp()
        env = {
            **os.environ,
            "DASK_ANALYTICS__STORE": store,
            "DASK_ANALYTICS__INTERVAL": "1s",
            "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "error",
            **(env or {}),
        }
        sf = Path(self.dir) / "scheduler.json"
        cmd = [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--dashboard-address",
            ":0",
            "--scheduler-file",
            str(sf),
        ]
        if analytics:
            cmd += ["--preload", preload]
        self.procs = [
            subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ]
        cores = list(range(os.cpu_count() or 1))
        if len(cores) > 1:
            # The scheduler on a core of its own, the workers (and this client) on the rest:
            # the workers' bursts then do not steal the scheduler's core mid-measurement.
            os.sched_setaffinity(self.procs[0].pid, {cores[0]})
            self._others = set(cores[1:])
        else:
            self._others = set(cores)
        while not sf.exists():
            time.sleep(0.1)
        for _ in range(workers):
            self.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        "--scheduler-file",
                        str(sf),
                        "--nthreads",
                        "1",
                        "--no-nanny",
                        "--dashboard-address",
                        ":0",
                    ],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            os.sched_setaffinity(self.procs[-1].pid, self._others)
        self.client = Client(scheduler_file=str(sf), timeout=60)
        self.client.wait_for_workers(workers, timeout=60)

    def close(self):
        self.client.close()
        for p in reversed(self.procs):
            p.terminate()
            p.wait()


# The hook timed (analytics.accounting): section 1b reads what it counted.
ACCOUNTED = {"DASK_ANALYTICS__ACCOUNTING": "true"}


def _run_once(c: Cluster, work, n: int) -> float:
    """Scheduler event-loop CPU microseconds per task of one run of `work` (and the
    1.2 s after it, so the plugin's ticks are counted)."""
    loop0 = _loop_cpu(c.client)
    work(c.client, n)
    time.sleep(1.2)
    return (_loop_cpu(c.client) - loop0) / _tasks_in_last(c.client) * 1e6


def _spread(values: list[float]) -> float:
    """Half the interquartile range: how far a typical round sits from the median."""
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return (q[2] - q[0]) / 2


def _median_ci(values: list[float]) -> float:
    """Half-width of a ~95% interval of the median (order statistics): the spread of
    the figure itself, which shrinks as rounds are added."""
    v = sorted(values)
    n = len(v)
    if n < 6:
        return float("nan")
    k = max(0, int(n / 2 - 0.98 * n**0.5))
    return (v[n - 1 - k] - v[k]) / 2


def _gc_watch(dask_scheduler) -> None:
    """Runs on the scheduler: count the event-loop thread's CPU inside the garbage
    collector (gc.callbacks), per generation."""
    import gc
    import threading
    import time as t

    if getattr(dask_scheduler, "_bench_gc", None) is not None:
        return
    loop_thread = threading.get_ident()
    stats = dask_scheduler._bench_gc = {"cpu": [0.0, 0.0, 0.0], "n": [0, 0, 0], "t0": 0.0}

    def callback(phase, info):
        if threading.get_ident() != loop_thread:
            return
        if phase == "start":
            stats["t0"] = t.thread_time()
        else:
            g = info["generation"]
            stats["cpu"][g] += t.thread_time() - stats["t0"]
            stats["n"][g] += 1

    gc.callbacks.append(callback)


def _gc_stats(dask_scheduler) -> dict:
    import gc

    s = dask_scheduler._bench_gc
    return {"cpu": list(s["cpu"]), "n": list(s["n"]), "objects": len(gc.get_objects())}


def gc_share(off: Cluster, on: Cluster, repeats: int, n: int) -> None:
    """The collector's CPU on the event loop, with and without analytics: a cost no
    hook of the plugin's pays, that grows with every object the process holds (the
    store's libraries, imported in the scheduler, are tens of thousands)."""
    for c in (off, on):
        c.client.run_on_scheduler(_gc_watch)
    print(
        f"\n1d. Garbage collection on the event loop ({repeats} rounds of client.map, ~{n} tasks)\n"
    )
    print(
        f"{'cluster':<10} {'objects':>9} {'gen2 runs':>10} {'gc us/task':>11} {'of which gen2':>14} {'loop us/task':>13}"
    )
    work = WORKLOADS["client.map"]
    totals = {id(c): [0.0, 0.0, 0, 0.0, 0] for c in (off, on)}
    for _ in range(repeats):
        for c in (off, on):
            s0 = c.client.run_on_scheduler(_gc_stats)
            loop0 = _loop_cpu(c.client)
            work(c.client, n)
            loop1 = _loop_cpu(c.client)
            s1 = c.client.run_on_scheduler(_gc_stats)
            tot = totals[id(c)]
            tot[0] += sum(s1["cpu"]) - sum(s0["cpu"])
            tot[1] += s1["cpu"][2] - s0["cpu"][2]
            tot[2] += s1["n"][2] - s0["n"][2]
            tot[3] += loop1 - loop0
            tot[4] += _tasks_in_last(c.client)
    for label, c in (("off", off), ("on", on)):
        gc_cpu, gen2, runs, loop, tasks = totals[id(c)]
        objects = c.client.run_on_scheduler(_gc_stats)["objects"]
        print(
            f"{label:<10} {objects:>9} {runs:>10} {gc_cpu / tasks * 1e6:>11.1f} {gen2 / tasks * 1e6:>14.1f}"
            f" {loop / tasks * 1e6:>13.1f}"
        )


def overhead(repeats: int, n: int, store: str) -> None:
    off, on = Cluster(False, store), Cluster(True, store, env=ACCOUNTED)
    try:
        for c in (off, on):  # warm up: imports, first-graph costs
            WORKLOADS["client.map"](c.client, 500)
        print(
            f"\n1. Scheduler event-loop CPU per task ({repeats} ABBA rounds, median; ~{n} tasks a run;"
            " the scheduler pinned to a core of its own)\n"
        )
        print(
            f"{'workload':<16} {'tasks':>7} {'us/task off':>12} {'on':>8} {'extra':>7} {'round spread':>13}"
            f" {'median +/-':>11}"
        )
        for name, work in WORKLOADS.items():
            extra = []
            offs, ons = [], []
            for r in range(repeats):
                # ABBA: which cluster goes first alternates, so a drift in the machine's
                # speed over the run weighs on both alike.
                if r % 2:
                    b, a = _run_once(on, work, n), _run_once(off, work, n)
                else:
                    a, b = _run_once(off, work, n), _run_once(on, work, n)
                offs.append(a)
                ons.append(b)
                extra.append((b / a - 1) * 100)  # paired: the two runs of one round
            tasks = _tasks_in_last(on.client)
            print(
                f"{name:<16} {tasks:>7} {statistics.median(offs):>12.1f} {statistics.median(ons):>8.1f}"
                f" {statistics.median(extra):>6.1f}% {_spread(extra):>12.1f}p {_median_ci(extra):>10.1f}p"
            )
        print(
            "\n(extra: median of each round's on/off ratio; round spread: half the interquartile range of"
            " those ratios; median +/-: half-width of a ~95% interval of the median, in points. Each run"
            " includes 1.2 s idle, so the plugin's ticks are counted)"
        )
        gc_share(off, on, max(3, repeats // 3), n)
        accounted(on.client, [n])
        memory(on.client)
    finally:
        off.close()
        on.close()


def _cost(client: Client) -> dict:
    return client.sync(client.scheduler.analytics_info)["cost"]


def accounted(
    client: Client, sizes: list[int], idle: float = 30.0, workloads: list[str] | None = None
) -> None:
    """The plugin's own count of what it costs the event loop (collect/accounting.py),
    per part, as a share of the loop's CPU over the same run: a ratio the machine's
    noise does not move, unlike the difference of two totals above."""
    print(
        "\n1b. Accounted by the plugin: its share of the scheduler's event-loop CPU, by part"
        " (everything on: task stream, metrics, profiles, worker samples)\n"
    )
    parts = ("hooks", "graph", "ticks", "events", "profiles", "metrics")
    print(
        f"{'workload':<18} {'tasks':>7} {'loop s':>7} "
        + " ".join(f"{p:>8}" for p in parts)
        + f" {'share':>7} {'dispatch':>8} {'of it gc':>8} {'longest ms':>10} {'in':<8} {'gc ms':>7}"
        f" {'threads s':>9}"
    )
    for n in sizes:
        for name, work in WORKLOADS.items():
            if workloads and name not in workloads:
                continue
            c0 = _cost(client)
            work(client, n)
            time.sleep(1.2)
            client.sync(client.scheduler.analytics_flush)  # the profile fetch of this work
            c1 = _cost(client)
            tasks = _tasks_in_last(client)
            loop = c1["loop_cpu_seconds"] - c0["loop_cpu_seconds"]
            spent = {p: c1["parts"][p] - c0["parts"][p] for p in parts}
            # The hooks at this row's own means (timed calls and baselines), not the
            # running means of every row so far.
            hooks, dispatch = hook_seconds(sums_between(c0["hook_sums"], c1["hook_sums"]))
            spent["hooks"] += hooks - (
                hook_seconds(c1["hook_sums"])[0] - hook_seconds(c0["hook_sums"])[0]
            )
            total = sum(spent.values())
            threads = sum(c1["threads"].values()) - sum(c0["threads"].values())
            print(
                f"{name:<18} {tasks:>7} {loop:>7.2f} "
                + " ".join(f"{spent[p]:>8.3f}" for p in parts)
                + f" {total / loop * 100:>6.2f}% {dispatch / loop * 100:>7.2f}%"
                f" {(c1['gc_seconds'] - c0['gc_seconds']) / max(total, 1e-9) * 100:>7.1f}%"
                f" {c1['longest_call_ms']:>10.2f} {c1['longest_part'][:8]:<8}"
                f" {c1['longest_gc_ms']:>7.2f} {threads:>9.3f}"
            )
    time.sleep(3)  # the last computation's fetch and samples
    c0 = _cost(client)
    t0 = time.time()
    time.sleep(idle)
    c1 = _cost(client)
    wall = time.time() - t0
    loop_s = c1["seconds"] - c0["seconds"]
    threads = sum(c1["threads"].values()) - sum(c0["threads"].values())
    print(
        f"\nIdle for {wall:.0f} s: analytics used {loop_s / wall * 100:.3f}% of a core on the event loop and"
        f" {threads / wall * 100:.3f}% in its threads ({(loop_s + threads) / wall * 100:.3f}% in all)"
    )
    print(
        "(loop s: the event loop's CPU over the run; share: the parts' sum over it; dispatch: of the"
        " share, Dask's own cost of calling the transition hook, ~6 calls a task, which any plugin with"
        " one pays however little it does (the hook called for no task, timed where it runs, less"
        " the clock); of it gc: collections"
        " started by analytics code, already inside the parts; longest ms: the longest single callback"
        " so far, less the collections inside it, in: its part; gc ms: the longest collection that"
        " started in analytics code (it walks Dask's whole heap); threads s: the shipper's writer and profile merging, off the loop)"
    )


PARTS_PRELOAD = str(Path(__file__).with_name("_analytics_parts.py"))
# (label, parts switched off (see _analytics_parts.py), extra environment)
PARTS = [
    ("all on", "", {}),
    ("- transition hook body", "hook", {}),
    ("- update_graph hooks", "graph", {}),
    ("- ticks", "ticks", {}),
    ("- messages (emit)", "emit", {}),
    ("- profile fetches", "", {"DASK_ANALYTICS__PROFILE__TRANSMIT": "false"}),
    ("- task stream", "", {"DASK_ANALYTICS__TASK_STREAM__TRANSMIT": "false"}),
    ("- fine metrics", "", {"DASK_ANALYTICS__METRICS__TRANSMIT": "false"}),
    ("- worker samples", "", {"DASK_ANALYTICS__WORKERS__TRANSMIT": "false"}),
]


NOTHING_PRELOAD = str(Path(__file__).with_name("_plugins_that_do_nothing.py"))
OWN_PRELOAD = str(Path(__file__).with_name("_dask_own_plugins.py"))
# (label, preload or None, extra environment): the side-by-side's schedulers.
SIDE_BY_SIDE = [
    ("no plugin", None, {}),
    ("no-op plugin", OWN_PRELOAD, {"DAL_BENCH_OWN": "noop"}),
    ("TaskStreamPlugin", OWN_PRELOAD, {"DAL_BENCH_OWN": "task-stream"}),
    ("AllProgress", OWN_PRELOAD, {"DAL_BENCH_OWN": "all-progress"}),
    ("analytics, all on", "dask_analytics_lab", {}),
    # Computations made from Dask's spans (collect/sources.py), as where Computation is gone.
    ("analytics, spans", "dask_analytics_lab", {"DASK_ANALYTICS__COMPUTATION__SOURCE": "spans"}),
]


def _process_cpu(c: Cluster) -> float:
    """The scheduler process's CPU seconds, every thread (the store's writer too), read
    from outside: no call into the loop it measures."""
    import psutil

    t = psutil.Process(c.procs[0].pid).cpu_times()
    return t.user + t.system


def _run_both(c: Cluster, work, n: int) -> tuple[float, float]:
    """(process, event loop) CPU microseconds per task of one run of `work` and the
    1.2 s after it (the plugin's ticks and writes)."""
    p0, loop0 = _process_cpu(c), _loop_cpu(c.client)
    work(c.client, n)
    time.sleep(1.2)
    p1, loop1 = _process_cpu(c), _loop_cpu(c.client)
    tasks = _tasks_in_last(c.client)
    return (p1 - p0) / tasks * 1e6, (loop1 - loop0) / tasks * 1e6


def side_by_side(repeats: int, sizes: list[int], store: str, workloads: list[str]) -> None:
    """One scheduler per variant (SIDE_BY_SIDE), each pinned to the first core with its
    workers on the others, every variant run once per round in a rotated order (none is
    always first, a drift in the machine's speed weighs on all alike).  The figure is
    the scheduler process's CPU per task, every thread; beside it the event loop's.
    The budget: analytics with everything on costs no more than Dask's TaskStreamPlugin
    (a no-op plugin's dispatch plus the task stream's own work); `over budget` is the
    median of each round's paired difference, with a ~95% interval of that median."""
    clusters = [
        (label, Cluster(preload is not None, store, preload=preload or "", env=env))
        for label, preload, env in SIDE_BY_SIDE
    ]
    try:
        for _, c in clusters:
            WORKLOADS["client.map"](c.client, 500)  # imports, first-graph costs
        for n in sizes:
            for name in workloads:
                work = WORKLOADS[name]
                proc: dict[str, list[float]] = {label: [] for label, _ in clusters}
                loop: dict[str, list[float]] = {label: [] for label, _ in clusters}
                tasks = 0
                for r in range(repeats):
                    k = r % len(clusters)
                    for label, c in clusters[k:] + clusters[:k]:
                        p, lp = _run_both(c, work, n)
                        proc[label].append(p)
                        loop[label].append(lp)
                    tasks = _tasks_in_last(clusters[0][1].client)
                    print(
                        f"  {name} round {r + 1}: "
                        + ", ".join(f"{label} {proc[label][-1]:.1f}" for label, _ in clusters),
                        flush=True,
                    )
                base = proc["no plugin"]
                print(
                    f"\n1f. {name}, {tasks} tasks, {repeats} rounds: scheduler-process CPU per task"
                    " (median, +/- ~95% interval of the median)\n"
                )
                print(
                    f"{'variant':<20} {'us/task':>8} {'+/-':>6} {'over none':>10} {'+/-':>6}"
                    f" {'loop us/task':>13}"
                )
                for label, _ in clusters:
                    over = [a - b for a, b in zip(proc[label], base)]
                    print(
                        f"{label:<20} {statistics.median(proc[label]):>8.1f}"
                        f" {_median_ci(proc[label]):>6.1f} {statistics.median(over):>10.2f}"
                        f" {_median_ci(over):>6.2f} {statistics.median(loop[label]):>13.1f}"
                    )
                ours, budget = proc["analytics, all on"], proc["TaskStreamPlugin"]
                over = [a - b for a, b in zip(ours, budget)]
                verdict = "within" if statistics.median(over) <= 0 else "OVER"
                print(
                    f"analytics - TaskStreamPlugin: {statistics.median(over):+.2f} us a task"
                    f" (+/- {_median_ci(over):.2f}): {verdict} the budget"
                )
    finally:
        for _, c in clusters:
            c.close()


def dispatch(repeats: int, n: int, store: str, plugins: int) -> None:
    """What Dask pays to call one more plugin's transition hook, seen from outside the
    plugin: client.map's loop CPU per task on a scheduler with `plugins` plugins that
    do nothing, against one without (no analytics on either), ABBA in each round.
    Many plugins make the difference large enough to resolve on a small machine; each
    one's share is the difference over their number (a lower bound for a single one:
    the later calls of a run of them find Dask's arguments and the call path warm)."""
    off = Cluster(False, store)
    on = Cluster(True, store, preload=NOTHING_PRELOAD, env={"DAL_BENCH_PLUGINS": str(plugins)})
    work = WORKLOADS["client.map"]
    try:
        for c in (off, on):
            work(c.client, 500)
        shares, bases = [], []
        for r in range(repeats):
            a1 = _run_once(off, work, n)
            b1 = _run_once(on, work, n)
            b2 = _run_once(on, work, n)
            a2 = _run_once(off, work, n)
            base = (a1 + a2) / 2
            bases.append(base)
            shares.append(((b1 + b2) / 2 / base - 1) * 100 / plugins)
            print(
                f"  round {r + 1}: without {base:.1f} us/task, with {plugins}:"
                f" {(b1 + b2) / 2:.1f}; a plugin {shares[-1]:+.3f}%",
                flush=True,
            )
        share, base = statistics.median(shares), statistics.median(bases)
        print(
            f"\n1e. client.map, {n} tasks, {repeats} rounds: one more plugin that does nothing"
            f" costs {share:.2f}% of the loop's CPU (95% interval of the median"
            f" +/- {_median_ci(shares):.2f} points), {share / 100 * base:.2f} us a task of"
            f" {base:.0f}; the accounted `dispatch` (1b) measures the same cost inside the"
            " analytics plugin's hook"
        )
    finally:
        off.close()
        on.close()


def parts(repeats: int, n: int, store: str, workloads: list[str]) -> None:
    """Where the with/without difference goes: one cluster per variant of analytics with
    one part switched off, all run in turn in each round with a cluster without
    analytics; what a part costs is what the extra drops by without it."""
    off = Cluster(False, store)
    variants = [
        (label, Cluster(True, store, preload=PARTS_PRELOAD, env={"DAL_BENCH_OFF": what, **env}))
        for label, what, env in PARTS
    ]
    try:
        for c in [off] + [c for _, c in variants]:
            WORKLOADS["client.map"](c.client, 500)
        for name in workloads:
            work = WORKLOADS[name]
            extra: dict[str, list[float]] = {label: [] for label, _ in variants}
            for r in range(repeats):
                before = _run_once(off, work, n)
                order = (
                    variants[r % len(variants) :] + variants[: r % len(variants)]
                )  # no variant always first
                runs = [(label, _run_once(c, work, n)) for label, c in order]
                base = (before + _run_once(off, work, n)) / 2  # off before and after: drift cancels
                for label, v in runs:
                    extra[label].append((v / base - 1) * 100)
                print(
                    f"  round {r + 1}: off {base:.1f} us/task; "
                    + ", ".join(
                        f"{label.lstrip('- ')} {extra[label][-1]:+.1f}%" for label, _ in variants
                    ),
                    flush=True,
                )
            full = statistics.median(extra["all on"])
            print(
                f"\n1c. {name}: loop CPU per task over no analytics, with parts switched off"
                f" ({repeats} rounds, median)\n"
            )
            print(f"{'variant':<24} {'extra':>7} {'round spread':>13} {'part costs':>11}")
            for label, _ in variants:
                m = statistics.median(extra[label])
                part = "" if label == "all on" else f"{full - m:>10.1f}p"
                print(f"{label:<24} {m:>6.1f}% {_spread(extra[label]):>12.1f}p {part:>11}")
    finally:
        off.close()
        for _, c in variants:
            c.close()


def memory(client: Client) -> None:
    print(
        "\n3. The plugin's state after N computations (bounded by distributed's computations deque)\n"
    )
    print(
        f"{'computations':>12} {'tracked':>8} {'group map':>10} {'error rows':>11} {'scheduler RSS MiB':>18}"
    )

    def state(dask_scheduler):
        import psutil

        p = dask_scheduler.plugins["dask-analytics-lab"]
        return (
            len(p._computations._tracked),
            len(p._computations.counts),
            len(p._errors._rows),
            psutil.Process().memory_info().rss / 2**20,
        )

    done = 0
    for target in (50, 100, 200):
        while done < target:
            client.submit(inc, done, key=f"m-{uuid.uuid4().hex}").result()
            client.run_on_scheduler(
                lambda dask_scheduler: None
            )  # let the scheduler go idle between submits
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

    print(
        "\n2. One snapshot of one computation (median; 'unchanged': the next tick when nothing moved)\n"
    )
    print(
        f"{'groups':>7} {'tasks':>9} {'snapshot ms':>12} {'unchanged ms':>13} {'ratio to 10 groups':>19}"
    )
    base = None
    for groups, tasks in ((10, 100), (100, 100), (1000, 100)):
        first, unchanged = time_poll(computation(groups, tasks))
        base = base or first
        print(
            f"{groups:>7} {groups * tasks:>9} {first * 1e3:>12.3f} {unchanged * 1e3:>13.3f} {first / base:>19.1f}"
        )
    for tasks in (1_000, 100_000):
        first, unchanged = time_poll(computation(10, tasks))
        print(
            f"{10:>7} {10 * tasks:>9} {first * 1e3:>12.3f} {unchanged * 1e3:>13.3f} {first / base:>19.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument(
        "--tasks", type=int, default=20_000, help="tasks per workload run (approximate)"
    )
    parser.add_argument(
        "--store", default=None, help="store URL (default: a temporary SQLite file)"
    )
    parser.add_argument(
        "--gc", action="store_true", help="only section 1d, garbage collection with and without"
    )
    parser.add_argument(
        "--accounted",
        nargs="*",
        type=int,
        metavar="TASKS",
        default=None,
        help="only section 1b, the plugin's own accounting, at these sizes (default: 20000 200000)",
    )
    parser.add_argument(
        "--workloads",
        nargs="*",
        default=None,
        choices=sorted(WORKLOADS),
        help="sections 1b and 1f only: these workloads (default: all)",
    )
    parser.add_argument(
        "--idle", type=float, default=30.0, help="seconds idle for the idle share (section 1b)"
    )
    parser.add_argument(
        "--parts",
        nargs="*",
        metavar="WORKLOAD",
        default=None,
        help="only section 1c, where the cost goes, for these workloads (default: client.map)",
    )
    parser.add_argument(
        "--dispatch",
        type=int,
        metavar="PLUGINS",
        default=None,
        help="only section 1e, Dask's cost of calling this many plugins that do nothing",
    )
    parser.add_argument(
        "--side-by-side",
        nargs="*",
        type=int,
        metavar="TASKS",
        default=None,
        help="only section 1f, Dask's own plugins beside analytics, at these sizes"
        " (default: 20000; --workloads picks workloads)",
    )
    args = parser.parse_args()
    store = args.store or "sqlite:///" + os.path.join(tempfile.mkdtemp(), "bench.db")
    dask.config.set({"distributed.admin.tick.limit": "1h"})
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 1)))  # off the schedulers' core
    if args.gc:
        off, on = Cluster(False, store), Cluster(True, store)
        try:
            gc_share(off, on, args.repeats, args.tasks)
        finally:
            off.close()
            on.close()
        return
    if args.accounted is not None:
        on = Cluster(True, store, env=ACCOUNTED)
        try:
            accounted(
                on.client,
                args.accounted or [20_000, 200_000],
                idle=args.idle,
                workloads=args.workloads,
            )
        finally:
            on.close()
        return
    if args.side_by_side is not None:
        side_by_side(
            args.repeats,
            args.side_by_side or [20_000],
            store,
            args.workloads or list(WORKLOADS),
        )
        return
    if args.dispatch is not None:
        dispatch(args.repeats, args.tasks, store, args.dispatch)
        return
    if args.parts is not None:
        parts(args.repeats, args.tasks, store, args.parts or ["client.map"])
        return
    snapshot_cost()
    overhead(args.repeats, args.tasks, store)


if __name__ == "__main__":
    main()
