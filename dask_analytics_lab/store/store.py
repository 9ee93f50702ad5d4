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
from . import budget, partitions, queries
from . import compare as _compare
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


class Store:
    """Open with open_store(url). Every method may raise StoreUnavailable.

    single_connection: one connection, opened here (SQLite's -wal and -shm files
    with it) and kept until close(); for a writer in a long-lived process.
    """

    def __init__(self, url: str | os.PathLike[str], *, single_connection: bool = False) -> None:
        url = os.fspath(url)
        if "://" not in url:  # a bare path is a SQLite file, as in config.validate_store
            url = "sqlite:///" + os.path.abspath(os.path.expanduser(url))
        self.url = masked(url)  # as given, safe to print: the password is hidden
        self._engine = make_engine(url, single_connection=single_connection)
        self._read = read_options(self._engine)
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
        options = dict(self._read)
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

    def list_clusters(
        self,
        *,
        account: str | None = None,
        user: str | None = None,
        state: str | None = None,
        since: Any = None,
        until: Any = None,
        text: str | None = None,
        before: str | None = None,
        limit: int | None = 100,
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_clusters(
                conn,
                account=account,
                user=user,
                state=state,
                since=since,
                until=until,
                text=text,
                before=before,
                limit=limit,
            )

    def get_cluster(self, cluster_id: str, *, account: str | None = None) -> dict[str, Any]:
        with self.reading() as conn:
            return queries.get_cluster(conn, cluster_id, account=account)

    def list_cluster_samples(
        self,
        cluster_id: str,
        *,
        account: str | None = None,
        limit: int | None = 10_000,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_cluster_samples(
                conn, cluster_id, account=account, limit=limit, offset=offset
            )

    def list_computations(
        self,
        *,
        cluster_id: str | None = None,
        account: str | None = None,
        user: str | None = None,
        state: str | None = None,
        since: Any = None,
        until: Any = None,
        text: str | None = None,
        before: str | None = None,
        limit: int | None = 100,
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_computations(
                conn,
                cluster_id=cluster_id,
                account=account,
                user=user,
                state=state,
                since=since,
                until=until,
                text=text,
                before=before,
                limit=limit,
            )

    def cost_report(
        self, *, by: str = "user", since: Any = None, until: Any = None, account: str | None = None
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.cost_report(conn, by=by, since=since, until=until, account=account)

    def get_computation(self, computation_id: str, *, account: str | None = None) -> dict[str, Any]:
        with self.reading() as conn:
            return queries.get_computation(conn, computation_id, account=account)

    def list_task_groups(
        self, computation_id: str, *, account: str | None = None
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_task_groups(conn, computation_id, account=account)

    def list_exceptions(
        self,
        *,
        cluster_id: str | None = None,
        computation_id: str | None = None,
        account: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_exceptions(
                conn,
                cluster_id=cluster_id,
                computation_id=computation_id,
                account=account,
                limit=limit,
                offset=offset,
            )

    def list_events(
        self,
        *,
        cluster_id: str | None = None,
        topic: str | None = None,
        account: str | None = None,
        limit: int | None = 1000,
        since: float | None = None,
        until: float | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_events(
                conn,
                cluster_id=cluster_id,
                topic=topic,
                account=account,
                limit=limit,
                since=since,
                until=until,
                offset=offset,
            )

    def get_profile(
        self,
        *,
        computation_id: str | None = None,
        cluster_id: str | None = None,
        prefix: str | None = None,
        account: str | None = None,
    ) -> dict[str, Any]:
        with self.reading() as conn:
            return queries.get_profile(
                conn,
                computation_id=computation_id,
                cluster_id=cluster_id,
                prefix=prefix,
                account=account,
            )

    def list_worker_samples(
        self,
        cluster_id: str,
        *,
        worker: str | None = None,
        account: str | None = None,
        limit: int | None = 100_000,
        since: float | None = None,
        until: float | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_worker_samples(
                conn,
                cluster_id,
                worker=worker,
                account=account,
                limit=limit,
                since=since,
                until=until,
                offset=offset,
            )

    def list_task_stream(
        self,
        computation_id: str,
        *,
        account: str | None = None,
        limit: int | None = 100_000,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_task_stream(
                conn, computation_id, account=account, limit=limit, offset=offset
            )

    def list_gpu_metrics(
        self,
        *,
        cluster_id: str | None = None,
        monitor_id: str | None = None,
        worker: str | None = None,
        account: str | None = None,
        limit: int | None = 100_000,
        since: float | None = None,
        until: float | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return queries.list_gpu_metrics(
                conn,
                cluster_id=cluster_id,
                monitor_id=monitor_id,
                worker=worker,
                account=account,
                limit=limit,
                since=since,
                until=until,
                offset=offset,
            )

    def list_runs(
        self, computation_id: str, *, account: str | None = None, limit: int | None = 100
    ) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return _compare.list_runs(conn, computation_id, account=account, limit=limit)

    def compare(
        self, computation_id: str, *, baseline: str | None = None, account: str | None = None
    ) -> dict[str, Any]:
        with self.reading() as conn:
            return _compare.compare(conn, computation_id, baseline=baseline, account=account)

    def run_summary(self, computation_id: str, *, account: str | None = None) -> dict[str, Any]:
        with self.reading() as conn:
            return _compare.run_summary(conn, computation_id, account=account)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """The read methods in one read transaction (snapshot.py): for several reads that
        must agree, e.g. everything findings/ reads of one computation."""
        with self.reading() as conn:
            yield Snapshot(conn)

    def export(self, *, account: str | None = None) -> dict[str, list[dict[str, Any]]]:
        with self.reading() as conn:
            return queries.export(conn, account=account)

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
