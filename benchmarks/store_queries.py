"""How fast is "the last 100 computations with their totals" over ~1M task groups?

Builds a store with --groups task-group rows (bulk Core executemany, not ingest) in
SQLite, and in PostgreSQL too when --postgres URL is given (its tables are emptied
first: give it a scratch database), then times in the same run:

  store.list_computations  what the store does: totals kept on the computation row,
                           so it reads `limit` rows of one table (through the Store
                           API: connection, transaction and row conversion included)
  limit-first join         LIMIT the computations first, then join and sum their groups
  naive join               join every group, GROUP BY, ORDER BY, then LIMIT

    python benchmarks/store_queries.py                        # SQLite, 1M groups
    python benchmarks/store_queries.py --postgres postgresql://user@127.0.0.1:5432/scratch
    python benchmarks/store_queries.py --sqlite /tmp/b.db --reuse   # measure again, no rebuild

Building 1M rows takes about a minute per backend on 2 cores; the measuring, seconds.
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

from dask_analytics_lab.store import open_store  # noqa: E402
from dask_analytics_lab.store import schema as s  # noqa: E402
from dask_analytics_lab.store.engine import READ  # noqa: E402

LIMIT = 100
CHUNK = 20_000
T0 = 1_700_000_000.0
PREFIXES = [
    "read-parquet",
    "getitem",
    "groupby-agg",
    "sum",
    "ones",
    "map",
    "from-pandas",
    "rechunk",
]


def build(
    engine: sa.Engine, n_groups: int, per_computation: int, n_clusters: int
) -> tuple[int, float]:
    """Fill the tables; returns (computations, seconds)."""
    t = time.perf_counter()
    n_comps = n_groups // per_computation
    rng = random.Random(0)
    with engine.begin() as conn:
        for table in reversed(s.DATA_TABLES):
            conn.execute(sa.delete(table))
        conn.execute(sa.delete(s.ingested))
        conn.execute(
            sa.insert(s.clusters),
            [
                {
                    "cluster_id": f"cluster-{c}",
                    "account": "default",
                    "started": T0 + c,
                    "first_seen": T0 + c,
                    "last_seen": T0 + c,
                    "name": f"cluster {c}",
                }
                for c in range(n_clusters)
            ],
        )
    comps, groups = [], []

    def flush(force: bool = False) -> None:
        if len(groups) >= CHUNK or force:
            with engine.begin() as conn:
                if comps:
                    conn.execute(sa.insert(s.computations), comps)
                if groups:
                    conn.execute(sa.insert(s.task_groups), groups)
            comps.clear()
            groups.clear()

    for i in range(n_comps):
        cid, start = f"cluster-{i % n_clusters}", T0 + 10.0 * i
        comp_id = f"comp-{i:08d}"
        gs = []
        for j in range(per_computation):
            prefix = PREFIXES[j % len(PREFIXES)]
            n = rng.randint(1, 2000)
            gs.append(
                {
                    "cluster_id": cid,
                    "computation_id": comp_id,
                    "name": f"{prefix}-{j:04d}-{rng.getrandbits(64):016x}",
                    "prefix": prefix,
                    "states": {"memory": n},
                    "n_tasks": n,
                    "compute": n * 0.01,
                    "transfer": n * 0.001,
                    "disk_read": 0.0,
                    "disk_write": 0.0,
                    "nbytes": n * 80_000,
                    "start": start,
                    "stop": start + 5,
                    "dependencies": [],
                    "updated": start + 5,
                }
            )
        comps.append(
            {
                "computation_id": comp_id,
                "cluster_id": cid,
                "start": start,
                "stop": start + 5,
                "state": "finished",
                "code_hashes": [],
                "n_tasks": sum(g["n_tasks"] for g in gs),
                "n_groups": len(gs),
                "n_erred": 0,
                "compute": sum(g["compute"] for g in gs),
                "transfer": sum(g["transfer"] for g in gs),
                "disk": 0.0,
                "nbytes": sum(g["nbytes"] for g in gs),
                "updated": start + 5,
            }
        )
        groups.extend(gs)
        flush()
    flush(force=True)
    if engine.dialect.name == "postgresql":
        # autovacuum would do this soon after a real load; without it the planner guesses
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))
    return n_comps, time.perf_counter() - t


def joined(limit_first: bool) -> sa.Select:
    c, g = s.computations, s.task_groups
    comps = sa.select(c).order_by(c.c.start.desc()).limit(LIMIT).subquery() if limit_first else c
    totals = [
        sa.func.count().label("n_groups"),
        sa.func.sum(g.c.n_tasks).label("n_tasks"),
        sa.func.sum(g.c.compute).label("compute"),
        sa.func.sum(g.c.transfer).label("transfer"),
        sa.func.sum(g.c.nbytes).label("nbytes"),
    ]
    q = (
        sa.select(
            comps.c.computation_id,
            comps.c.cluster_id,
            comps.c.start,
            comps.c.stop,
            comps.c.state,
            *totals,
        )
        .select_from(
            comps.join(
                g,
                sa.and_(
                    g.c.cluster_id == comps.c.cluster_id,
                    g.c.computation_id == comps.c.computation_id,
                ),
            )
        )
        .group_by(
            comps.c.computation_id, comps.c.cluster_id, comps.c.start, comps.c.stop, comps.c.state
        )
        .order_by(comps.c.start.desc())
        .limit(LIMIT)
    )
    return q


def timed(fn, repeat: int) -> float:
    fn()  # warm: pool, caches
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1000


def measure(url: str, args: argparse.Namespace) -> list[tuple]:
    store = open_store(url)
    engine = store._engine  # the benchmark fills tables directly, bypassing ingest

    def count(table: sa.Table) -> int:
        with engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()

    if args.reuse and count(s.task_groups) == args.groups:
        print(f"  {store.dialect}: reusing its {args.groups:,} task groups", flush=True)
    else:
        n_comps, build_s = build(engine, args.groups, args.per_computation, args.clusters)
        print(
            f"  {store.dialect}: built {count(s.task_groups):,} task groups in {n_comps:,} computations "
            f"in {build_s:.0f} s",
            flush=True,
        )
    n_rows = count(s.task_groups)

    def run(q):
        with engine.connect().execution_options(**READ) as conn:
            rows = conn.execute(q).all()
        assert len(rows) == LIMIT

    ours = timed(lambda: store.list_computations(limit=LIMIT), args.repeat)
    first = timed(lambda: run(joined(limit_first=True)), args.repeat)
    naive = timed(lambda: run(joined(limit_first=False)), args.naive_repeat)
    # same answers
    a = [(r["computation_id"], r["n_tasks"]) for r in store.list_computations(limit=LIMIT)]
    with engine.connect() as conn:
        b = [(r.computation_id, r.n_tasks) for r in conn.execute(joined(limit_first=False))]
    assert a == b, "the queries disagree"
    store.close()
    return [
        (store.dialect, n_rows, "store.list_computations", ours, naive / ours),
        (store.dialect, n_rows, "limit-first join", first, naive / first),
        (store.dialect, n_rows, "naive join-group-limit", naive, 1.0),
    ]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--groups", type=int, default=1_000_000, help="task-group rows (default 1,000,000)"
    )
    p.add_argument(
        "--per-computation", type=int, default=50, help="task groups per computation (default 50)"
    )
    p.add_argument("--clusters", type=int, default=20)
    p.add_argument(
        "--postgres", metavar="URL", help="also measure this (scratch!) PostgreSQL database"
    )
    p.add_argument("--sqlite", metavar="PATH", help="SQLite file to use (default: a temporary one)")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="measure again without rebuilding when the stores already hold --groups rows",
    )
    p.add_argument(
        "--repeat", type=int, default=50, help="timed runs of the fast queries (median shown)"
    )
    p.add_argument("--naive-repeat", type=int, default=5, help="timed runs of the naive query")
    args = p.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_path = args.sqlite or str(Path(tmp) / "bench.db")
        rows += measure("sqlite:///" + sqlite_path, args)
        if args.postgres:
            rows += measure(args.postgres, args)

    print(f"\nlast {LIMIT} computations with their totals (median ms)")
    print(f"{'backend':<11} {'task groups':>12}  {'query':<26} {'ms':>9}  {'naive / this':>12}")
    for backend, n, name, ms, ratio in rows:
        print(f"{backend:<11} {n:>12,}  {name:<26} {ms:>9.2f}  {ratio:>11.0f}x")


if __name__ == "__main__":
    main()
