"""The transition hook's own cost per task, replayed: no scheduler noise around it.

    python benchmarks/hook_replay.py [--tasks 20000] [--workload client.map] [--rounds 7]

A real in-process cluster (LocalCluster(processes=False), 2 workers) runs the workload
with analytics registered and a second plugin that keeps every transition Dask hands
its plugins: the key, start, finish, stimulus id, keyword arguments and the TaskState.
Then the calls are replayed, as Dask makes them (`plugin.transition(key, start, finish,
stimulus_id=..., **kwargs)`), to the analytics plugin and to a no-op plugin of the same
signature; the difference is the hook's body, per transition and per task (best of
`--rounds`, the hook's timed calls and the plugin's ticks switched off; the task
stream's incoming tasks are let go of between rounds; `analytics.accounting` is off by
default, so no call is timed).  The replay runs after the
workload: the groups' counts exist, as they do for every transition but a group's first.

    python benchmarks/hook_replay.py --side-by-side [--workload ...]

replays the same calls to Dask's own TaskStreamPlugin (the dashboard's task stream) and
AllProgress (its progress bars) too, each over the tasks as they were: every plugin's
body beside the no-op's, in one run (the budget: analytics' body no more than the task
stream's).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import types
import uuid
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import dask.bag as db
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.diagnostics.progress import AllProgress
from distributed.diagnostics.task_stream import TaskStreamPlugin

import dask_analytics_lab as dal
from dask_analytics_lab.collect.hook import transition_hook
from dask_analytics_lab.collect.plugin import PLUGIN_NAME


def inc(x: int) -> int:
    return x + 1


WORKLOADS = {
    "client.map": lambda c, n: c.gather(
        c.map(inc, range(n), key=[f"inc-{uuid.uuid4().hex[:8]}-{i}" for i in range(n)])
    ),
    "array reduction": lambda c, n: c.compute(da.ones(n * 10, chunks=10).sum(), sync=True),
    "bag map/sum": lambda c, n: c.compute(
        db.from_sequence(range(n * 4), npartitions=n).map(inc).sum(), sync=True
    ),
}


class Keep(SchedulerPlugin):
    """Every transition as Dask hands it to its plugins (after the analytics plugin's)."""

    name = "keep-transitions"

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.calls: list[tuple] = []

    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs) -> None:
        self.calls.append((key, start, finish, stimulus_id, kwargs, self.scheduler.tasks.get(key)))


class Noop:
    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs) -> None:
        return None


def replay(plugin: Any, calls: list[tuple]) -> float:
    t0 = time.thread_time()  # CPU: the machine's other jobs do not count
    for key, start, finish, stimulus_id, kwargs, _ in calls:
        plugin.transition(key, start, finish, stimulus_id=stimulus_id, **kwargs)
    return time.thread_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--workload", default="client.map", choices=sorted(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--side-by-side", action="store_true", help="Dask's TaskStreamPlugin and AllProgress too"
    )
    args = parser.parse_args()
    store = "sqlite:///" + str(Path(tempfile.mkdtemp()) / "replay.db")
    with dask.config.set({"distributed.admin.tick.limit": "1h"}):
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster,
            Client(cluster) as client,
        ):
            dal.register(client, store=store)
            scheduler = cluster.scheduler
            plugin = scheduler.plugins[PLUGIN_NAME]
            WORKLOADS[args.workload](client, 200)  # warm up
            time.sleep(1.5)
            keep = Keep(scheduler)
            scheduler.add_plugin(keep)

            WORKLOADS[args.workload](client, args.tasks)
            scheduler.remove_plugin(name=keep.name)
            calls = keep.calls
            tasks = len({c[0] for c in calls})
            plugin._callback.stop()  # no ticks under the replay
            # The hook again, over the tasks as they were at their transitions (Dask has
            # forgotten them), with no timed calls: they would time the replay.
            plugin._tasks = {key: ts for key, _, _, _, _, ts in calls if ts is not None}
            plugin.transition = transition_hook(plugin)
            best, base = float("inf"), float("inf")
            # Dask's own plugins over a scheduler that has the tasks as they were.
            then = types.SimpleNamespace(tasks=plugin._tasks, add_plugin=lambda p: None)
            own: dict[str, float] = {}
            for _ in range(args.rounds):
                if plugin._stream is not None:
                    plugin._stream.incoming.clear()
                best = min(best, replay(plugin, calls))
                base = min(base, replay(Noop(), calls))
                if args.side_by_side:
                    for label, make in (
                        ("TaskStreamPlugin", lambda: TaskStreamPlugin(then)),
                        ("AllProgress", lambda: AllProgress(then)),
                    ):
                        own[label] = min(own.get(label, float("inf")), replay(make(), calls))
    if args.side_by_side:
        print(
            f"{args.workload}: {tasks} tasks, {len(calls)} transitions replayed; each plugin's"
            f" body over a no-op's (best of {args.rounds})\n"
        )
        print(f"{'plugin':<20} {'us/transition':>14} {'us/task':>8}")
        for label, spent in [*own.items(), ("analytics", best)]:
            body = spent - base
            print(f"{label:<20} {body / len(calls) * 1e6:>14.3f} {body / tasks * 1e6:>8.2f}")
        print(
            f"{'(no-op call itself)':<20} {base / len(calls) * 1e6:>14.3f} {base / tasks * 1e6:>8.2f}"
        )
        return
    body = best - base
    print(
        f"{args.workload}: {tasks} tasks, {len(calls)} transitions: hook body"
        f" {body / len(calls) * 1e6:.3f} us a transition, {body / tasks * 1e6:.2f} us a task"
        f" (replay {best:.3f} s, no-op {base:.3f} s; best of {args.rounds})"
    )


if __name__ == "__main__":
    main()
