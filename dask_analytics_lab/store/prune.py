"""Retention: delete the clusters that ended before a cut-off, with every row that hangs
off them, in short transactions that never hold writers up for long.

A cluster is older than the cut-off when nothing about it happened since: it stopped
before the cut-off, or (a lost one, never stopped) its last message is older than the
cut-off.  A cluster still recording sends a sample every `analytics.interval`, so its
last_seen is recent however long ago it started: it is never pruned.  Times are the
clusters' own clocks (as every time in the store is).

What goes with an old cluster: its row and the rows of every table with a cluster_id
column (CHILD_TABLES, read from the schema, so a table added later goes too), its
`ingested` bookkeeping among them (whose deletion gives its messages' bytes back to
their account's storage usage, usage.py; a retried message of a pruned cluster then
makes a stub row, itself old, that the next prune takes).  Kept: its `cluster_owners` claim
(one small row: the id stays its account's, so no other account can write under it)
and reports (a published report is its author's to keep).

A dry run counts exactly what a prune with the same `now` and cut-off then deletes,
table by table, as long as nothing is written in between: the same clusters, and the
snippets swept after them (see the CLI's --as-of, which pins `now`).

Code snippets are shared by hash within an account: a snippet goes once no computation
refers to it and its account has no cluster that recorded in the last ACTIVE seconds
(a live cluster may have sent a snippet whose computation is still in flight; see
_sweep_snippets).

On PostgreSQL the time-partitioned tables (partitions.py) lose first every partition
whose range ended before the cut-off, as one DROP TABLE each, in a transaction of its
own: its rows are all of old clusters once those of clusters kept (a live cluster that
started long ago) have moved to the DEFAULT partition.  The batches below then delete
only what is left: rows in the partitions that straddle the cut-off, in DEFAULT, and in
the other tables.  The counts are the same as row by row, so a dry run still counts
exactly.  A partition whose lock is not had in time is left to the batches this time.

Batches: each transaction takes at most `batch` clusters and deletes at most
`max_rows` rows; a cluster with more rows is emptied over several transactions and its
row deleted last.  Between transactions prune sleeps at least as long as the last one
took (and 100 ms on SQLite, longer than its busy handler's longest nap), so waiting
writers get the lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import sqlalchemy as sa

from ..config import parse_age  # noqa: F401 - the CLI's and tests' way in
from ..store_errors import StoreUnavailable
from . import partitions, team_schema, usage
from . import schema as s
from .ingest import cluster_accounts
from .team_schema import cluster_owners

logger = logging.getLogger("dask_analytics_lab.retention")

T = TypeVar("T")

# Tables with a cluster_id whose rows outlive their cluster on purpose.
KEPT_TABLES = (cluster_owners, team_schema.reports)
# Rows that hang off a cluster, deleted before its row (children first: foreign keys);
# `ingested` last, so a batch cut short still refuses the retries of what it kept.
CHILD_TABLES: tuple[sa.Table, ...] = tuple(
    sorted(
        (
            t
            for t in reversed(s.metadata.sorted_tables)
            if "cluster_id" in t.c and t is not s.clusters and t not in KEPT_TABLES
        ),
        key=lambda t: t is s.ingested,
    )
)
# A snippet whose account had a cluster recording this recently is not deleted.
ACTIVE = 3600.0
BATCH = 20
MAX_ROWS = 5_000
SQLITE_PAUSE = 0.1
SNIPPET_CHUNK = 500


def is_old(cutoff: float) -> sa.ColumnElement[bool]:
    """Clusters that ended before `cutoff` (started < cutoff only narrows it, and lets
    the `started` index find them)."""
    c = s.clusters.c
    return sa.and_(
        c.started < cutoff, c.last_seen < cutoff, sa.or_(c.stopped.is_(None), c.stopped < cutoff)
    )


def prune(
    store: Any,
    older_than: float | None = None,
    *,
    cutoff: float | None = None,
    dry_run: bool = False,
    batch: int = BATCH,
    max_rows: int = MAX_ROWS,
    pause: float | None = None,
    lock: Callable[[], AbstractContextManager[object]] | None = None,
    stop: Callable[[], bool] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Delete (or with dry_run count) the clusters that ended more than `older_than`
    seconds ago (or before the time `cutoff`), with all their rows.

    Returns {"clusters": n, <table>: rows, ..., "code_snippets": n, "seconds": wall time}.
    lock: a context manager factory taken around each write transaction (the team
    server's own writer lock, so its ingest queues fairly behind prune's batches).
    stop: asked between batches; True ends the run there (what was deleted stays deleted).
    """
    if (older_than is None) == (cutoff is None):
        raise ValueError("give older_than (seconds) or cutoff (a time), not both")
    now = time.time() if now is None else now
    if cutoff is None:
        assert older_than is not None  # one of the two, checked above
        cutoff = now - older_than
    start = time.perf_counter()
    if dry_run:
        counts = _count(store, cutoff, now)
    else:
        pause = (SQLITE_PAUSE if store.dialect == "sqlite" else 0.0) if pause is None else pause
        counts = _delete(
            store,
            cutoff,
            now,
            batch=max(1, batch),
            max_rows=max(1, max_rows),
            pause=pause,
            lock=lock or contextlib.nullcontext,
            stop=stop or (lambda: False),
        )
    return {**counts, "seconds": round(time.perf_counter() - start, 3)}


def _ordered(counts: dict[str, int]) -> dict[str, int]:
    names = ["clusters", *(t.name for t in CHILD_TABLES), "code_snippets"]
    return {n: int(counts.get(n, 0)) for n in names}


# --- dry run ----------------------------------------------------------------------
def _count(store: Any, cutoff: float, now: float) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    with store.reading() as conn:
        ids = [r[0] for r in conn.execute(sa.select(s.clusters.c.cluster_id).where(is_old(cutoff)))]
        counts["clusters"] = len(ids)
        for chunk in _chunks(ids, 500):
            for t in CHILD_TABLES:
                counts[t.name] += conn.execute(
                    sa.select(sa.func.count()).select_from(t).where(t.c.cluster_id.in_(chunk))
                ).scalar_one()
        if ids:
            old = set(ids)
            kept = _referenced(conn, None, exclude=old)
            active = _active_accounts(conn, now)
            counts["code_snippets"] = sum(
                1 for k in _snippet_keys(conn) if k not in kept and k[0] not in active
            )
    return _ordered(counts)


# --- deleting -----------------------------------------------------------------------
def _delete(
    store: Any,
    cutoff: float,
    now: float,
    *,
    batch: int,
    max_rows: int,
    pause: float,
    lock: Callable[[], AbstractContextManager[object]],
    stop: Callable[[], bool],
) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    if store.dialect == "postgresql":
        _drop_partitions(store, cutoff, lock, stop, counts)
    while not stop():
        t0 = time.perf_counter()
        with lock():
            done = _retrying(store, lambda conn: _one_batch(conn, cutoff, batch, max_rows, counts))
        if done:
            break
        # Let writers that queued behind this transaction in first.
        time.sleep(max(pause, time.perf_counter() - t0) if pause else 0)
    # After any deleted cluster, as the dry run counts: a cluster that sent a snippet but
    # no computation (it died first) leaves an orphan too.
    if counts["clusters"] and not stop():
        counts["code_snippets"] = _sweep_snippets(store, now, lock)
    return _ordered(counts)


def _drop_partitions(
    store: Any,
    cutoff: float,
    lock: Callable[[], AbstractContextManager[object]],
    stop: Callable[[], bool],
    counts: dict[str, int],
) -> None:
    with store.reading() as conn:
        expired = partitions.expired(conn, cutoff)
    for part in expired:
        if stop():
            return
        try:
            with lock(), store.transaction() as conn:
                counts[part.table] += partitions.drop(conn, part, is_old(cutoff))
        except (StoreUnavailable, sa.exc.OperationalError) as e:
            # lock_not_available (lock_timeout), deadlock_detected: another time.
            if _sqlstate(e) not in ("55P03", "40P01"):
                raise
            logger.warning(
                "dask-analytics retention: %s was busy; its old rows are deleted row by row "
                "this time, the partition dropped next time",
                part.name,
            )


def _sqlstate(e: BaseException) -> str | None:
    cause = e if isinstance(e, sa.exc.DBAPIError) else e.__cause__
    return getattr(getattr(cause, "orig", None), "sqlstate", None)


def _retrying(store: Any, body: Callable[[sa.Connection], bool]) -> bool:
    """One write transaction; again once after a PostgreSQL deadlock with a writer."""
    for attempt in range(3):
        try:
            with store.transaction() as conn:
                return body(conn)
        except (sa.exc.OperationalError, StoreUnavailable) as e:
            # The store reports a driver's OperationalError as StoreUnavailable (its cause):
            # a deadlock or serialization failure is one of those, and worth one more go.
            driver = e.__cause__ if isinstance(e, StoreUnavailable) else e
            sqlstate = getattr(getattr(driver, "orig", None), "sqlstate", None)
            if attempt == 2 or sqlstate not in ("40P01", "40001"):
                raise
    raise AssertionError("unreachable")


def _one_batch(
    conn: sa.Connection, cutoff: float, batch: int, max_rows: int, counts: dict[str, int]
) -> bool:
    """Delete up to `max_rows` rows of up to `batch` old clusters; True when none is left."""
    c = s.clusters.c
    picked = [
        r[0]
        for r in conn.execute(
            sa.select(c.cluster_id)
            .where(is_old(cutoff))
            .order_by(c.started, c.cluster_id)
            .limit(batch)
        )
    ]
    if not picked:
        return True
    # Lock them (PostgreSQL; SQLite's BEGIN IMMEDIATE already excludes writers) in id
    # order, as ingest touches clusters, and check again: a message may have just
    # brought one back.
    ids = [
        r[0]
        for r in conn.execute(
            sa.select(c.cluster_id)
            .where(c.cluster_id.in_(picked), is_old(cutoff))
            .order_by(c.cluster_id)
            .with_for_update()
        )
    ]
    if not ids:
        return False
    budget = max_rows
    for t in CHILD_TABLES:
        n = _delete_rows(conn, t, ids, budget)
        counts[t.name] += n
        budget -= n
        if budget <= 0:
            return False  # the rest in the next transaction; the clusters' rows stay till then
    counts["clusters"] += conn.execute(sa.delete(s.clusters).where(c.cluster_id.in_(ids))).rowcount
    return False


def _delete_rows(conn: sa.Connection, t: sa.Table, ids: list[str], limit: int) -> int:
    """Delete at most `limit` rows of `t` belonging to the clusters `ids`, by primary key
    (indexed on both databases; PostgreSQL's ctid would not be)."""
    pk = list(t.primary_key.columns)
    key = pk[0] if len(pk) == 1 else sa.tuple_(*pk)
    some = sa.select(*pk).where(t.c.cluster_id.in_(ids)).limit(limit)
    if t is s.ingested:
        # Each claim holds what its message added to its account's usage: given back in
        # the transaction that deletes it, so usage falls exactly as retention deletes.
        deleted = conn.execute(
            sa.delete(t).where(key.in_(some)).returning(t.c.cluster_id, t.c.kind, t.c.bytes)
        ).all()
        usage.give_back(conn, deleted)
        return len(deleted)
    return conn.execute(sa.delete(t).where(key.in_(some))).rowcount


# --- code snippets --------------------------------------------------------------
def _sweep_snippets(
    store: Any, now: float, lock: Callable[[], AbstractContextManager[object]]
) -> int:
    """Delete the snippets no computation refers to, except in accounts that recorded lately.

    A live cluster's scheduler sends a snippet once, maybe in the batch before the
    computation that refers to it: a snippet nothing refers to *yet* must survive.
    Such an account has a cluster seen in the last ACTIVE seconds, and is skipped.
    The scan of every computation runs in a read (no lock held); the write only
    rechecks the computations of clusters seen since just before that scan.
    """
    scanned = time.time()
    with store.reading() as conn:
        referenced = _referenced(conn, None)
        orphans = [k for k in _snippet_keys(conn) if k not in referenced]
    deleted = 0
    for chunk in _chunks(orphans, SNIPPET_CHUNK):
        with lock(), store.transaction() as conn:
            if conn.dialect.name == "postgresql":
                # Waits for writers that stored (or skipped, as already there) a snippet and
                # have not committed, and holds new ones off for this short transaction.
                conn.exec_driver_sql("LOCK TABLE code_snippets IN SHARE ROW EXCLUSIVE MODE")
            active = _active_accounts(conn, now)
            recent = sa.select(s.clusters.c.cluster_id).where(
                s.clusters.c.last_seen >= scanned - ACTIVE
            )
            late = _referenced(conn, s.computations.c.cluster_id.in_(recent))
            gone = [k for k in chunk if k[0] not in active and k not in late]
            cs = s.code_snippets.c
            for acc, hashes in _by_account(gone).items():
                deleted += conn.execute(
                    sa.delete(s.code_snippets).where(cs.account == acc, cs.hash.in_(hashes))
                ).rowcount
    return deleted


def _referenced(
    conn: sa.Connection, where: Any, exclude: set[str] | None = None
) -> set[tuple[str, str]]:
    """(account, hash) of the snippets the computations (those matching `where`) refer to,
    by code_hashes or code_frames; a computation's account is its cluster's, as
    ingest.cluster_accounts decides it."""
    cc, cl, o = s.computations.c, s.clusters.c, cluster_owners.c
    account = sa.func.coalesce(cl.account, o.account, "default")
    q = (
        sa.select(cc.cluster_id, account, cc.code_hashes, cc.code_frames)
        .select_from(
            s.computations.join(s.clusters, cl.cluster_id == cc.cluster_id).outerjoin(
                cluster_owners, o.cluster_id == cc.cluster_id
            )
        )
        .where(sa.or_(cc.code_hashes.is_not(None), cc.code_frames.is_not(None)))
    )
    if where is not None:
        q = q.where(where)
    found: set[tuple[str, str]] = set()
    for cid, acc, hashes, frames in conn.execute(q):
        if exclude and cid in exclude:
            continue
        found.update((acc, h) for h in _json(hashes) or () if isinstance(h, str))
        found.update(
            (acc, f["hash"])
            for f in _json(frames) or ()
            if isinstance(f, dict) and isinstance(f.get("hash"), str)
        )
    return found


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _active_accounts(conn: sa.Connection, now: float) -> set[str]:
    recent = [
        r[0]
        for r in conn.execute(
            sa.select(s.clusters.c.cluster_id).where(s.clusters.c.last_seen >= now - ACTIVE)
        )
    ]
    return set(cluster_accounts(conn, set(recent)).values()) if recent else set()


def _snippet_keys(conn: sa.Connection) -> list[tuple[str, str]]:
    cs = s.code_snippets.c
    return [(r[0], r[1]) for r in conn.execute(sa.select(cs.account, cs.hash))]


def _by_account(keys: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for acc, h in keys:
        out[acc].append(h)
    return out


def _chunks(items: list[T], n: int) -> Iterator[list[T]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]
