"""`dask analytics server` and `dask analytics token ...` (click commands).

The package's CLI group (dask_analytics_lab/cli.py) adds `server` and `token`; `python
-m dask_analytics_lab.server ...` runs that group.  The store is `--store`, named
anywhere on the line (`--db`: its deprecated spelling), else `analytics.store`.  Each
command's body takes the parsed options as one namespace (`args`) and returns the exit
status.  The `--store` option itself is here too, for every command of the CLI.

Whatever writes says which store it wrote (password masked), and `token create` writes
only into a store a server has made its tables in, and only one that something named:
the personal default store is no team server's database unless someone started one on
it, and then they can name it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import click

CODE_KEY_ENV = "DASK_ANALYTICS_CODE_KEY"


def default_key_file() -> Path:
    """The code key file when neither $DASK_ANALYTICS_CODE_KEY, --code-key-file nor
    analytics.code-key-file names one: in the user's config directory
    (~/.config/dask-analytics/code.key), apart from the default database."""
    from ..codecrypt import default_key_file

    return default_key_file()


# --- --store: every command of the CLI takes it (cli.py, prune_cli.py and alerts/cli.py
# import it from here, as cli.py imports this module and they cannot import cli.py) ---
F = TypeVar("F", bound=Callable[..., Any])
STORE = "dask_analytics.store"  # ctx.meta key: the store the command line named
_DB_SAID = "dask_analytics.db-deprecated"


def _remember_store(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    # ctx.meta is one dict for the whole line, so a group's --store reaches its
    # subcommands; a later one (after the subcommand) is processed later and wins.
    if value is None:
        return
    if param.name == "db" and not ctx.meta.get(_DB_SAID):
        ctx.meta[_DB_SAID] = True
        click.echo("dask-analytics: --db is deprecated, use --store (the same store)", err=True)
    ctx.meta[STORE] = value


def store_option(help: str) -> Callable[[F], F]:
    """`--store PATH_OR_URL`, for a group or a command: named anywhere on the line, read
    with named_store().  `--db`, hidden, is its deprecated spelling (server and token
    took it before every command took --store)."""

    def wrap(fn: F) -> F:
        fn = click.option(
            "--db", "db", hidden=True, callback=_remember_store, expose_value=False, is_eager=True
        )(fn)
        return click.option(
            "--store",
            "store",
            metavar="PATH_OR_URL",
            callback=_remember_store,
            expose_value=False,
            is_eager=True,
            help=help,
        )(fn)

    return wrap


def named_store(ctx: click.Context | None = None) -> str | None:
    """The store the command line named (--store, or --db), else None."""
    return (ctx or click.get_current_context()).meta.get(STORE)


def resolve_store(given: str | None) -> tuple[str, str | None]:
    """(url, default): the store a command uses (`given`: the one its line named), as a
    URL, and, when nothing named it (no --store, analytics.store unset), the words saying
    that it is the personal default store; None when the line or analytics.store did."""
    from .. import config

    if given is None:
        given = config.get("analytics.store")
    url = config.validate_store(given)
    if given is not None:
        return url, None
    return url, "your personal default store: no --store given, analytics.store unset"


def _resolved(args: SimpleNamespace) -> tuple[str, str | None]:
    """resolve_store() for a command that works on a server's database, not through it."""
    from ..urls import mask_url

    url, default = resolve_store(args.store)
    if url.startswith(("http://", "https://")):
        raise SystemExit(
            f"dask-analytics: {mask_url(url)} is a team server's URL: this command works on "
            "its database, on the server's host: --store its SQLite path or postgresql:// URL "
            "(the one `dask-analytics server --store` was given)"
        )
    return url, default


def _has_team_tables(url: str) -> bool:
    """Whether the store has the team server's tables (a server, or anything else that
    opened it, made the whole schema), looked at without creating the store: open_store
    would make a missing SQLite file, or the tables of an empty PostgreSQL database."""
    import sqlite3
    import urllib.request

    import sqlalchemy as sa

    from ..store.engine import is_memory, make_engine, parse, raise_unavailable
    from ..urls import mask_url

    u = parse(url)
    if u.get_backend_name() == "sqlite":
        if is_memory(u) or not u.database:
            return False
        path = Path(u.database).expanduser()
        if not path.is_file():
            return False
        try:
            # Read-only: sqlite3.connect would make an empty file of a path it cannot open.
            with contextlib.closing(
                sqlite3.connect(f"file:{urllib.request.pathname2url(str(path))}?mode=ro", uri=True)
            ) as conn:
                return bool(
                    conn.execute(
                        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tokens'"
                    ).fetchone()
                )
        except sqlite3.DatabaseError:
            return True  # not a store at all: open_store says so, in its words
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return sa.inspect(conn).has_table("tokens")
    except sa.exc.DBAPIError as e:
        raise_unavailable(mask_url(url), "postgresql", e)
    finally:
        engine.dispose()


def _code_keys(args: SimpleNamespace) -> list[str]:
    """The server's code keys: $DASK_ANALYTICS_CODE_KEY, else --code-key-file, else
    analytics.code-key-file, else default_key_file() (made, mode 0600, on first start).
    Never from argv: a key there is in every process listing.  They also become this
    process's keys (codecrypt.set_process_keys), so the store layer reads and writes
    with them and says `code_error` for code none of them opens."""
    import shutil

    import platformdirs

    from .. import codecrypt, config

    if getattr(args, "code_key", None):
        raise SystemExit(
            f"dask-analytics server: --code-key is refused (a key on the command line is visible "
            f"to every user in the process list); put it in a file (mode 600) and pass "
            f"--code-key-file FILE, or set ${CODE_KEY_ENV}"
        )
    log = logging.getLogger("dask_analytics_lab.server")
    given = os.environ.get(CODE_KEY_ENV, "").strip()
    try:
        if given:
            keys = codecrypt.parse_keys(given, where=f"${CODE_KEY_ENV}")
            log.info("code key: from $%s", CODE_KEY_ENV)
        else:
            named = args.code_key_file or config.get(codecrypt.KEY_FILE_SETTING)
            path = Path(named).expanduser() if named else default_key_file()
            if not named:
                # Before, the default key file sat next to the default database: move it here.
                old = Path(platformdirs.user_data_dir("dask-analytics")) / "server-code.key"
                if old.exists() and not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                    shutil.copyfile(old, path)
                    os.chmod(path, 0o600)
                    old.unlink()
                    log.warning(
                        "moved the code key from %s (next to the default database) to %s", old, path
                    )
            keys = codecrypt.load_or_create_key_file(path)
            log.info("code key: from %s", path)
    except codecrypt.CodeKeyError as e:
        raise SystemExit(f"dask-analytics server: {e}") from None
    codecrypt.set_process_keys(keys)
    return keys


LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def _allowed_hosts(args: SimpleNamespace) -> list[str] | None:
    """The Host names the server answers to: with --no-token or any --allowed-host, the
    local names, the address it binds, the --public-url's host and every --allowed-host;
    otherwise (tokens, no --allowed-host) any."""
    given = list(args.allowed_host or [])
    if not args.no_token and not given:
        return None
    hosts = [*LOCAL_HOSTS, args.host, *given]
    if args.public_url:
        from urllib.parse import urlsplit

        hosts.append(urlsplit(args.public_url).hostname or "")
    return [h for h in hosts if h]


def default_session_file(args: SimpleNamespace) -> Path:
    """Next to the code key file (the user's data directory by default): apart from the
    database, which a stolen backup may expose."""
    key_file = getattr(args, "code_key_file", None)
    return (
        Path(key_file).parent if key_file else default_key_file().parent
    ) / "server-session.secret"


def _session_secret(args: SimpleNamespace) -> bytes:
    """The secret signing login sessions: --session-secret-file, made (mode 0600) on first start."""
    import secrets

    path = (
        Path(args.session_secret_file) if args.session_secret_file else default_session_file(args)
    )
    try:
        data = path.read_bytes().strip()
    except FileNotFoundError:
        from ..codecrypt import write_new_secret

        # Replicas started together may all find it missing: one makes it, all read the same.
        if write_new_secret(path, secrets.token_hex(32) + "\n"):
            logging.getLogger("dask_analytics_lab.server").info(
                "made the login session secret %s", path
            )
        return path.read_bytes().strip()
    if os.name == "posix" and path.stat().st_mode & 0o077:
        logging.getLogger("dask_analytics_lab.server").warning(
            "%s is readable by other users: anyone who reads it can forge logins (chmod 600 it)",
            path,
        )
    if len(data) < 32:
        raise ValueError(f"{path} holds too short a session secret (at least 32 characters)")
    return data


METRICS_TOKEN_ENV = "DASK_ANALYTICS_METRICS_TOKEN"


def _metrics_token(args: SimpleNamespace) -> str | None:
    """The token /metrics wants: $DASK_ANALYTICS_METRICS_TOKEN, else --metrics-token-file
    (never argv: it would show in the process list)."""
    token = os.environ.get(METRICS_TOKEN_ENV, "").strip()
    if not token and args.metrics_token_file:
        try:
            token = Path(args.metrics_token_file).read_text().strip()
        except OSError as e:
            raise SystemExit(
                f"dask-analytics server: cannot read --metrics-token-file: {e}"
            ) from None
    if token and len(token) < 16:
        raise SystemExit("dask-analytics server: the metrics token must be at least 16 characters")
    return token or None


def _server(args: SimpleNamespace) -> int:
    from ..store import StoreUnavailable
    from .app import serve
    from .quota import KEYS as QUOTA_KEYS

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.no_token and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"refusing --no-token on {args.host}: without tokens anyone who reaches the port reads "
            "every account; bind to 127.0.0.1 or drop --no-token",
            file=sys.stderr,
        )
        return 2
    from .. import config

    try:
        retention = (
            config.parse_age(args.retention, what="--retention")
            if args.retention
            else config.retention(config.get("analytics.retention"))
        )
    except ValueError as e:
        print(f"dask-analytics server: {e}", file=sys.stderr)
        return 2
    alerts = None
    if config.get("analytics.alerts.rules") and config.get("analytics.alerts.webhooks"):
        from ..alerts.settings import from_config

        try:
            alerts = from_config()  # the server's own Dask config: it evaluates the rules
        except ValueError as e:  # ConfigError names the key
            print(f"dask-analytics server: {e}", file=sys.stderr)
            return 2
    store_url, default = _resolved(args)
    settings: dict[str, Any] = {
        "store_url": store_url,
        "retention": retention,
        "metrics_token": _metrics_token(args),
        "token_required": not args.no_token,
        "code_key": _code_keys(args),
        "public_url": args.public_url,
        "allowed_hosts": _allowed_hosts(args),
        "session_secret": _session_secret(args),
        "forwarded_allow_ips": args.forwarded_allow_ips
        or config.get("analytics.server.forwarded-allow-ips"),
        "report_url": args.report_url or config.get("analytics.server.report-url"),
        "alerts": alerts,
    }
    # Limits left unset keep the server's defaults (context.py).
    for key in ("max_answer_bytes", "query_timeout", *QUOTA_KEYS.values()):
        if getattr(args, key, None) is not None:
            settings[key] = getattr(args, key)
    try:
        made = not _has_team_tables(store_url)  # before serve() opens (and makes) them

        def ready(url: str) -> None:
            from ..urls import mask_url

            what = "made the team tables in" if made else "store"
            note = f" ({default})" if default else ""
            print(f"dask-analytics server: {what} {mask_url(store_url)}{note}", flush=True)
            print(f"dask-analytics server at {url}", flush=True)

        asyncio.run(
            serve(
                settings,
                host=args.host,
                port=args.port,
                certfile=args.certfile,
                keyfile=args.keyfile,
                ready=ready,
            )
        )
    except StoreUnavailable as e:
        print(f"dask-analytics server: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:  # port taken, unreadable certificate, bad key
        print(f"dask-analytics server: {e}", file=sys.stderr)
        return 1
    return 0


def _team(args: SimpleNamespace) -> Any:
    """The TeamStore of the named store; SystemExit, with what to do, for one that has no
    team tables (never made here: a typo would be a new empty store)."""
    from ..store import open_store
    from ..store.team import TeamStore
    from ..urls import mask_url

    url, default = _resolved(args)
    if not _has_team_tables(url):
        where = f"{mask_url(url)} ({default})" if default else mask_url(url)
        raise SystemExit(
            f"dask-analytics: no team server's tables in {where}: no `dask-analytics server` "
            "has run on it; --store names the server's database"
        )
    return TeamStore(open_store(url))


def _token_create(args: SimpleNamespace) -> int:
    import shlex
    import time

    from ..store import open_store
    from ..store.team import TeamStore
    from ..urls import mask_url
    from .tokens import new_token, token_hash

    url, default = _resolved(args)
    shown = mask_url(url)
    again = (
        f"dask-analytics token create --store URL --account {shlex.quote(args.account)} "
        f"--user {shlex.quote(args.user)}"
    )
    # The personal default store is a team server's only when someone started one on it
    # without naming a store: writing there unasked is how a token ends up where no
    # server reads it, so it must be named, like any other.
    if default is not None:
        print(
            f"dask-analytics token create: the token would go into {_safe(shown)} ({default}), "
            "and a team server keeps its tokens in its own database; nothing was written. "
            f"Name that database, the --store the server was started with: {_safe(again)} "
            f"(--store {_safe(shown)} if it was started without one)",
            file=sys.stderr,
        )
        return 2
    if not _has_team_tables(url):
        print(
            f"dask-analytics token create: {_safe(shown)} has no team server's tables (no "
            "`dask-analytics server` has run on it: one makes them when it starts); nothing "
            f"was written. Name the server's database, the --store it was started with: "
            f"{_safe(again)}; or start the server on this store first",
            file=sys.stderr,
        )
        return 2
    team = TeamStore(open_store(url))
    token_id, token = new_token()
    expires = None if args.expires is None else time.time() + args.expires
    team.add_token(
        token_id=token_id,
        token_hash=token_hash(token),
        account=args.account,
        user=args.user,
        expires=expires,
    )
    print(token)
    until = (
        "never expires"
        if expires is None
        else "expires " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(expires))
    )
    print(
        f"(wrote token id {token_id} for user {_safe(args.user)!r} of account "
        f"{_safe(args.account)!r} into {_safe(shown)}, {until}: servers on that store accept "
        "it; it is shown once: the server keeps only its hash)",
        file=sys.stderr,
    )
    return 0


def _safe(text: Any) -> str:
    from ..tables import escaped

    return escaped(text)


def _duration(value: str) -> float:
    """--expires: 30d, 12h, 90m, 2w, 3600s (a plain number: days)."""
    import dask.utils

    try:
        seconds = dask.utils.parse_timedelta(value.strip(), default="d")
    except (ValueError, KeyError, TypeError):
        raise click.BadParameter(
            f"--expires takes a duration such as 30d, 12h or 2w, got {value!r}"
        ) from None
    if not seconds or seconds <= 0:
        raise click.BadParameter("--expires must be a positive duration")
    return float(seconds)


def _token_list(args: SimpleNamespace) -> int:
    import time

    from ..tables import render

    now = time.time()

    def when(t: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"

    def state(r: dict) -> str:
        if r["revoked"]:
            return "revoked " + when(r["revoked"])
        if r.get("expires") is not None and r["expires"] <= now:
            return "expired"
        return "active"

    rows = _team(args).list_tokens(account=args.account)
    print(
        render(
            [
                (
                    r["token_id"],
                    r["account"],
                    r["user"],
                    when(r["created"]),
                    when(r.get("expires")),
                    when(r.get("last_used")),
                    state(r),
                )
                for r in rows
            ],
            ["id", "account", "user", "created", "expires", "last used", "state"],
        )
    )
    return 0


def _token_revoke(args: SimpleNamespace) -> int:
    from ..urls import mask_url

    url, default = _resolved(args)
    shown = _safe(mask_url(url)) + (f" ({default})" if default else "")
    if _team(args).revoke_token(args.token_id):
        print(
            f"revoked token {_safe(args.token_id)} in {shown} (every server replica on it stops "
            "accepting it within a few seconds)"
        )
        return 0
    print(
        f"no active token with id {_safe(args.token_id)!r} in {shown}; `dask-analytics token "
        "list` shows them, --store names the server's database",
        file=sys.stderr,
    )
    return 1


def _name(kind: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        value = value.strip()
        if (
            not value
            or len(value) > 200
            or any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in value)
        ):
            raise click.BadParameter(f"{kind} must be 1 to 200 printable characters")
        return value

    return check


def _param(check: Callable[[str], Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback from one of the checks above (None passes through)."""
    return lambda ctx, param, value: None if value is None else check(value)


def _call(body: Callable[[SimpleNamespace], int], options: dict) -> None:
    """Run a command's body with its options (and the --store the line named, wherever
    on it) as one namespace; its status becomes the exit status."""
    status = body(SimpleNamespace(store=named_store(), **options))
    if status:
        raise SystemExit(status)


database_option = store_option(
    "the server's database: a SQLite path, or a sqlite:/// or postgresql:// URL "
    "(default: analytics.store); before or after the command's name"
)


@click.command(
    name="server", help="run the team analytics server (ingest, query API, reports, web view)"
)
@database_option
@click.option("--host", default="127.0.0.1", show_default=True, help="interface to listen on")
@click.option("--port", type=int, default=8765, show_default=True, help="port")
@click.option("--certfile", help="TLS certificate (PEM); serves https")
@click.option("--keyfile", help="TLS private key (PEM), if not in --certfile")
@click.option("--code-key", hidden=True)  # refused with a message: keys do not go in argv
@click.option(
    "--code-key-file",
    metavar="FILE",
    help=f"file holding the Fernet key(s) that encrypt code at rest (snippets, reports), one per "
    f"line or comma-separated, newest first; or set ${CODE_KEY_ENV}. Default: "
    f"analytics.code-key-file, else dask-analytics/code.key in the user config directory (made, mode 0600, on first start)",
)
@click.option("--public-url", help="base URL of report links (default: from each request's Host)")
@click.option(
    "--no-token",
    is_flag=True,
    help="no tokens: anyone reaching the port reads every account (localhost only)",
)
@click.option(
    "--allowed-host",
    multiple=True,
    metavar="NAME",
    help="a host name (or address) clients reach the server by; repeat for several. Requests "
    "naming another Host are refused (DNS rebinding). Checked with --no-token (local names "
    "and --host allowed by default) or once given; '*' allows any",
)
@click.option(
    "--session-secret-file",
    help="file holding the secret that signs login sessions (default: server-session.secret "
    "next to the code key file; made with mode 0600 on first start)",
)
@click.option(
    "--metrics-token-file",
    metavar="FILE",
    help=f"file holding the token GET /metrics wants (Authorization: Bearer <token>), or set "
    f"${METRICS_TOKEN_ENV}; without one /metrics is refused unless --no-token",
)
@click.option(
    "--forwarded-allow-ips",
    metavar="ADDRS",
    help="reverse proxies (addresses or networks, comma-separated; '*': any) whose X-Forwarded-For "
    "names the client, and X-Forwarded-Proto/-Host the scheme and host it used (https: Secure "
    "login cookie, HSTS, https links); default: analytics.server.forwarded-allow-ips, else none",
)
@click.option(
    "--report-url",
    metavar="URL",
    help="a second origin (e.g. https://reports.example.com, another name of this server) serving "
    "uploaded reports' own HTML; default: analytics.server.report-url, else that HTML is not "
    "served (report links open the page rendered from each report's twin)",
)
@click.option(
    "--retention",
    metavar="AGE",
    help="delete clusters that ended longer ago than AGE (e.g. 90d), hourly; default: analytics.retention",
)
@click.option(
    "--max-answer-bytes",
    "max_answer_bytes",
    type=click.IntRange(min=64 * 1024),
    metavar="N",
    help="largest JSON answer of one read, in bytes (lists are cut into pages: the answer's `next` says "
    "how to get the rest); default 16 MiB",
)
@click.option(
    "--query-timeout",
    "query_timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="cancel a store read running longer (answered 503); default 30",
)
@click.option(
    "--report-quota-bytes",
    "quota_report_bytes",
    type=click.IntRange(min=0),
    metavar="N",
    help="bytes of stored reports one account may keep (0: no quota); default 2 GiB",
)
@click.option(
    "--event-quota-bytes",
    "quota_event_bytes",
    type=click.IntRange(min=0),
    metavar="N",
    help="bytes of recorded events and exceptions one account may keep (0: no quota); default 2 GiB",
)
@click.option(
    "--task-stream-quota-bytes",
    "quota_task_stream_bytes",
    type=click.IntRange(min=0),
    metavar="N",
    help="bytes of task stream one account may keep (0: no quota); default 64 GiB",
)
@click.option(
    "--profile-quota-bytes",
    "quota_profile_bytes",
    type=click.IntRange(min=0),
    metavar="N",
    help="bytes of profiles one account may keep (0: no quota); default 16 GiB",
)
@click.option(
    "--sample-quota-bytes",
    "quota_sample_bytes",
    type=click.IntRange(min=0),
    metavar="N",
    help="bytes of cluster, worker and GPU samples and computation metrics one account may keep "
    "(0: no quota); default 32 GiB",
)
@click.option(
    "--account-quota-bytes",
    "quota_account_bytes",
    type=click.IntRange(min=0),
    metavar="N",
    help="bytes one account may keep in all, reports included (0: no quota); default 128 GiB",
)
def server(**options: Any) -> None:
    _call(_server, options)


@click.group(name="token", help="API tokens of the analytics server")
@database_option
def token() -> None:
    pass


@token.command(name="create", help="make a token for a user of an account and print it")
@click.option("--account", required=True, callback=_param(_name("account")))
@click.option("--user", required=True, callback=_param(_name("user")))
@click.option(
    "--expires",
    metavar="DURATION",
    callback=_param(_duration),
    help="refuse the token after this long, e.g. 30d, 12h, 2w (default: never)",
)
@database_option
def token_create(**options: Any) -> None:
    _call(_token_create, options)


@token.command(name="list", help="list tokens (ids, never the tokens)")
@click.option("--account", callback=_param(_name("account")))
@database_option
def token_list(**options: Any) -> None:
    _call(_token_list, options)


@token.command(name="revoke", help="revoke a token by its id")
@click.argument("token_id")
@database_option
def token_revoke(**options: Any) -> None:
    _call(_token_revoke, options)
