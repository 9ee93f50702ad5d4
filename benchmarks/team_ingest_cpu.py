"""A team server's ingest of team_scale.py's messages, without HTTP: the CPU a replica's
body thread spends decoding and storing them (server/ingest.py's decode_messages, then
store.ingest) and the CPU PostgreSQL spends on them, per message.

The messages are those of N simulated clusters for S seconds
(benchmarks/_simulated_cluster.py: one batch per cluster per tick), sent as JSON
bodies, stored one batch at a time by one thread into a fresh database of a throwaway
PostgreSQL server started here.  The baseline, in the same run and on the same
batches (into a database of its own): every table's rows through SQLAlchemy's
executemany (store/bulk.py's documents switched off).  The first tenth of the batches
warm both up and is left out.

    python benchmarks/team_ingest_cpu.py                 # 200 clusters, 120 s of messages
    python benchmarks/team_ingest_cpu.py --clusters 50 --seconds 60
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._simulated_cluster import tick_batches  # noqa: E402
from benchmarks.team_scale import postmaster, tree_cpu  # noqa: E402
from dask_analytics_lab.server.ingest import decode_messages  # noqa: E402
from dask_analytics_lab.store import bulk, open_store  # noqa: E402


def bodies(clusters: int, seconds: int) -> list[bytes]:
    batches = tick_batches(0, clusters, seconds, seed=1, account="bench", user="ann")
    encoder = msgspec.json.Encoder()
    return [encoder.encode(b) for b in batches]


@contextmanager
def executemany():
    """The baseline: every table's rows through SQLAlchemy's executemany."""
    bulk._BUILT.clear()
    with mock.patch.object(bulk, "_recordset_insert", lambda *a: None):
        yield
    bulk._BUILT.clear()


def run(pg, url: str, raws: list[bytes]) -> tuple[float, float, int]:
    """(this thread's CPU, the server's CPU, messages) past the warm-up."""
    warm = len(raws) // 10
    with open_store(url) as store:
        for raw in raws[:warm]:
            store.ingest(decode_messages(raw))
        n = 0
        c0, p0 = time.thread_time(), tree_cpu(postmaster(pg))
        for raw in raws[warm:]:
            batch = decode_messages(raw)
            n += len(batch)
            store.ingest(batch)
        return time.thread_time() - c0, tree_cpu(postmaster(pg)) - p0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--seconds", type=int, default=120)
    a = ap.parse_args()
    from tests.postgres_server import PostgresServer

    raws = bodies(a.clusters, a.seconds)
    pg = PostgresServer().start()
    try:
        with executemany():
            base = run(pg, pg.url(pg.create_database("base")), raws)
        new = run(pg, pg.url(pg.create_database("bulk")), raws)
    finally:
        pg.stop()
    n = new[2]
    print(
        f"{a.clusters} simulated clusters, {a.seconds} s of messages: {n:,} messages in "
        f"{len(raws) - len(raws) // 10:,} batches, {sum(map(len, raws)) / len(raws) / 1024:.1f} KiB "
        "of JSON a batch; ms of CPU a message"
    )
    print(f"{'':<14} {'executemany':>11} {'documents':>9} {'ratio':>6}")
    for label, i in (("body thread", 0), ("PostgreSQL", 1), ("both", None)):
        b = base[i] if i is not None else base[0] + base[1]
        f = new[i] if i is not None else new[0] + new[1]
        print(f"{label:<14} {b / n * 1e3:>11.3f} {f / n * 1e3:>9.3f} {f / b:>6.2f}")


if __name__ == "__main__":
    main()
