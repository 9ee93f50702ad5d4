"""`dask-analytics`: read the store from a terminal, and export it.

Whatever it prints of the store goes through tables.printable: recorded strings come
from the clusters, and their control characters (terminal escapes) are shown escaped.
JSON export escapes them by itself; CSV goes to files.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Sequence

from . import api, tables
from .config import ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dask-analytics", description="Read what dask-analytics-lab recorded.")
    parser.add_argument("--store", help="store path or URL (default: analytics.store from Dask's config)")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("where", help="print the store in use")
    p = sub.add_parser("clusters", help="recorded clusters, newest first: live, stopped or lost")
    p.add_argument("--limit", type=int, default=50)
    p = sub.add_parser("computations", help="computations, newest first")
    p.add_argument("--cluster", help="only this cluster id")
    p.add_argument("--limit", type=int, default=50)
    p = sub.add_parser("exceptions", help="failed tasks: one row per failure (type, where, message pattern)")
    p.add_argument("--cluster", help="only this cluster id")
    p.add_argument("--computation", help="only this computation id")
    p.add_argument("--traceback", action="store_true", help="print each traceback")
    p.add_argument("--limit", type=int, default=50)
    p = sub.add_parser("events", help="recorded events")
    p.add_argument("--cluster", help="only this cluster id")
    p.add_argument("--topic")
    p.add_argument("--limit", type=int, default=100)
    p = sub.add_parser("export", help="write everything as JSON or CSV")
    p.add_argument("--format", choices=["json", "csv"], default="json")
    p.add_argument("--output", "-o", help="JSON: a file (default stdout); CSV: a folder, one file per table")

    try:
        from .server.cli import add_server_commands
    except ImportError:
        pass
    else:
        add_server_commands(sub)
    return parser


def _export(store: str | None, fmt: str, output: str | None) -> None:
    data = api.export(store=store)
    if fmt == "json":
        text = json.dumps(data, indent=1, default=str)
        if output:
            Path(output).write_text(text)
        else:
            print(text)
        return
    folder = Path(output or "dask-analytics-export")
    folder.mkdir(parents=True, exist_ok=True)
    for table, rows in data.items():
        columns = sorted({c for r in rows for c in r})
        with (folder / f"{table}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            for r in rows:
                writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
    print(f"wrote {len(data)} tables to {tables.printable(folder)}/")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    store = args.store
    try:
        if args.command == "where":
            print(tables.printable(api.where(store)))
        elif args.command == "clusters":
            print(tables.clusters(api.list_clusters(limit=args.limit, store=store)))
        elif args.command == "computations":
            print(tables.computations(api.list_computations(args.cluster, limit=args.limit, store=store)))
        elif args.command == "exceptions":
            rows = api.list_exceptions(args.cluster, computation_id=args.computation, limit=args.limit, store=store)
            print(tables.exceptions(rows))
            if args.traceback:
                for r in rows:
                    what = " ".join(x for x in (r.get("exc_type"), r.get("location")) if x)
                    head = f"--- {what or r['task_group']} x{r['count']} (task group {r['task_group']})"
                    body = f"{r['traceback_text'] or ''}{tables.example(r)}"
                    print(f"\n{tables.printable(head)}\n{tables.printable(body, lines=True)}")
        elif args.command == "events":
            print(tables.events(api.list_events(args.cluster, topic=args.topic, limit=args.limit, store=store)))
        elif args.command == "export":
            _export(store, args.format, args.output)
        elif hasattr(args, "run"):
            return args.run(args) or 0
    except (ConfigError, LookupError, ConnectionError, ValueError) as e:
        print(f"dask-analytics: {tables.printable(e, lines=True)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
