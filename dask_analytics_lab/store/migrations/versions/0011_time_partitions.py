"""Time partitions: on PostgreSQL, task_stream, worker_samples, gpu_samples and events
become tables partitioned by RANGE on their time column, a partition per UTC day and a
DEFAULT one (store/partitions.py); their rows move over.  A partitioned table's primary
key must hold the partition key: (id, time), (id, start).  SQLite keeps its tables.

Both: task_stream_spans, each computation's task stream's range of start times, so a
read of it names its partitions; filled from the rows already there.

Frozen once released: change the schema in a new revision.  Self-contained on purpose
(store/partitions.py may change later; what this revision made may not).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

import math
import time
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TABLES = {"task_stream": "start", "worker_samples": "time", "gpu_samples": "time", "events": "time"}
DAY = 86400.0


def upgrade() -> None:
    op.create_table(
        "task_stream_spans",
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("first_start", sa.Double(), nullable=False),
        sa.Column("last_start", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.cluster_id"],
            name="fk_task_stream_spans_cluster_id_clusters",
        ),
        sa.PrimaryKeyConstraint("cluster_id", "computation_id", name="pk_task_stream_spans"),
    )
    op.execute(
        "INSERT INTO task_stream_spans (cluster_id, computation_id, first_start, last_start) "
        "SELECT cluster_id, computation_id, min(start), max(start) FROM task_stream "
        "GROUP BY cluster_id, computation_id"
    )
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    for table, key in TABLES.items():
        _rebuild(conn, table, key)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        for table in TABLES:
            _rebuild(conn, table, None)
    op.drop_table("task_stream_spans")


def _rebuild(conn: sa.Connection, table: str, key: str | None) -> None:
    """Make `table` again, partitioned by `key` (None: a plain table), with its rows,
    indexes, foreign keys and id sequence."""
    q = _q
    oid = f"'{table}'::regclass"
    indexes = [
        d.replace(" ON ONLY ", " ON ")
        for (d,) in conn.exec_driver_sql(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index "
            f"WHERE indrelid = {oid} AND NOT indisprimary ORDER BY indexrelid"
        )
    ]
    fks = conn.exec_driver_sql(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        f"WHERE conrelid = {oid} AND contype = 'f' AND conparentid = 0 ORDER BY conname"
    ).all()
    seq = conn.exec_driver_sql(f"SELECT pg_get_serial_sequence('{table}', 'id')").scalar_one()
    old = f"{table}_before_0011"
    # The sequence would go with the old table: the new one's id default keeps using it.
    conn.exec_driver_sql(f"ALTER SEQUENCE {seq} OWNED BY NONE")
    conn.exec_driver_sql(f"ALTER TABLE {q(table)} RENAME TO {q(old)}")
    like = f"CREATE TABLE {q(table)} (LIKE {q(old)} INCLUDING DEFAULTS)"
    if key is None:
        conn.exec_driver_sql(like)
    else:
        conn.exec_driver_sql(f"{like} PARTITION BY RANGE ({q(key)})")
        conn.exec_driver_sql(
            f"CREATE TABLE {q(table + '_default')} PARTITION OF {q(table)} DEFAULT"
        )
        now = math.floor(time.time() / DAY)
        days = {now, now + 1} | {
            int(d)
            for (d,) in conn.exec_driver_sql(
                f"SELECT DISTINCT floor({q(key)} / {DAY}) FROM {q(old)}"
            )
            if d is not None
        }
        for d in sorted(days):
            name = f"{table}_p{datetime.fromtimestamp(d * DAY, UTC):%Y%m%d}"
            conn.exec_driver_sql(
                f"CREATE TABLE {q(name)} PARTITION OF {q(table)} "
                f"FOR VALUES FROM ({d * DAY!r}) TO ({(d + 1) * DAY!r})"
            )
    # Indexes after the rows: one build instead of an update per row.
    conn.exec_driver_sql(f"INSERT INTO {q(table)} SELECT * FROM {q(old)}")
    conn.exec_driver_sql(f"DROP TABLE {q(old)}")
    pk = "id" if key is None else f"id, {q(key)}"
    conn.exec_driver_sql(
        f"ALTER TABLE {q(table)} ADD CONSTRAINT {q('pk_' + table)} PRIMARY KEY ({pk})"
    )
    for name, definition in fks:
        conn.exec_driver_sql(f"ALTER TABLE {q(table)} ADD CONSTRAINT {q(name)} {definition}")
    for definition in indexes:
        conn.exec_driver_sql(definition)
    conn.exec_driver_sql(f"ALTER SEQUENCE {seq} OWNED BY {q(table)}.id")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
