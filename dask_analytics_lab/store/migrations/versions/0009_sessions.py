"""Server-side login sessions (logout ends one everywhere) and the messages dropped for
other accounts' clusters (so a repeat answers as an unknown id's repeat does).

Frozen once released: change the schema in a new revision.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("token_id", sa.Text(), nullable=False),
        sa.Column("created", sa.Double(), nullable=False),
        sa.Column("expires", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"], ["tokens.token_id"], name="fk_sessions_token_id_tokens"
        ),
        sa.PrimaryKeyConstraint("session_id", name="pk_sessions"),
    )
    op.create_index("ix_sessions_expires", "sessions", ["expires"])
    op.create_table(
        "dropped_messages",
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("account", "cluster_id", "seq", name="pk_dropped_messages"),
    )


def downgrade() -> None:
    op.drop_table("dropped_messages")
    op.drop_table("sessions")  # its index goes with it
