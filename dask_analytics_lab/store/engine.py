"""Connecting: one SQLAlchemy engine per store URL, set up for SQLite or PostgreSQL.

SQLite needs care to take several writer processes and readers at once:
- WAL, so readers never block the writer and the writer never blocks readers;
- a busy timeout, so a writer waits for the write lock instead of failing at once;
- BEGIN IMMEDIATE for writes. With a deferred BEGIN, a transaction that reads and
  then writes cannot upgrade its (by then stale) read snapshot when another process
  wrote in between, and SQLite fails it with "database is locked" at once, busy
  timeout or not. Measured here: 4 writer processes only worked with IMMEDIATE.
- reads keep a deferred BEGIN (the READ execution option) so they take no write lock.
Python's sqlite3 (before 3.12) issues its own BEGINs; SQLAlchemy's documented
recipe turns that off (isolation_level None) and emits BEGIN in the "begin" event.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import QueuePool, StaticPool

from ..store_errors import QueryTimeout, StoreUnavailable
from ..urls import mask_url

# Execution options of a read-only connection: deferred BEGIN on SQLite.
READ = {"dal_read": True}
BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10


def parse(url: str) -> URL:
    """The SQLAlchemy URL for a store URL; plain postgresql:// means psycopg 3."""
    try:
        u = make_url(url)
    except (sa.exc.ArgumentError, ValueError) as e:
        shown = re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", url)
        raise ValueError(f"{shown!r} is not a valid store URL ({e})") from None
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    if u.get_backend_name() not in ("sqlite", "postgresql"):
        # A wrong setting, not an outage: ValueError, so nobody retries it.
        raise ValueError(
            f"{masked(u)} is not a store URL: only sqlite:/// and postgresql:// are (an http(s):// "
            "URL is a `dask-analytics server`, reached through its client)"
        )
    return u


def masked(url: URL | str) -> str:
    """The URL with any password hidden (urls.mask_url), for error messages and logs."""
    return mask_url(str(url))  # a URL object prints its password as *** already


def dialect_insert(conn: sa.Connection | str, table: sa.Table) -> Any:
    """INSERT with ON CONFLICT for this connection's dialect, or the dialect named (the
    same API on both)."""
    name = conn if isinstance(conn, str) else conn.dialect.name
    return (postgresql.insert if name == "postgresql" else sqlite.insert)(table)


def is_memory(u: URL) -> bool:
    return u.get_backend_name() == "sqlite" and u.database in (None, "", ":memory:")


def make_engine(url: str, *, single_connection: bool = False) -> sa.Engine:
    """An engine for a store URL.

    single_connection: pool exactly one connection, kept for the engine's life (a
    second checkout waits for it).  For the scheduler's writer, which writes from
    one thread: its process then holds a constant set of descriptors for the store
    (distributed checks that a scheduler's descriptor count does not grow).
    """
    u = parse(url)
    pool: dict[str, Any] = {"pool_size": 1, "max_overflow": 0} if single_connection else {}
    if u.get_backend_name() == "postgresql":
        try:
            # pre_ping: a pooled connection may have died with a server restart.
            return sa.create_engine(
                u, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}, **pool
            )
        except ImportError as e:
            # An install to fix, not an outage: said as what to run, still an ImportError.
            raise ModuleNotFoundError(
                f"the store {masked(url)} is PostgreSQL, and psycopg is not installed here ({e}); "
                "install it with: pip install 'dask-analytics-lab[postgresql]'",
                name="psycopg",
            ) from None
    if is_memory(u):
        # One shared connection, or every checkout would see its own empty database.
        engine = sa.create_engine(
            u, poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
    else:
        _make_parent_dir(u)
        engine = sa.create_engine(u, poolclass=QueuePool, **pool) if pool else sa.create_engine(u)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _make_parent_dir(u: URL) -> None:
    assert u.database  # a SQLite file: make_engine asked is_memory
    parent = Path(u.database).expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreUnavailable(
            f"cannot use the analytics store {masked(u)}: cannot create its directory {parent} "
            f"({e.strerror or e}). Set analytics.store to a path in a writable directory."
        ) from None


def _sqlite_on_connect(dbapi_conn: Any, record: Any) -> None:
    if hasattr(sqlite3, "LEGACY_TRANSACTION_CONTROL"):
        # Python >= 3.12: isolation_level only counts in this mode, which 3.16 stops defaulting to.
        dbapi_conn.autocommit = sqlite3.LEGACY_TRANSACTION_CONTROL
    dbapi_conn.isolation_level = None  # the driver begins nothing; _sqlite_on_begin does
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")  # first: the next one may wait
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")  # durable enough in WAL, much faster
        cur.execute("PRAGMA foreign_keys = ON")  # as PostgreSQL does
    finally:
        cur.close()


def _sqlite_on_begin(conn: sa.Connection) -> None:
    conn.exec_driver_sql(
        "BEGIN" if conn.get_execution_options().get("dal_read") else "BEGIN IMMEDIATE"
    )


def read_options(engine: sa.Engine) -> dict[str, Any]:
    """Execution options for a read: a consistent snapshot over several SELECTs."""
    if engine.dialect.name == "postgresql":
        return {**READ, "isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
    return dict(READ)


# Errors that mean "cannot reach or open the database", as opposed to a bug in a query.
CONNECTION_ERRORS = (sa.exc.OperationalError, sa.exc.InterfaceError)


def is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, CONNECTION_ERRORS):
        return True
    # SQLite says "file is not a database" as a DatabaseError.
    return isinstance(exc, sa.exc.DatabaseError) and "not a database" in str(exc.orig or "")


def raise_unavailable(shown_url: str, backend: str, exc: BaseException) -> NoReturn:
    """Raise StoreUnavailable for a driver error, with what to do about it.

    shown_url: the store URL as the user gave it, password masked."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    reason = text.splitlines()[0].rstrip(".") if text else type(exc).__name__
    if "locked" in reason:
        advice = f"Another process held its write lock for over {BUSY_TIMEOUT_MS // 1000} s; try again later."
    elif backend == "postgresql":
        advice = (
            "Check that the PostgreSQL server is running and reachable from here, and that "
            "analytics.store names the right host, port, user, password and database."
        )
    else:
        advice = (
            "Check that the file is a dask-analytics SQLite store, that its directory is "
            "writable by this user and on a local disk, or set analytics.store to another path."
        )
    raise StoreUnavailable(
        f"cannot use the analytics store {shown_url}: {reason}. {advice}"
    ) from exc


# How often (in SQLite virtual machine instructions) the time limit is checked: about
# every millisecond of query work.
PROGRESS_STEPS = 10_000


@contextlib.contextmanager
def time_limit(conn: sa.Connection, seconds: float | None, shown_url: str) -> Iterator[None]:
    """Cancel the statements of this read transaction that run past `seconds`: PostgreSQL's
    statement_timeout for the transaction (SET LOCAL), SQLite a progress handler that
    aborts once the time is up.  A cancelled read raises QueryTimeout."""
    if not seconds:
        yield
        return
    timed_out = [False]
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            f"SET LOCAL statement_timeout = {max(1, int(seconds * 1000))}",
            execution_options={"stream_results": False},
        )  # not a cursor's query
        raw = None
    else:
        raw = conn.connection.dbapi_connection
        assert raw is not None  # the driver's connection, open: a transaction holds it
        deadline = time.monotonic() + seconds

        def check() -> int:
            if time.monotonic() > deadline:
                timed_out[0] = True
                return 1  # non-zero: SQLite stops the statement ("interrupted")
            return 0

        raw.set_progress_handler(check, PROGRESS_STEPS)
    try:
        yield
    except sa.exc.DBAPIError as e:
        if timed_out[0] or _query_canceled(e):
            raise QueryTimeout(
                f"a read of the analytics store {shown_url} ran past the query time limit of {seconds:g} s and "
                "was cancelled; ask for less (a smaller limit= or a narrower since=/until=), or raise the limit "
                "(server setting query_timeout, `dask-analytics server --query-timeout SECONDS`)"
            ) from None
        raise
    finally:
        if raw is not None:
            raw.set_progress_handler(None, 0)


def _query_canceled(e: sa.exc.DBAPIError) -> bool:
    return (
        getattr(e.orig, "sqlstate", None) == "57014"
    )  # PostgreSQL: query_canceled (statement_timeout)
