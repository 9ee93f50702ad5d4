"""A re-run into live task groups, inside Dask's update_graph: what the plugin's hook
(`ComputationTracker.observe_graph`) costs when a second computation lands in the
first one's G groups, and the claims the next ticks build afterwards (a slice at a
time, under the tick's deadline).

Two cases, on the same real TaskGroup objects:
  quiet  a tick summarised the first run after its last task finished: the groups are
         taken without being read (their old claim's last summary is the final one);
  moved  the re-run comes before any tick did: each group's states are copied inside
         the hook, the rest of it read before the re-run's first count in it or when
         its claim is built.
The baseline is `moved`, in the same run: the ratio is what taking a group unread saves.
CPU ms, the best of --repeat, collections off.

    python benchmarks/rerun_takeover.py [--groups 4000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from distributed.scheduler import Computation, TaskGroup, TaskPrefix, TaskState  # noqa: E402

from dask_analytics_lab.collect.computations import ComputationTracker  # noqa: E402


def once(n_groups: int, *, tick_between: bool) -> tuple[float, float, float, float]:
    """(first run's hook, its claims built after, the re-run's hook, its claims) in s."""
    tracker = ComputationTracker(lambda kind, data: None, code_transmit=False)
    tasks: dict[object, TaskState] = {}
    groups: dict[str, TaskGroup] = {}
    first = Computation()
    for g in range(n_groups):
        name = f"g{g}x"
        tg = groups[name] = TaskGroup(name, TaskPrefix(name))
        ts = TaskState((name, 0), None, "released", tg, False)
        tg.add(ts)
        tasks[ts.key] = ts
        first.groups.add(tg)
    clock = time.thread_time
    t0 = clock()
    tracker.observe_graph(first, tasks, list(tasks))
    t1 = clock()
    tracker.poll([first], groups, changed=True)  # builds the claims (no deadline)
    t2 = clock()
    for ts in list(tasks.values()):  # each task done, as the transition hook counts it
        ts.group.states["released"] -= 1
        ts.group.states["memory"] += 1
        tracker.counts_for(ts.group).done += 1
    if tick_between:
        tracker.poll([first], groups, changed=True)
    second = Computation()
    keys = []
    for tg in groups.values():  # new keys in the live groups (the first results held)
        ts = TaskState((tg.name, 1), None, "released", tg, False)
        tg.add(ts)
        tasks[ts.key] = ts
        keys.append(ts.key)
    t3 = clock()
    tracker.observe_graph(second, tasks, keys)
    t4 = clock()
    tracker.poll([first, second], groups, changed=True)
    t5 = clock()
    return t1 - t0, t2 - t1, t4 - t3, t5 - t4


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--groups", type=int, default=4000)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    gc.disable()
    best = {}
    for case, tick_between in (("moved", False), ("quiet", True)):
        runs = [once(args.groups, tick_between=tick_between) for _ in range(args.repeat)]
        best[case] = [1e3 * min(r[i] for r in runs) for i in range(4)]
    print(
        f"{args.groups:,} one-task groups and their re-run into the live groups; CPU ms, "
        f"best of {args.repeat}, collections off\n"
    )
    print(
        f"{'case':6} {'first hook':>10} {'first poll':>10} {'re-run hook':>11} {'its poll':>9}  ratio"
    )
    base = best["moved"][2]
    for case, (h1, p1, h2, p2) in best.items():
        print(f"{case:6} {h1:10.2f} {p1:10.2f} {h2:11.2f} {p2:9.2f}  {h2 / base:5.2f}")
    print(
        "\nhook: observe_graph, inside Dask's update_graph; poll: the claims built and the "
        "groups summarised, by the next ticks (sliced there); ratio: the re-run's hook "
        "against `moved`"
    )


if __name__ == "__main__":
    main()
