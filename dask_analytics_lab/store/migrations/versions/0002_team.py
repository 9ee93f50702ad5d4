"""The team server's tables: accounts, users, tokens (hashed), cluster owners, reports.

Frozen once released: change them in a new revision.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)
TABLES = ["users", "tokens", "reports", "cluster_owners", "accounts"]  # drop order


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("created", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("account", name="pk_accounts"),
    )
    op.create_table(
        "users",
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("created", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account"], ["accounts.account"], name="fk_users_account_accounts"
        ),
        sa.PrimaryKeyConstraint("account", "user", name="pk_users"),
    )
    op.create_table(
        "tokens",
        sa.Column("token_id", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("created", sa.Double(), nullable=False),
        sa.Column("revoked", sa.Double()),
        sa.ForeignKeyConstraint(
            ["account"], ["accounts.account"], name="fk_tokens_account_accounts"
        ),
        sa.PrimaryKeyConstraint("token_id", name="pk_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_tokens_token_hash"),
    )
    op.create_table(
        "cluster_owners",
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("claimed", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("cluster_id", name="pk_cluster_owners"),
    )
    op.create_table(
        "reports",
        sa.Column("report_id", sa.Text(), nullable=False),
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("user", sa.Text()),
        sa.Column("filename", sa.Text()),
        sa.Column("title", sa.Text()),
        sa.Column("private", sa.Boolean(), nullable=False),
        sa.Column("created", sa.Double(), nullable=False),
        sa.Column("cluster_id", sa.Text()),
        sa.Column("size", sa.BigInteger()),
        sa.Column("summary", JSON),
        sa.Column("html_gz", sa.LargeBinary(), nullable=False),
        sa.Column("twin_gz", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("report_id", name="pk_reports"),
    )
    op.create_index("ix_reports_account_created", "reports", ["account", "created"])
    op.create_index("ix_reports_created", "reports", ["created"])


def downgrade() -> None:
    for table in TABLES:
        op.drop_table(table)  # its indexes go with it
