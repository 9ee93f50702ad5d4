"""How long does `explain` take for a big computation?  (Issue 21: under 100 ms for
100,000 tasks.)

Builds a SQLite store (and a PostgreSQL one with --postgres URL: give it a scratch
database) through `Store.ingest`, with what the collector sends for:

  100k binned   100,000 tasks in 500 task groups on 100 workers of 4 threads, run for
                10 minutes: its task stream binned (2,000 bins, analytics.task-stream.
                max-bins), 100 workers sampled every 5 s (12,000 rows), fine metrics for
                every prefix, failures and events; 200 earlier runs of the same code
  10k per task  10,000 tasks kept one task-stream row each (analytics.task-stream.
                max-tasks): the most rows a stream holds unbinned

then times `findings.explain(store, id)` (every read and every rule, as dal.explain runs
them on an embedded store), the median of --repeat runs after one warm-up: "explained"
with nothing kept (what was kept is deleted before each run: the first explain of a
computation, keeping what it found included), "kept" answered from the findings the
store keeps with a computation whose record can no longer change (findings/kept.py).

    python benchmarks/findings_speed.py
    python benchmarks/findings_speed.py --postgres postgresql://user@127.0.0.1:5432/scratch
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dask_analytics_lab.findings import explain  # noqa: E402
from dask_analytics_lab.messages import fingerprint, make  # noqa: E402
from dask_analytics_lab.store import (
    open_store,  # noqa: E402
    schema,  # noqa: E402
)

T0 = 1_700_000_000.0
PREFIXES = ["read_parquet", "getitem", "groupby-agg", "assign", "merge", "sum"]


class Messages:
    def __init__(self, cluster_id: str):
        self.cluster_id, self.seq = cluster_id, 0

    def __call__(self, kind: str, t: float, data: dict) -> dict:
        self.seq += 1
        return make(self.cluster_id, self.seq, kind, t, data)


def cluster(m: Messages, workers: int, threads: int, wall: float) -> list[dict]:
    out = [
        m(
            "cluster",
            T0,
            {
                "name": "bench",
                "address": "tcp://10.0.0.1:8786",
                "user": "ann",
                "account": "default",
                "started": T0,
                "price_per_core_hour": 0.05,
                "versions": {},
                "platform": {},
                "settings": {},
            },
        )
    ]
    for t in range(0, int(wall) + 1, 5):
        out.append(
            m(
                "worker_samples",
                T0 + t,
                {
                    "samples": [
                        {
                            "worker": f"tcp://10.0.{w // 250}.{w % 250}:4000",
                            "time": T0 + t,
                            "name": str(w),
                            "host": "h",
                            "nthreads": threads,
                            "memory_limit": 16 * 2**30,
                            "managed": 2**30,
                            "unmanaged": 2**28,
                            "spilled": 2**27 if w % 10 == 0 else 0,
                            "cpu": 350.0,
                            "processing": threads,
                        }
                        for w in range(workers)
                    ]
                },
            )
        )
    return out


def computation(
    m: Messages,
    comp_id: str,
    start: float,
    *,
    tasks: int,
    n_groups: int,
    workers: int,
    wall: float,
    binned: bool,
    rng: random.Random,
) -> list[dict]:
    per = tasks // n_groups
    groups = []
    for j in range(n_groups):
        prefix = PREFIXES[j % len(PREFIXES)]
        a = start + wall * j / n_groups
        groups.append(
            {
                "name": f"{prefix}-{j:04d}",
                "prefix": prefix,
                "states": {"memory": per},
                "n_tasks": per,
                "n_done": per,
                "n_erred": 0,
                "n_not_run": 0,
                "compute": per * 0.8,
                "transfer": per * 0.05,
                "disk_read": 0.0,
                "disk_write": 0.0,
                "nbytes": per * 10**6,
                "start": a,
                "stop": a + wall / n_groups * 2,
                "dependencies": [groups[-1]["name"]] if groups else [],
            }
        )
    totals = {
        "n_tasks": tasks,
        "n_groups": n_groups,
        "n_done": tasks,
        "n_erred": 0,
        "n_not_run": 0,
        "compute": tasks * 0.8,
        "transfer": tasks * 0.05,
        "disk": 0.0,
        "nbytes": tasks * 10**6,
    }
    fp = fingerprint("df.groupby('a').sum().compute()", PREFIXES)
    out = [
        m(
            "computation",
            start + wall,
            {
                "id": comp_id,
                "start": start,
                "stop": start + wall,
                "state": "finished",
                "code": [],
                "code_frames": [],
                "code_line": "df.groupby('a').sum().compute()",
                "label": " → ".join(PREFIXES),
                "fingerprint": fp,
                "totals": totals,
                "groups": groups,
            },
        )
    ]
    rows = []
    if binned:
        width = wall / (2000 // workers * 1.0) if workers <= 2000 else wall
        bins = int(wall / width)
        for b in range(bins):
            for w in range(min(workers, 2000 // bins or 1)):
                g = groups[min(n_groups - 1, b * n_groups // bins)]
                rows.append(
                    {
                        "worker": f"tcp://10.0.{w // 250}.{w % 250}:4000",
                        "thread": None,
                        "prefix": g["prefix"],
                        "task_group": g["name"],
                        "state": "memory",
                        "start": start + b * width,
                        "stop": start + (b + 1) * width,
                        "n_tasks": max(1, tasks // 2000),
                        "busy": width * 3.5,
                        "binned": True,
                    }
                )
    else:
        t = start
        for i in range(tasks):
            g = groups[i * n_groups // tasks]
            w = i % workers
            d = 0.05 + rng.random() * 0.05
            rows.append(
                {
                    "worker": f"tcp://10.0.{w // 250}.{w % 250}:4000",
                    "thread": 140000 + i % 4,
                    "prefix": g["prefix"],
                    "task_group": g["name"],
                    "state": "memory",
                    "start": t,
                    "stop": t + d,
                }
            )
            t += wall / tasks
    for i in range(0, len(rows), 2000):
        out.append(
            m(
                "task_stream",
                start + wall,
                {
                    "computation_id": comp_id,
                    "rows": rows[i : i + 2000],
                    "replace": bool(binned and i == 0),
                },
            )
        )
    metrics = [
        {
            "prefix": p,
            "context": "execute",
            "activity": a,
            "unit": "seconds",
            "value": rng.random() * 100,
        }
        for p in PREFIXES
        for a in ("thread-cpu", "thread-noncpu", "executor", "disk-read", "serialize")
    ]
    metrics.append(
        {"context": "gather-dep", "activity": "network", "unit": "seconds", "value": 30.0}
    )
    out.append(m("metrics", start + wall, {"computation_id": comp_id, "rows": metrics}))
    out.append(
        m(
            "exception",
            start + wall,
            {
                "computation_id": comp_id,
                "group": groups[3]["name"],
                "hash": "e1",
                "exception_text": "ValueError('x')",
                "traceback_text": "",
                "key": "k",
                "count": 3,
                "first_time": start,
                "last_time": start + 1,
                "exc_type": "ValueError",
                "location": "etl.py:3 in clean",
                "pattern": "x",
                "examples": [],
                "workers": ["tcp://10.0.0.1:4000"],
            },
        )
    )
    return out


def build(url: str) -> dict[str, str]:
    rng = random.Random(0)
    ids = {}
    with open_store(url) as store:
        m = Messages("bench-100k")
        store.ingest(cluster(m, 100, 4, 600.0))
        for k in range(200):  # earlier runs: compare() finds its baseline among them
            store.ingest(
                computation(
                    m,
                    f"run-{k:03d}",
                    T0 - 700.0 * (k + 1),
                    tasks=1000,
                    n_groups=50,
                    workers=100,
                    wall=60.0,
                    binned=True,
                    rng=rng,
                )
            )
        store.ingest(
            computation(
                m,
                "big-100k",
                T0,
                tasks=100_000,
                n_groups=500,
                workers=100,
                wall=600.0,
                binned=True,
                rng=rng,
            )
        )
        ids["100k tasks, binned stream"] = "big-100k"
        m = Messages("bench-10k")
        store.ingest(cluster(m, 16, 4, 120.0))
        msgs = computation(
            m,
            "per-task-10k",
            T0,
            tasks=10_000,
            n_groups=20,
            workers=16,
            wall=120.0,
            binned=False,
            rng=rng,
        )
        for i in range(0, len(msgs), 5):
            store.ingest(msgs[i : i + 5])
        ids["10k tasks, one row each"] = "per-task-10k"
    return ids


def forget(store, cid: str) -> None:
    """Delete what the store kept of the computation's findings: the next explain computes."""
    with store.transaction() as conn:
        for table in (schema.findings, schema.explained):
            conn.execute(sa.delete(table).where(table.c.computation_id == cid))


def measure(url: str, cid: str, repeat: int) -> tuple[float, float, float, list[dict]]:
    """(explained median ms, explained max ms, kept median ms, the findings)."""
    with open_store(url) as store:
        found = explain(store, cid)  # warm-up: the connection pool and SQLite's page cache
        times = []
        for _ in range(repeat):
            forget(store, cid)
            t = time.perf_counter()
            found = explain(store, cid)
            times.append(time.perf_counter() - t)
        kept = []
        for _ in range(repeat):
            t = time.perf_counter()
            again = explain(store, cid)
            kept.append(time.perf_counter() - t)
        assert again == found
    return statistics.median(times) * 1000, max(times) * 1000, statistics.median(kept) * 1000, found


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--postgres", help="also a PostgreSQL scratch database (its tables are filled)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    urls = [("SQLite", "sqlite:///" + str(Path(tempfile.mkdtemp()) / "findings.db"))]
    if args.postgres:
        urls.append(("PostgreSQL", args.postgres))
    print(
        f"{'store':<11} {'computation':<28} {'explained ms':>12} {'max ms':>8} {'kept ms':>8}"
        "  findings"
    )
    for name, url in urls:
        t = time.perf_counter()
        ids = build(url)
        print(f"# {name}: built in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        for label, cid in ids.items():
            med, worst, kept, found = measure(url, cid, args.repeat)
            kinds = ", ".join(f["kind"] for f in found) or "-"
            print(f"{name:<11} {label:<28} {med:>12.1f} {worst:>8.1f} {kept:>8.1f}  {kinds}")


if __name__ == "__main__":
    main()
