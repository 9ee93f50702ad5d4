"""GPU samples that tell the truth: what a worker running no task waited on, every
computation running when there were several, and the workers that share the GPU.

Rows stored before this revision have these empty: read as "not known".

Frozen once released: change the schema in a new revision.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.add_column("gpu_samples", sa.Column("waiting", sa.Text(), nullable=True))
    op.add_column("gpu_samples", sa.Column("jobs", JSON, nullable=True))
    op.add_column("gpu_samples", sa.Column("shared_by", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gpu_samples") as batch:
        batch.drop_column("shared_by")
        batch.drop_column("jobs")
        batch.drop_column("waiting")
