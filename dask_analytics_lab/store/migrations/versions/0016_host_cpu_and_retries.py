"""How busy the scheduler's host was while each computation ran (the cpu-starved
finding tells waiting for a free core from waiting on I/O with it), and the failures
Dask's retries hid: how many attempts were run again, how many tasks then succeeded.

Rows stored before this revision have these empty: read as "not known".

Frozen once released: change the schema in a new revision.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("computations", sa.Column("host_cpu", sa.Double(), nullable=True))
    op.add_column("computations", sa.Column("host_cores", sa.BigInteger(), nullable=True))
    op.add_column("exceptions", sa.Column("retried", sa.BigInteger(), nullable=True))
    op.add_column("exceptions", sa.Column("recovered", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("exceptions") as batch:
        batch.drop_column("recovered")
        batch.drop_column("retried")
    with op.batch_alter_table("computations") as batch:
        batch.drop_column("host_cores")
        batch.drop_column("host_cpu")
