"""How fast the store grows, and how fast retention (store/prune.py) takes it back while
a cluster keeps recording.

For SQLite (a file here) and PostgreSQL (a throwaway server started here from Debian's
postgresql package, or --postgres URL of a scratch database; --no-postgres skips it):

  growth   bytes the store takes per computation (as the collector records one: the
           computation with --groups task groups, a code snippet, a profile per prefix,
           fine metrics, --tasks task-stream rows) and per cluster-hour (cluster
           samples: one per 30 s heartbeat when idle, one per 1 s tick when busy).
           Bytes: SQLite's used pages after a checkpoint, PostgreSQL's table+index sizes.
  prune    --clusters old clusters of --computations computations each are pruned while
           a writer thread ingests a live cluster's batches (20 messages each) back to
           back; rows/s and clusters/s, and the writer's batch latency during the prune
           against its baseline measured just before in the same run (median, p99, max =
           the longest stall).

    python benchmarks/store_growth.py                       # 200 clusters x 20 computations
    python benchmarks/store_growth.py --clusters 50 --computations 10 --no-postgres
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from dask.utils import format_bytes  # noqa: E402

from dask_analytics_lab.store import open_store  # noqa: E402
from dask_analytics_lab.store import schema as s  # noqa: E402
from dask_analytics_lab.store.prune import prune  # noqa: E402
from dask_analytics_lab.store.team_schema import TEAM_TABLES  # noqa: E402
from tests.factories import Cluster, group, tree  # noqa: E402

DAY = 86400.0


def computation_msgs(c: Cluster, comp: str, n_groups: int, n_tasks: int) -> list[dict]:
    groups = [group(f"op{i}-{comp[-6:]}", n_tasks=50) for i in range(n_groups)]
    h = f"h-{comp}"
    rows = [
        {
            "worker": f"tcp://10.0.0.{i % 4 + 1}:4000",
            "thread": 1 + i % 2,
            "prefix": f"op{i % n_groups}",
            "task_group": groups[i % n_groups]["name"],
            "state": "memory",
            "start": c.t + i * 0.01,
            "stop": c.t + i * 0.01 + 0.008,
        }
        for i in range(n_tasks)
    ]
    msgs = [
        c.code(
            h,
            text=f"df = dd.read_parquet('s3://bucket/{comp}')\ndf.groupby('x').y.mean().compute()\n",
        ),
        c.computation(comp, code=[h], groups=groups, fingerprint=f"fp-{comp[-3:]}"),
        c.tasks(comp, rows),
        c.metrics(comp),
    ]
    msgs += [
        c.profile(comp, tree("main", f"op{i}", "work", count=10)) for i in range(min(n_groups, 3))
    ]
    return msgs


def cluster_msgs(
    c: Cluster, n_comps: int, n_groups: int, n_tasks: int, *, stop: bool = True
) -> list[dict]:
    msgs = [c.cluster(started=c.t)]
    for i in range(n_comps):
        msgs += [c.sample()] + computation_msgs(c, f"{c.id}-c{i:04d}", n_groups, n_tasks)
    return msgs + ([c.stop()] if stop else [])


def used_bytes(store) -> int:
    if store.dialect == "sqlite":
        raw = store._engine.raw_connection()  # PRAGMAs outside a transaction (no BEGIN here)
        try:
            cur = raw.cursor()
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            page, pages, free = (
                cur.execute(f"PRAGMA {p}").fetchone()[0]
                for p in ("page_size", "page_count", "freelist_count")
            )
            return (pages - free) * page
        finally:
            raw.close()
    with store.reading() as conn:
        names = [t.name for t in (*s.DATA_TABLES, s.ingested, *TEAM_TABLES)]
        return int(
            conn.execute(
                sa.text(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                    "WHERE c.relname = ANY(:n) AND c.relkind = 'r'"
                ),
                {"n": names},
            ).scalar()
        )


def growth(store, args) -> dict[str, float]:
    """Bytes per computation, per idle and per busy cluster-hour (deltas, after a warm-up)."""
    out = {}
    if store.dialect == "postgresql":
        store_vacuum(store)
    c = Cluster("growth-comp", t0=time.time() - 30 * DAY)
    store.ingest(
        cluster_msgs(c, 5, args.groups, args.tasks, stop=False)
    )  # warm-up: first pages, snippets
    before = used_bytes(store)
    n = args.growth_computations
    for i in range(0, n, 10):
        batch = []
        for j in range(i, min(n, i + 10)):
            batch += computation_msgs(c, f"growth-comp-x{j:05d}", args.groups, args.tasks)
        store.ingest(batch)
    if store.dialect == "postgresql":
        store_vacuum(store)
    out["per computation"] = (used_bytes(store) - before) / n
    for name, every in (("per idle cluster-hour", 30.0), ("per busy cluster-hour", 1.0)):
        h = Cluster(f"growth-{name[4:8]}", t0=time.time() - 30 * DAY)
        store.ingest([h.cluster(started=h.t)])
        before = used_bytes(store)
        n = int(3600 / every)
        for i in range(0, n, 200):
            store.ingest(
                [
                    h.sample(at=h.t + every, n_workers=4 + k % 3, processing=k)
                    for k in range(i, min(n, i + 200))
                ]
            )
        if store.dialect == "postgresql":
            store_vacuum(store)
        out[name] = used_bytes(store) - before
    return out


def store_vacuum(store) -> None:
    # sizes settle (visibility maps, free space maps) once vacuumed: compare like with like
    raw = store._engine.raw_connection()
    try:
        raw.driver_connection.autocommit = True
        raw.driver_connection.execute("VACUUM ANALYZE")
    finally:
        raw.close()


def writer_latencies(store_url: str, stop: threading.Event, out: list[float], errors: list) -> None:
    live = Cluster("live-writer", t0=time.time())
    try:
        with open_store(store_url) as w:
            w.ingest([live.cluster(started=time.time())])
            i = 0
            while not stop.is_set():
                i += 1
                batch = [live.sample(at=time.time(), n_workers=i % 7) for _ in range(10)]
                batch += [live.event("tick", {"i": i}) for _ in range(9)] + [
                    live.computation(f"live-{i}", groups=[group("a"), group("b")])
                ]
                t0 = time.perf_counter()
                w.ingest(batch)
                out.append(time.perf_counter() - t0)
    except BaseException as e:  # noqa: BLE001 - reported in the table
        errors.append(e)


def prune_run(store_url: str, args) -> dict:
    with open_store(store_url) as store:
        t0 = time.time() - 200 * DAY
        for k in range(args.clusters):
            store.ingest(
                cluster_msgs(
                    Cluster(f"old-{k:05d}", t0=t0 + k * 60),
                    args.computations,
                    args.groups,
                    args.tasks,
                )
            )
        with store.reading() as conn:
            rows = sum(
                conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                for t in (*s.DATA_TABLES, s.ingested)
                if t is not s.code_snippets
            )
        stop, lat, errors = threading.Event(), [], []
        writer = threading.Thread(target=writer_latencies, args=(store_url, stop, lat, errors))
        writer.start()
        time.sleep(args.baseline_seconds)  # the writer alone: its baseline
        n_base = len(lat)
        result = prune(store, 90 * DAY)
        n_during = len(lat) - n_base
        stop.set()
        writer.join()
        base, during = lat[:n_base], lat[n_base : n_base + n_during]
        deleted = sum(v for k, v in result.items() if k not in ("seconds", "code_snippets"))
        return {
            "rows": rows,
            "deleted": deleted,
            "clusters": result["clusters"],
            "seconds": result["seconds"],
            "base": base,
            "during": during,
            "errors": errors,
        }


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_backend(name: str, url: str, args) -> tuple[dict, dict]:
    print(f"{name}: {url.split('@')[-1]}", flush=True)
    with open_store(url) as store:
        g = growth(store, args)
    print("  growth: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in g.items()), flush=True)
    p = prune_run(url, args)
    print(
        f"  prune: {p['deleted']:,} rows of {p['clusters']} clusters in {p['seconds']:.1f} s",
        flush=True,
    )
    return g, p


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clusters", type=int, default=200, help="old clusters to prune (default 200)")
    ap.add_argument(
        "--computations", type=int, default=20, help="computations per old cluster (default 20)"
    )
    ap.add_argument("--groups", type=int, default=5, help="task groups per computation (default 5)")
    ap.add_argument(
        "--tasks", type=int, default=100, help="task-stream rows per computation (default 100)"
    )
    ap.add_argument(
        "--growth-computations", type=int, default=500, help="computations measured (default 500)"
    )
    ap.add_argument(
        "--baseline-seconds", type=float, default=3.0, help="the writer alone, before prune"
    )
    ap.add_argument(
        "--postgres", metavar="URL", help="scratch PostgreSQL database (default: start one here)"
    )
    ap.add_argument("--no-postgres", action="store_true")
    args = ap.parse_args()

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(("sqlite", *run_backend("sqlite", f"sqlite:///{tmp}/growth.db", args)))
    if not args.no_postgres:
        pg = None
        url = args.postgres
        if url is None:
            from tests.postgres_server import PostgresServer

            pg = PostgresServer().start()
            url = pg.url("postgres")
        try:
            results.append(("postgresql", *run_backend("postgresql", url, args)))
        finally:
            if pg is not None:
                pg.stop()

    print(
        f"\nstore growth ({args.groups} task groups, {args.tasks} task-stream rows, a snippet, "
        f"{min(args.groups, 3)} profiles and 4 metric rows per computation)"
    )
    print(
        f"{'backend':<11} {'per computation':>16} {'idle cluster-hour':>18} {'busy cluster-hour':>18}"
    )
    for name, g, _ in results:
        print(
            f"{name:<11} {format_bytes(g['per computation']):>16} {format_bytes(g['per idle cluster-hour']):>18} "
            f"{format_bytes(g['per busy cluster-hour']):>18}"
        )
    print(
        f"\nprune while a writer records ({args.clusters} clusters x {args.computations} computations); "
        "writer batch latency in ms: baseline (writer alone, same run) vs during prune"
    )
    print(
        f"{'backend':<11} {'rows':>9} {'rows/s':>9} {'clusters/s':>11} {'base p50':>9} {'p50':>7} "
        f"{'base p99':>9} {'p99':>7} {'base max':>9} {'max stall':>10} {'max/base max':>13} {'errors':>7}"
    )
    for name, _, p in results:
        rate = p["deleted"] / p["seconds"] if p["seconds"] else float("nan")
        bmax, dmax = max(p["base"] or [float("nan")]), max(p["during"] or [float("nan")])
        print(
            f"{name:<11} {p['deleted']:>9,} {rate:>9,.0f} {p['clusters'] / p['seconds']:>11.1f} "
            f"{1e3 * statistics.median(p['base']):>9.1f} {1e3 * statistics.median(p['during']):>7.1f} "
            f"{1e3 * pct(p['base'], 0.99):>9.1f} {1e3 * pct(p['during'], 0.99):>7.1f} {1e3 * bmax:>9.1f} "
            f"{1e3 * dmax:>10.1f} {dmax / bmax:>12.2f}x {len(p['errors']):>7}"
        )
        for e in p["errors"]:
            print(f"  writer error: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
