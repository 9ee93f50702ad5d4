"""The Store: one object per store URL that ingests messages and answers reads.

Safe to share between threads (the engine pools connections) but not across a
fork: open the store in the process that uses it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from ..messages import Envelope
from ..reader import Reader
from ..reads import Read
from . import budget, partitions, queries
from . import ingest as _ingest
from .engine import (
    is_connection_error,
    make_engine,
    masked,
    raise_unavailable,
    read_options,
    time_limit,
)
from .migrate import upgrade
from .snapshot import Snapshot
from .usage import Charge


class Store(Reader):
    """Open with open_store(url). Every method may raise StoreUnavailable.

    The read methods are the Reader's (reads.py declares them): each runs its query in
    one read transaction; `snapshot()` gives several reads one transaction.

    single_connection: one connection, opened here (SQLite's -wal and -shm files
    with it) and kept until close(); for a writer in a long-lived process.
    """

    def __init__(self, url: str | os.PathLike[str], *, single_connection: bool = False) -> None:
        url = os.fspath(url)
        if "://" not in url:  # a bare path is a SQLite file, as in config.validate_store
            url = "sqlite:///" + os.path.abspath(os.path.expanduser(url))
        self.url = masked(url)  # as given, safe to print: the password is hidden
        self._engine = make_engine(url, single_connection=single_connection)
        self._read_options = read_options(self._engine)
        # Seconds a read may run before it is cancelled (QueryTimeout); None: no limit.
        # The team server sets it (its query_timeout); embedded readers have none.
        self.read_timeout: float | None = None
        try:
            with self._unavailable(opening=True):
                upgrade(self._engine, self.url)
        except BaseException:
            self._engine.dispose()
            raise
        # PostgreSQL's time partitions, made ahead by whoever writes (partitions.py).
        self._ahead = partitions.Ahead(self._engine) if self.dialect == "postgresql" else None

    @property
    def dialect(self) -> str:
        """ "sqlite" or "postgresql"."""
        return self._engine.dialect.name

    @contextlib.contextmanager
    def _unavailable(self, opening: bool = False) -> Iterator[None]:
        """Driver errors meaning "cannot reach/open the database" become StoreUnavailable;
        when opening, any (e.g. a PostgreSQL user who may not create tables)."""
        try:
            yield
        except sa.exc.DBAPIError as e:
            if opening or is_connection_error(e):
                raise_unavailable(self.url, self.dialect, e)
            raise

    @contextlib.contextmanager
    def reading(self) -> Iterator[sa.Connection]:
        """A read transaction: every SELECT inside sees one snapshot.  Connection
        trouble is StoreUnavailable, as for every Store method.  With `read_timeout`
        set, a read running longer is cancelled (QueryTimeout); under a server's answer
        budget (budget.py), PostgreSQL rows come through a server-side cursor, so a big
        result is never held whole by the driver."""
        options = dict(self._read_options)
        if budget.current() is not None and self.dialect == "postgresql":
            options.update(stream_results=True, max_row_buffer=1000)
        with self._unavailable(), self._engine.connect().execution_options(**options) as conn:
            with conn.begin(), time_limit(conn, self.read_timeout, self.url):
                yield conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A write transaction, committed on leaving the block and rolled back on an
        error (BEGIN IMMEDIATE on SQLite: it holds the write lock from the start, so two
        writing processes wait for each other instead of failing at commit).  Connection
        trouble is StoreUnavailable."""
        with self._unavailable(), self._engine.begin() as conn:
            yield conn

    def ingest(
        self, messages: list[Envelope] | list[dict[str, Any]], *, charge: Charge | None = None
    ) -> int:
        """Store a batch (all or nothing); returns how many messages were new.

        Raises messages.MessageError, and stores nothing, if any message is malformed.
        charge: a usage.Charge (the team server's quotas): raises usage.QuotaExceeded,
        and stores nothing, where the new messages would pass one.
        """
        if self._ahead is not None:
            self._ahead()
        with self._unavailable():
            return _ingest.ingest(self._engine, messages, charge=charge)

    def _answer(self, read: Read, args: dict[str, Any]) -> Any:
        keeper = read.keeper()
        if keeper is not None:
            keeper(self, args)
        if read.over == "reader":  # a read made of reads (findings): they share a snapshot
            return read.function()(self, **args)
        with self.snapshot() as snap:
            return snap._answer(read, args)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """The read methods in one read transaction (snapshot.py): for several reads that
        must agree, e.g. everything findings/ reads of one computation."""
        with self.reading() as conn:
            yield Snapshot(conn)

    def export_page(
        self,
        table: str,
        *,
        account: str | None = None,
        after: tuple[Any, ...] | None = None,
        limit: int = 1000,
    ) -> tuple[list[dict[str, Any]], tuple[Any, ...] | None]:
        """One page of `export`'s rows of one table, in primary key order, after the key
        `after`: (rows, the key to pass for the next page, or None after the last).  Each
        page is its own short read, so a streamed export holds no transaction open."""
        with self.reading() as conn:
            return queries.export_page(conn, table, account=account, after=after, limit=limit)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Store {self.url}>"


def open_store(url: str | os.PathLike[str], *, single_connection: bool = False) -> Store:
    """Open (creating if need be, and upgrading to this release's schema) the store at
    `url`: sqlite:///absolute/path, postgresql://..., or a plain file path.

    single_connection: see Store (the scheduler plugin's writer uses it)."""
    return Store(url, single_connection=single_connection)
