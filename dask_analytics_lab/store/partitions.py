"""Time partitions of the big tables on PostgreSQL; SQLite keeps one plain table each.

task_stream, worker_samples, gpu_samples and events are written once and grow with
time (docs/scale.md: ~0.74 billion rows a day at 100,000 clusters a day).  On PostgreSQL
the migration 0011 partitions them by RANGE on their time column: one partition per
INTERVAL, named <table>_pYYYYMMDD (its first UTC day), and a DEFAULT partition
<table>_default that takes a row outside all of them (a clock far off, an old message
sent again), so an insert never fails for want of a partition.

- Ahead: the first ingest of a Store, and then the first one of each interval, makes the
  partitions of the current interval and the next one (`ensure`); readers never do DDL.
- Retention (prune.py) drops a partition whose range ended before its cut-off as one
  table (`drop`), instead of deleting its rows one by one; rows in it of clusters that
  retention keeps (a cluster still recording that started long ago) move to the
  DEFAULT partition first, so what a prune removes is what it removed before.
- Reads (queries.py) name the time range of what they read, so the planner reads only
  the partitions of that range (partition pruning).
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from . import schema as s

if TYPE_CHECKING:
    from alembic.runtime.environment import NameFilterParentNames, NameFilterType

logger = logging.getLogger("dask_analytics_lab.store")

# One UTC day.  Retention is set in days ("90d"), so a day is the finest cut it asks for;
# 30-90 days of retention is 30-90 partitions a table, far below the thousands where
# planning slows; and a day at the peak of docs/scale.md (~250 million rows a table) is
# a unit one DROP TABLE removes where DELETE would take hours.  Partitions are found by
# their bounds, never by their names, so a later release may change it.
INTERVAL = 86400.0
# Intervals made ahead of the current one.
AHEAD = 1
# The partitioned tables and their partition keys.
TABLES: dict[sa.Table, str] = {
    s.task_stream: "start",
    s.worker_samples: "time",
    s.gpu_samples: "time",
    s.events: "time",
}
# Serialises partition DDL between processes (another constant than migrate.PG_LOCK_KEY).
LOCK_KEY = 0x6461_6C5F_7061_72  # "dal_par"
# How long DDL waits for a table's lock before it gives up until next time: while it
# waits behind a long read, every writer of the table queues behind it.
LOCK_TIMEOUT_MS = 5000
# After a failed `ensure`, the next ingest tries again this many seconds later.
RETRY = 60.0

_NAME = re.compile(r"^(" + "|".join(t.name for t in TABLES) + r")_(p\d{8}|default)$")
_BOUNDS = re.compile(r"FROM \('?([^')]+)'?\) TO \('?([^')]+)'?\)")


@dataclass(frozen=True)
class Partition:
    table: str
    name: str
    lo: float | None  # None, None: the DEFAULT partition
    hi: float | None


def start_of(t: float) -> float:
    """Start of the interval that holds the time t."""
    return math.floor(t / INTERVAL) * INTERVAL


def name_of(table: str, lo: float) -> str:
    return f"{table}_p{datetime.fromtimestamp(lo, UTC):%Y%m%d}"


def default_of(table: str) -> str:
    return f"{table}_default"


def is_partition(name: str) -> bool:
    """Whether a table name is one of a partitioned table's partitions (schema.py has
    none of them: Alembic's comparisons leave them out, see include_name)."""
    return _NAME.match(name) is not None


def include_name(
    name: str | None, type_: NameFilterType, parent_names: NameFilterParentNames
) -> bool:
    """Alembic's include_name hook: the partitions are the database's, not schema.py's."""
    return not (type_ == "table" and name is not None and is_partition(name))


def listing(conn: sa.Connection) -> list[Partition]:
    """The partitions of every partitioned table (none on a store before 0011)."""
    rows = conn.execute(
        sa.text(
            "SELECT p.relname, c.relname, pg_get_expr(c.relpartbound, c.oid) "
            "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE p.relkind = 'p' AND p.relname = ANY(:tables) "
            "AND p.relnamespace = to_regnamespace(current_schema())"
        ),
        {"tables": [t.name for t in TABLES]},
    )
    out = []
    for table, name, bound in rows:
        m = _BOUNDS.search(bound or "")
        lo, hi = (float(m.group(1)), float(m.group(2))) if m else (None, None)
        out.append(Partition(table, name, lo, hi))
    return sorted(out, key=lambda p: (p.table, p.lo is not None, p.lo or 0.0))


def expired(conn: sa.Connection, cutoff: float) -> list[Partition]:
    """Partitions that hold only times before `cutoff`, oldest first."""
    parts = [p for p in listing(conn) if p.hi is not None and p.hi <= cutoff]
    return sorted(parts, key=lambda p: (p.lo, p.table))


def ensure(conn: sa.Connection, now: float, ahead: int = AHEAD) -> list[str]:
    """Make the partitions of the interval holding `now` and of the `ahead` next ones
    where missing; returns the names made.  In the caller's transaction."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_KEY})
    _lock_timeout(conn)
    have = listing(conn)
    if not have:
        return []  # a store before 0011, or tables left unpartitioned
    made = []
    first = start_of(now)
    for table in TABLES:
        ranges = [
            (p.lo, p.hi)
            for p in have
            if p.table == table.name and p.lo is not None and p.hi is not None
        ]
        for i in range(ahead + 1):
            lo = first + i * INTERVAL
            if not any(a <= lo < b for a, b in ranges):
                made.append(create(conn, table, lo, lo + INTERVAL))
    return made


def create(conn: sa.Connection, table: sa.Table, lo: float, hi: float) -> str:
    """Make the partition [lo, hi) of `table`, with any rows the DEFAULT partition holds
    in that range (PostgreSQL refuses the partition while they are there).

    Made as a plain table and then attached: attaching takes a SHARE UPDATE EXCLUSIVE
    lock on `table`, so writers and readers go on meanwhile (CREATE TABLE ... PARTITION
    OF would lock them out)."""
    key = TABLES[table]
    name = name_of(table.name, lo)
    cols = ", ".join(_q(c.name) for c in table.columns)
    conn.exec_driver_sql(f"CREATE TABLE {_q(name)} (LIKE {_q(table.name)} INCLUDING DEFAULTS)")
    conn.execute(
        sa.text(
            f"WITH moved AS (DELETE FROM {_q(default_of(table.name))} "
            f"WHERE {_q(key)} >= :lo AND {_q(key)} < :hi RETURNING {cols}) "
            f"INSERT INTO {_q(name)} ({cols}) SELECT {cols} FROM moved"
        ),
        {"lo": lo, "hi": hi},
    )
    conn.exec_driver_sql(
        f"ALTER TABLE {_q(table.name)} ATTACH PARTITION {_q(name)} "
        f"FOR VALUES FROM ({lo!r}) TO ({hi!r})"
    )
    logger.info("dask-analytics store: made the partition %s", name)
    return name


def drop(conn: sa.Connection, part: Partition, is_old: sa.ColumnElement[bool]) -> int:
    """Drop the partition `part` (wholly before retention's cut-off); rows of its clusters
    that are not old (`is_old`, a condition on `clusters`) move to the DEFAULT partition
    first.  Returns the rows dropped: all of them of old clusters.  In the caller's
    transaction, which should be short: from DETACH to commit, `table` is locked."""
    table = next(t for t in TABLES if t.name == part.table)
    _lock_timeout(conn)
    c = s.clusters.c
    ids = _cluster_ids(conn, part.name)
    # Locked as prune locks the clusters it deletes (a message may bring one back until
    # then), before the table's lock: ingest locks its clusters first too.
    old = (
        set(
            conn.execute(
                sa.select(c.cluster_id)
                .where(c.cluster_id == sa.any_(_text_array(ids)), is_old)
                .order_by(c.cluster_id)
                .with_for_update()
            ).scalars()
        )
        if ids
        else set()
    )
    conn.exec_driver_sql(f"ALTER TABLE {_q(part.table)} DETACH PARTITION {_q(part.name)}")
    # Read again now that nothing more can come in: a row that came meanwhile is kept.
    kept = [i for i in _cluster_ids(conn, part.name) if i not in old]
    moved = 0
    if kept:
        src = sa.table(part.name, *(sa.column(col.name) for col in table.columns))
        moved = conn.execute(
            sa.insert(table).from_select(
                [col.name for col in table.columns],
                sa.select(*src.columns).where(src.c.cluster_id == sa.any_(_text_array(kept))),
            ),
            execution_options={"preserve_rowcount": True},  # SQLAlchemy keeps it for INSERT only so
        ).rowcount
    total = conn.exec_driver_sql(f"SELECT count(*) FROM {_q(part.name)}").scalar_one()
    conn.exec_driver_sql(f"DROP TABLE {_q(part.name)}")
    logger.info(
        "dask-analytics retention: dropped the partition %s (%d rows; %d moved to %s)",
        part.name,
        total - moved,
        moved,
        default_of(part.table),
    )
    return int(total - moved)


def _cluster_ids(conn: sa.Connection, name: str) -> list[str]:
    """The distinct cluster ids of a partition, by skipping through its index on
    cluster_id: one index probe per cluster, not a read of every row."""
    p = _q(name)
    return list(
        conn.exec_driver_sql(
            f"WITH RECURSIVE ids(cluster_id) AS ("
            f"(SELECT cluster_id FROM {p} ORDER BY cluster_id LIMIT 1) UNION ALL "
            f"SELECT (SELECT cluster_id FROM {p} WHERE cluster_id > ids.cluster_id "
            f"ORDER BY cluster_id LIMIT 1) FROM ids WHERE ids.cluster_id IS NOT NULL) "
            f"SELECT cluster_id FROM ids WHERE cluster_id IS NOT NULL"
        ).scalars()
    )


def _text_array(values: list[str]) -> sa.BindParameter[Any]:
    # One array parameter: a list of 100,000 ids as IN (...) would pass the driver's
    # limit of 65,535 parameters.
    return sa.bindparam(None, values, type_=postgresql.ARRAY(sa.Text))


def _lock_timeout(conn: sa.Connection) -> None:
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Ahead:
    """For a Store: before an ingest, make sure the partitions of now and of the next
    interval exist.  A comparison per ingest; DDL once an interval per process.  A
    failure (a lock not had in time; no right to create tables) is logged and tried
    again RETRY seconds later (the next interval): the ingest goes on, its rows land in
    DEFAULT at worst."""

    def __init__(self, engine: sa.Engine):
        self._engine = engine
        self._until = 0.0  # the time before which nothing needs doing
        self._lock = threading.Lock()

    def __call__(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if now < self._until:
            return
        with self._lock:
            if now < self._until:
                return
            try:
                with self._engine.begin() as conn:
                    ensure(conn, now)
                self._until = start_of(now) + INTERVAL
            except sa.exc.DBAPIError as e:
                # No right to create tables (a role that only writes rows) will not change
                # within a minute: try again next interval, and do not log it every minute.
                denied = getattr(e.orig, "sqlstate", None) == "42501"
                wait = INTERVAL if denied else RETRY
                self._until = now + wait
                logger.warning(
                    "dask-analytics store: could not make the partitions ahead (will try "
                    "again in %.0f s; rows go to the DEFAULT partition meanwhile): %s",
                    wait,
                    str(getattr(e, "orig", None) or e).strip().splitlines()[0],
                )
