"""Where the time went: fine performance metrics per computation and task prefix, a
profile per task prefix, per-worker samples over time, and each computation's task
stream (one row per task, or per bin once a computation has too many to keep).

Frozen once released: change the schema in a new revision.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "computation_metrics",
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=False),
        sa.Column("activity", sa.Text(), nullable=False),
        sa.Column("unit", sa.Text(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("updated", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.cluster_id"],
            name="fk_computation_metrics_cluster_id_clusters",
        ),
        sa.PrimaryKeyConstraint(
            "cluster_id",
            "computation_id",
            "prefix",
            "context",
            "activity",
            "unit",
            name="pk_computation_metrics",
        ),
    )
    op.create_table(
        "worker_samples",
        sa.Column("id", RowId, primary_key=True, autoincrement=True),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("worker", sa.Text(), nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("name", sa.Text()),
        sa.Column("host", sa.Text()),
        sa.Column("nthreads", sa.BigInteger()),
        sa.Column("memory_limit", sa.BigInteger()),
        sa.Column("managed", sa.BigInteger()),
        sa.Column("unmanaged", sa.BigInteger()),
        sa.Column("spilled", sa.BigInteger()),
        sa.Column("cpu", sa.Double()),
        sa.Column("processing", sa.BigInteger()),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_worker_samples_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_worker_samples"),
    )
    op.create_index("ix_worker_samples_cluster_id_time", "worker_samples", ["cluster_id", "time"])
    op.create_index(
        "ix_worker_samples_cluster_id_worker_time",
        "worker_samples",
        ["cluster_id", "worker", "time"],
    )
    op.create_table(
        "task_stream",
        sa.Column("id", RowId, primary_key=True, autoincrement=True),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("worker", sa.Text()),
        sa.Column("thread", sa.BigInteger()),
        sa.Column("prefix", sa.Text()),
        sa.Column("task_group", sa.Text()),
        sa.Column("state", sa.Text()),
        sa.Column("start", sa.Double(), nullable=False),
        sa.Column("stop", sa.Double(), nullable=False),
        sa.Column("n_tasks", sa.BigInteger(), nullable=False),
        sa.Column("busy", sa.Double()),
        sa.Column("binned", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_task_stream_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_task_stream"),
    )
    op.create_index(
        "ix_task_stream_cluster_id_computation_id_start",
        "task_stream",
        ["cluster_id", "computation_id", "start"],
    )
    # A profile per task prefix: "" is the whole computation's (as recorded before).
    with op.batch_alter_table("profiles", recreate="always") as batch:
        batch.add_column(sa.Column("prefix", sa.Text(), nullable=False, server_default=""))
        batch.drop_constraint("pk_profiles", type_="primary")
        batch.create_primary_key("pk_profiles", ["cluster_id", "computation_id", "prefix"])


def downgrade() -> None:
    op.execute("DELETE FROM profiles WHERE prefix != ''")
    with op.batch_alter_table("profiles", recreate="always") as batch:
        batch.drop_constraint("pk_profiles", type_="primary")
        batch.create_primary_key("pk_profiles", ["cluster_id", "computation_id"])
        batch.drop_column("prefix")
    op.drop_index("ix_task_stream_cluster_id_computation_id_start", "task_stream")
    op.drop_table("task_stream")
    op.drop_index("ix_worker_samples_cluster_id_worker_time", "worker_samples")
    op.drop_index("ix_worker_samples_cluster_id_time", "worker_samples")
    op.drop_table("worker_samples")
    op.drop_table("computation_metrics")
