"""The initial schema: every table of release 0.1.

Frozen: stores made by this release replay it; change the schema in a new revision.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# SQLite only autoincrements an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT.
ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON = sa.JSON(none_as_null=True)

TABLES = [
    "task_groups",
    "profiles",
    "gpu_samples",
    "exceptions",
    "events",
    "computations",
    "cluster_samples",
    "ingested",
    "code_snippets",
    "clusters",
]


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text()),
        sa.Column("address", sa.Text()),
        sa.Column("user", sa.Text()),
        sa.Column("account", sa.Text()),
        sa.Column("started", sa.Double(), nullable=False),
        sa.Column("stopped", sa.Double()),
        sa.Column("stop_reason", sa.Text()),
        sa.Column("idle_shutdown", sa.Boolean()),
        sa.Column("versions", JSON),
        sa.Column("platform", JSON),
        sa.Column("settings", JSON),
        sa.Column("price_per_core_hour", sa.Double()),
        sa.Column("n_workers", sa.BigInteger()),
        sa.Column("n_threads", sa.BigInteger()),
        sa.Column("memory_used", sa.BigInteger()),
        sa.Column("memory_total", sa.BigInteger()),
        sa.Column("processing", sa.BigInteger()),
        sa.Column("worker_seconds", sa.Double()),
        sa.Column("core_seconds", sa.Double()),
        sa.Column("cost", sa.Double()),
        sa.Column("idle_since", sa.Double()),
        sa.Column("last_activity", sa.Double()),
        sa.Column("dropped_messages", sa.BigInteger()),
        sa.Column("sample_time", sa.Double()),
        sa.Column("first_seen", sa.Double(), nullable=False),
        sa.Column("last_seen", sa.Double(), nullable=False),
        sa.Column("updated", sa.Double()),
        sa.PrimaryKeyConstraint("cluster_id", name="pk_clusters"),
    )
    op.create_index("ix_clusters_account_started", "clusters", ["account", "started"])
    op.create_index("ix_clusters_started", "clusters", ["started"])

    op.create_table(
        "code_snippets",
        sa.Column("hash", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("filename", sa.Text()),
        sa.Column("lineno_frame", sa.BigInteger()),
        sa.Column("lineno_relative", sa.BigInteger()),
        sa.PrimaryKeyConstraint("hash", name="pk_code_snippets"),
    )
    op.create_table(
        "ingested",
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("cluster_id", "seq", name="pk_ingested"),
    )
    op.create_table(
        "cluster_samples",
        sa.Column("id", ROW_ID, autoincrement=True, nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("n_workers", sa.BigInteger()),
        sa.Column("n_threads", sa.BigInteger()),
        sa.Column("memory_used", sa.BigInteger()),
        sa.Column("memory_total", sa.BigInteger()),
        sa.Column("processing", sa.BigInteger()),
        sa.Column("worker_seconds", sa.Double()),
        sa.Column("core_seconds", sa.Double()),
        sa.Column("cost", sa.Double()),
        sa.Column("idle_since", sa.Double()),
        sa.Column("last_activity", sa.Double()),
        sa.Column("dropped_messages", sa.BigInteger()),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_cluster_samples_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_cluster_samples"),
    )
    op.create_index("ix_cluster_samples_cluster_id_time", "cluster_samples", ["cluster_id", "time"])

    op.create_table(
        "computations",
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("start", sa.Double(), nullable=False),
        sa.Column("stop", sa.Double()),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("code_hashes", JSON),
        sa.Column("n_tasks", sa.BigInteger()),
        sa.Column("n_groups", sa.BigInteger()),
        sa.Column("n_erred", sa.BigInteger()),
        sa.Column("compute", sa.Double()),
        sa.Column("transfer", sa.Double()),
        sa.Column("disk", sa.Double()),
        sa.Column("nbytes", sa.BigInteger()),
        sa.Column("updated", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_computations_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("computation_id", name="pk_computations"),
    )
    op.create_index(
        "ix_computations_cluster_id_start_computation_id",
        "computations",
        ["cluster_id", "start", "computation_id"],
    )
    op.create_index(
        "ix_computations_start_computation_id", "computations", ["start", "computation_id"]
    )

    op.create_table(
        "events",
        sa.Column("id", ROW_ID, autoincrement=True, nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("msg", JSON),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_events_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_cluster_id_time", "events", ["cluster_id", "time"])
    op.create_index("ix_events_cluster_id_topic_time", "events", ["cluster_id", "topic", "time"])
    op.create_index("ix_events_time", "events", ["time"])
    op.create_index("ix_events_topic_time", "events", ["topic", "time"])

    op.create_table(
        "exceptions",
        sa.Column("id", ROW_ID, autoincrement=True, nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("task_group", sa.Text(), nullable=False),
        sa.Column("hash", sa.Text(), nullable=False),
        sa.Column("exception_text", sa.Text()),
        sa.Column("traceback_text", sa.Text()),
        sa.Column("example_key", sa.Text()),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("first_time", sa.Double(), nullable=False),
        sa.Column("last_time", sa.Double(), nullable=False),
        sa.Column("updated", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_exceptions_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_exceptions"),
        sa.UniqueConstraint(
            "cluster_id",
            "computation_id",
            "task_group",
            "hash",
            name="uq_exceptions_cluster_id_computation_id_task_group_hash",
        ),
    )
    op.create_index("ix_exceptions_cluster_id_last_time", "exceptions", ["cluster_id", "last_time"])
    op.create_index(
        "ix_exceptions_computation_id_last_time", "exceptions", ["computation_id", "last_time"]
    )
    op.create_index("ix_exceptions_last_time", "exceptions", ["last_time"])

    op.create_table(
        "gpu_samples",
        sa.Column("id", ROW_ID, autoincrement=True, nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("worker", sa.Text()),
        sa.Column("host", sa.Text()),
        sa.Column("monitor_id", sa.Text()),
        sa.Column("timestamp", sa.Double()),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("gpu_uuid", sa.Text()),
        sa.Column("gpu_index", sa.BigInteger()),
        sa.Column("gpu_name", sa.Text()),
        sa.Column("mem_used", sa.BigInteger()),
        sa.Column("mem_total", sa.BigInteger()),
        sa.Column("mem_util", sa.Double()),
        sa.Column("compute_util", sa.Double()),
        sa.Column("power_w", sa.Double()),
        sa.Column("temperature_c", sa.Double()),
        sa.Column("job", sa.Text()),
        sa.Column("dag", sa.Text()),
        sa.Column("task_groups", JSON),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_gpu_samples_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_gpu_samples"),
    )
    op.create_index("ix_gpu_samples_cluster_id_time", "gpu_samples", ["cluster_id", "time"])
    op.create_index(
        "ix_gpu_samples_host_gpu_uuid_time", "gpu_samples", ["host", "gpu_uuid", "time"]
    )
    op.create_index("ix_gpu_samples_monitor_id_time", "gpu_samples", ["monitor_id", "time"])

    op.create_table(
        "profiles",
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("tree", JSON, nullable=False),
        sa.Column("count", sa.BigInteger()),
        sa.Column("updated", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_profiles_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("cluster_id", "computation_id", name="pk_profiles"),
    )
    op.create_table(
        "task_groups",
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text()),
        sa.Column("states", JSON),
        sa.Column("n_tasks", sa.BigInteger()),
        sa.Column("compute", sa.Double()),
        sa.Column("transfer", sa.Double()),
        sa.Column("disk_read", sa.Double()),
        sa.Column("disk_write", sa.Double()),
        sa.Column("nbytes", sa.BigInteger()),
        sa.Column("start", sa.Double()),
        sa.Column("stop", sa.Double()),
        sa.Column("dependencies", JSON),
        sa.Column("updated", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.cluster_id"], name="fk_task_groups_cluster_id_clusters"
        ),
        sa.PrimaryKeyConstraint("cluster_id", "computation_id", "name", name="pk_task_groups"),
    )


def downgrade() -> None:
    for table in TABLES:  # children before clusters
        op.drop_table(table)
