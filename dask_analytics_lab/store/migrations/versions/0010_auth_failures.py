"""Failed authentications counted in the database, so every server replica of one
database throttles a guessed credential by the same count (server/throttle.py).

Frozen once released: change the schema in a new revision.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "auth_failures",
        sa.Column("address", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("since", sa.Double(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("address", "fingerprint", name="pk_auth_failures"),
    )
    op.create_index("ix_auth_failures_since", "auth_failures", ["since"])


def downgrade() -> None:
    op.drop_table("auth_failures")  # its index goes with it
