"""What a trustworthy record needs: per-group done / erred / never-ran counts, the line
and label of each computation, failures grouped by type and frame, a cluster's peak size,
and the user a client reported beside the one its token names.

Frozen once released: change the schema in a new revision.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)

COLUMNS: dict[str, list[sa.Column[Any]]] = {
    "clusters": [
        sa.Column("peak_workers", sa.BigInteger()),
        sa.Column("peak_threads", sa.BigInteger()),
        sa.Column("peak_memory", sa.BigInteger()),
        sa.Column("reported_user", sa.Text()),
    ],
    "computations": [
        sa.Column("code_frames", JSON),
        sa.Column("code_line", sa.Text()),
        sa.Column("label", sa.Text()),
        sa.Column("n_done", sa.BigInteger()),
        sa.Column("n_not_run", sa.BigInteger()),
    ],
    "task_groups": [
        sa.Column("n_done", sa.BigInteger()),
        sa.Column("n_erred", sa.BigInteger()),
        sa.Column("n_not_run", sa.BigInteger()),
    ],
    "exceptions": [
        sa.Column("exc_type", sa.Text()),
        sa.Column("location", sa.Text()),
        sa.Column("pattern", sa.Text()),
        sa.Column("examples", JSON),
        sa.Column("workers", JSON),
    ],
}


def upgrade() -> None:
    # Adding nullable columns needs no table rebuild, on SQLite either.
    for table, columns in COLUMNS.items():
        for column in columns:
            op.add_column(table, column)


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite >= 3.35, PostgreSQL): a batch rebuild of `clusters`
    # would trip the foreign keys that point at it.
    for table, columns in COLUMNS.items():
        for column in columns:
            op.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column.name}"')
