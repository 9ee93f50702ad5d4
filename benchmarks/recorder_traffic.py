"""What one real recorder sends a team server, against team_scale.py's simulated cluster.

A LocalCluster (4 workers x 2 threads, in this process) records at the default settings
into a real `dask-analytics server` (SQLite) while it runs a 614-task dask.array
computation a minute; every batch its HttpSink posts is counted.  The simulated cluster
(benchmarks/_simulated_cluster.py) is then run through the same span of time on a
virtual clock, with the shipper's rules (a batch per burst of messages, a heartbeat
after BEAT quiet seconds).  Both per cluster-minute: POSTs, messages by kind, and
bytes of JSON (raw and gzip'd as HttpSink sends it).

    python benchmarks/recorder_traffic.py              # 3 minutes
    python benchmarks/recorder_traffic.py --minutes 1
"""

from __future__ import annotations

import argparse
import collections
import gzip
import random
import sys
import tempfile
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._simulated_cluster import SimCluster  # noqa: E402
from dask_analytics_lab import remote  # noqa: E402
from dask_analytics_lab.messages import BEAT, check_batch  # noqa: E402
from dask_analytics_lab.remote import GZIP_LEVEL  # noqa: E402

Posts = list[list[dict]]


def _wire(batch: list) -> list[dict]:
    return [m if isinstance(m, dict) else msgspec.to_builtins(m) for m in batch]


def slow(x):
    time.sleep(0.05)
    return x + 1


def record_real(seconds: float) -> Posts:
    import dask.array as da
    from distributed import Client, LocalCluster

    import dask_analytics_lab as dal
    from tests.server_helpers import ServerThread

    posts: Posts = []
    write = remote.HttpSink.write

    def counting(self, messages):
        posts.append(_wire(messages))
        return write(self, messages)

    remote.HttpSink.write = counting
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            ServerThread({"store_url": f"sqlite:///{tmp}/traffic.db"}) as server,
            LocalCluster(
                n_workers=4, threads_per_worker=2, processes=False, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            dal.register(
                client, store=server.url, config_overrides={"analytics.token": server.token("A")}
            )
            t0 = time.time()
            while time.time() - t0 < seconds:
                x = da.ones((4000, 4000), chunks=250)
                y = x.map_blocks(slow, dtype=float)
                (y + y.T).mean(axis=0).sum().compute()
                time.sleep(max(0.0, 60 - (time.time() - t0) % 60))
            dal.flush(client)
    finally:
        remote.HttpSink.write = write
    return posts


def simulate(seconds: float) -> Posts:
    """The simulated cluster on a virtual clock: each tick's messages in one POST."""
    sim = SimCluster(0, start=1.8e9, rng=random.Random(0))
    sim.next_computation = sim.t0 + 1  # as the recording: a computation first
    t = sim.t0
    posts = [sim.start(t, account="A", user="ann")]
    written = t
    while t < sim.t0 + seconds:
        t += 1.0
        batch = sim.tick(t)
        if not batch and t - written >= BEAT:
            batch = [sim.heartbeat(written + BEAT)]
        if batch:
            posts.append(batch)
            written = t
        if sim.profiles_due is not None:
            written = sim.profiles_due
            posts.append(sim.profiles(written))
    posts.append(sim.stop(t))
    for batch in posts:
        check_batch(batch)  # what the server would refuse, refused here
    return posts


def figures(posts: Posts, minutes: float) -> dict:
    kinds = collections.Counter(m["kind"] for batch in posts for m in batch)
    raw = [msgspec.json.encode(batch) for batch in posts]
    return {
        "POSTs": len(posts) / minutes,
        "messages": sum(kinds.values()) / minutes,
        "kB JSON": sum(len(b) for b in raw) / minutes / 1e3,
        "kB gzip": sum(len(gzip.compress(b, GZIP_LEVEL)) for b in raw) / minutes / 1e3,
        **{k: n / minutes for k, n in sorted(kinds.items())},
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--minutes", type=float, default=3)
    args = p.parse_args()
    seconds = args.minutes * 60
    real = figures(record_real(seconds), args.minutes)
    model = figures(simulate(seconds), args.minutes)
    print(f"\nper cluster-minute, {args.minutes:g} minutes each")
    print(f"{'':<16} {'real':>8} {'simulated':>10} {'ratio':>6}")
    for key in dict.fromkeys([*real, *model]):
        a, b = real.get(key, 0.0), model.get(key, 0.0)
        print(f"{key:<16} {a:>8.1f} {b:>10.1f} {b / a if a else float('nan'):>6.2f}")


if __name__ == "__main__":
    main()
