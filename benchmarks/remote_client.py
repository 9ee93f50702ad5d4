"""The one HTTP client (dask_analytics_lab/remote.py) against one connection per request.

A `dask-analytics server` process on a SQLite store in a temporary folder; from one
thread, in turn:

  GET      N x GET /api/clusters?limit=10 (what list_clusters() sends)
  ingest   N x POST /api/ingest of a small gzip'd batch (what the scheduler plugin sends)

baseline: urllib, a new TCP connection per request (the two clients before remote.py);
remote:   HttpReader / HttpSink, on one kept-alive connection.

    python benchmarks/remote_client.py            # N = 500, plain http and https
    python benchmarks/remote_client.py -n 2000 --batch 20

On 127.0.0.1 a TCP connection costs ~0.1 ms and the server's own work dominates; a TLS
handshake costs more, and over a real network every new connection adds round trips.
"""

from __future__ import annotations

import argparse
import gzip
import json
import ssl
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dask_analytics_lab.http_reader import HttpReader  # noqa: E402
from dask_analytics_lab.remote import HttpSink  # noqa: E402
from tests.server_helpers import (  # noqa: E402
    Cluster,
    ServerProcess,
    free_port,
    make_tokens,
    self_signed,  # noqa: E402
)


def urllib_call(url: str, token: str, tls: ssl.SSLContext | None, body: list | None = None) -> dict:
    """One request as the old clients sent it: a fresh connection, closed after."""
    headers = {"Authorization": f"token {token}", "Accept": "application/json"}
    data = None
    if body is not None:
        data = gzip.compress(json.dumps(body).encode(), 5)
        headers.update({"Content-Type": "application/json", "Content-Encoding": "gzip"})
    request = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=30, context=tls) as r:
        return json.loads(r.read())


def per_request_ms(n: int, call: Callable[[int], object]) -> float:
    call(-1)  # warm: imports, the first connection
    t = time.perf_counter()
    for i in range(n):
        call(i)
    return (time.perf_counter() - t) / n * 1000


def measure(n: int, batch_size: int, tls: bool) -> list[tuple[str, float, float]]:
    folder = Path(tempfile.mkdtemp(prefix="dal-remote-bench-"))
    db = "sqlite:///" + str(folder / "analytics.db")
    token = make_tokens(db, 1)[0]
    extra, ca_file, context = [], None, None
    if tls:
        ca_file, keyfile = self_signed(folder)
        extra, context = (
            ["--certfile", ca_file, "--keyfile", keyfile],
            ssl.create_default_context(cafile=ca_file),
        )
    with ServerProcess(db, free_port(), extra) as server:
        url = server.url.replace("http://", "https://") if tls else server.url
        c = Cluster(account="load")
        sink, reader = (
            HttpSink(url, token=token, ca_file=ca_file),
            HttpReader(url, token=token, ca_file=ca_file),
        )
        sink.write([c.cluster(name="bench")])

        def batch() -> list[dict]:
            return [c.sample() for _ in range(batch_size)]

        def old_ingest(_: int) -> None:
            assert urllib_call(url + "/api/ingest", token, context, batch())["stored"] == batch_size

        def new_ingest(_: int) -> None:
            assert sink.write(batch()) == batch_size

        def old_get(_: int) -> None:
            assert urllib_call(url + "/api/clusters?limit=10", token, context)["clusters"]

        def new_get(_: int) -> None:
            assert reader.list_clusters(limit=10)

        scheme = "https" if tls else "http"
        rows = [
            (f"{scheme} GET /api/clusters", per_request_ms(n, old_get), per_request_ms(n, new_get)),
            (
                f"{scheme} POST /api/ingest ({batch_size} msgs)",
                per_request_ms(n, old_ingest),
                per_request_ms(n, new_ingest),
            ),
        ]
        sink.close()
        reader.close()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("-n", type=int, default=500, help="requests of each kind (default 500)")
    p.add_argument("--batch", type=int, default=5, help="messages per ingest batch (default 5)")
    args = p.parse_args()
    rows = measure(args.n, args.batch, tls=False) + measure(args.n, args.batch, tls=True)
    print(f"\n{args.n} requests of each kind, one thread, server on 127.0.0.1 (ms per request)\n")
    print(
        f"{'request':<30} {'new connection each (urllib)':>29} {'remote.py (kept alive)':>23} {'ratio':>7}"
    )
    for name, old, new in rows:
        print(f"{name:<30} {old:>29.2f} {new:>23.2f} {old / new:>6.2f}x")


if __name__ == "__main__":
    main()
