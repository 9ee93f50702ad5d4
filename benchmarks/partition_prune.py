"""Retention on PostgreSQL's time partitions (store/partitions.py) against row by row.

Two fresh databases on a throwaway PostgreSQL server (Debian's postgresql package, as
the tests use), the same rows in each: --clusters clusters that stopped 100 days ago,
each with --rows worker samples, task-stream rows and events/10 of that day.  In one
the day has its partition (retention drops it), in the other the rows sit in DEFAULT
(retention deletes them row by row, as it did before partitions).  Prints the seconds
each prune took and the rows it removed, which must be the same.

    python benchmarks/partition_prune.py                    # 100 clusters x 2,000 rows
    python benchmarks/partition_prune.py --clusters 20 --rows 500
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from dask_analytics_lab.store import open_store, partitions  # noqa: E402
from dask_analytics_lab.store import schema as s  # noqa: E402
from dask_analytics_lab.store.prune import prune  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402

DAY = 86400.0


def fill(store, n_clusters: int, n_rows: int, t0: float) -> None:
    with store.transaction() as conn:
        for i in range(n_clusters):
            cid = f"old-{i:05d}"
            t = t0 + i
            conn.execute(
                sa.insert(s.clusters),
                {
                    "cluster_id": cid,
                    "started": t,
                    "stopped": t + 60,
                    "first_seen": t,
                    "last_seen": t + 60,
                },
            )
            times = [t + k * 0.01 for k in range(n_rows)]
            conn.execute(
                sa.insert(s.worker_samples),
                [
                    {"cluster_id": cid, "worker": f"w{k % 8}", "time": x, "cpu": 50.0}
                    for k, x in enumerate(times)
                ],
            )
            conn.execute(
                sa.insert(s.task_stream),
                [
                    {
                        "cluster_id": cid,
                        "computation_id": "c",
                        "start": x,
                        "stop": x + 0.005,
                        "n_tasks": 1,
                        "binned": False,
                    }
                    for x in times
                ],
            )
            conn.execute(
                sa.insert(s.events),
                [
                    {"cluster_id": cid, "topic": "t", "time": x, "msg": {"k": 1}}
                    for x in times[::10]
                ],
            )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--rows", type=int, default=2000)
    args = ap.parse_args()
    now = time.time()
    t0 = partitions.start_of(now - 100 * DAY) + 3600
    with PostgresServer() as pg:
        results = {}
        for how in ("partition dropped", "row by row (DEFAULT)"):
            with open_store(pg.url(pg.create_database())) as store:
                if how.startswith("partition"):
                    with store.transaction() as conn:
                        partitions.ensure(conn, t0, ahead=0)
                fill(store, args.clusters, args.rows, t0)
                with store.transaction() as conn:
                    conn.exec_driver_sql("ANALYZE")
                start = time.perf_counter()
                done = prune(store, 90 * DAY, now=now, pause=0)
                seconds = time.perf_counter() - start
                rows = sum(v for k, v in done.items() if k not in ("seconds", "code_snippets"))
                results[how] = (seconds, rows)
                print(f"{how:22s} {seconds:7.2f} s  {rows:,} rows  ({rows / seconds:,.0f} rows/s)")
        (a, ra), (b, rb) = results.values()
        assert ra == rb, "both prunes must remove the same rows"
        print(f"dropping partitions: {b / a:.1f}x faster")


if __name__ == "__main__":
    main()
