"""What analytics costs a large cluster's scheduler, and a computation of many groups.

    python benchmarks/large_cluster.py [--case large|regroup|both] [--rounds 1]
    python benchmarks/large_cluster.py --case large --workers 100 --groups 2000 --tasks 100000
    python benchmarks/large_cluster.py --case large --parts     # each part of a tick timed too

Cases (each run with and without analytics in the same invocation, every run in a fresh
process, in the order off, on, on, off, ... so drift falls on both sides):
  large    a scheduler with 100 in-process workers (LocalCluster(processes=False), one
           thread each), one computation of 2,000 task groups and 100,000 tasks (20
           prefixes, 50 tasks a group);
  regroup  4,000 one-task groups (4,000 prefixes), then their re-run while the first
           results are held, so the re-run lands in the 4,000 live groups; 2 worker
           processes.
Printed per case: the computation's wall time and its ratio to the runs without
analytics; the longest single call of the plugin (each scheduler hook, its tick and
the tick's continuations, the fine-metrics heartbeat sink, and each step of its
coroutines such as profile fetches, timed from here by wrapping them), max and p99 per
kind; the plugin's calls' total time as a share of the event-loop thread's CPU; worker
RPCs per profile fetch; memory (process RSS, GC-tracked objects, and the bytes of the
plugin's own state: its structures, not the Dask objects they point to).
With processes=False the workers share the scheduler's event loop: the loop's CPU and
RSS include theirs, on both sides of each ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
import uuid
from pathlib import Path
from typing import Any

CASES = {
    "large": {
        "workers": 100,
        "processes": False,
        "groups": 2000,
        "tasks": 100_000,
        "prefixes": 20,
        "rerun": False,
    },
    "regroup": {
        "workers": 2,
        "processes": True,
        "groups": 4000,
        "tasks": 4000,
        "prefixes": 4000,
        "rerun": True,
    },
}
HOOKS = ("update_graph", "transition", "add_worker", "remove_worker", "log_event", "restart")
SETTLE = 3.0  # seconds after the computation for the plugin's ticks to catch up (counted)


def inc(x: int) -> int:
    return x + 1


# --- measuring, inside the child process -----------------------------------------------
class Calls:
    """Durations of each kind of plugin call, in seconds, less the garbage collector's
    pauses inside them (a collection runs in whichever call allocates when it is due:
    its pauses are counted apart, in `gc`, on both sides)."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.gc = [0.0, 0.0, 0]  # seconds in collections, the longest, collections
        self._gc_start = 0.0
        self.profile = None  # a cProfile.Profile over the plugin's calls, when asked for
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            dt = time.perf_counter() - self._gc_start
            self.gc[0] += dt
            self.gc[1] = max(self.gc[1], dt)
            self.gc[2] += 1

    def timed(self, kind: str, fn: Any, cpu: bool = True) -> Any:
        """`cpu`: also the thread's CPU time (1-2 us a call here: not for the transition hook)."""
        times = self.times.setdefault(kind, [])
        cpu_times = self.times.setdefault(kind + " (CPU)", []) if cpu else None
        clock = time.perf_counter
        cpu_clock = time.thread_time if cpu else float
        paused = self.gc
        calls = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            profile = calls.profile if kind != "transition" else None
            g = paused[0]
            c = cpu_clock()
            t = clock()
            if profile is not None:
                profile.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                if profile is not None:
                    profile.disable()
                gc_pause = paused[0] - g
                times.append(clock() - t - gc_pause)
                if cpu_times is not None:
                    cpu_times.append(cpu_clock() - c - gc_pause)

        return wrapper

    def summary(self) -> dict[str, dict]:
        out = {}
        for kind, v in self.times.items():
            if v:
                s = sorted(v)
                out[kind] = {
                    "n": len(s),
                    "max": s[-1],
                    "p99": s[min(len(s) - 1, int(len(s) * 0.99))],
                    "total": sum(s),
                }
        return out


def _time_loop_steps(calls: Calls) -> Any:
    """Time every step of a coroutine of the package on the event loop (profile fetches,
    the shipper's waits) and the longest loop step of all: asyncio's Handle._run wrapped.
    Done on both sides, so its own cost is in both wall times."""
    original = asyncio.events.Handle._run
    ours = calls.times.setdefault("coroutine step", [])
    ours_cpu = calls.times.setdefault("coroutine step (CPU)", [])
    longest = [0.0]
    clock, cpu_clock = time.perf_counter, time.thread_time
    paused = calls.gc

    def _run(self: Any) -> None:
        task = getattr(self._callback, "__self__", None)
        code = None
        if isinstance(task, asyncio.Task):
            code = getattr(task.get_coro(), "cr_code", None)
        mine = code is not None and "dask_analytics_lab" in code.co_filename
        g = paused[0]
        c = cpu_clock() if mine else 0.0
        t = clock()
        try:
            original(self)
        finally:
            dt = clock() - t
            if dt > longest[0]:
                longest[0] = dt
            if mine:
                ours.append(dt - (paused[0] - g))
                ours_cpu.append(cpu_clock() - c - (paused[0] - g))

    asyncio.events.Handle._run = _run
    return longest


def _instrument(plugin: Any, calls: Calls) -> None:
    for name in HOOKS:
        setattr(plugin, name, calls.timed(name, getattr(plugin, name), cpu=name != "transition"))
    # The periodic tick was bound when the plugin started; its continuations call
    # plugin._tick, looked up at each call.
    plugin._callback.callback = calls.timed("tick", plugin._callback.callback)
    plugin._tick = calls.timed("tick (continued)", plugin._tick)
    if os.environ.get("DAL_BENCH_PARTS"):
        # Each part of the tick on its own (its calls are inside the tick's).
        parts = {
            "_computations": ("poll",),
            "_stream": ("tick",),
            "_metrics": ("tick",),
            "_sampler": ("sample",),
            "_workers": ("sample",),
            "_lifecycle": ("flush",),
            "_profiles": ("put", "tick"),
            "_errors": ("drain",),
        }
        for attr, names in parts.items():
            obj = getattr(plugin, attr, None)
            for name in names if obj is not None else ():
                setattr(obj, name, calls.timed(f"  {attr[1:]}.{name}", getattr(obj, name)))
        from dask_analytics_lab.collect import labels

        tracker = plugin._computations
        for obj, name in (
            (tracker.claims, "take_touched"),
            (tracker._messages, "send"),
            (labels, "refingerprint"),
            (tracker, "_live_moved"),
            (tracker, "_update"),
        ):
            setattr(obj, name, calls.timed(f"    tracker.{name}", getattr(obj, name)))
        labels.prefix_label = calls.timed("    tracker label", labels.prefix_label)
    metrics = getattr(plugin, "_metrics", None)
    spans = plugin.scheduler.extensions.get("spans")
    if metrics is not None and spans is not None:
        # tap_heartbeats closed over the recorder's bound method: swap it in the closure.
        closure = spans.heartbeat.__closure__ or ()
        for cell in closure:
            if (
                isinstance(cell.cell_contents, types.MethodType)
                and cell.cell_contents.__self__ is metrics
            ):
                cell.cell_contents = calls.timed("metrics heartbeat", cell.cell_contents)


def _plugin_state(plugin: Any, scheduler: Any) -> dict[str, tuple[int, int]]:
    """Part -> (objects, bytes) reachable from the plugin's own structures, stopping at
    Dask's objects (task groups, tasks, computations, the scheduler) and at code; an
    object reachable from two parts counts in the first."""
    from distributed.scheduler import Computation, TaskGroup, TaskPrefix, TaskState, WorkerState

    stop_types = (
        TaskGroup,
        TaskPrefix,
        TaskState,
        Computation,
        WorkerState,
        type,
        types.ModuleType,
        types.FunctionType,
        types.MethodType,
        types.BuiltinFunctionType,
        asyncio.AbstractEventLoop,
    )
    stop_ids = {
        id(scheduler),
        id(plugin),
        id(scheduler.tasks),
        id(scheduler.computations),
        id(scheduler.task_groups),
        id(scheduler.workers),
        id(scheduler.extensions),
    }
    spans = scheduler.extensions.get("spans")
    if spans is not None:
        stop_ids.update({id(spans), id(spans.spans)})
    seen: set[int] = set()
    out = {}
    for name in (
        "_computations",
        "_stream",
        "_metrics",
        "_errors",
        "_lost",
        "_lifecycle",
        "_workers",
        "_sampler",
        "_suspects",
        "_profiles",
    ):
        root = getattr(plugin, name, None)
        stack = [root] if root is not None else []
        n = size = 0
        while stack:
            o = stack.pop()
            if (
                id(o) in seen
                or id(o) in stop_ids
                or isinstance(o, stop_types)
                or o.__class__.__name__ == "Span"
                or o.__class__.__name__ == "RunSpan"
                or isinstance(o, asyncio.Future)
            ):
                continue
            seen.add(id(o))
            n += 1
            size += sys.getsizeof(o)
            stack.extend(gc.get_referents(o))
        out[name.strip("_")] = (n, size)
    return out


def _graph(groups: int, tasks: int, prefixes: int, tag: str) -> tuple[dict, list]:
    per = max(1, tasks // groups)
    dsk = {}
    for g in range(groups):
        name = f"g{g}x{tag}" if prefixes >= groups else f"p{g % prefixes}{tag}-g{g}"
        for j in range(per):
            dsk[(name, j)] = (inc, j)
    return dsk, list(dsk)


def child(case: str, analytics: bool, spec: dict, out: str) -> None:
    import dask
    import psutil
    from distributed import Client, LocalCluster, wait

    calls = Calls()
    longest = _time_loop_steps(calls)
    store = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "bench.db")
    result: dict[str, Any] = {"case": case, "analytics": analytics}
    with dask.config.set(
        {"distributed.logging.distributed": "error", "distributed.admin.tick.limit": "1h"}
    ):
        # In one process every worker would take the whole process's memory for its own
        # and pause: no memory limit there.
        with (
            LocalCluster(
                n_workers=spec["workers"],
                threads_per_worker=1,
                processes=spec["processes"],
                dashboard_address=":0",
                **({} if spec["processes"] else {"memory_limit": 0}),
            ) as cluster,
            Client(cluster) as client,
        ):
            client.wait_for_workers(spec["workers"], timeout=300)
            scheduler = cluster.scheduler
            # Dask's own work for a submission (the synchronous part of update_graph, where
            # the plugin's hook runs too), for scale: timed on both sides.
            scheduler._create_taskstate_from_graph = calls.timed(
                "(Dask: graph to tasks)", scheduler._create_taskstate_from_graph
            )
            plugin = None
            if analytics:
                import dask_analytics_lab as dal

                dal.register(client, store=store)
                plugin = scheduler.plugins["dask-analytics-lab"]
                info0 = client.sync(client.scheduler.analytics_info)
                client.sync(_on_loop, scheduler, lambda: _instrument(plugin, calls))
            client.submit(inc, 0, key="warm-up").result()  # imports, first-graph costs
            time.sleep(1.5)
            for times in calls.times.values():
                times.clear()
            longest[0] = 0.0
            calls.gc[:] = [0.0, 0.0, 0]
            if os.environ.get("DAL_BENCH_PROFILE") and analytics:
                import cProfile

                calls.profile = cProfile.Profile()
            loop0 = client.run_on_scheduler(time.thread_time)
            tag = uuid.uuid4().hex[:6]
            dsk, keys = _graph(spec["groups"], spec["tasks"], spec["prefixes"], tag + "a")
            t0 = time.perf_counter()
            first = client.get(dsk, keys, sync=False)
            wait(first)
            if spec["rerun"]:
                dsk, keys = _graph(spec["groups"], spec["tasks"], spec["prefixes"], tag + "a")
                # New keys in the same groups while the first results are held: the live groups.
                dsk = {(name, j + len(dsk)): task for (name, j), task in dsk.items()}
                second = client.get(dsk, list(dsk), sync=False)
                wait(second)
            result["wall"] = time.perf_counter() - t0
            time.sleep(SETTLE)
            result["loop_cpu"] = client.run_on_scheduler(time.thread_time) - loop0
            result["calls"] = calls.summary()
            result["gc"] = list(calls.gc)
            if calls.profile is not None:
                import pstats

                pstats.Stats(calls.profile).sort_stats(os.environ["DAL_BENCH_PROFILE"]).print_stats(
                    45
                )
            result["longest_loop_step"] = longest[0]
            result["rss_mib"] = psutil.Process().memory_info().rss / 2**20
            result["gc_objects"] = len(gc.get_objects())
            if plugin is not None:
                info = dal.flush(client, timeout=300)
                fetches = info["profiles_fetched"] - info0["profiles_fetched"]
                result["profile_fetches"] = fetches
                result["profile_rpcs"] = info["profile_rpcs"] - info0["profile_rpcs"]
                result["summaries"] = getattr(plugin._computations, "summarised", 0)
                result["state"] = client.sync(
                    _on_loop, scheduler, lambda: _plugin_state(plugin, scheduler)
                )
            del first
    Path(out).write_text(json.dumps(result))


async def _on_loop(scheduler: Any, fn: Any) -> Any:
    return fn()  # runs on the scheduler's event loop, between its other callbacks


# --- the parent: runs the children, prints the table ----------------------------------------
def run_child(case: str, analytics: bool, spec: dict) -> dict:
    out = tempfile.mktemp(suffix=".json")
    cmd = [
        sys.executable,
        __file__,
        "--child",
        case,
        "--analytics",
        "on" if analytics else "off",
        "--spec",
        json.dumps(spec),
        "--out",
        out,
    ]
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return json.loads(Path(out).read_text())


def report(case: str, spec: dict, runs: list[dict]) -> None:
    off = [r for r in runs if not r["analytics"]]
    on = [r for r in runs if r["analytics"]]
    base = statistics.median(r["wall"] for r in off)
    print(
        f"\n{case}: {spec['workers']} workers ({'processes' if spec['processes'] else 'in one process'}), "
        f"{spec['groups']:,} groups, {spec['groups'] * max(1, spec['tasks'] // spec['groups']):,} tasks"
        f"{' and their re-run into the live groups' if spec['rerun'] else ''}; {len(off)} runs each way\n"
    )
    print(
        f"{'analytics':<10} {'wall s':>8} {'ratio':>6} {'loop CPU s':>11} {'longest step ms':>16}"
        f" {'GC s':>6} {'longest GC ms':>14} {'RSS MiB':>8} {'GC objects':>11}"
    )
    for label, rs in (("off", off), ("on", on)):
        wall = statistics.median(r["wall"] for r in rs)
        print(
            f"{label:<10} {wall:>8.2f} {wall / base:>6.2f} {statistics.median(r['loop_cpu'] for r in rs):>11.2f}"
            f" {max(r['longest_loop_step'] for r in rs) * 1e3:>16.1f}"
            f" {statistics.median(r['gc'][0] for r in rs):>6.2f} {max(r['gc'][1] for r in rs) * 1e3:>14.1f}"
            f" {statistics.median(r['rss_mib'] for r in rs):>8.0f} {statistics.median(r['gc_objects'] for r in rs):>11,.0f}"
        )
    walls = {
        label: ", ".join(f"{r['wall']:.2f}" for r in rs) for label, rs in (("off", off), ("on", on))
    }
    print(f"  (wall s of each run: off {walls['off']}; on {walls['on']})")
    dask_own = [r["calls"].get("(Dask: graph to tasks) (CPU)") for r in off]
    if all(dask_own):
        print(
            f"  Dask's own graph-to-tasks step (without analytics): longest"
            f" {max(x['max'] for x in dask_own) * 1e3:.1f} ms CPU"
        )
    loop = statistics.median(r["loop_cpu"] for r in on)
    print(
        f"\n{'plugin call':<22} {'calls':>8} {'max CPU ms':>11} {'p99 CPU ms':>11} {'max wall ms':>12}"
        f" {'CPU ms':>9} {'of loop CPU':>12}"
    )
    kinds = sorted(
        {
            k
            for r in on
            for k in r["calls"]
            if not k.endswith(" (CPU)") and not k.startswith("(Dask")
        }
    )
    kinds = [k for k in kinds if not k.startswith(" ")] + [k for k in kinds if k.startswith(" ")]
    total = 0.0
    for kind in kinds:
        wall = [r["calls"][kind] for r in on if kind in r["calls"]]
        # The transition hook is timed by the wall clock only (its calls last a few us).
        cpu = [r["calls"].get(kind + " (CPU)", r["calls"][kind]) for r in on if kind in r["calls"]]
        n = statistics.median(x["n"] for x in cpu)
        tot = statistics.median(x["total"] for x in cpu)
        if not kind.startswith(" "):
            total += tot  # the parts (indented) are inside the tick's calls
        print(
            f"{kind:<22} {n:>8,.0f} {max(x['max'] for x in cpu) * 1e3:>11.2f} {max(x['p99'] for x in cpu) * 1e3:>11.3f}"
            f" {max(x['max'] for x in wall) * 1e3:>12.2f} {tot * 1e3:>9.1f} {tot / loop * 100:>11.2f}%"
        )
    print(
        f"{'all':<22} {'':>8} {'':>11} {'':>11} {'':>12} {total * 1e3:>9.1f} {total / loop * 100:>11.2f}%"
    )
    print(
        "  (CPU: the calling thread's CPU time in the call, less collections (the transition hook: wall"
        " time); wall: also the time the OS gave the CPU to other processes meanwhile; indented: parts"
        " of the tick's calls, with its continuations)"
    )
    r = on[-1]
    fetches = r.get("profile_fetches", 0)
    print(
        f"\nprofile fetches {fetches}, worker RPCs {r.get('profile_rpcs', 0)}"
        f" ({r.get('profile_rpcs', 0) / max(fetches, 1):.1f} a fetch, {spec['workers']} workers);"
        f" group summaries built {r.get('summaries', 0):,}"
    )
    state = r.get("state", {})
    print(
        f"plugin state {sum(n for n, _ in state.values()):,} objects, {sum(b for _, b in state.values()) / 2**20:.1f} MiB: "
        + ", ".join(
            f"{part} {b / 2**20:.1f}"
            for part, (n, b) in sorted(state.items(), key=lambda x: -x[1][1])
            if b >= 2**16
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("large", "regroup", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=1, help="pairs of runs (off/on) per case")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--groups", type=int)
    parser.add_argument("--tasks", type=int)
    parser.add_argument(
        "--parts", action="store_true", help="time each part of a tick too (poll, stream, ...)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--analytics", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.analytics == "on", json.loads(args.spec), args.out)
        return
    if args.parts:
        os.environ["DAL_BENCH_PARTS"] = "1"  # how the child processes are told
    for case in ("large", "regroup") if args.case == "both" else (args.case,):
        spec = dict(CASES[case])
        for key in ("workers", "groups", "tasks"):
            if getattr(args, key) is not None:
                spec[key] = getattr(args, key)
        if case == "regroup" and args.groups is not None and args.tasks is None:
            spec["tasks"] = spec["groups"]
        spec["prefixes"] = min(spec["prefixes"], spec["groups"])
        runs = []
        for i in range(args.rounds):
            order = (False, True) if i % 2 == 0 else (True, False)
            for analytics in order:
                runs.append(run_child(case, analytics, spec))
                print(
                    f"  {case} {'on' if analytics else 'off'}: {runs[-1]['wall']:.2f} s", flush=True
                )
        report(case, spec, runs)


if __name__ == "__main__":
    main()
