"""The team server's tables: accounts, users, tokens, cluster ownership, reports,
login sessions, the messages dropped for other accounts' clusters, failed
authentications and each account's storage usage.

Registered on schema.metadata, so whoever imports this module (Alembic's env.py, the
schema test) sees every table; made by migrations 0002_team, 0009_sessions, 0010_auth_failures and
0013_account_usage.  Queries: team.py.
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import Json, Time, metadata

accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("account", sa.Text, primary_key=True),
    sa.Column("created", Time, nullable=False),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("account", sa.Text, sa.ForeignKey("accounts.account"), primary_key=True),
    sa.Column("user", sa.Text, primary_key=True),
    sa.Column("created", Time, nullable=False),
)

# Only a hash of each token: a stolen database does not hand out working tokens.
tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("token_id", sa.Text, primary_key=True),
    sa.Column("token_hash", sa.Text, nullable=False, unique=True),
    sa.Column("account", sa.Text, sa.ForeignKey("accounts.account"), nullable=False),
    sa.Column("user", sa.Text, nullable=False),
    sa.Column("created", Time, nullable=False),
    sa.Column("revoked", Time),
    sa.Column("expires", Time),  # null: never
    sa.Column("last_used", Time),
)

# Which account a cluster id belongs to: the first that wrote it (or the account its
# own `cluster` message named, for a scheduler that wrote straight into the store).
# The server refuses another account's messages for it.
cluster_owners = sa.Table(
    "cluster_owners",
    metadata,
    sa.Column("cluster_id", sa.Text, primary_key=True),
    sa.Column("account", sa.Text, nullable=False),
    sa.Column("claimed", Time, nullable=False),
)

# Performance reports: the HTML and its JSON twin, gzip'd.
reports = sa.Table(
    "reports",
    metadata,
    sa.Column("report_id", sa.Text, primary_key=True),
    sa.Column("account", sa.Text, nullable=False),
    sa.Column("user", sa.Text),
    sa.Column("filename", sa.Text),
    sa.Column("title", sa.Text),
    sa.Column("private", sa.Boolean, nullable=False),
    sa.Column("created", Time, nullable=False),
    sa.Column("cluster_id", sa.Text),
    sa.Column("size", sa.BigInteger),
    sa.Column("summary", Json),
    sa.Column("html_gz", sa.LargeBinary, nullable=False),
    sa.Column("twin_gz", sa.LargeBinary, nullable=False),
    sa.Index(None, "account", "created"),
    sa.Index(None, "created"),
)

# Browser login sessions: the signed cookie names a session id, and a session lives
# only while its row does (logout deletes it), so a copied cookie dies with the logout
# on every server process of the database.
sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("session_id", sa.Text, primary_key=True),
    sa.Column("token_id", sa.Text, sa.ForeignKey("tokens.token_id"), nullable=False),
    sa.Column("created", Time, nullable=False),
    sa.Column("expires", Time, nullable=False),
    sa.Index(None, "expires"),
)

# Messages an account sent for a cluster id another account owns: dropped, never
# stored, but remembered by (account, cluster, seq) so that sending them again answers
# as a repeat of an unknown id's batch does ("stored": 0): ingest is no oracle of
# other accounts' ids, not even across retries.
dropped_messages = sa.Table(
    "dropped_messages",
    metadata,
    sa.Column("account", sa.Text, primary_key=True),
    sa.Column("cluster_id", sa.Text, primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True),
    sa.Column("time", Time, nullable=False),
)

# Failed authentications with one credential (a keyed fingerprint of it, never the
# credential) from one client address, in the window that began at `since`: the count
# every server replica of the database throttles by (server/throttle.py).
auth_failures = sa.Table(
    "auth_failures",
    metadata,
    sa.Column("address", sa.Text, primary_key=True),
    sa.Column("fingerprint", sa.Text, primary_key=True),
    sa.Column("since", Time, nullable=False),
    sa.Column("failures", sa.Integer, nullable=False),
    sa.Index(None, "since"),
)

# Bytes each account stores, by kind (usage.py: what each kind holds, how it is
# counted): one row an account, so one statement charges a batch to every quota at once
# and every server replica of the database counts against the same figures.
account_usage = sa.Table(
    "account_usage",
    metadata,
    sa.Column("account", sa.Text, primary_key=True),
    sa.Column("task_stream", sa.BigInteger, nullable=False),
    sa.Column("profiles", sa.BigInteger, nullable=False),
    sa.Column("events", sa.BigInteger, nullable=False),
    sa.Column("samples", sa.BigInteger, nullable=False),
    sa.Column("records", sa.BigInteger, nullable=False),
    sa.Column("reports", sa.BigInteger, nullable=False),
)

TEAM_TABLES = (accounts, users, tokens, cluster_owners, reports, sessions, dropped_messages)
