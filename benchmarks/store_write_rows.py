"""The embedded store's writing of row tables, in the scheduler's process: CPU of the
writer thread for a computation's task stream rows and a run's worker samples, as
store.ingest runs them (store/bulk.py).

SQLite: each batch's rows go to sqlite3 as tuples (the statement compiled once per set
of columns); the baseline, in the same run and on the same data, is SQLAlchemy's own
executemany of the same statement (which builds each row's parameters in Python).
Each figure is the best of --repeat runs into a fresh file, the writer's thread CPU.

    python benchmarks/store_write_rows.py [--rows 20000] [--batch 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dask_analytics_lab.store import bulk, open_store  # noqa: E402
from tests.factories import Cluster  # noqa: E402


def task_stream(c: Cluster, n: int, batch: int) -> list[dict]:
    """A client.map computation's task stream, as the collector sends it (one row a task
    up to its max-tasks), `batch` rows a message."""
    rows = [
        {
            "worker": f"tcp://127.0.0.1:{40000 + i % 2}",
            "thread": 140000 + i % 2,
            "prefix": "inc",
            "task_group": "inc-5f6a7b8c",
            "state": "memory",
            "start": c.t + i * 1e-3,
            "stop": c.t + i * 1e-3 + 4e-4,
            "n_tasks": 1,
            "busy": None,
            "binned": False,
        }
        for i in range(n)
    ]
    return [c.tasks("comp-1", rows[i : i + batch]) for i in range(0, n, batch)]


def worker_samples(c: Cluster, n: int, batch: int) -> list[dict]:
    """n worker samples, `batch` workers a message (a large cluster's sampling)."""
    return [c.workers(batch, at=c.t + k) for k in range(max(1, n // batch))]


@contextmanager
def executemany():
    """The baseline: every batch through SQLAlchemy's executemany."""
    bulk._BUILT.clear()
    with mock.patch.object(bulk, "_driver_insert", lambda *a: None):
        yield
    bulk._BUILT.clear()


def writer_cpu(make, n: int, batch: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        c = Cluster(account="bench")
        msgs = make(c, n, batch)
        with open_store("sqlite:///" + os.path.join(tempfile.mkdtemp(), "rows.db")) as store:
            store.ingest([c.cluster()])
            t0 = time.thread_time()
            for m in msgs:
                store.ingest([m])
            best = min(best, time.thread_time() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1000, help="rows a message")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(
        f"SQLite, {a.rows:,} rows in messages of {a.batch:,}; writer thread CPU, best of {a.repeat}"
    )
    print(f"{'table':<16} {'executemany s':>13} {'driver s':>9} {'ratio':>6} {'us a row':>9}")
    for name, make in (("task_stream", task_stream), ("worker_samples", worker_samples)):
        with executemany():
            base = writer_cpu(make, a.rows, a.batch, a.repeat)
        fast = writer_cpu(make, a.rows, a.batch, a.repeat)
        print(
            f"{name:<16} {base:>13.3f} {fast:>9.3f} {fast / base:>6.2f} {fast / a.rows * 1e6:>9.1f}"
        )


if __name__ == "__main__":
    main()
