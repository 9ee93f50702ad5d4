"""`dask-analytics server` and `dask-analytics token ...`.

The package's CLI (dask_analytics_lab/cli.py) calls `add_server_commands(subparsers)`;
each command sets `run(args) -> int` (the exit status).  The store is `--db`, else the
CLI's global `--store`, else `analytics.store`.  `python -m
dask_analytics_lab.server ...` runs the same commands on their own.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

CODE_KEY_ENV = "DASK_ANALYTICS_CODE_KEY"


def default_key_file() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("dask-analytics")) / "server-code.key"


def _db(args: argparse.Namespace) -> str:
    import dask.config

    from .. import config

    value = args.db or getattr(args, "store", None)
    url = config.validate_store(value if value is not None else dask.config.get("analytics.store"))
    if url.startswith(("http://", "https://")):
        raise SystemExit(f"--db must be a SQLite path or a postgresql:// URL, not a server URL ({url})")
    return url


def _code_keys(args: argparse.Namespace) -> list[str]:
    from .codecrypt import load_or_create_key_file, parse_keys

    given = args.code_key or os.environ.get(CODE_KEY_ENV)
    if given:
        return parse_keys(given)
    path = Path(args.code_key_file) if args.code_key_file else default_key_file()
    existed = path.exists()
    key = load_or_create_key_file(path)
    if not existed:
        logging.getLogger("dask_analytics_lab.server").warning(
            "no --code-key given: made one in %s (keep it: snippets stored with it need it)", path)
    return parse_keys(key)


def _server(args: argparse.Namespace) -> int:
    from ..store import StoreUnavailable
    from .app import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.no_token and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"refusing --no-token on {args.host}: without tokens anyone who reaches the port reads "
              "every account; bind to 127.0.0.1 or drop --no-token", file=sys.stderr)
        return 2
    settings: dict[str, Any] = {
        "store_url": _db(args),
        "token_required": not args.no_token,
        "code_key": _code_keys(args),
        "public_url": args.public_url,
    }
    try:
        asyncio.run(serve(settings, host=args.host, port=args.port, certfile=args.certfile,
                          keyfile=args.keyfile, ready=lambda url: print(f"dask-analytics server at {url}", flush=True)))
    except StoreUnavailable as e:
        print(f"dask-analytics server: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:  # port taken, unreadable certificate, bad key
        print(f"dask-analytics server: {e}", file=sys.stderr)
        return 1
    return 0


def _team(args: argparse.Namespace) -> Any:
    from ..store import open_store
    from ..store.team import TeamStore

    return TeamStore(open_store(_db(args)))


def _token_create(args: argparse.Namespace) -> int:
    from .tokens import new_token, token_hash

    team = _team(args)
    token_id, token = new_token()
    team.add_token(token_id=token_id, token_hash=token_hash(token), account=args.account, user=args.user)
    print(token)
    print(f"(token id {token_id} for user {args.user!r} of account {args.account!r}; "
          "it is shown once: the server keeps only its hash)", file=sys.stderr)
    return 0


def _token_list(args: argparse.Namespace) -> int:
    rows = _team(args).list_tokens(account=args.account)
    print(f"{'id':<14}{'account':<20}{'user':<20}{'created':<22}revoked")
    import time

    def when(t: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"

    for r in rows:
        print(f"{r['token_id']:<14}{r['account']:<20}{r['user']:<20}{when(r['created']):<22}{when(r['revoked'])}")
    return 0


def _token_revoke(args: argparse.Namespace) -> int:
    if _team(args).revoke_token(args.token_id):
        print(f"revoked token {args.token_id} (servers stop accepting it within 30 s)")
        return 0
    print(f"no active token with id {args.token_id!r}; `dask-analytics token list` shows them", file=sys.stderr)
    return 1


def _name(kind: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        value = value.strip()
        if not value or len(value) > 200 or any(ord(c) < 32 for c in value):
            raise argparse.ArgumentTypeError(f"{kind} must be 1 to 200 printable characters")
        return value
    return check


def add_server_commands(subparsers: Any) -> None:
    """Add `server` and `token {create,list,revoke}` to an argparse subparsers object."""
    db_help = "store: SQLite path or sqlite:/// or postgresql:// URL (default: analytics.store)"
    p = subparsers.add_parser("server", help="run the team analytics server (ingest, query API, reports, web view)")
    p.add_argument("--db", help=db_help)
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    p.add_argument("--certfile", help="TLS certificate (PEM); serves https")
    p.add_argument("--keyfile", help="TLS private key (PEM), if not in --certfile")
    p.add_argument("--code-key", help=f"Fernet key(s), comma-separated, newest first, encrypting code snippets at "
                                      f"rest (or ${CODE_KEY_ENV}; default: a key file, made on first start)")
    p.add_argument("--code-key-file", help=f"file holding the code key (default {default_key_file()})")
    p.add_argument("--public-url", help="base URL of report links (default: from each request's Host)")
    p.add_argument("--no-token", action="store_true",
                   help="no tokens: anyone reaching the port reads every account (localhost only)")
    p.set_defaults(run=_server)

    t = subparsers.add_parser("token", help="API tokens of the analytics server")
    tsub = t.add_subparsers(dest="token_command", required=True)
    c = tsub.add_parser("create", help="make a token for a user of an account and print it")
    c.add_argument("--account", required=True, type=_name("account"))
    c.add_argument("--user", required=True, type=_name("user"))
    c.add_argument("--db", help=db_help)
    c.set_defaults(run=_token_create)
    ls = tsub.add_parser("list", help="list tokens (ids, never the tokens)")
    ls.add_argument("--account", type=_name("account"))
    ls.add_argument("--db", help=db_help)
    ls.set_defaults(run=_token_list)
    r = tsub.add_parser("revoke", help="revoke a token by its id")
    r.add_argument("token_id")
    r.add_argument("--db", help=db_help)
    r.set_defaults(run=_token_revoke)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dask_analytics_lab.server")
    add_server_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.run(args)
