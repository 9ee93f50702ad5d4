"""Bytes the store takes per 1,000 tasks, as a real LocalCluster records them, and that
this stays bounded as computations grow (issue 12, item 6).

For each size in --sizes, one `client.map` computation of that many tasks runs on a
fresh LocalCluster recording into a fresh SQLite file (after a 10-task warm-up
computation, so first pages and the cluster's rows are not counted); the bytes it added
(SQLite's used pages after a checkpoint) are split per 1,000 tasks and per table.  The
baseline, in the same run, is the same computation with the task stream off
(analytics.task-stream.transmit: false): the stream is the only record that grows
with the number of tasks (rows up to analytics.task-stream.max-tasks, then bins).

    python benchmarks/storage_per_task.py [--sizes 1000,10000,100000] [--workers 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from dask.utils import format_bytes  # noqa: E402

from benchmarks.store_growth import used_bytes  # noqa: E402


def inc(x: int) -> int:
    return x + 1


def table_rows(store) -> dict[str, int]:
    from dask_analytics_lab.store import schema as s

    with store.reading() as conn:
        return {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
            for t in s.DATA_TABLES
        }


def one(n: int, workers: int, stream: bool, folder: Path) -> tuple[int, dict[str, int]]:
    """Bytes and rows per table that one n-task computation added to a fresh store."""
    import dask
    from distributed import Client, LocalCluster, wait

    import dask_analytics_lab as dal
    from dask_analytics_lab.store import open_store

    path = folder / f"{n}-{'on' if stream else 'off'}.db"
    url = f"sqlite:///{path}"

    def settled(client, cid, count):
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            dal.flush(client)
            comps = dal.list_computations(cid, store=url)
            if len(comps) >= count and comps[0]["state"] != "running":
                rows = dal.list_task_stream(comps[0]["computation_id"], store=url) if stream else []
                if not stream or sum(r["n_tasks"] for r in rows) >= (n if count == 2 else 10):
                    time.sleep(1.5)  # the last metrics and profile ride the next ticks
                    dal.flush(client)
                    return
            time.sleep(0.5)
        raise SystemExit(f"the {n}-task computation did not settle in the store within 5 minutes")

    with (
        dask.config.set({"analytics.task-stream.transmit": stream}),
        LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        info = dal.register(client, store=str(path))
        wait(client.map(inc, range(10), pure=False))
        settled(client, info["cluster_id"], 1)
        with open_store(url) as store:
            before, rows_before = used_bytes(store), table_rows(store)
        futures = client.map(inc, range(n), pure=False)
        wait(futures)
        del futures
        settled(client, info["cluster_id"], 2)
        with open_store(url) as store:
            after, rows_after = used_bytes(store), table_rows(store)
    return after - before, {
        k: rows_after[k] - rows_before.get(k, 0)
        for k in rows_after
        if rows_after[k] != rows_before.get(k, 0)
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sizes", default="1000,10000,100000", help="tasks per computation, comma-separated"
    )
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            on, rows = one(n, args.workers, True, Path(tmp))
            off, _ = one(n, args.workers, False, Path(tmp))
            results.append((n, on, off, rows))
            print(
                f"{n:,} tasks: {format_bytes(on)} (task stream off: {format_bytes(off)}); rows added: "
                + ", ".join(f"{k} {v:,}" for k, v in sorted(rows.items())),
                flush=True,
            )
    print(
        f"\n{'tasks':>9} {'bytes, all on':>14} {'per 1,000 tasks':>16} {'stream off':>11} "
        f"{'per 1,000':>10} {'on/off':>7} {'stream rows':>12}"
    )
    for n, on, off, rows in results:
        print(
            f"{n:>9,} {format_bytes(on):>14} {format_bytes(on * 1000 / n):>16} {format_bytes(off):>11} "
            f"{format_bytes(off * 1000 / n):>10} {f'{on / off:.1f}' if off else '-':>7} {rows.get('task_stream', 0):>12,}"
        )


if __name__ == "__main__":
    main()
