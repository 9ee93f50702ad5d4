"""History: a computation's fingerprint (the line that made it and its task prefixes),
so the runs of the same code can be found and compared; indexes for filtering clusters
by user.

Frozen once released: change the schema in a new revision.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("computations", sa.Column("fingerprint", sa.Text()))
    op.create_index("ix_computations_fingerprint_start", "computations", ["fingerprint", "start"])
    op.create_index("ix_clusters_user_started", "clusters", ["user", "started"])


def downgrade() -> None:
    op.drop_index("ix_clusters_user_started", "clusters")
    op.drop_index("ix_computations_fingerprint_start", "computations")
    op.execute('ALTER TABLE "computations" DROP COLUMN "fingerprint"')
