"""The team server under a flood of reads (issue 20, N1): how long other accounts wait,
and how much memory the server takes.

Starts `dask-analytics server` in its own process (SQLite store, or --postgres URL),
uploads one public report of --report-mib MiB (random text: gzip shrinks it only ~2x),
then --readers anonymous clients read it --rounds times each (a quarter of them take no
gzip), while a prober sends another account's small read every 50 ms and a sampler reads
the server's RSS every 10 ms.  With --tasks N, the flood is instead --readers/16
readers of one account's task stream of N rows (limit 1,000,000).  With --twin-mib N
(issue 37, R1), the report's twin is N MiB and the readers GET the page the server
renders from it (on its own origin), while another account both ingests (a small batch
every 50 ms) and reads; their latencies are printed beside the same probes run before
the flood, in the same run (the baseline).

    python benchmarks/server_stall.py                        # 64 readers of a 4 MiB report
    python benchmarks/server_stall.py --report-mib 50 --readers 16
    python benchmarks/server_stall.py --tasks 300000 --readers 64
    python benchmarks/server_stall.py --twin-mib 16 --readers 16   # issue 37's R1

The server runs `python -m dask_analytics_lab.server`, which imports the package from the
current folder first: to measure another tree (PYTHONPATH=/other/tree), run this script
from a folder that holds no dask_analytics_lab.

Prints: the prober's worst and median latency during the flood, the server's RSS before
and its peak, and (when the server has one) its loop-lag probe's stall count and worst
lag.  Target (issue 20): other accounts answered within 1 s, RSS growth < 256 MiB.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.server_helpers import Cluster, ServerProcess, free_port, request  # noqa: E402

MiB = 2**20
METRICS_TOKEN = "m" * 32


def make_token(db: str, account: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dask_analytics_lab.server",
            "token",
            "create",
            "--account",
            account,
            "--user",
            "ann",
            "--store",
            db,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def read_all(port: int, path: str, headers: dict) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        n = 0
        while chunk := r.read(65536):
            n += len(chunk)
        return n if r.status == 200 else -r.status
    finally:
        conn.close()


def stall_figures(url: str) -> str:
    status, text, _ = request(
        url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    if status != 200:
        return "no loop-lag probe"
    found = {
        line.split()[0]: line.split()[1]
        for line in text.splitlines()
        if line.startswith("dask_analytics_loop")
    }
    if not found:
        return "no loop-lag probe"
    return (
        f"loop stalls > 0.5 s: {found.get('dask_analytics_loop_stalls_total')}, worst lag "
        f"{float(found.get('dask_analytics_loop_lag_max_seconds', 'nan')):.2f} s, most CPU on the loop "
        f"between two 0.1 s probes {float(found.get('dask_analytics_loop_busy_max_seconds', 'nan')):.2f} s"
    )


def pct(values: list[float], q: float) -> float:
    """The q-th percentile in milliseconds (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))] * 1000


def twin_report(url: str, token: str, args: argparse.Namespace) -> tuple[str, dict, int, str]:
    """Upload a public report whose twin is about --twin-mib MiB (performance_report's
    kind: a task stream of compute intervals of random-named keys, all of which its page
    shows); what the readers GET: its page on the server's own origin."""
    row = 160  # bytes a task stream row takes as JSON, about
    rows = [
        {
            "worker": f"tcp://10.0.0.{i % 16}:4000",
            "thread": 140000 + i % 4,
            "key": f"{os.urandom(6).hex()}-{i}",
            "action": "compute",
            "status": "OK",
            "start": 1.7e9 + i * 1e-3,
            "stop": 1.7e9 + i * 1e-3 + 5e-4,
        }
        for i in range(args.twin_mib * MiB // row)
    ]
    twin = {"summary": {"n_tasks": len(rows)}, "task_groups": [], "task_stream": rows}
    status, body, _ = request(
        url + "/api/reports",
        method="POST",
        token=token,
        body={"html": "<p>report</p>", "twin": twin, "filename": "r.html", "private": False},
    )
    assert status == 201, body
    what = (
        f"{args.readers} anonymous readers x {args.rounds} of the page of a "
        f"{args.twin_mib} MiB twin"
    )
    return "/reports/" + body["report"]["id"], {"Accept-Encoding": "gzip"}, args.readers, what


def probes_of(
    url: str,
    token: str,
    *,
    seconds: float | None = None,
    until: threading.Event | None = None,
    into: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Another account's calls, one every 50 ms in turn: a small ingest batch (a sample of
    its own cluster) and a read of its clusters; their latencies, by kind."""
    out = into if into is not None else {"ingest": [], "read": [], "failed": []}
    c = Cluster(account="B")
    first = [c.cluster()]
    end = time.monotonic() + (seconds or 0)

    def timed(kind: str, *args: Any, **kwargs: Any) -> bool:
        # A call that fails (its 30 s client timeout included) counts at the time it took.
        t0 = time.perf_counter()
        try:
            ok = request(*args, **kwargs)[0] == 200
        except OSError:
            ok = False
        out[kind].append(time.perf_counter() - t0)
        if not ok:
            out.setdefault("failed", []).append(time.perf_counter() - t0)
        return ok

    while (until is None and time.monotonic() < end) or (until is not None and not until.is_set()):
        if timed(
            "ingest", url + "/api/ingest", method="POST", token=token, body=first + [c.sample()]
        ):
            first = []
        timed("read", url + "/api/clusters", token=token)
        time.sleep(0.05)
    return out


def run(db: str, args: argparse.Namespace, tmp: Path) -> None:
    from dask_analytics_lab.store import open_store

    open_store(db).close()  # the server's store, made as its start makes it, before its tokens
    a, b = make_token(db, "A"), make_token(db, "B")
    (tmp / "metrics.token").write_text(METRICS_TOKEN)
    port = free_port()
    # Uploaded report HTML is served on the report origin only: another name of this server.
    with ServerProcess(
        db,
        port,
        [
            "--metrics-token-file",
            str(tmp / "metrics.token"),
            "--report-url",
            f"http://localhost:{port}",
        ],
    ) as server:
        proc = psutil.Process(server.proc.pid)
        if args.tasks:
            c = Cluster(account="A")
            rows = [
                {
                    "worker": f"tcp://10.0.0.{i % 16}:4000",
                    "thread": 140000 + i % 4,
                    "prefix": "ones",
                    "task_group": "ones-abc",
                    "state": "memory",
                    "start": c.t + i * 1e-4,
                    "stop": c.t + i * 1e-4 + 5e-5,
                }
                for i in range(args.tasks)
            ]
            msgs = [c.cluster(), c.computation("comp-1")]
            msgs += [c.tasks("comp-1", rows[i : i + 5000]) for i in range(0, len(rows), 5000)]
            for i in range(0, len(msgs), 10):
                status, body, _ = request(
                    server.url + "/api/ingest", method="POST", token=a, body=msgs[i : i + 10]
                )
                assert status == 200, body
            path, headers, readers = (
                "/api/computations/comp-1/tasks?limit=1000000",
                {"Authorization": f"token {a}", "Accept-Encoding": "gzip"},
                max(1, args.readers // 16),
            )
            what = f"{readers} reads of a task stream of {args.tasks:,} rows"
        elif args.twin_mib:
            path, headers, readers, what = twin_report(server.url, a, args)
        else:
            html = (
                "<html><body><pre>"
                + os.urandom(args.report_mib * MiB * 3 // 4).hex()[: args.report_mib * MiB]
            )
            status, body, _ = request(
                server.url + "/api/reports",
                method="POST",
                token=a,
                body={
                    "html": html,
                    "twin": {"summary": {}},
                    "filename": "r.html",
                    "private": False,
                },
            )
            assert status == 201, body
            path, headers, readers = (
                "/reports/" + body["report"]["id"],
                {"Accept-Encoding": "gzip", "Host": f"localhost:{port}"},
                args.readers,
            )
            what = f"{readers} anonymous readers x {args.rounds} of a {args.report_mib} MiB public report"
        read_all(port, path, headers)  # warm
        time.sleep(1)
        if args.twin_mib:
            baseline = probes_of(server.url, b, seconds=5)
        before = proc.memory_info().rss
        peak, lat, done = [before], [], threading.Event()
        flood_probes: dict[str, list[float]] = {"ingest": [], "read": [], "failed": []}

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], proc.memory_info().rss)
                time.sleep(0.01)

        def probe() -> None:
            if args.twin_mib:
                probes_of(server.url, b, until=done, into=flood_probes)
                return
            while not done.is_set():
                t0 = time.perf_counter()
                request(server.url + "/api/whoami", token=b)
                lat.append(time.perf_counter() - t0)
                time.sleep(0.05)

        sizes: list[int] = []

        def reader(i: int) -> None:
            for _ in range(args.rounds):
                h = (
                    headers
                    if i % 4
                    else {k: v for k, v in headers.items() if k != "Accept-Encoding"}
                )
                sizes.append(read_all(port, path, h))

        helpers = [threading.Thread(target=f, daemon=True) for f in (sample, probe)]
        for t in helpers:
            t.start()
        t0 = time.perf_counter()
        threads = [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        done.set()
        for t in helpers:
            t.join(5)
        bad = [s for s in sizes if s < 0]
        good = [n for n in sizes if n >= 0]
        print(
            f"{what}: {wall:.1f} s, {len(good)} answered 200 ({max(good, default=0) / MiB:.1f} MiB "
            f"the largest, as sent), others {sorted(set(bad))}"
        )
        if args.twin_mib:
            print(
                f"  another account's calls     {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'n':>5}"
            )
            for kind in ("ingest", "read"):
                for when, got in (("before", baseline[kind]), ("flood", flood_probes[kind])):
                    print(
                        f"    {kind:<7} {when:<8}        {pct(got, 50):8.1f} {pct(got, 99):8.1f} "
                        f"{max(got) * 1000:8.1f} {len(got):5d}"
                    )
            print(f"    failed or timed out (30 s): {len(flood_probes['failed'])} during the flood")
            ratio = pct(flood_probes["ingest"], 99) / max(pct(baseline["ingest"], 99), 1e-9)
            print(
                f"    ingest p99 flood / before: {ratio:.2f}x  (targets: ingest p99 < 1500 ms, reads < 1000 ms)"
            )
        else:
            print(
                f"  another account's read: worst {max(lat):.2f} s, median {statistics.median(lat) * 1000:.0f} ms "
                f"({len(lat)} probes)"
            )
        print(
            f"  server RSS: {before / MiB:.0f} MiB before, peak {peak[0] / MiB:.0f} MiB "
            f"(+{(peak[0] - before) / MiB:.0f} MiB)"
        )
        print(f"  {stall_figures(server.url)}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--readers", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--report-mib", type=int, default=4)
    p.add_argument("--tasks", type=int, default=0)
    p.add_argument("--twin-mib", type=int, default=0)
    p.add_argument(
        "--postgres", metavar="URL", help="a scratch PostgreSQL database instead of SQLite"
    )
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.postgres or "sqlite:///" + str(Path(tmp) / "stall.db")
        run(db, args, Path(tmp))


if __name__ == "__main__":
    main()
