"""The issue's load test at full length: 20 simulated clusters post to one server at
once for a minute (as the scheduler plugin does: batches, re-sent batches after a lost
answer, retries), on SQLite and PostgreSQL; then checks every message was stored once.

    python benchmarks/server_load.py                  # 60 s per backend
    python benchmarks/server_load.py --seconds 10 --clusters 50
    python benchmarks/server_load.py --postgres postgresql://user@host/scratch

The suite runs the same for a few seconds (tests/integration/test_server_load.py).  The fault test
at full length (the server killed for a minute under a working cluster):
    DAL_OUTAGE_SECONDS=60 python -m pytest tests/integration/test_server_faults.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.test_server_load import check_stored_once, run_load  # noqa: E402
from tests.server_helpers import ServerProcess, free_port, make_tokens  # noqa: E402


def run(name: str, url: str, clusters: int, seconds: float) -> tuple:
    tokens = make_tokens(url, clusters)
    with ServerProcess(url, free_port()) as server:
        results, wall = run_load(server.url, tokens, seconds)
    check_stored_once(url, results)  # raises if any message is missing or stored twice
    messages = sum(r.distinct for r in results)
    posts = sum(r.posts for r in results)
    resent = sum(r.resent for r in results)
    print(f"  {name}: {messages:,} messages in {wall:.1f} s, every one stored once", flush=True)
    return name, clusters, wall, messages, posts, resent


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--clusters", type=int, default=20)
    p.add_argument(
        "--postgres", metavar="URL", help="scratch PostgreSQL database (default: start one here)"
    )
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(
            run("sqlite", "sqlite:///" + str(Path(tmp) / "load.db"), args.clusters, args.seconds)
        )
    if args.postgres:
        rows.append(run("postgresql", args.postgres, args.clusters, args.seconds))
    else:
        from tests.postgres_server import PostgresServer

        with PostgresServer() as pg:
            rows.append(
                run("postgresql", pg.url(pg.create_database("load")), args.clusters, args.seconds)
            )

    print(
        f"\n{'backend':<11} {'clusters':>8} {'seconds':>8} {'messages':>10} {'posts':>7} {'re-sent':>8} "
        f"{'messages/s':>11}  stored once"
    )
    for name, clusters, wall, messages, posts, resent in rows:
        print(
            f"{name:<11} {clusters:>8} {wall:>8.1f} {messages:>10,} {posts:>7,} {resent:>8,} "
            f"{messages / wall:>11,.0f}  yes"
        )


if __name__ == "__main__":
    main()
