"""Bring a store's schema to this release's head with Alembic, at every open."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from .engine import READ
from .errors import StoreUnavailable

MIGRATIONS = Path(__file__).with_name("migrations")
# Any constant: the PostgreSQL advisory lock that serialises concurrent upgrades.
PG_LOCK_KEY = 0x6461_6C5F_6D69_67  # "dal_mig"


def alembic_config(connection: sa.Connection | None = None, url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("path_separator", "os")
    if url:
        cfg.set_main_option("sqlalchemy.url", url)
    cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    return _scripts().get_current_head()


def current(conn: sa.Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: sa.Engine, shown_url: str) -> None:
    """Upgrade to head; safe when several processes open a new store at once.

    shown_url: the store's URL for messages, password masked."""
    with engine.connect().execution_options(**READ) as conn:
        rev = current(conn)
    if rev == head():
        return  # every open after the first: no lock, no Alembic run
    _check_known(shown_url, rev)
    # The write lock makes concurrent first opens take turns; Alembic reads the
    # version again inside it, so whoever comes second finds head and does nothing.
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_LOCK_KEY})
        command.upgrade(alembic_config(conn), "head")


def _check_known(shown_url: str, rev: str | None) -> None:
    if rev is None:
        return
    try:
        _scripts().get_revision(rev)
    except Exception:
        raise StoreUnavailable(
            f"the analytics store {shown_url} has schema revision {rev!r}, which this "
            "release of dask-analytics-lab does not know: a newer release wrote it. Upgrade "
            "dask-analytics-lab (pip install -U dask-analytics-lab) to read it."
        ) from None
