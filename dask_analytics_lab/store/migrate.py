"""Bring a store's schema to this release's head at every open (Alembic's migrations).

Alembic (and Mako, Pygments with it: ~21,000 objects the garbage collector then walks
in every process, the scheduler's included) is imported only when a migration runs:
an open of a store already at head reads its revision with one query, and a new SQLite
file is made at head from schema.py's tables and stamped with the head revision, as
Alembic stamps it (22-28 ms in a fresh process; replaying every migration took 270-320
ms, and a scheduler's first embedded store imported Alembic for it).  tests/unit/test_store_open.py
checks that the two make the same schema.  A new PostgreSQL database replays the
migrations: its time partitions are made there (0011), not by schema.py.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..store_errors import StoreUnavailable
from . import team_schema  # noqa: F401 - puts the team's tables on metadata (the migrations make them)
from .engine import READ
from .schema import metadata

MIGRATIONS = Path(__file__).with_name("migrations")
# Any constant: the PostgreSQL advisory lock that serialises concurrent upgrades.
PG_LOCK_KEY = 0x6461_6C5F_6D69_67  # "dal_mig"
_REVISION = re.compile(r'^(down_revision|revision)\s*=\s*"([^"]*)"', re.M)


def alembic_config(connection: sa.Connection | None = None, url: str | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("path_separator", "os")
    if url:
        cfg.set_main_option("sqlalchemy.url", url)
    cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def _revisions() -> dict[str, str | None]:
    """revision -> down_revision, read from the scripts' text (Alembic's own reading,
    ScriptDirectory, is the one the tests check this against)."""
    out: dict[str, str | None] = {}
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = dict((k, v) for k, v in _REVISION.findall(path.read_text()))
        out[found["revision"]] = found.get("down_revision") or None
    return out


def head() -> str:
    revisions = _revisions()
    (tip,) = set(revisions) - set(revisions.values())  # one line of revisions: one tip
    return tip


def is_known(rev: str) -> bool:
    """Whether this release has the migration `rev` (else a newer release wrote it)."""
    return rev in _revisions()


def current(conn: sa.Connection) -> str | None:
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


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
        elif rev is None and not sa.inspect(conn).get_table_names():
            _make_at_head(conn)
            return
        from alembic import command

        command.upgrade(alembic_config(conn), "head")


def _make_at_head(conn: sa.Connection) -> None:
    """A new SQLite file's tables, at head (inside the open's write transaction)."""
    metadata.create_all(conn)
    # Alembic's own version table, as `alembic stamp` makes it.
    conn.execute(
        sa.text(
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
            "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
        )
    )
    conn.execute(sa.text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": head()})


def _check_known(shown_url: str, rev: str | None) -> None:
    if rev is not None and rev not in _revisions():
        raise StoreUnavailable(
            f"the analytics store {shown_url} has schema revision {rev!r}, which this "
            "release of dask-analytics-lab does not know: a newer release wrote it. Upgrade "
            "dask-analytics-lab (pip install -U dask-analytics-lab) to read it."
        )
