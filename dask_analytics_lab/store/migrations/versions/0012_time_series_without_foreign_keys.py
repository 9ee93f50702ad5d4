"""The time-series tables (task_stream, worker_samples, gpu_samples, events,
cluster_samples, computation_metrics) lose their foreign key to clusters.

Each of their rows made PostgreSQL look the cluster up and lock its row (a third of a
task stream row's insert).  What the key guarded holds without it: ingest writes the
cluster's row before any other in the same transaction, and prune deletes by
cluster_id.  SQLite copies each table (batch mode) to drop it.

Frozen once released: change the schema in a new revision.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TABLES = (
    "task_stream",
    "worker_samples",
    "gpu_samples",
    "events",
    "cluster_samples",
    "computation_metrics",
)


def _fk(table: str) -> str:
    return f"fk_{table}_cluster_id_clusters"


def upgrade() -> None:
    for table in TABLES:
        # On PostgreSQL a partitioned table's key goes from its partitions with it.
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(_fk(table), type_="foreignkey")


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.create_foreign_key(_fk(table), "clusters", ["cluster_id"], ["cluster_id"])
