"""Alerts fired and their delivery (dask_analytics_lab/alerts/): one row per rule,
subject and webhook, inserted by whoever sends it.

Frozen once released: change the schema in a new revision.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("webhook", sa.Text(), nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("computation_id", sa.Text(), nullable=False),
        sa.Column("account", sa.Text(), nullable=True),
        sa.Column("fired", sa.Double(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("link", sa.Text(), nullable=True),
        sa.Column("body", JSON, nullable=True),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_try", sa.Double(), nullable=True),
        sa.Column("delivered", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("rule", "subject", "webhook", name="pk_alerts"),
    )
    op.create_index("ix_alerts_fired", "alerts", ["fired"])
    op.create_index("ix_alerts_cluster_id", "alerts", ["cluster_id"])


def downgrade() -> None:
    op.drop_index("ix_alerts_cluster_id", table_name="alerts")
    op.drop_index("ix_alerts_fired", table_name="alerts")
    op.drop_table("alerts")
