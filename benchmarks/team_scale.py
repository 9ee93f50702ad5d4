"""Issue 22, item 4: the team service at scale, through a real HAProxy.

N simulated clusters (default 1,000) each send what a real scheduler's recorder sends
at the default settings (benchmarks/_simulated_cluster.py: a snapshot a second while a
computation runs, worker samples every 5 s, a 614-task computation a minute with its
groups, task stream, metrics and profiles, heartbeats when quiet) for M minutes, through
HAProxy to 3 `dask-analytics server` replicas on one PostgreSQL, with real tokens (10
accounts, 50 users).  Each cluster ships as the plugin's shipper does: one batch in
flight, everything queued meanwhile in the next one (at most BATCH messages and
BATCH_BYTES by the shipper's estimate), retries with the shipper's backoff, through the
real HttpSink (its 10 s timeout included) on a kept-alive connection of its own.  A pool
of `--threads` threads sends for all of them, so the load generator is one process; it
also caps the requests in flight, so when the service falls behind, part of the queue
waits in the generator (counted in the message wait, not in the POST's latency), where
a real fleet would have one request in flight per cluster.  Meanwhile a team lead clicks through the team page (the clusters list, a
cluster's page, one of its computations' pages: the API calls js/team/app.ts makes for
each, 6 at a time as a browser does), a page a second.  Then the same with one replica.

Reported per configuration: messages stored exactly once (counted in the database: per
cluster by (cluster_id, seq) in `ingested`, and the rows of the sample, event and task
stream tables); ingest latency p50/p99 (a batch's POST, retries included, as the
shipper's thread sees it); how long a message waited from its tick to being stored
(the senders keeping up); the team page's load time p50/p99; the database's growth per
cluster-hour (by table); and the CPU of each part: the load generator, the replicas, PostgreSQL,
HAProxy, and the rest of the machine (other jobs on a shared machine).  Then one
replica against three: the scale-out figure.  The first WARMUP seconds (the clusters
starting, each replica's first requests) are left out of the latencies and the CPU.

    python benchmarks/team_scale.py                                  # 1,000 clusters, 10 min, 3 then 1
    python benchmarks/team_scale.py --clusters 50 --minutes 0.5      # a quick look
    python benchmarks/team_scale.py --replicas 3 --postgres postgresql://user@host/scratch

The goal: p99 ingest < 200 ms.  On one small machine the generator, the replicas,
HAProxy and PostgreSQL share its cores: the CPU table says who used them.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._simulated_cluster import SimCluster  # noqa: E402
from dask_analytics_lab import config  # noqa: E402
from dask_analytics_lab.collect.buffer import estimate  # noqa: E402
from dask_analytics_lab.collect.shipper import BATCH_BYTES  # noqa: E402
from dask_analytics_lab.collect.writer import BATCH, retry_delay  # noqa: E402
from dask_analytics_lab.messages import BEAT, MessageError  # noqa: E402
from dask_analytics_lab.remote import HttpSink, ServerClient  # noqa: E402
from tests.balancer import Replicas  # noqa: E402

ACCOUNTS, USERS = 10, 50
RAMP = 10.0  # seconds over which the clusters start (and stop): not all in one instant
# Seconds left out of the figures (not of the load): the clusters' starts, and each
# replica's first requests (imports, caches, connections), which only the first
# configuration of a run would pay otherwise.
WARMUP = 30.0
PAGE_EVERY = 1.0  # the reader's pause between two pages
BROWSER_CONNECTIONS = 6  # requests a browser runs at once to one origin (HTTP/1.1)


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


# --- the senders ----------------------------------------------------------------------
@dataclass(eq=False)
class Shipping:
    """One cluster's shipper: its queue, its sink (one kept-alive connection) and whether
    a batch is in flight; the lock is the generator's."""

    sim: SimCluster
    sink: HttpSink
    pending: deque = field(default_factory=deque)  # (time put, estimated bytes, message)
    busy: bool = False
    written_at: float = 0.0


class Generator:
    """Runs the simulated clusters' timelines on one thread and sends their batches from
    a small pool, each cluster's one at a time, as its shipper would."""

    def __init__(
        self,
        url: str,
        sims: list[SimCluster],
        tokens: list[str],
        threads: int,
        warm: threading.Event,
    ):
        s = config.resolve({})
        self.tick_every = s["interval"]
        self.min_delay, self.max_delay = s["retry_min_delay"], s["retry_max_delay"]
        self.ships = [Shipping(sim, HttpSink(url, token=tokens[sim.index % USERS])) for sim in sims]
        self.tokens = tokens
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="sender")
        self.lock = threading.Lock()
        self.events: list[tuple[float, int, int, str]] = []  # (due, order, cluster, what)
        self.order = itertools.count()
        self.warm = warm  # set once the start-up is over: only then are figures kept
        self.latencies: list[float] = []  # seconds per batch, retries included
        self.waits: list[float] = []  # seconds from a batch's oldest message to stored
        self.lags: list[float] = []  # seconds the timeline ran late (the generator's own)
        self.posts = self.retries = 0
        self.delivered = 0  # messages stored so far
        self.kept_up = 0.0  # messages stored a second while the clusters ran
        self.backlog = 0  # messages queued when the timeline ended
        self.drain = 0.0  # seconds from the last cluster's stop to everything stored
        self.errors: list[str] = []

    def _at(self, due: float, i: int, what: str) -> None:
        with self.lock:
            heapq.heappush(self.events, (due, next(self.order), i, what))

    def put(self, ship: Shipping, batch: list[dict]) -> None:
        if not batch:
            return
        now = time.time()
        with self.lock:
            ship.pending.extend((now, estimate(m["kind"], m["data"])[0], m) for m in batch)
            if ship.busy:
                return
            ship.busy = True
        self.pool.submit(self._ship, ship)

    @staticmethod
    def _head(pending: deque) -> list[tuple[float, int, dict]]:
        """The next batch, as the shipper takes it: at most BATCH messages and BATCH_BYTES
        of their estimated size (at least one)."""
        batch, total = [], 0
        for entry in itertools.islice(pending, BATCH):
            if batch and total + entry[1] > BATCH_BYTES:
                break
            batch.append(entry)
            total += entry[1]
        return batch

    def _ship(self, ship: Shipping) -> None:
        """The shipper's thread for one cluster, until its queue is empty."""
        try:
            while True:
                with self.lock:
                    batch = self._head(ship.pending)
                messages = [m for _, _, m in batch]
                t0 = time.perf_counter()
                for failures in itertools.count(1):
                    try:
                        ship.sink.write(messages)
                        break
                    except MessageError as e:  # a bug of the simulation: stop here
                        self.errors.append(f"{ship.sim.id}: {e}")
                        return
                    except Exception:
                        with self.lock:
                            self.retries += 1
                        time.sleep(retry_delay(failures, self.min_delay, self.max_delay))
                now = time.time()
                if self.warm.is_set():
                    self.latencies.append(time.perf_counter() - t0)
                    self.waits.append(now - batch[0][0])
                with self.lock:
                    self.posts += 1
                    self.delivered += len(batch)
                    for _ in batch:
                        ship.pending.popleft()
                    ship.written_at = now
                    if not ship.pending:
                        ship.busy = False
                        break
            self._at(now + BEAT, ship.sim.index, "quiet")
        except BaseException as e:
            self.errors.append(f"{ship.sim.id}: {type(e).__name__}: {e}")
            raise

    def run(self, seconds: float, warmup: float, on_warm: Callable[[], None]) -> float:
        """The clusters' lives for `seconds`, then their ends; returns the wall time.
        After `warmup` seconds, on_warm() and the figures start."""
        start = time.time()
        n = len(self.ships)
        for i in range(n):
            self._at(start + RAMP * i / n, i, "start")
        end, warm_at = start + seconds, start + warmup
        while True:
            with self.lock:
                due, _, i, what = self.events[0]
                if due >= end:
                    break
                heapq.heappop(self.events)
            now = time.time()
            if due > now:
                time.sleep(due - now)
                now = time.time()
            if now >= warm_at and not self.warm.is_set():
                on_warm()
                self.warm.set()
            if self.warm.is_set():
                self.lags.append(now - due)
            self._step(self.ships[i], what, now)
        with self.lock:
            self.backlog = sum(len(s.pending) for s in self.ships)
            self.kept_up = self.delivered / (time.time() - start)
        for k, ship in enumerate(self.ships):  # each cluster closes, spread over RAMP
            time.sleep(max(0.0, end + RAMP * k / n - time.time()))
            self.put(ship, ship.sim.stop(time.time()))
        stopped = time.time()
        self.flush()
        self.drain = time.time() - stopped
        return time.time() - start

    def _step(self, ship: Shipping, what: str, now: float) -> None:
        sim = ship.sim
        if what == "start":
            u = sim.index % USERS
            self.put(ship, sim.start(now, account=f"team-{u % ACCOUNTS}", user=f"user-{u}"))
            self._at(now + self.tick_every, sim.index, "tick")
        elif what == "tick":
            self.put(ship, sim.tick(now))
            if sim.profiles_due is not None:
                self._at(sim.profiles_due, sim.index, "profiles")
            self._at(now + self.tick_every, sim.index, "tick")
        elif what == "profiles":
            self.put(ship, sim.profiles(now))
        elif what == "quiet":  # the shipper's heartbeat, when nothing was written meanwhile
            with self.lock:
                quiet = not ship.busy and now - ship.written_at >= BEAT - 0.01
            if quiet:
                self.put(ship, [sim.heartbeat(now)])

    def flush(self, timeout: float = 1800) -> None:
        deadline = time.time() + timeout
        while any(s.busy for s in self.ships):
            if time.time() > deadline:
                left = sum(len(s.pending) for s in self.ships)
                raise SystemExit(
                    f"{left:,} messages still not stored {timeout:.0f} s after the end"
                )
            time.sleep(0.1)
        self.pool.shutdown()
        for s in self.ships:
            s.sink.close()


# --- the team page ----------------------------------------------------------------------
class Reader:
    """A team lead on the team page: the clusters list, a cluster, one of its
    computations, each page's API calls at once (as js/team/app.ts makes them)."""

    def __init__(self, url: str, token: str, warm: threading.Event):
        self.warm = warm
        self.client = ServerClient(url, token=token, timeout=120)
        self.pool = ThreadPoolExecutor(BROWSER_CONNECTIONS, thread_name_prefix="page")
        self.times: dict[str, list[float]] = {"clusters": [], "cluster": [], "computation": []}
        self.failures = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.rng = random.Random(0)

    def _page(self, name: str, calls: list[tuple[str, dict]]) -> list:
        t0 = time.perf_counter()
        answers = list(self.pool.map(lambda c: self.client.get(c[0], **c[1]), calls))
        if self.warm.is_set():
            self.times[name].append(time.perf_counter() - t0)
        return answers

    def _visit(self) -> None:
        clusters, _ = self._page(
            "clusters", [("/api/clusters", {"limit": 100}), ("/api/exceptions", {"limit": 2000})]
        )
        if not clusters["clusters"]:
            return
        cid = self.rng.choice(clusters["clusters"][:20])["cluster_id"]
        answers = self._page(
            "cluster",
            [
                (f"/api/clusters/{cid}", {}),
                (f"/api/clusters/{cid}/samples", {"limit": 5000}),
                (f"/api/clusters/{cid}/computations", {"limit": 500}),
                ("/api/exceptions", {"cluster_id": cid, "limit": 500}),
                ("/api/events", {"cluster_id": cid, "limit": 200}),
                (f"/api/clusters/{cid}/workers", {"limit": 100000}),
                ("/api/events", {"cluster_id": cid, "topic": "worker-joined", "limit": 5000}),
                ("/api/events", {"cluster_id": cid, "topic": "worker-left", "limit": 5000}),
            ],
        )
        computations = answers[2]["computations"]
        if not computations or self.stopping.wait(PAGE_EVERY):
            return
        comp = self.rng.choice(computations)["computation_id"]
        self._page(
            "computation",
            [
                (f"/api/computations/{comp}", {}),
                ("/api/exceptions", {"computation_id": comp, "limit": 500}),
                (f"/api/computations/{comp}/profile", {}),
                (f"/api/computations/{comp}/summary", {}),
                (f"/api/computations/{comp}/tasks", {"limit": 50000}),
                (f"/api/computations/{comp}/findings", {}),
            ],
        )

    def _run(self) -> None:
        while not self.stopping.wait(PAGE_EVERY):
            try:
                self._visit()
            except Exception:
                self.failures += 1

    def start(self) -> Reader:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(180)
        self.pool.shutdown()
        self.client.close()


# --- CPU, by part ---------------------------------------------------------------------
def own_cpu(proc: psutil.Process) -> float:
    """CPU seconds of the process alone (the generator: its children are the replicas)."""
    t = proc.cpu_times()
    return t.user + t.system


def tree_cpu(proc: psutil.Process) -> float:
    """CPU seconds of a process, its reaped children and its live descendants (a
    PostgreSQL backend that ends is counted in its postmaster's children times)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


class CpuMeter:
    """Cores each part kept busy between start() and stop(), and the whole machine's."""

    def __init__(self, parts: dict[str, list[psutil.Process]]):
        self.parts = parts

    def _read(self) -> dict[str, float]:
        got = {
            name: sum(own_cpu(p) if name == "generator" else tree_cpu(p) for p in procs)
            for name, procs in self.parts.items()
        }
        m = psutil.cpu_times()
        got["machine"] = m.user + m.nice + m.system + m.irq + m.softirq + getattr(m, "steal", 0)
        return got

    def start(self) -> None:
        self.t0, self.before = time.time(), self._read()

    def stop(self) -> dict[str, float]:
        after, wall = self._read(), time.time() - self.t0
        cores = {k: (after[k] - self.before[k]) / wall for k in after}
        cores["others"] = max(0.0, cores["machine"] - sum(cores[k] for k in self.parts))
        return cores


def postmaster(pg) -> psutil.Process:
    return psutil.Process(int((pg.data / "postmaster.pid").read_text().split()[0]))


# --- one configuration --------------------------------------------------------------------
def run(
    db: str, pg, workdir: Path, n_replicas: int, clusters: int, seconds: float, threads: int
) -> dict:
    with Replicas(db, workdir, n=n_replicas) as r:
        tokens = [r.token(f"team-{u % ACCOUNTS}", user=f"user-{u}") for u in range(USERS)]
        lead = r.token("team-0", user="lead")
        rng = random.Random(n_replicas)
        sims = [SimCluster(i, start=time.time(), rng=rng) for i in range(clusters)]
        warm = threading.Event()
        gen = Generator(r.url, sims, tokens, threads, warm)
        parts = {
            "generator": [psutil.Process()],
            "replicas": [psutil.Process(s.proc.pid) for s in r.servers.values()],
            "haproxy": [psutil.Process(r.balancer.proc.pid)],
        }
        if pg is not None:
            parts["postgres"] = [postmaster(pg)]
        meter = CpuMeter(parts)
        size0 = database_size(db)
        reader = Reader(r.url, lead, warm).start()
        wall = gen.run(seconds, min(WARMUP, seconds / 3), meter.start)
        reader.stop()
        cores = meter.stop()
        size1 = database_size(db)
    if gen.errors:
        raise SystemExit(f"{len(gen.errors)} senders failed, e.g. {gen.errors[:3]}")
    check_stored_once(db, sims)
    sent = sum(s.stored + s.heartbeats for s in sims)
    minutes = clusters * seconds / 60  # each cluster lives `seconds` (start and stop ramps alike)
    pages = [t for times in reader.times.values() for t in times]
    return {
        "replicas": n_replicas,
        "clusters": clusters,
        "seconds": wall,
        "messages": sent,
        "msg_s": sent / wall,
        "live_msg_s": gen.kept_up,
        "posts_s": gen.posts / wall,
        "posts_per_cluster_minute": gen.posts / minutes,
        "messages_per_cluster_minute": sent / minutes,
        "p50": pct(gen.latencies, 50),
        "p99": pct(gen.latencies, 99),
        "wait_p99": pct(gen.waits, 99),
        "lag_p99": pct(gen.lags, 99),
        "pages": len(pages),
        "page_p50": pct(pages, 50),
        "page_p99": pct(pages, 99),
        "page_failures": reader.failures,
        "by_page": {k: (len(v), pct(v, 50), pct(v, 99)) for k, v in reader.times.items()},
        "retries": gen.retries,
        "backlog": gen.backlog,
        "drain": gen.drain,
        "bytes_per_cluster_hour": {
            t: (size1[t] - size0.get(t, 0)) / (clusters * seconds / 3600) for t in size1
        },
        "cores": cores,
    }


def query(db: str, sql: str) -> list[tuple]:
    import sqlalchemy as sa

    from dask_analytics_lab.store.engine import make_engine

    engine = make_engine(db)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def database_size(db: str) -> dict[str, int]:
    """Bytes of the whole database ("all") and of each table with its indexes, a
    partitioned table's partitions (store/partitions.py) summed into it."""
    sizes = dict(
        query(
            db,
            "SELECT COALESCE(pg_partition_root(relid)::text, relname::text), "
            "sum(pg_total_relation_size(relid))::bigint FROM pg_stat_user_tables GROUP BY 1",
        )
    )
    sizes["all"] = query(db, "SELECT pg_database_size(current_database())")[0][0]
    return sizes


def check_stored_once(db: str, sims: list[SimCluster]) -> None:
    """Each cluster's seqs 1..n once in `ingested`, and the row tables hold exactly the
    rows sent: nothing lost, nothing doubled by a retried batch."""
    got = {
        cid: rest
        for cid, *rest in query(
            db,
            "SELECT cluster_id, count(*), count(DISTINCT seq), min(seq), max(seq) "
            "FROM ingested GROUP BY cluster_id",
        )
    }
    wrong = [
        (s.id, s.stored, got.get(s.id))
        for s in sims
        if got.get(s.id) != [s.stored, s.stored, 1, s.stored]
    ]
    if wrong:
        raise SystemExit(
            f"{len(wrong)} clusters' messages not stored exactly once, e.g. {wrong[:3]}"
        )
    ids = ", ".join(f"'{s.id}'" for s in sims)
    for table in ("cluster_samples", "worker_samples", "events", "task_stream"):
        ((n,),) = query(db, f"SELECT count(*) FROM {table} WHERE cluster_id IN ({ids})")
        sent = sum(s.rows[table] for s in sims)
        if n != sent:
            raise SystemExit(f"{table}: {n} rows stored, {sent} sent")


# --- the report -------------------------------------------------------------------------
def show(results: list[dict], args: argparse.Namespace) -> None:
    base = results[0]
    print(
        f"\n{args.clusters:,} simulated clusters for {args.minutes:g} min each configuration; "
        f"{base['posts_per_cluster_minute']:.1f} POSTs and {base['messages_per_cluster_minute']:.1f} "
        "messages a cluster-minute (a real recorded cluster: 24 and 45); "
        f"{psutil.cpu_count()} cores, nice {os.nice(0)}, load average at the end "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        f"\n{'replicas':>8} {'messages':>9} {'msg/s':>6} {'live':>6} {'POST/s':>6} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'wait p99':>8} {'lag p99':>7} {'pages':>5} {'page p50':>8} {'page p99':>8} "
        f"{'retries':>7} {'backlog':>7} {'drain':>6} {'MiB/cl-h':>8}  stored once"
    )
    for r in results:
        print(
            f"{r['replicas']:>8} {r['messages']:>9,} {r['msg_s']:>6,.0f} {r['live_msg_s']:>6,.0f} {r['posts_s']:>6,.0f} "
            f"{r['p50'] * 1e3:>7.1f} {r['p99'] * 1e3:>7.1f} {r['wait_p99']:>7.2f}s {r['lag_p99']:>6.2f}s {r['pages']:>5} "
            f"{r['page_p50'] * 1e3:>6.0f}ms {r['page_p99'] * 1e3:>6.0f}ms {r['retries']:>7} "
            f"{r['backlog']:>7,} {r['drain']:>5.1f}s "
            f"{r['bytes_per_cluster_hour']['all'] / 2**20:>8.2f}  yes"
        )
    print(
        "msg/s: messages sent over the whole run, drain included; live: stored a second while "
        "the clusters ran;\nwait: from a message's tick to stored; lag: how late the generator's "
        "own timeline ran;\nbacklog: queued in the senders when the clusters' time was up; "
        "drain: from the last stop to all stored"
    )
    print("\nteam page load, ms (p50 / p99, loads):")
    for r in results:
        print(
            f"  {r['replicas']} replica(s): "
            + ", ".join(
                f"{k} {p50 * 1e3:.0f} / {p99 * 1e3:.0f} ({n})"
                for k, (n, p50, p99) in r["by_page"].items()
            )
            + (f"; {r['page_failures']} failed" if r["page_failures"] else "")
        )
    names = ["generator", "replicas", "postgres", "haproxy", "others", "machine"]
    print("\nCPU, cores busy on average (others: the rest of the machine, e.g. other jobs)")
    print(f"{'replicas':>8} " + " ".join(f"{n:>9}" for n in names))
    for r in results:
        print(
            f"{r['replicas']:>8} "
            + " ".join(
                f"{r['cores'][n]:>9.2f}" if n in r["cores"] else f"{'n/a':>9}" for n in names
            )
        )
    print("\nreplicas' CPU per stored message, ms (all replicas, team page reads included)")
    for r in results:
        print(f"  {r['replicas']} replica(s): {r['cores']['replicas'] / r['msg_s'] * 1e3:.2f}")
    growth = base["bytes_per_cluster_hour"]
    tables = sorted((t for t in growth if t != "all"), key=growth.get, reverse=True)[:6]
    print(
        "\ndatabase growth per cluster-hour, MiB, by table with its indexes (first configuration)"
    )
    print("  " + ", ".join(f"{t} {growth[t] / 2**20:.2f}" for t in tables))
    if len(results) > 1:
        print("\nscale-out, against the first configuration (the offered load is the same):")
        for r in results[1:]:
            print(
                f"  {r['replicas']} replica(s) against {base['replicas']}: p50 ingest "
                f"{r['p50'] / base['p50']:.2f}x, p99 {r['p99'] / base['p99']:.2f}x, "
                f"message wait p99 {r['wait_p99'] / base['wait_p99']:.2f}x, "
                f"page p99 {r['page_p99'] / base['page_p99']:.2f}x, "
                f"throughput {r['msg_s'] / base['msg_s']:.2f}x"
            )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument(
        "--replicas",
        default="3,1",
        help="replica counts to run in turn, comma-separated; the first is the baseline",
    )
    p.add_argument("--threads", type=int, default=128, help="sender threads for all clusters")
    p.add_argument(
        "--postgres",
        metavar="URL",
        help="a PostgreSQL database to write into (default: start a server here and make "
        "a fresh database per configuration); its CPU is then not measured",
    )
    args = p.parse_args()
    counts = [int(n) for n in args.replicas.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        from tests.postgres_server import PostgresServer

        pg = None if args.postgres else PostgresServer().start()
        try:
            for n in counts:
                db = pg.url(pg.create_database("scale")) if pg else args.postgres
                print(
                    f"{n} replica(s), {args.clusters} clusters, {args.minutes:g} min ...",
                    flush=True,
                )
                results.append(
                    run(
                        db,
                        pg,
                        Path(tmp) / f"r{n}",
                        n,
                        args.clusters,
                        args.minutes * 60,
                        args.threads,
                    )
                )
                if n != counts[-1]:  # what is measured so far, should the run not finish
                    show(results, args)
                    print("\n", flush=True)
        finally:
            if pg:
                pg.stop()
    show(results, args)


if __name__ == "__main__":
    main()
