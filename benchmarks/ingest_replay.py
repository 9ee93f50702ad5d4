"""Issue 41, item 1: a replica's CPU per ingest POST, and PostgreSQL's, against the
least a server could do (benchmarks/_minimal_ingest.py), side by side in one run.

The same POSTs go to both: what N simulated clusters' shippers send in S seconds
(benchmarks/_simulated_cluster.py; one batch per cluster per tick, what the shipper's
linger gathers), gzip'd and with a token as HttpSink sends them, over K kept-alive
connections.  Each round replays a fresh set of clusters (so every message is new to
both) to one side, then the other, alternating which goes first; a `dask-analytics
server` process and the minimal one each write into a database of their own on one
PostgreSQL started here with its durable defaults (fsync, synchronous_commit on).
The servers and PostgreSQL are pinned to --server-cores, this process to the others.
Measured per round: the server process's CPU and PostgreSQL's (postmaster, backends,
its background processes) over the POSTs and the work they leave for later (the
findings keeper explains a computation kept.SETTLE after it ends: each round waits that
out, then for both processes to go quiet), per POST.  Shown: the median of the rounds,
their range, and ours over the minimal (issue 41's goal: within 1.5x each).

    python benchmarks/ingest_replay.py                      # 100 clusters, 20 s, 5 rounds
    python benchmarks/ingest_replay.py --clusters 50 --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._simulated_cluster import tick_batches  # noqa: E402
from dask_analytics_lab.findings.kept import SETTLE  # noqa: E402
from dask_analytics_lab.remote import GZIP_LEVEL  # noqa: E402
from dask_analytics_lab.server.tokens import token_hash  # noqa: E402
from tests.server_helpers import ServerProcess, add_token, free_port  # noqa: E402

ACCOUNT = "bench"


def bodies(first: int, clusters: int, seconds: int) -> tuple[list[bytes], int]:
    """(gzip'd bodies, messages) of clusters first.. first+clusters for `seconds` ticks."""
    batches = tick_batches(first, clusters, seconds, seed=first, account=ACCOUNT, user="ann")
    encode = msgspec.json.Encoder().encode
    return [gzip.compress(encode(b), GZIP_LEVEL) for b in batches], sum(map(len, batches))


def replay(port: int, token: str, raws: list[bytes], connections: int) -> None:
    """POST every body once over `connections` kept-alive connections; every answer 200."""
    headers = {
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
        "Authorization": f"token {token}",
    }
    errors: list[str] = []

    def send(part: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            for raw in part:
                conn.request("POST", "/api/ingest", body=raw, headers=headers)
                r = conn.getresponse()
                answer = r.read()
                if r.status != 200:
                    errors.append(f"{r.status} {answer[:200]!r}")
                    return
        finally:
            conn.close()

    threads = [
        threading.Thread(target=send, args=(raws[i::connections],)) for i in range(connections)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"{len(errors)} POSTs failed, e.g. {errors[:2]}")


def cpu(proc: psutil.Process, tree: bool = False) -> float:
    total = 0.0
    for p in [proc, *(proc.children(recursive=True) if tree else [])]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + (t.children_user + t.children_system if tree else 0)
    return total


def pin(procs: list[psutil.Process], cores: list[int]) -> None:
    for p in procs:
        for q in [p, *p.children(recursive=True)]:
            try:
                q.cpu_affinity(cores)
            except psutil.Error:
                pass


def quiet(proc: psutil.Process, postmaster: psutil.Process) -> None:
    """Wait out the work the POSTs left behind: the findings keeper explains a computation
    kept.SETTLE after its end (and the last commits' WAL writes), then until neither
    process used CPU for a second (at most a minute more)."""
    time.sleep(SETTLE + 1.0)
    deadline = time.monotonic() + 60
    last = cpu(proc) + cpu(postmaster, tree=True)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = cpu(proc) + cpu(postmaster, tree=True)
        if now - last < 0.02:
            return
        last = now


class Side:
    def __init__(self, name: str, proc: subprocess.Popen, port: int, token: str):
        self.name, self.proc, self.port, self.token = name, proc, port, token
        self.ps = psutil.Process(proc.pid)
        self.server_ms: list[float] = []
        self.pg_ms: list[float] = []


def start_minimal(db: str, token: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "_minimal_ingest.py"),
            "--db",
            db,
            "--port",
            str(port),
            "--token-hash",
            token_hash(token),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if "minimal ingest at" not in line:
        raise SystemExit(f"the minimal server did not start: {line}")
    return proc, port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=4)
    n_cores = psutil.cpu_count()
    ap.add_argument(
        "--server-cores",
        default=",".join(map(str, range(n_cores // 2, n_cores))),
        help="cores of the servers and PostgreSQL (default: the upper half)",
    )
    a = ap.parse_args()
    server_cores = [int(c) for c in a.server_cores.split(",")]
    own_cores = [c for c in range(n_cores) if c not in server_cores] or server_cores
    from tests.postgres_server import PostgresServer

    sets = [bodies(i * a.clusters, a.clusters, a.seconds) for i in range(a.rounds + 1)]
    pg = PostgresServer(settings=[]).start()  # PostgreSQL's durable defaults
    postmaster = psutil.Process(int((pg.data / "postmaster.pid").read_text().split()[0]))
    ours_db, minimal_db = (pg.url(pg.create_database(n)) for n in ("ours", "minimal"))
    ours_token = add_token(ours_db, ACCOUNT)
    minimal_token = "minimal-" + os.urandom(16).hex()
    server = ServerProcess(ours_db, free_port()).start()
    mproc, mport = start_minimal(minimal_db, minimal_token)
    sides = [
        Side("dask-analytics server", server.proc, server.port, ours_token),
        Side("minimal handler", mproc, mport, minimal_token),
    ]
    try:
        pin([postmaster, *(s.ps for s in sides)], server_cores)
        psutil.Process().cpu_affinity(own_cores)
        warm, _ = sets[0]
        for s in sides:  # imports, caches, connections, the first plans
            replay(s.port, s.token, warm, a.connections)
        for r in range(a.rounds):
            raws, _ = sets[r + 1]
            order = sides if r % 2 == 0 else sides[::-1]
            for s in order:
                pin([postmaster], server_cores)  # backends started since
                c0, p0 = cpu(s.ps), cpu(postmaster, tree=True)
                replay(s.port, s.token, raws, a.connections)
                quiet(s.ps, postmaster)  # the work a POST leaves for later is its cost too
                c1, p1 = cpu(s.ps), cpu(postmaster, tree=True)
                s.server_ms.append((c1 - c0) / len(raws) * 1e3)
                s.pg_ms.append((p1 - p0) / len(raws) * 1e3)
    finally:
        server.kill()
        mproc.kill()
        pg.stop()
    posts = len(sets[1][0])
    msgs = statistics.mean(n for _, n in sets[1:])
    print(
        f"\n{a.clusters} simulated clusters x {a.seconds} s a round: {posts:,} POSTs, "
        f"{msgs / posts:.1f} messages and {statistics.mean(map(len, sets[1][0])) / 1024:.1f} KiB "
        f"gzip'd a POST; {a.rounds} rounds, {a.connections} connections; servers and "
        f"PostgreSQL (fsync on) on cores {server_cores}, the sender on {own_cores}"
    )
    print("CPU ms per POST: median of the rounds [lowest, highest]")
    print(f"{'':<24} {'server':>22} {'PostgreSQL':>22} {'both':>8}")
    for s in sides:
        both = [a + b for a, b in zip(s.server_ms, s.pg_ms)]
        print(
            f"{s.name:<24} {statistics.median(s.server_ms):>7.3f} "
            f"[{min(s.server_ms):.3f}, {max(s.server_ms):.3f}] "
            f"{statistics.median(s.pg_ms):>7.3f} [{min(s.pg_ms):.3f}, {max(s.pg_ms):.3f}] "
            f"{statistics.median(both):>8.3f}"
        )
    ours, minimal = sides
    rs = [a / b for a, b in zip(ours.server_ms, minimal.server_ms)]
    rp = [a / b for a, b in zip(ours.pg_ms, minimal.pg_ms)]
    print(
        f"ours / minimal, per round: server {statistics.median(rs):.2f}x "
        f"[{min(rs):.2f}, {max(rs):.2f}], PostgreSQL {statistics.median(rp):.2f}x "
        f"[{min(rp):.2f}, {max(rp):.2f}] (goal: within 1.5x each)"
    )


if __name__ == "__main__":
    main()
