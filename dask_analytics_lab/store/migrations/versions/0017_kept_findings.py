"""Findings kept with their computation (findings/kept.py): which computations were
explained, under which thresholds, and what each finding was, so a list filters by
finding kind without explaining every computation again.

Frozen once released: change the schema in a new revision.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.create_table(
        "explained",
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.Column("kept", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("computation_id", name="pk_explained"),
    )
    op.create_index("ix_explained_cluster_id", "explained", ["cluster_id"])
    op.create_table(
        "findings",
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("impact", sa.Double(), nullable=False),
        sa.Column("body", JSON, nullable=False),
        sa.PrimaryKeyConstraint("computation_id", "rank", name="pk_findings"),
    )
    op.create_index("ix_findings_kind_computation_id", "findings", ["kind", "computation_id"])
    op.create_index("ix_findings_cluster_id", "findings", ["cluster_id"])


def downgrade() -> None:
    op.drop_index("ix_findings_cluster_id", table_name="findings")
    op.drop_index("ix_findings_kind_computation_id", table_name="findings")
    op.drop_table("findings")
    op.drop_index("ix_explained_cluster_id", table_name="explained")
    op.drop_table("explained")
