"""How programs end: the tasks that were running when their computation was cancelled,
and how often a cluster's scheduler promised to be heard from (its heartbeat).

Frozen once released: change the schema in a new revision.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TABLES = ("computations", "task_groups")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("n_cancelled", sa.BigInteger()))
    op.add_column("clusters", sa.Column("heartbeat", sa.Double()))


def downgrade() -> None:
    for table in TABLES:
        op.execute(f'ALTER TABLE "{table}" DROP COLUMN "n_cancelled"')
    op.execute('ALTER TABLE "clusters" DROP COLUMN "heartbeat"')
