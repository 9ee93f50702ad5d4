"""What installing the package costs each `dask scheduler` / `dask worker` start.

Dask's `dask` command imports every `dask_cli` entry point at each start. Each row is a
fresh interpreter that imports `dask.cli` and then loads one thing, as the command would:

  nothing        no entry point of ours (the baseline: Dask's CLI alone)
  entry point    the entry point as installed (cli_entry: the stand-in group)
  whole CLI      dask_analytics_lab.cli, what the entry point named before

Rounds are interleaved; the table prints the median CPU (user + system) of each and its
ratio to the baseline, the package's modules and SQLAlchemy's that stayed loaded, and the
GC-tracked objects the process held at the end.

    python benchmarks/cli_start.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

LOAD = {
    "nothing": "",
    "entry point": (
        "import importlib.metadata as m\n"
        "[ep.load() for ep in m.entry_points(group='dask_cli') if ep.name == 'analytics']\n"
    ),
    "whole CLI": "import dask_analytics_lab.cli\n",
}

SCRIPT = """
import gc, json, sys
import dask.cli
{load}
gc.collect()
print(json.dumps({{
    "ours": sum(m.split(".")[0] == "dask_analytics_lab" for m in sys.modules),
    "sqlalchemy": sum(m.split(".")[0] == "sqlalchemy" for m in sys.modules),
    "gc": len(gc.get_objects()),
}}))
"""


def one(load: str) -> tuple[float, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(load=load)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    cpu: dict[str, list[float]] = {name: [] for name in LOAD}
    seen: dict[str, dict] = {}
    for load in LOAD.values():  # one unmeasured round: the files in the page cache
        one(load)
    for _ in range(args.rounds):
        for name, load in LOAD.items():
            seconds, seen[name] = one(load)
            cpu[name].append(seconds)
    base = statistics.median(cpu["nothing"])
    print(f"fresh interpreters, {args.rounds} interleaved rounds, median CPU (user + system)")
    print(
        f"{'loads':<12} {'CPU s':>7} {'x base':>7} {'+ s':>6} {'ours':>5} {'SQLA':>5} {'GC objs':>9}"
    )
    for name in LOAD:
        med = statistics.median(cpu[name])
        s = seen[name]
        print(
            f"{name:<12} {med:7.3f} {med / base:7.2f} {med - base:6.3f} "
            f"{s['ours']:5d} {s['sqlalchemy']:5d} {s['gc']:9,d}"
        )


if __name__ == "__main__":
    main()
