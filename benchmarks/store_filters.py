"""Team questions over ~1M task groups: how long does a filtered page, a deep page
through the cursor, and a cost report take?

Builds the same store as store_queries.py (--groups task-group rows, bulk inserts),
then gives its clusters users, accounts, states, costs and start times spread over
--days, and its computations labels and states; in SQLite, and in PostgreSQL too when
--postgres URL is given (its tables are emptied first: give it a scratch database).
Every figure is the median of --repeat runs through the Store API (connection,
transaction and row conversion included):

    python benchmarks/store_filters.py                          # SQLite, 1M groups
    python benchmarks/store_filters.py --groups 20000           # a quick check
    python benchmarks/store_filters.py --postgres postgresql://user@127.0.0.1:5432/scratch

Target: every page and report under 50 ms at 1M task groups.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_queries import T0, build, timed  # noqa: E402

from dask_analytics_lab.store import open_store  # noqa: E402
from dask_analytics_lab.store import schema as s  # noqa: E402

PAGE = 50
USERS = 50
ACCOUNTS = 5
TARGET_MS = 50.0
LABELS = [
    "read_parquet → groupby-agg",
    "ones → sum",
    "from-pandas → map → rechunk",
    "read_csv → merge",
]


def decorate(engine: sa.Engine, days: int) -> None:
    """Users, accounts, states, costs and spread-out starts for the clusters; labels and
    states for the computations (a computation starts within its cluster's life)."""
    c, k = s.clusters, s.computations
    with engine.begin() as conn:
        ids = sorted(
            conn.execute(sa.select(c.c.cluster_id)).scalars(), key=lambda x: int(x.split("-")[1])
        )
        n = len(ids)
        span = days * 86400.0
        starts = {}
        for i, cid in enumerate(ids):
            started = T0 + span * i / n
            starts[cid] = started
            live = i == n - 1  # the newest one: live (its last_seen is now)
            conn.execute(
                sa.update(c)
                .where(c.c.cluster_id == cid)
                .values(
                    user=f"user-{i % USERS:02d}",
                    account=f"team-{i % ACCOUNTS}",
                    started=started,
                    name=f"{('etl-nightly', 'scratch', 'train-model')[i % 3]}-{i}",
                    first_seen=started,
                    last_seen=time.time() if live else started + 3600,
                    stopped=None if live or i % 7 == 3 else started + 3600,  # every 7th: lost
                    core_seconds=3600.0 * (1 + i % 16),
                    cost=0.05 * (1 + i % 16),
                    price_per_core_hour=0.05,
                )
            )
        per_cluster: dict[str, int] = {}
        rows = conn.execute(
            sa.select(k.c.computation_id, k.c.cluster_id).order_by(k.c.computation_id)
        ).all()
        updates = []
        for j, (comp_id, cid) in enumerate(rows):
            m = per_cluster[cid] = per_cluster.get(cid, -1) + 1
            updates.append(
                {
                    "b_id": comp_id,
                    "start": starts[cid] + 5.0 * m,
                    "label": LABELS[m % len(LABELS)],
                    "state": "erred" if j % 11 == 0 else ("running" if j % 13 == 0 else "finished"),
                }
            )
        stmt = (
            sa.update(k)
            .where(k.c.computation_id == sa.bindparam("b_id"))
            .values(
                start=sa.bindparam("start"),
                label=sa.bindparam("label"),
                state=sa.bindparam("state"),
            )
        )
        for i in range(0, len(updates), 5000):
            conn.execute(stmt, updates[i : i + 5000])
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))


def deep_cursor(fn, **filters) -> tuple[str | None, int]:
    """The cursor whose next page is the last full one, found by following the cursor
    through every row (what pressing Older until the end does); and how many rows."""
    cursors: list[str] = []
    before = None
    while rows := fn(limit=1000, before=before, **filters):
        cursors += [r["cursor"] for r in rows]
        before = cursors[-1]
    return (cursors[-PAGE - 1] if len(cursors) > PAGE else None), len(cursors)


def measure(url: str, args: argparse.Namespace) -> list[tuple]:
    store = open_store(url)
    engine = store._engine  # the benchmark fills tables directly, bypassing ingest
    with engine.connect() as conn:
        have = conn.execute(sa.select(sa.func.count()).select_from(s.task_groups)).scalar()
    if args.reuse and have == args.groups:
        print(f"  {store.dialect}: reusing its {have:,} task groups", flush=True)
    else:
        n_comps, build_s = build(engine, args.groups, args.per_computation, args.clusters)
        t = time.perf_counter()
        decorate(engine, args.days)
        print(
            f"  {store.dialect}: built {args.groups:,} task groups in {n_comps:,} computations on "
            f"{args.clusters:,} clusters in {build_s + time.perf_counter() - t:.0f} s",
            flush=True,
        )
    with engine.connect() as conn:
        n_groups = conn.execute(sa.select(sa.func.count()).select_from(s.task_groups)).scalar()

    lc, lp = store.list_clusters, store.list_computations
    deep_cl, _ = deep_cursor(lc)
    deep_comp, walked = deep_cursor(lp)
    deep_user, _ = deep_cursor(lp, user="user-07")
    cases = [
        ("clusters: first page", lambda: lc(limit=PAGE)),
        (
            "clusters: user+state+text",
            lambda: lc(limit=PAGE, user="user-07", state="stopped", text="ETL"),
        ),
        (
            "clusters: account+since/until",
            lambda: lc(limit=PAGE, account="team-2", since=T0 + 30 * 86400, until=T0 + 200 * 86400),
        ),
        ("clusters: deep page (cursor)", lambda: lc(limit=PAGE, before=deep_cl)),
        ("computations: first page", lambda: lp(limit=PAGE)),
        ("computations: user+text", lambda: lp(limit=PAGE, user="user-07", text="groupby")),
        (
            "computations: state=erred+since",
            lambda: lp(limit=PAGE, state="erred", since=T0 + 100 * 86400),
        ),
        ("computations: state=lost", lambda: lp(limit=PAGE, state="lost")),
        ("computations: deep page (cursor)", lambda: lp(limit=PAGE, before=deep_comp)),
        ("computations: user, deep page", lambda: lp(limit=PAGE, user="user-07", before=deep_user)),
        ("cost_report by user", lambda: store.cost_report(by="user")),
        ("cost_report by day", lambda: store.cost_report(by="day")),
        (
            "cost_report by month, since",
            lambda: store.cost_report(by="month", since=T0 + 90 * 86400),
        ),
        ("cost_report by user, account", lambda: store.cost_report(by="user", account="team-3")),
    ]
    out = []
    for name, fn in cases:
        rows = fn()
        out.append((store.dialect, n_groups, name, len(rows), timed(fn, args.repeat)))
    # A deep page is the same rows as walking there page by page, newest first.
    assert len(lp(limit=PAGE, before=deep_comp)) == PAGE, "the deep page is not full"
    print(
        f"  {store.dialect}: the deep computations page starts {walked - PAGE:,} rows in",
        flush=True,
    )
    store.close()
    return out


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
    p.add_argument("--clusters", type=int, default=2000)
    p.add_argument(
        "--days", type=int, default=400, help="the clusters' starts spread over this many days"
    )
    p.add_argument(
        "--postgres", metavar="URL", help="also measure this (scratch!) PostgreSQL database"
    )
    p.add_argument("--sqlite", metavar="PATH", help="SQLite file to use (default: a temporary one)")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="measure again without rebuilding when the stores already hold --groups rows",
    )
    p.add_argument("--repeat", type=int, default=30, help="timed runs of each (median shown)")
    args = p.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows += measure("sqlite:///" + (args.sqlite or str(Path(tmp) / "bench.db")), args)
        if args.postgres:
            rows += measure(args.postgres, args)

    print(f"\nfilters, pages of {PAGE} and cost reports (median ms; target < {TARGET_MS:.0f} ms)")
    print(f"{'backend':<11} {'task groups':>12}  {'query':<34} {'rows':>5} {'ms':>9}")
    for backend, n, name, n_rows, ms in rows:
        flag = "" if ms < TARGET_MS else "  over target"
        print(f"{backend:<11} {n:>12,}  {name:<34} {n_rows:>5} {ms:>9.2f}{flag}")


if __name__ == "__main__":
    main()
