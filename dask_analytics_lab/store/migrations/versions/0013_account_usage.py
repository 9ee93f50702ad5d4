"""Storage quotas kept in the database: each account's bytes by kind (account_usage),
and on each `ingested` row what its message added, so prune gives it back.

Reports' usage is summed from the reports table here (their blobs are their bytes).
Messages stored before this revision have no bytes on their `ingested` row: they are
not counted, and so nothing is given back for them either.

Frozen once released: change the schema in a new revision.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ingested", sa.Column("kind", sa.SmallInteger(), nullable=True))
    op.add_column("ingested", sa.Column("bytes", sa.BigInteger(), nullable=True))
    op.create_table(
        "account_usage",
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("task_stream", sa.BigInteger(), nullable=False),
        sa.Column("profiles", sa.BigInteger(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("samples", sa.BigInteger(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("reports", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("account", name="pk_account_usage"),
    )
    op.execute(
        "INSERT INTO account_usage "
        "(account, task_stream, profiles, events, samples, records, reports) "
        "SELECT account, 0, 0, 0, 0, 0, "
        "SUM(LENGTH(html_gz) + LENGTH(twin_gz)) FROM reports GROUP BY account"
    )


def downgrade() -> None:
    op.drop_table("account_usage")
    with op.batch_alter_table("ingested") as batch:
        batch.drop_column("bytes")
        batch.drop_column("kind")
