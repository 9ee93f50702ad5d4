"""The analytics server's memory and responsiveness under hostile request bodies.

For each attack, starts a fresh `dask-analytics server` in its own process (SQLite
store), measures it idle (the baseline: its RSS, and the latency of a small
authenticated read), then attacks with --concurrency (default 16) connections at once,
while a prober sends the same small read every 50 ms and a sampler reads the server's
RSS (psutil) every 10 ms:

  unauthenticated  16 MiB bodies with no token (refused from the headers, unread)
  json-16MiB       16 MiB identity JSON, a plausible scheduler batch (computations
                   with 1,000 task groups each) whose last message is invalid: every
                   byte is received, parsed and validated, then refused (422)
  dense-16MiB      16 MiB identity JSON of the costliest shape per byte (an event whose
                   message is a list of {}): refused by the parse estimate (413)
  gzip-ratio       gzip bodies that inflate to the 32 MiB limit at just under the
                   100x ratio limit (one long string), last message invalid (422)
  gzip-bomb        1 GiB of zeros gzip'd (1 MiB sent): refused while inflating (413)
  stalled          16 MiB announced, 1 MiB sent, then silence: closed when idle

    python benchmarks/server_body_memory.py
    python benchmarks/server_body_memory.py --concurrency 32 --only json-16MiB gzip-ratio

Target (issue 9): peak RSS under 512 MiB, every small read answered within 1 s.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.server_helpers import Cluster, ServerProcess, free_port, group  # noqa: E402

MiB = 2**20


def make_token(db: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dask_analytics_lab.server",
            "token",
            "create",
            "--account",
            "bench",
            "--user",
            "ann",
            "--db",
            db,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def invalid_last(c: Cluster, msgs: list[dict]) -> list[dict]:
    """The batch with a last message the store refuses after checking all the others."""
    return msgs + [c.sample(n_workers="many")]


def json_batch(size: int) -> bytes:
    """Computations of 1,000 task groups each, as big as fits in `size`."""
    c = Cluster(account="bench")
    msgs, n = [c.cluster()], 0
    one = len(
        json.dumps(
            c.computation("comp-x", groups=[group(f"g{i}-x", n_tasks=i + 1) for i in range(1000)])
        )
    )
    while (n + 1) * one < size - 64 * 1024:
        msgs.append(
            c.computation(
                f"comp-{n}", groups=[group(f"g{i}-{n}", n_tasks=i + 1) for i in range(1000)]
            )
        )
        n += 1
    body = json.dumps(invalid_last(c, msgs)).encode()
    assert len(body) <= size, len(body)
    return body


def dense_batch(size: int) -> bytes:
    c = Cluster(account="bench")
    head = json.dumps([c.cluster(), c.event(msg=[])])
    return head.replace(
        '"msg": []', '"msg": [' + ",".join(["{}"] * ((size - len(head) - 16) // 3)) + "]"
    ).encode()


def ratio_batch(limit: int, ratio: int) -> bytes:
    """gzip'd JSON that inflates to just under `limit` at just under `ratio`."""
    c = Cluster(account="bench")
    head = json.dumps(invalid_last(c, [c.cluster(), c.event(msg="")]))
    size = limit - len(head) - 1024
    every = 2000  # one random letter every `every` bytes: lower means more noise, less ratio
    while True:
        filler = bytearray(b"a" * size)
        for i, b in enumerate(os.urandom(size // every)):
            filler[i * every] = 0x61 + b % 26
        body = head.replace('"msg": ""', '"msg": "' + filler.decode() + '"', 1).encode()
        packed = gzip.compress(body, 6)
        if (
            len(body) / len(packed) < ratio * 0.97
        ):  # just under the limit, with room for the stream's start
            return packed
        every = int(every * 0.9)


def bomb() -> bytes:
    d = gzip.compress(b"[" + b" " * (1024 * MiB - 2) + b"]", 9)
    return d


# --- clients -------------------------------------------------------------------------
def post(port: int, body: bytes, headers: dict, *, stall_after: int | None = None) -> str:
    """Send one POST over a raw socket; the status line's code, or what happened."""
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    try:
        head = "".join(
            f"{k}: {v}\r\n"
            for k, v in {
                "Host": f"127.0.0.1:{port}",
                "Content-Length": len(body),
                **headers,
            }.items()
        )
        s.sendall(f"POST /api/ingest HTTP/1.1\r\n{head}\r\n".encode())
        sent = 0
        try:
            while sent < len(body):
                if stall_after is not None and sent >= stall_after:
                    s.settimeout(120)
                    got = s.recv(200)  # wait until the server answers or closes the connection
                    return "closed" if not got else got.split(b" ")[1].decode()
                n = s.send(body[sent : sent + 256 * 1024])
                sent += n
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed mid-body: read its answer
        try:
            data = s.recv(200)
        except (TimeoutError, ConnectionResetError):
            return "reset"
        return data.split(b" ")[1].decode() if data.startswith(b"HTTP/") else "closed"
    finally:
        s.close()


class Probe:
    """Small authenticated reads every 50 ms; latencies in seconds."""

    def __init__(self, port: int, token: str):
        self.port, self.token, self.times, self.errors = port, token, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request(
                    "GET",
                    "/api/clusters?limit=10",
                    headers={"Authorization": f"token {self.token}"},
                )
                r = conn.getresponse()
                r.read()
                conn.close()
                if r.status != 200:
                    self.errors.append(r.status)
            except OSError as e:
                self.errors.append(repr(e))
            self.times.append(time.perf_counter() - t0)
            self._stop.wait(0.05)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class Peak:
    """The highest RSS of a process, sampled every 10 ms."""

    def __init__(self, pid: int):
        self.proc, self.peak = psutil.Process(pid), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            self._stop.wait(0.01)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def attack(port: int, n: int, body: bytes, headers: dict, **kw) -> Counter:
    results: list[str] = []
    lock = threading.Lock()

    def one() -> None:
        try:
            r = post(port, body, headers, **kw)
        except OSError as e:
            r = type(e).__name__
        with lock:
            results.append(r)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return Counter(results)


def ms(x: float) -> str:
    return f"{x * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--only", nargs="*", help="run only these attacks")
    args = parser.parse_args()
    n = args.concurrency

    print("building bodies ...", file=sys.stderr)
    json_body = json_batch(16 * MiB)
    dense_body = dense_batch(16 * MiB)
    ratio_body = ratio_batch(32 * MiB, 100)
    bomb_body = bomb()
    junk = b"x" * (16 * MiB)
    js = {"Content-Type": "application/json"}
    gz = {**js, "Content-Encoding": "gzip"}

    scenarios = [
        ("unauthenticated", junk, js, {}),
        ("json-16MiB", json_body, {**js}, {}),
        ("dense-16MiB", dense_body, {**js}, {}),
        ("gzip-ratio", ratio_body, {**gz}, {}),
        ("gzip-bomb", bomb_body, {**gz}, {}),
        ("stalled", junk, {**js}, {"stall_after": MiB}),
    ]
    print(
        f"bodies: json {len(json_body) / MiB:.1f} MiB, dense {len(dense_body) / MiB:.1f} MiB, gzip-ratio "
        f"{len(ratio_body) / MiB:.2f} MiB sent (x{32 * MiB / len(ratio_body):.0f}), bomb "
        f"{len(bomb_body) / MiB:.2f} MiB sent (1 GiB inflated)",
        file=sys.stderr,
    )
    rows, baselines = [], []
    for name, body, headers, kw in scenarios:
        if args.only and name not in args.only:
            continue
        # A fresh server for each attack: its figures do not carry what the last one left.
        with tempfile.TemporaryDirectory() as tmp:
            db = f"sqlite:///{tmp}/bench.db"
            port = free_port()
            with ServerProcess(
                db, port, ["--session-secret-file", f"{tmp}/session.secret"]
            ) as server:
                token = make_token(db)
                if name != "unauthenticated":
                    headers = {**headers, "Authorization": f"token {token}"}
                pid = server.proc.pid
                # The baseline: idle RSS and small-read latency with no attack (after a warm-up).
                with Probe(port, token) as probe:
                    time.sleep(3)
                idle = psutil.Process(pid).memory_info().rss
                base = sorted(probe.times[5:])
                baselines.append((idle, statistics.median(base), max(base)))
                print(f"running {name} ...", file=sys.stderr)
                t0 = time.perf_counter()
                with Peak(pid) as peak, Probe(port, token) as probe:
                    answers = attack(port, n, body, headers, **kw)
                took = time.perf_counter() - t0
                lat = sorted(probe.times) or [float("nan")]
                after = psutil.Process(pid).memory_info().rss
                rows.append(
                    (
                        name,
                        dict(answers),
                        idle,
                        peak.peak,
                        after,
                        statistics.median(lat),
                        max(lat),
                        probe.errors,
                        took,
                        max(base),
                    )
                )

    print(
        f"\n{n} concurrent requests per attack, each on a fresh server; small read = "
        "GET /api/clusters?limit=10 every 50 ms\n"
    )
    head = (
        f"{'attack':<16}{'answers':<24}{'peak RSS':>10}{'x idle':>8}{'after':>9}{'read p50':>10}"
        f"{'read max':>10}{'x base':>8}{'took':>8}"
    )
    print(head)
    print("-" * len(head))
    idle = statistics.median(b[0] for b in baselines)
    b50, bmax = (
        statistics.median(b[1] for b in baselines),
        statistics.median(b[2] for b in baselines),
    )
    print(
        f"{'(no attack)':<16}{'':<24}{idle / MiB:>7.0f}MiB{1:>8.2f}{'':>9}{ms(b50):>8}ms{ms(bmax):>8}ms"
        f"{1:>8.1f}{'':>8}"
    )
    worst_rss, worst_lat = 0, 0.0
    for name, answers, idle_i, rss, after, p50, mx, errors, took, base_max in rows:
        shown = ", ".join(f"{k}x{v}" for k, v in sorted(answers.items()))
        print(
            f"{name:<16}{shown:<24}{rss / MiB:>7.0f}MiB{rss / idle_i:>8.2f}{after / MiB:>6.0f}MiB{ms(p50):>8}ms"
            f"{ms(mx):>8}ms{mx / base_max:>8.1f}{took:>7.1f}s"
            + (f"  read errors: {errors[:3]}" if errors else "")
        )
        worst_rss, worst_lat = max(worst_rss, rss), max(worst_lat, mx)
    print(
        "\n(no attack): the servers idle, medians; x idle: peak RSS over that server's idle RSS; after: its RSS "
        "once the attack is over; x base: the slowest small read over the slowest without an attack"
    )
    ok = worst_rss < 512 * MiB and worst_lat < 1.0
    print(
        f"target (peak RSS < 512 MiB, small reads < 1 s): {'met' if ok else 'NOT met'} "
        f"(worst {worst_rss / MiB:.0f} MiB, {worst_lat * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
