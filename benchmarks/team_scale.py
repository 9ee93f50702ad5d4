"""Issue 22, item 4: the team service at scale, through a real HAProxy.

N simulated clusters (default 1,000) each send what a real scheduler sends at the
default intervals (analytics.yaml: a snapshot batch every second while busy, a
heartbeat every 2 s while idle, worker samples every 5 s, a computation with its
groups, metrics and task stream every ~30 s) for M minutes, through HAProxy to 3
replicas on one PostgreSQL; meanwhile a reader loads the team page's lists.  Then the
same with one replica.  Reported per configuration: every message stored once (checked
in the database by (cluster, seq)), ingest latency p50/p99 (a batch's POST, retries
included), how late batches went out (the client keeping up), the team page's p99,
and the database's growth per cluster-hour; then single replica against three.

    python benchmarks/team_scale.py                               # 1,000 clusters, 10 minutes, 3 then 1
    python benchmarks/team_scale.py --clusters 50 --minutes 0.5   # a quick look
    python benchmarks/team_scale.py --postgres postgresql://user@host/scratch_db_prefix

The goal: p99 ingest < 200 ms.  This is a skeleton: on a 2-core machine the
simulator, the replicas, HAProxy and PostgreSQL share the cores, so only small runs
say anything here; the figures for the README come from a run on a bigger machine.
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dask_analytics_lab.messages import make  # noqa: E402
from dask_analytics_lab.remote import HttpSink  # noqa: E402
from tests.balancer import Replicas  # noqa: E402
from tests.server_helpers import Cluster, group  # noqa: E402

TICK = 1.0  # analytics.interval
HEARTBEAT = 2.0  # messages.HEARTBEAT
WORKERS_EVERY = 5.0  # analytics.workers.interval
COMPUTATION_EVERY = 30.0
BUSY = 0.5  # share of its time a cluster computes


class SimCluster:
    def __init__(self, index: int, token: str, seed: int):
        self.index, self.token = index, token
        self.maker = Cluster(account=f"team-{index % 10}", t0=time.time())
        self.sent = 0
        self.pending = [self.maker.cluster(user=f"user-{index % 50}")]
        self.next_workers = time.time() + seed % 5
        self.next_computation = time.time() + seed % 30
        self.computations = 0
        self.heartbeats = 0

    def due_batch(self, now: float) -> list[dict]:
        """What its plugin would post at `now`."""
        m = self.maker
        m.t = now
        batch, self.pending = self.pending, []
        busy = (now % 60) < 60 * BUSY  # clusters alternate between work and rest
        if busy:
            batch.append(m.sample())
        elif int(now) % int(HEARTBEAT) == 0:  # seq 0 and no claim, as the plugin sends it
            batch.append(make(m.id, 0, "heartbeat", now, {}))
            self.heartbeats += 1
        if now >= self.next_workers:
            batch.append(m.workers(4))
            self.next_workers = now + WORKERS_EVERY
        if busy and now >= self.next_computation:
            comp = f"{m.id}-c{self.computations}"
            self.computations += 1
            batch += [
                m.computation(
                    comp, groups=[group("read-parquet", n_tasks=100), group("sum", n_tasks=10)]
                ),
                m.metrics(comp),
                m.tasks(comp),
            ]
            self.next_computation = now + COMPUTATION_EVERY
        self.sent += sum(1 for msg in batch if msg["kind"] != "heartbeat")  # what `ingested` claims
        return batch


def pct(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100)[q - 1]
        if len(values) >= 2
        else (values[0] if values else float("nan"))
    )


def run(
    db: str, workdir: Path, n_replicas: int, clusters: int, seconds: float, threads: int
) -> dict:
    with Replicas(db, workdir, n=n_replicas) as r:
        tokens = [r.token(f"team-{i}", user=f"user-{i}") for i in range(10)]
        sims = [SimCluster(i, tokens[i % 10], i) for i in range(clusters)]
        latencies: list[float] = []
        lateness: list[float] = []
        failures = [0]
        local = threading.local()

        def post(sim: SimCluster, due: float) -> None:
            started = time.time()
            lateness.append(started - due)
            batch = sim.due_batch(started)
            sinks = local.__dict__.setdefault("sinks", {})
            sink = sinks.get(sim.token) or sinks.setdefault(
                sim.token, HttpSink(r.url, token=sim.token)
            )
            t0 = time.perf_counter()
            for attempt in range(100):  # as the shipper retries (backoff aside)
                try:
                    sink.write(batch)
                    break
                except Exception:
                    failures[0] += 1
                    time.sleep(min(1.0, 0.05 * 2**attempt))
            latencies.append(time.perf_counter() - t0)

        page: list[float] = []
        stop = threading.Event()

        def reader() -> None:  # someone keeps the team page open
            req = urllib.request.Request(
                r.url + "/api/clusters?limit=50", headers={"Authorization": f"token {tokens[0]}"}
            )
            while not stop.wait(1.0):
                t0 = time.perf_counter()
                with urllib.request.urlopen(req, timeout=60) as answer:
                    answer.read()
                page.append(time.perf_counter() - t0)

        size0 = database_size(db)
        start = time.time()
        due = [(start + (i % 100) / 100 * TICK, i) for i in range(clusters)]  # spread over a tick
        heapq.heapify(due)
        reading = threading.Thread(target=reader, daemon=True)
        reading.start()
        with ThreadPoolExecutor(threads) as pool:
            while due and due[0][0] < start + seconds:
                at, i = heapq.heappop(due)
                delay = at - time.time()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(post, sims[i], at)
                heapq.heappush(due, (at + TICK, i))
        stop.set()
        wall = time.time() - start
        for s in sims:  # the last messages of each (a cluster's stop)
            HttpSink(r.url, token=s.token).write([s.maker.stop()])
            s.sent += 1
        size1 = database_size(db)
    check_stored_once(db, sims)
    messages = sum(s.sent + s.heartbeats for s in sims)
    return {
        "replicas": n_replicas,
        "clusters": clusters,
        "seconds": wall,
        "messages": messages,
        "per_s": messages / wall,
        "p50": pct(latencies, 50),
        "p99": pct(latencies, 99),
        "late_p99": pct(lateness, 99),
        "page_p99": pct(page, 99),
        "retries": failures[0],
        "bytes_per_cluster_hour": (size1 - size0) / (clusters * wall / 3600),
    }


def database_size(db: str) -> int:
    from tests.test_replicas import rows

    return rows(db, "SELECT pg_database_size(current_database())")[0][0]


def check_stored_once(db: str, sims: list[SimCluster]) -> None:
    from tests.test_replicas import rows

    got = dict(rows(db, "SELECT cluster_id, count(*) FROM ingested GROUP BY cluster_id"))
    wrong = [
        (s.maker.id, s.sent, got.get(s.maker.id)) for s in sims if got.get(s.maker.id) != s.sent
    ]
    if wrong:
        raise SystemExit(
            f"{len(wrong)} clusters' messages not stored exactly once, e.g. {wrong[:3]}"
        )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--threads", type=int, default=64, help="client threads posting batches")
    p.add_argument(
        "--postgres",
        metavar="URL",
        help="a PostgreSQL server's URL whose user may create databases (default: start one here)",
    )
    args = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        from tests.postgres_server import PostgresServer

        pg = None if args.postgres else PostgresServer().start()
        try:
            for n in (3, 1):
                name = pg.create_database("scale") if pg else None
                db = pg.url(name) if pg else args.postgres
                print(
                    f"{n} replica(s), {args.clusters} clusters, {args.minutes} min ...", flush=True
                )
                results.append(
                    run(db, Path(tmp) / f"r{n}", n, args.clusters, args.minutes * 60, args.threads)
                )
        finally:
            if pg:
                pg.stop()
    print(
        f"\n{'replicas':>8} {'clusters':>8} {'messages':>9} {'msg/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'late p99':>8} {'page p99':>8} {'retries':>7} {'MB/cluster-h':>12}  stored once"
    )
    for r in results:
        print(
            f"{r['replicas']:>8} {r['clusters']:>8} {r['messages']:>9,} {r['per_s']:>7,.0f} {r['p50'] * 1e3:>7.1f} "
            f"{r['p99'] * 1e3:>7.1f} {r['late_p99'] * 1e3:>7.0f}ms {r['page_p99'] * 1e3:>6.0f}ms {r['retries']:>7} "
            f"{r['bytes_per_cluster_hour'] / 2**20:>12.2f}  yes"
        )
    three, one = results
    # The offered load is the same (the clusters' default intervals): what scales is how
    # long each batch waits, and whether the senders keep to their schedule.
    print(
        f"\nscale-out, one replica against three: p99 ingest {one['p99'] / three['p99']:.2f}x as long, "
        f"p99 lateness {one['late_p99'] / max(three['late_p99'], 1e-9):.2f}x"
    )


if __name__ == "__main__":
    main()
