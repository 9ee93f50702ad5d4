"""Code snippets scoped by account (a computation shows only code its own account
sent); tokens that expire and say when they were last used.

Frozen once released: change the schema in a new revision.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tokens", sa.Column("expires", sa.Double()))
    op.add_column("tokens", sa.Column("last_used", sa.Double()))
    with op.batch_alter_table("code_snippets", recreate="always") as batch:
        batch.add_column(sa.Column("account", sa.Text(), nullable=False, server_default=""))
        batch.drop_constraint("pk_code_snippets", type_="primary")
        batch.create_primary_key("pk_code_snippets", ["account", "hash"])
    _copy_snippets_to_their_accounts(op.get_bind())


def _copy_snippets_to_their_accounts(bind: sa.Connection) -> None:
    """Until now one row served every account: give each account that used a snippet
    its own copy, then drop the shared rows."""
    uses = bind.execute(
        sa.text(
            "SELECT c.code_hashes, COALESCE(cl.account, o.account, 'default') FROM computations c "
            "LEFT JOIN clusters cl ON cl.cluster_id = c.cluster_id "
            "LEFT JOIN cluster_owners o ON o.cluster_id = c.cluster_id "
            "WHERE c.code_hashes IS NOT NULL"
        )
    ).fetchall()
    pairs: set[tuple[str, str]] = set()
    for hashes, account in uses:
        if isinstance(hashes, str):
            hashes = json.loads(hashes)
        pairs.update((account, h) for h in hashes or ())
    copy = sa.text(
        "INSERT INTO code_snippets (account, hash, text, filename, lineno_frame, lineno_relative) "
        "SELECT :account, hash, text, filename, lineno_frame, lineno_relative FROM code_snippets "
        "WHERE account = '' AND hash = :hash"
    )
    for account, h in sorted(pairs):
        if account:
            bind.execute(copy, {"account": account, "hash": h})
    bind.execute(sa.text("DELETE FROM code_snippets WHERE account = ''"))


def downgrade() -> None:
    bind = op.get_bind()
    # One row per hash again: keep any account's copy.
    bind.execute(
        sa.text(
            "DELETE FROM code_snippets WHERE EXISTS (SELECT 1 FROM code_snippets o "
            "WHERE o.hash = code_snippets.hash AND o.account < code_snippets.account)"
        )
    )
    with op.batch_alter_table("code_snippets", recreate="always") as batch:
        batch.drop_constraint("pk_code_snippets", type_="primary")
        batch.drop_column("account")
        batch.create_primary_key("pk_code_snippets", ["hash"])
    op.execute('ALTER TABLE "tokens" DROP COLUMN "last_used"')
    op.execute('ALTER TABLE "tokens" DROP COLUMN "expires"')
