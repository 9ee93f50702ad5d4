"""A computation's label (`read_parquet → … → to_parquet`: collect/labels.py) at
thousands of task groups: the tracker makes it, in a turn of the scheduler's loop of its
own, whenever a computation gets a new set of groups.

The baseline, in the same run on the same groups, is the label as defined: each group's
level by recursion, every group sorted by (level, start, name), the prefixes in the order
of their first group.  Real TaskGroup objects; CPU ms, the best of --repeat, collections
off.  Both must give the same label.

    python benchmarks/label_speed.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from distributed.scheduler import TaskGroup, TaskPrefix  # noqa: E402

from dask_analytics_lab.collect.labels import prefix_label  # noqa: E402
from tests.unit.test_tracker import _label_by_sorting  # noqa: E402  (the label as defined)


def by_definition(claims: list[Any]) -> str:
    groups = {c.tg for c in claims}
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(groups) + 100))
    return _label_by_sorting(groups)


def claims_of(n_groups: int, n_prefixes: int, deps: int) -> list[Any]:
    """Groups named and started as Dask's are, each depending on up to `deps` earlier ones."""
    rng = random.Random(1)
    prefixes = [TaskPrefix(f"op{k}") for k in range(n_prefixes)]
    groups: list[TaskGroup] = []
    for g in range(n_groups):
        tg = TaskGroup(f"op{g % n_prefixes}-{g:08x}", prefixes[g % n_prefixes])
        tg.start = 1.7e9 + rng.random()
        if groups and deps:
            tg.dependencies.update(rng.sample(groups[-200:], min(deps, len(groups))))
        groups.append(tg)
    return [SimpleNamespace(tg=tg) for tg in groups]


def best(fn: Any, claims: list[Any], repeat: int) -> tuple[float, str]:
    seconds, label = float("inf"), ""
    for _ in range(repeat):
        t0 = time.thread_time()
        label = fn(claims)
        seconds = min(seconds, time.thread_time() - t0)
    return 1e3 * seconds, label


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    gc.disable()
    print(
        f"{'groups':>7} {'prefixes':>8} {'deps':>5} {'defined ms':>11} {'label ms':>9} {'ratio':>6}"
    )
    for n_groups, n_prefixes, deps in [
        (4000, 4000, 0),
        (4000, 30, 0),
        (4000, 4000, 2),
        (4000, 30, 2),
        (200, 10, 2),
    ]:
        claims = claims_of(n_groups, n_prefixes, deps)
        base, want = best(by_definition, claims, args.repeat)
        ours, got = best(prefix_label, claims, args.repeat)
        assert got == want, (got, want)
        print(
            f"{n_groups:>7} {n_prefixes:>8} {deps:>5} {base:>11.2f} {ours:>9.2f} {ours / base:>6.2f}"
        )


if __name__ == "__main__":
    main()
