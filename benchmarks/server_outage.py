"""The scheduler's round trip while the team server is down: does the plugin ever make it
wait on the store?

    python benchmarks/server_outage.py [--outage 60] [--rounds 3]

A `dask-analytics server` process on a SQLite file in a temporary folder; a LocalCluster
records into it.  Round trips (one tiny task submitted and gathered) are timed, each
followed by a small array computation: --rounds with the server up, then for --outage
seconds after a SIGKILL of the server.  Prints the median round trip before and during
the outage and the slowest one during it.  Target: the median during under 3x the one
before (+0.1 s), none over 5 s.  tests/integration/test_server_faults.py checks that everything held
through the outage arrives; the times are this script's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dask.array as da  # noqa: E402

from tests.cluster_helpers import recorded_cluster  # noqa: E402
from tests.server_helpers import ServerProcess, free_port, make_tokens  # noqa: E402


def round_trip(client, i: int) -> float:
    t = time.perf_counter()
    assert client.submit(lambda x: x + 1, i, pure=False).result() == i + 1
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--rounds", type=int, default=3, help="round trips before the outage")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/analytics.db"
        token = make_tokens(url, 1)[0]
        config = {"analytics.token": token, "analytics.retry.max-delay": "300ms"}
        server = ServerProcess(url, free_port())
        try:
            server.start()
            with recorded_cluster(server.url, config=config) as (client, _):
                before = []
                for i in range(args.rounds):
                    before.append(round_trip(client, i))
                    da.ones((200, 200), chunks=50).sum().compute()
                server.kill()
                start, during, i = time.time(), [], args.rounds
                while time.time() - start < args.outage:
                    during.append(round_trip(client, i))
                    da.ones((200, 200), chunks=50).sum().compute()
                    i += 1
        finally:
            server.kill()
    b, d = statistics.median(before), statistics.median(during)
    print(f"scheduler round trip, {args.outage:.0f} s outage:")
    print(f"  median before   {b * 1000:8.1f} ms")
    print(f"  median during   {d * 1000:8.1f} ms   (target < {(3 * b + 0.1) * 1000:.0f} ms)")
    print(f"  slowest during  {max(during) * 1000:8.1f} ms   (target < 5000 ms)")


if __name__ == "__main__":
    main()
