"""Is a read of another account's code hash a timing oracle?  (Issue 20, item 2.)

    python benchmarks/code_read_timing.py [--reads 200] [--postgres URL]

A team server (in this process) on a SQLite file in a temporary folder, or on --postgres
URL (a scratch database).  Account A stores a snippet; account B stores two computations
that list a code hash: A's (the probe) and one nobody sent (the control).  B reads both,
interleaved, --reads times each.  Prints the median of each and their difference.
Target: the difference under half the larger median (or 10 ms).
tests/integration/test_code_privacy.py checks that both reads answer the same; the times are this
script's.
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

from tests.server_helpers import Cluster, ServerThread, request  # noqa: E402


def measure(store_url: str, reads: int) -> tuple[float, float]:
    with ServerThread({"store_url": store_url}) as server:
        token_a, token_b = server.token("A"), server.token("B", "mallory")
        a, b = Cluster(account="A"), Cluster(account="B")
        code = a.code(text="password = 'hunter2'\nx.sum().compute()\n")
        target = code["data"]["hash"]
        for token, batch in (
            (token_a, [a.cluster(), code, a.computation("comp-a", code=[target])]),
            (token_b, [b.cluster()]),
            (token_b, [b.computation("probe", code=[target])]),
            (token_b, [b.computation("control", code=["0" * 32])]),
        ):
            assert (
                request(server.url + "/api/ingest", method="POST", token=token, body=batch)[0]
                == 200
            )
        times: dict[str, list[float]] = {"probe": [], "control": []}
        for _ in range(reads):
            for cid, out in times.items():
                t0 = time.perf_counter()
                status = request(server.url + f"/api/computations/{cid}", token=token_b)[0]
                out.append(time.perf_counter() - t0)
                assert status == 200
    return statistics.median(times["probe"]), statistics.median(times["control"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--postgres", help="a scratch PostgreSQL database's URL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.postgres or f"sqlite:///{tmp}/analytics.db"
        probe, control = measure(url, args.reads)
    print(f"B's read of a computation listing a code hash, median of {args.reads}:")
    print(f"  A's hash (probe)      {probe * 1000:8.2f} ms")
    print(f"  nobody's (control)    {control * 1000:8.2f} ms")
    limit = max(0.5 * max(probe, control), 0.01)
    print(
        f"  difference            {abs(probe - control) * 1000:8.2f} ms   (target < {limit * 1000:.1f} ms)"
    )


if __name__ == "__main__":
    main()
