"""Opening a store: persistence, schema migrations, and clear errors when it can't be used."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from dask_analytics_lab.store import StoreUnavailable, open_store
from dask_analytics_lab.store.engine import make_engine
from dask_analytics_lab.store.migrate import alembic_config, head
from dask_analytics_lab.store.partitions import include_name
from dask_analytics_lab.store.team_schema import metadata  # every table: core and team

from ..factories import Cluster
from ..postgres_server import PostgresServer, free_port


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request):
    """conftest's, but empty on PostgreSQL too: these tests are of the first open."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")


def alembic_version(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.text("SELECT version_num FROM alembic_version"))]
    finally:
        engine.dispose()


def test_new_store_is_at_head(store_url):
    open_store(store_url).close()
    # A store made by this release names its schema revision, so the next release can
    # upgrade it: release N+1 adds versions/000(N+1)_*.py on top of this one.
    versions = Path(alembic_config.__code__.co_filename).parent / "migrations" / "versions"
    newest = sorted(p.name for p in versions.glob("0*.py"))[-1]
    assert alembic_version(store_url) == [head()] == [newest.split("_")[0]]
    open_store(store_url).close()  # and opening again changes nothing
    assert alembic_version(store_url) == [head()]


def test_head_is_alembics_and_an_open_at_head_never_imports_alembic(tmp_path):
    from alembic.script import ScriptDirectory

    assert head() == ScriptDirectory.from_config(alembic_config()).get_current_head()
    url = f"sqlite:///{tmp_path / 'a.db'}"
    # A process makes a new SQLite store, another opens it at head: Alembic, Mako and
    # Pygments stay out of both (a scheduler's garbage collector would walk their
    # ~21,000 objects for its whole life).
    probe = (
        "import sys; from dask_analytics_lab.store import open_store; "
        f"open_store({url!r}).close(); "
        "print(sorted(m for m in ('alembic', 'mako', 'pygments') if m in sys.modules))"
    )
    for _ in ("made", "opened at head"):
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout
        assert out.strip() == "[]", out
    assert alembic_version(url) == [head()]


def migrate(url: str) -> None:
    """An empty database brought to head by replaying every migration."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "head")
    finally:
        engine.dispose()


def sqlite_schema(path: Path) -> dict[str, tuple]:
    """Each table's columns, indexes and foreign keys as SQLite itself reports them
    (the order of columns aside: migrations add theirs at the end, and every query names
    its columns)."""
    with sqlite3.connect(path) as conn:

        def q(sql: str) -> list:
            return conn.execute(sql).fetchall()

        out = {}
        for (table,) in q("SELECT name FROM sqlite_master WHERE type = 'table'"):
            columns = sorted(r[1:] for r in q(f'PRAGMA table_info("{table}")'))
            indexes = sorted(
                (name, unique, origin, partial, [c[2] for c in q(f'PRAGMA index_info("{name}")')])
                for _, name, unique, origin, partial in q(f'PRAGMA index_list("{table}")')
            )
            keys = sorted(r[2:] for r in q(f'PRAGMA foreign_key_list("{table}")'))
            out[table] = (columns, indexes, keys)
    return out


def test_a_new_sqlite_file_is_made_as_the_migrations_make_it(tmp_path):
    # open_store makes a new SQLite file from schema.py's tables, without Alembic.
    migrate(f"sqlite:///{tmp_path / 'migrated.db'}")
    open_store(tmp_path / "made.db").close()
    migrated, made = sqlite_schema(tmp_path / "migrated.db"), sqlite_schema(tmp_path / "made.db")
    assert "computations" in made and "alembic_version" in made
    assert made == migrated
    assert alembic_version(f"sqlite:///{tmp_path / 'made.db'}") == [head()]
    with open_store(tmp_path / "made.db") as store:  # and it is a store
        c = Cluster()
        assert store.ingest([c.cluster(), c.computation("comp")]) == 2


def test_migrations_make_exactly_schema_py(store_url):
    migrate(store_url)
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(
                MigrationContext.configure(
                    conn,
                    opts={
                        "compare_type": True,
                        # Alembic reads SQLite's defaults back quoted ('' as "''"):
                        # sqlite_schema's test compares those as SQLite reports them.
                        "compare_server_default": conn.dialect.name == "postgresql",
                        "include_name": include_name,
                    },
                ),
                metadata,
            )
    finally:
        engine.dispose()
    assert diff == [], "schema.py and migrations/versions disagree; add a migration:\n" + "\n".join(
        map(str, diff)
    )


def test_constraints_are_named(store_url):
    open_store(store_url).close()
    engine = make_engine(store_url)
    try:
        insp = sa.inspect(engine)
        for table in metadata.tables:
            assert (
                insp.get_pk_constraint(table)["name"] == f"pk_{table}"
                or engine.dialect.name == "sqlite"
            )
            for fk in insp.get_foreign_keys(table):
                assert fk["name"] and fk["name"].startswith("fk_"), (table, fk)
            for ix in insp.get_indexes(table):
                assert ix["name"].startswith(("ix_", "uq_")), (table, ix)
    finally:
        engine.dispose()


def test_downgrade_and_upgrade_again(store_url):
    with open_store(store_url) as store:
        store.ingest([Cluster().cluster()])
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "base")
        assert set(sa.inspect(engine).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    with open_store(store_url) as store:
        assert store.list_clusters() == []
    assert alembic_version(store_url) == [head()]


def test_store_from_a_newer_release_is_refused_clearly(store_url):
    open_store(store_url).close()
    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(
        StoreUnavailable,
        match="schema revision '9999'.*newer release.*pip install -U dask-analytics-lab",
    ):
        open_store(store_url)


def test_reopen_same_file_keeps_everything(tmp_path):
    url = "sqlite:///" + str(tmp_path / "deep" / "er" / "analytics.db")  # directories are made
    c = Cluster()
    with open_store(url) as store:
        assert store.ingest([c.cluster(), c.computation("comp"), c.event()]) == 3
    with open_store(url) as store:
        assert store.get_computation("comp")["cluster_id"] == c.id
        assert len(store.list_events()) == 1
        assert store.ingest([c.event()]) == 1
    # WAL, as the other writers and readers need
    with sqlite3.connect(tmp_path / "deep" / "er" / "analytics.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_plain_path_and_pathlike(tmp_path):
    c = Cluster()
    with open_store(tmp_path / "a.db") as store:
        store.ingest([c.cluster()])
    with open_store(str(tmp_path / "a.db")) as store:
        assert store.list_clusters()[0]["cluster_id"] == c.id
        assert store.url == "sqlite:///" + str(tmp_path / "a.db") and store.dialect == "sqlite"


def test_in_memory_sqlite():
    with open_store("sqlite://") as store:
        c = Cluster()
        assert store.ingest([c.cluster(), c.event()]) == 2
        assert len(store.list_events()) == 1


def test_not_a_store_url():
    for url in (
        "http://analytics.example.com",
        "mysql://u@h/db",
        "postgresql://u:secret@h:notaport/db",
    ):
        with pytest.raises(ValueError) as info:
            open_store(url)
        assert "secret" not in str(info.value)


# --- unreachable ---------------------------------------------------------------------


def test_sqlite_directory_cannot_be_made(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    url = "sqlite:///" + str(blocker / "sub" / "analytics.db")
    with pytest.raises(StoreUnavailable) as info:
        open_store(url)
    text = str(info.value)
    assert url in text and "cannot create its directory" in text and "analytics.store" in text
    assert isinstance(info.value, ConnectionError)


def test_sqlite_path_is_a_directory(tmp_path):
    (tmp_path / "store.db").mkdir()
    with pytest.raises(
        StoreUnavailable, match=r"store\.db: unable to open database file\. Check that"
    ):
        open_store(tmp_path / "store.db")


def test_sqlite_file_is_not_a_database(tmp_path):
    (tmp_path / "notes.db").write_bytes(os.urandom(4096))
    with pytest.raises(StoreUnavailable, match="notes.db: file is not a database"):
        open_store(tmp_path / "notes.db")


def test_postgres_on_a_closed_port():
    port = free_port()  # nothing listens there
    url = f"postgresql://ann:s3cret@127.0.0.1:{port}/analytics"
    with pytest.raises(StoreUnavailable) as info:
        open_store(url)
    text = str(info.value)
    assert f"postgresql://ann:***@127.0.0.1:{port}/analytics" in text
    assert "s3cret" not in text and "PostgreSQL server is running" in text
    assert "\n" not in text


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_postgres_down_then_up_again():
    """An outage after opening: StoreUnavailable while down, and the same Store works after."""
    with PostgresServer() as pg:
        url = pg.url(pg.create_database())
        store = open_store(url)
        c = Cluster()
        assert store.ingest([c.cluster()]) == 1
        pg.halt()
        batch = [c.event(), c.computation("comp")]
        with pytest.raises(StoreUnavailable, match="PostgreSQL server is running"):
            store.ingest(batch)
        with pytest.raises(StoreUnavailable):
            store.list_clusters()
        pg.resume()
        assert store.ingest(batch) == 2  # the retried batch, nothing lost
        assert store.ingest(batch) == 0
        assert store.get_computation("comp")["cluster_id"] == c.id
        store.close()


@pytest.mark.postgres
def test_postgres_user_who_may_not_create_tables(postgres_server, postgres_url):
    role = f"reader_{uuid.uuid4().hex[:8]}"
    postgres_server.admin(f'CREATE ROLE "{role}" LOGIN')  # PostgreSQL 15+: no CREATE on public
    url = postgres_url.replace("postgres@", f"{role}@")
    with pytest.raises(StoreUnavailable, match="permission denied for schema public"):
        open_store(url)


def test_single_connection_store_opens_its_one_connection_up_front(store_url):
    """The scheduler's writer: one connection, open from the start, never a second."""
    c = Cluster()
    with open_store(store_url, single_connection=True) as store:
        pool = store._engine.pool
        assert pool.size() == 1 and pool.checkedin() == 1  # open before the first write
        store.ingest([c.cluster()])
        for _ in range(5):
            store.ingest([c.sample() for _ in range(10)])
        assert store.get_cluster(c.id)["name"] == "LocalCluster-1"
        assert pool.checkedin() == 1 and pool.checkedout() == 0
