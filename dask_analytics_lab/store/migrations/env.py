"""Alembic environment. Normally run by `migrate.upgrade()` with a connection that is
already inside a locked write transaction; with none, it connects to the
`sqlalchemy.url` option (for making new revisions, see README)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from dask_analytics_lab.store import team_schema  # noqa: F401 - puts the team's tables on metadata
from dask_analytics_lab.store.engine import make_engine
from dask_analytics_lab.store.partitions import include_name
from dask_analytics_lab.store.schema import metadata  # the core tables, and the team's

config = context.config


def run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things: batch mode copies the table instead.
        render_as_batch=True,
        compare_type=True,
        # PostgreSQL's time partitions are the database's, not schema.py's tables.
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:
    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("alembic without a connection needs the sqlalchemy.url option")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            run(conn)
    finally:
        engine.dispose()
