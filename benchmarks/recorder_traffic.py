"""What one real recorder sends a team server, against team_scale.py's simulated cluster.

A LocalCluster (4 workers x 2 threads, in this process) records at the default settings
into a real `dask-analytics server` (SQLite) while it runs a 614-task dask.array
computation a minute; every batch its HttpSink posts is counted.  The simulated cluster
(benchmarks/_simulated_cluster.py) is then run through the same span of time on a
virtual clock, shipped by the writer thread's rules (benchmarks/_shipper_model.py: the
200 ms linger after a batch's first message, a computation's end at once, a heartbeat
with every write and one alone BEAT after the last write started).  Both per
cluster-minute: POSTs, messages by kind (heartbeats included), and bytes of JSON (raw
and gzip'd as HttpSink sends it).  team_scale.py runs both before its configurations.

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

from benchmarks._shipper_model import ShipperModel  # noqa: E402
from benchmarks._simulated_cluster import SimCluster  # noqa: E402
from dask_analytics_lab import config, remote  # noqa: E402
from dask_analytics_lab.messages import check_batch  # noqa: E402
from dask_analytics_lab.remote import GZIP_LEVEL  # noqa: E402

Posts = list[list[dict]]
INTERVAL = config.resolve({})["interval"]  # the plugin's tick


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


def simulate(seconds: float, *, linger: float | None = None, flush: bool = True) -> Posts:
    """The simulated cluster on a virtual clock, shipped by the writer thread's rules
    (benchmarks/_shipper_model.py: the linger after a batch's first message, a
    computation's end at once, a heartbeat with every write and alone BEAT after the
    last write started), each write taking no time.  flush: as record_real ends, a
    forced snapshot flushed (`dal.flush`) before the cluster stops."""
    if linger is None:
        linger = config.resolve({})["buffer_linger"]
    sim = SimCluster(0, start=1.8e9, rng=random.Random(0))
    sim.next_computation = sim.t0 + 1  # as the recording: a computation first
    ship = ShipperModel(linger)
    posts: Posts = []

    def writer(now: float) -> float | None:
        """The writer thread's turn at `now`: every write due, then its next wake-up."""
        while ship.ready(now):
            batch = ship.take()
            posts.append([m for _, _, m in batch] + [sim.heartbeat(now)])
            ship.done(len(batch), now)
        return ship.next_wakeup(now)

    t = sim.t0
    end = t + seconds
    ship.put(sim.start(t, account="A", user="ann"), t)
    wake = writer(t)
    tick = t + INTERVAL
    while True:
        t = min(x for x in (tick, sim.profiles_due, wake) if x is not None)
        if t >= end:
            break
        if t == tick:
            ship.put(sim.tick(t), t)
            tick += INTERVAL
        elif t == sim.profiles_due:
            ship.put(sim.profiles(t), t)
        wake = writer(t)
    if flush:
        ship.put(sim.snapshot(end), end, hurry=True)
        writer(end)
    ship.put(sim.stop(end), end, hurry=True)  # close() flushes
    ship.closed = True
    writer(end)
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
