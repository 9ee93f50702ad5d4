"""The analytics server under load: messages/s ingested over HTTP, and the latency of
list_computations(limit=100) over HTTP with --rows stored task-group rows.

For SQLite and PostgreSQL (a throwaway server started here from Debian's postgresql
package, or --postgres URL of a scratch database), in one run:

  ingest   --senders threads post gzip'd batches (as the scheduler plugin does) to a
           `dask-analytics server` process for --seconds, at two batch sizes;
           baseline: the same batches written straight into the store (store.ingest,
           one thread), so the table shows what HTTP, auth and checks add.
  query    GET /api/computations?limit=100 (one kept-alive connection, token auth),
           with --rows task groups in the store; baseline: store.list_computations
           in-process on the same store.

    python benchmarks/server_ingest.py                   # 1M rows, 10 s per ingest run
    python benchmarks/server_ingest.py --rows 100000 --seconds 5
    python benchmarks/server_ingest.py --postgres postgresql://user@host/scratch

The issue's load test (20 clusters for a minute, every message stored once) is
benchmarks/server_load.py.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from dask_analytics_lab.remote import HttpSink  # noqa: E402
from dask_analytics_lab.server.tokens import new_token, token_hash  # noqa: E402
from dask_analytics_lab.store import open_store  # noqa: E402
from dask_analytics_lab.store.team import TeamStore  # noqa: E402
from tests.server_helpers import Cluster, ServerProcess, free_port, group  # noqa: E402

LIMIT = 100


def batches(seed: int, size: int):
    """Endless batches of one simulated cluster: samples, computations, events."""
    c = Cluster(account="bench")
    first = True
    for n in itertools.count():
        batch = [c.cluster(name=f"bench-{seed}")] if first else []
        first = False
        while len(batch) < size:
            k = len(batch) % 4
            if k == 0:
                batch.append(c.sample())
            elif k == 1:
                comp = f"{c.id}-{n}-{len(batch)}"
                batch.append(c.computation(comp, groups=[group(f"g{j}-{comp}") for j in range(5)]))
            else:
                batch.append(c.event(topic="bench", msg={"n": n}))
        yield batch


def token_for(url: str) -> str:
    store = open_store(url)
    token_id, token = new_token()
    TeamStore(store).add_token(
        token_id=token_id, token_hash=token_hash(token), account="bench", user="bench"
    )
    store.close()
    return token


def direct_ingest(url: str, size: int, seconds: float) -> float:
    """Baseline: messages/s through store.ingest in this process, one thread."""
    store = open_store(url)
    gen, n, t = batches(10_000 + size, size), 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        n += store.ingest(next(gen))
    rate = n / (time.perf_counter() - t)
    store.close()
    return rate


def http_ingest(server_url: str, token: str, size: int, seconds: float, senders: int) -> float:
    """Messages/s acknowledged as stored by the server, from `senders` threads."""
    stored = [0] * senders
    until = time.perf_counter() + seconds

    def send(i: int) -> None:
        sink, gen = HttpSink(server_url, token=token, timeout=60), batches(i * 1000 + size, size)
        while time.perf_counter() < until:
            stored[i] += sink.write(next(gen))

    t = time.perf_counter()
    threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sum(stored) / (time.perf_counter() - t)


def timed(fn, repeat: int) -> tuple[float, float]:
    fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def query_latency(url: str, server_url: str, token: str, repeat: int) -> list[tuple]:
    store = open_store(url)
    direct = timed(lambda: store.list_computations(limit=LIMIT), repeat)
    expected = [c["computation_id"] for c in store.list_computations(limit=LIMIT)]
    store.close()
    host, port = server_url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"Authorization": f"token {token}", "Accept-Encoding": "gzip"}

    def get() -> bytes:
        conn.request("GET", f"/api/computations?limit={LIMIT}", headers=headers)
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200, body[:200]
        return body

    import gzip

    answer = json.loads(gzip.decompress(get()))["computations"]
    assert [c["computation_id"] for c in answer] == expected, "the server and the store disagree"
    over_http = timed(get, repeat)
    conn.close()
    return [
        ("store.list_computations (baseline)", *direct),
        ("GET /api/computations?limit=100", *over_http),
    ]


def fill(url: str, rows: int) -> None:
    from store_queries import build  # the store benchmark's bulk loader

    store = open_store(url)
    n_comps, seconds = build(store._engine, rows, 50, 20)
    # The bulk loader writes account "default" clusters; the token reads that account.
    store.close()
    print(
        f"  filled {rows:,} task groups in {n_comps:,} computations in {seconds:.0f} s", flush=True
    )


def run_backend(name: str, url: str, args: argparse.Namespace) -> tuple[list, list]:
    print(f"{name}: {url.split('@')[-1]}", flush=True)
    ingest_rows, query_rows = [], []
    if not args.skip_ingest:
        token = token_for(url)
        for size in (20, 500):
            base = direct_ingest(url, size, args.seconds / 2)
            with ServerProcess(url, free_port()) as server:
                rate = http_ingest(server.url, token, size, args.seconds, args.senders)
            ingest_rows.append((name, size, base, rate))
            print(f"  batch {size}: store.ingest {base:,.0f}/s, HTTP {rate:,.0f}/s", flush=True)
    if not args.skip_query:
        fill(url, args.rows)
        store = open_store(url)
        token_id, token = new_token()
        TeamStore(store).add_token(
            token_id=token_id, token_hash=token_hash(token), account="default", user="bench"
        )
        store.close()
        with ServerProcess(url, free_port()) as server:
            for what, median, p95 in query_latency(url, server.url, token, args.repeat):
                query_rows.append((name, args.rows, what, median, p95))
    return ingest_rows, query_rows


@contextlib.contextmanager
def postgres(url: str | None):
    if url:
        yield url
        return
    from tests.postgres_server import PostgresServer

    with PostgresServer() as pg:
        yield pg.url(pg.create_database("bench"))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--rows",
        type=int,
        default=1_000_000,
        help="task-group rows for the query (default 1,000,000)",
    )
    p.add_argument(
        "--seconds", type=float, default=10, help="length of each HTTP ingest run (default 10)"
    )
    p.add_argument(
        "--senders", type=int, default=20, help="concurrent posting clusters (default 20)"
    )
    p.add_argument("--repeat", type=int, default=50, help="timed queries (median and p95 shown)")
    p.add_argument(
        "--postgres", metavar="URL", help="scratch PostgreSQL database (default: start one here)"
    )
    p.add_argument("--skip-ingest", action="store_true")
    p.add_argument("--skip-query", action="store_true")
    args = p.parse_args()

    ingest, query = [], []
    with tempfile.TemporaryDirectory() as tmp:
        i, q = run_backend("sqlite", "sqlite:///" + str(Path(tmp) / "bench.db"), args)
        ingest += i
        query += q
        # A fresh database for the query part, so ingest's rows do not count.
        with postgres(args.postgres) as url:
            i, q = run_backend("postgresql", url, args)
            ingest += i
            query += q

    if ingest:
        print(
            f"\ningest, messages/s ({args.senders} senders over HTTP for {args.seconds:.0f} s; "
            "baseline: store.ingest in-process, one thread)"
        )
        print(f"{'backend':<11} {'batch':>6} {'baseline':>10} {'HTTP':>10} {'HTTP/baseline':>14}")
        for name, size, base, rate in ingest:
            print(f"{name:<11} {size:>6} {base:>10,.0f} {rate:>10,.0f} {rate / base:>13.2f}x")
    if query:
        print(f"\nlist_computations(limit={LIMIT}) latency, ms (median, p95 of {args.repeat})")
        print(f"{'backend':<11} {'task groups':>12}  {'how':<36} {'median':>8} {'p95':>8}")
        for name, rows, what, median, p95 in query:
            print(f"{name:<11} {rows:>12,}  {what:<36} {median:>8.2f} {p95:>8.2f}")


if __name__ == "__main__":
    main()
