"""Time partitions (store/partitions.py, migration 0011), issue 22 item 5: on PostgreSQL
the task stream, worker samples, GPU samples and events are partitioned by day; an
upgrade keeps the rows there; rows land in their day's partition (or DEFAULT); retention
drops whole partitions and removes exactly what it removed before; a read names its
time range, so PostgreSQL reads only those partitions; SQLite keeps one table each."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import sqlalchemy as sa
from alembic import command

from dask_analytics_lab.server.metrics import _count as table_rows
from dask_analytics_lab.store import open_store, partitions, schema
from dask_analytics_lab.store.engine import make_engine
from dask_analytics_lab.store.migrate import alembic_config
from dask_analytics_lab.store.prune import prune

from ..factories import Cluster
from ..retention_scenario import DAY, NOW, kept_part, scenario
from ..waiting import wait_for

TABLES = [t.name for t in partitions.TABLES]
# Rows of messages_at() per table.
N = {"task_stream": 4, "worker_samples": 2, "gpu_samples": 2, "events": 1}


def day(t: float) -> float:
    return partitions.start_of(t)


@pytest.fixture
def engine(postgres_url):
    e = make_engine(postgres_url)
    yield e
    e.dispose()


def rows_by_partition(engine: sa.Engine, table: str) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(
            conn.exec_driver_sql(
                f"SELECT tableoid::regclass::text, count(*) FROM {table} GROUP BY 1"
            ).all()
        )


def relkind(engine: sa.Engine, name: str) -> str | None:
    """'p' partitioned, 'r' a plain table (a partition too), None: no such table."""
    with engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT relkind FROM pg_class WHERE relname = %(n)s", {"n": name}
        ).scalar()


def partition_names(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        return {
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            )
        }


def all_rows(engine: sa.Engine) -> dict[str, list[dict]]:
    with engine.connect() as conn:
        return {
            t: [dict(r._mapping) for r in conn.exec_driver_sql(f"SELECT * FROM {t} ORDER BY id")]
            for t in TABLES
        }


# --- the migration -------------------------------------------------------------------
@pytest.mark.postgres
def test_an_upgrade_from_0010_partitions_the_rows_in_place_and_a_downgrade_undoes_it(
    postgres_url, engine
):
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0010")
    # Rows as 0010 held them (Core against the same columns), on three days.
    cid = "tcp-scheduler-old"
    times = [NOW - 40 * DAY, NOW - 10 * DAY, NOW]
    with engine.begin() as conn:
        conn.execute(
            sa.insert(schema.clusters),
            {"cluster_id": cid, "started": times[0], "first_seen": times[0], "last_seen": NOW},
        )
        for i, t in enumerate(times):
            conn.execute(
                sa.insert(schema.computations),
                {
                    "computation_id": f"comp-{i}",
                    "cluster_id": cid,
                    "start": t,
                    "state": "done",
                    "updated": t,
                },
            )
            conn.execute(
                sa.insert(schema.task_stream),
                [
                    {
                        "cluster_id": cid,
                        "computation_id": f"comp-{i}",
                        "start": t + k,
                        "stop": t + k + 0.5,
                        "n_tasks": 1,
                        "binned": False,
                    }
                    for k in range(3)
                ],
            )
            conn.execute(
                sa.insert(schema.worker_samples), {"cluster_id": cid, "worker": "w", "time": t}
            )
            conn.execute(sa.insert(schema.gpu_samples), {"cluster_id": cid, "time": t})
            conn.execute(
                sa.insert(schema.events),
                {"cluster_id": cid, "topic": "x", "time": t, "msg": {"i": i}},
            )
    before = all_rows(engine)

    with open_store(postgres_url) as store:  # upgrades to head
        # The rows as they were, in the columns they had (later revisions add columns).
        assert {
            t: [{k: r[k] for k in old[0]} for r in rows] if (old := before[t]) else rows
            for t, rows in all_rows(engine).items()
        } == before
        for t in TABLES:
            assert relkind(engine, t) == "p", t
            assert rows_by_partition(engine, t) == {
                partitions.name_of(t, day(x)): 3 if t == "task_stream" else 1 for x in times
            }, t
            with engine.connect() as conn:
                pk = sa.inspect(conn).get_pk_constraint(t)
            assert pk["name"] == f"pk_{t}"
            assert pk["constrained_columns"] == ["id", partitions.TABLES[getattr(schema, t)]]
        # The spans were filled from the rows already there: a read finds them.
        assert [r["start"] for r in store.list_task_stream("comp-1")] == [
            times[1] + k for k in range(3)
        ]
        # The id sequences go on where they stopped.
        store.ingest([Cluster(cid).tasks("comp-new")])
        new = [r for r in all_rows(engine)["task_stream"] if r["computation_id"] == "comp-new"]
        assert len(new) == 4 and min(r["id"] for r in new) > max(
            r["id"] for r in before["task_stream"]
        )

    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0010")
    after = all_rows(engine)
    after["task_stream"] = [r for r in after["task_stream"] if r["computation_id"] != "comp-new"]
    assert after == before
    for t in TABLES:
        assert relkind(engine, t) == "r", t
    assert partition_names(engine) == set()
    assert relkind(engine, "task_stream_spans") is None

    with open_store(postgres_url) as store:  # and up again
        assert len(store.list_task_stream("comp-0")) == 3
        assert relkind(engine, "events") == "p"


# --- where rows go ---------------------------------------------------------------------
@pytest.mark.postgres
def test_rows_land_in_their_days_partition_and_the_next_days_are_made_ahead(postgres_url, engine):
    now = time.time()  # the migration's clock, not the module's NOW: midnight may have passed
    today = day(now)
    with open_store(postgres_url) as store:
        for t in TABLES:  # made by the migration: today and tomorrow, and DEFAULT
            assert partition_names(engine) >= {
                partitions.name_of(t, today),
                partitions.name_of(t, today + DAY),
                f"{t}_default",
            }
        c = Cluster(t0=now)
        # Rows of today, of a day long ago and of a day far ahead (clocks that are off).
        msgs = [c.cluster(started=now), *messages_at(c, "now", now)]
        msgs += messages_at(c, "old", now - 300 * DAY) + messages_at(c, "ahead", now + 5 * DAY)
        store.ingest(msgs)
        for t in TABLES:
            assert rows_by_partition(engine, t) == {
                partitions.name_of(t, today): N[t],
                f"{t}_default": 2 * N[t],
            }, t

        # Five days on, the first ingest makes that day's partition and the next: the
        # rows DEFAULT held for that day move into it.
        store._ahead(now=now + 5 * DAY)
        for t in TABLES:
            assert rows_by_partition(engine, t) == {
                partitions.name_of(t, today): N[t],
                partitions.name_of(t, today + 5 * DAY): N[t],
                f"{t}_default": N[t],
            }, t
            assert partitions.name_of(t, today + 6 * DAY) in partition_names(engine)
        # Indexes and keys came with the attached partition (a time-series table has no
        # foreign key since migration 0012).
        with engine.connect() as conn:
            insp = sa.inspect(conn)
            ahead = partitions.name_of("worker_samples", today + 5 * DAY)
            assert len(insp.get_indexes(ahead)) == len(insp.get_indexes("worker_samples"))
            assert insp.get_pk_constraint(ahead)["constrained_columns"] == ["id", "time"]
            assert insp.get_foreign_keys(ahead) == []
        # And every row reads as it was written.
        assert len(store.list_worker_samples(c.id, limit=None)) == 6
        assert len(store.list_task_stream(f"{c.id}-ahead")) == 4
        # /metrics counts a partitioned table's rows in its partitions, never analyzed
        # (#37 R10: the planner's estimate read 0 until then); the statistics arrive
        # shortly after the writes commit.
        wait_for(
            lambda: table_rows(store, now)[0]["worker_samples"] == 3 * N["worker_samples"],
            what="PostgreSQL's statistics to count the rows",
        )


@pytest.mark.postgres
def test_a_writer_that_may_not_make_tables_stores_everything_all_the_same(
    postgres_server, postgres_url, engine, caplog
):
    """A role that may write rows but not create tables: the partitions ahead are not
    made (said once in the log), and rows of a day without one land in DEFAULT."""
    open_store(postgres_url).close()
    role = f"writer_{uuid.uuid4().hex[:8]}"
    postgres_server.admin(f'CREATE ROLE "{role}" LOGIN')
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}"'
        )
        conn.exec_driver_sql(f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    later = time.time() + 10 * DAY
    with open_store(postgres_url.replace("postgres@", f"{role}@")) as store:
        with caplog.at_level("WARNING", logger="dask_analytics_lab.store"):
            store._ahead(now=later)
            store._ahead(now=later + 60)  # not again within the interval
        assert [r.getMessage() for r in caplog.records if "partitions ahead" in r.getMessage()]
        assert len(caplog.records) == 1 and "permission denied" in caplog.records[0].getMessage()
        c = Cluster(t0=later)
        store.ingest([c.cluster(started=later), *messages_at(c, "later", later)])
        for t in TABLES:
            assert rows_by_partition(engine, t) == {f"{t}_default": N[t]}, t
        assert len(store.list_task_stream(f"{c.id}-later")) == 4


def messages_at(c: Cluster, name: str, t: float) -> list[dict]:
    """A computation with its task stream, worker samples, a GPU sample and an event at t."""
    c.t = t
    comp = f"{c.id}-{name}"
    return [c.computation(comp), c.tasks(comp), c.workers(2, at=t), c.gpu(1), c.event()]


# --- retention ------------------------------------------------------------------------
@pytest.mark.postgres
def test_retention_drops_the_partitions_before_the_cutoff_and_keeps_what_it_kept(
    postgres_url, engine
):
    """test_prune's clusters (an old, a lost, a recent, a long job and a live one that
    started 200 days ago), with partitions for the old days: those go whole, the live
    cluster's old rows move to DEFAULT, and the prune removes what it always did."""
    with open_store(postgres_url) as store:
        with store.transaction() as conn:
            for t in (NOW - 200 * DAY, NOW - 100 * DAY, NOW - 95 * DAY, NOW - 10 * DAY, NOW):
                partitions.ensure(
                    conn, t
                )  # and the next day: a cluster's messages may cross midnight
        ids = scenario(store)
        keep = {ids["recent"], ids["long"], ids["live"]}
        before = store.export()
        with engine.connect() as conn:
            old_parts = {p.name for p in partitions.expired(conn, NOW - 90 * DAY)}
        assert {partitions.name_of(t, day(NOW - 200 * DAY)) for t in TABLES} <= old_parts
        # The live cluster (200 days ago) and the long job (100) have samples in expired
        # partitions.
        kept_old = [
            r
            for r in before["worker_samples"]
            if r["cluster_id"] in keep and r["time"] < NOW - 90 * DAY
        ]
        assert {r["cluster_id"] for r in kept_old} == {ids["live"], ids["long"]}
        assert "worker_samples_default" not in rows_by_partition(engine, "worker_samples")

        dry = prune(store, 90 * DAY, now=NOW, dry_run=True)
        done = prune(store, 90 * DAY, now=NOW, pause=0)
        del dry["seconds"], done["seconds"]
        assert done == dry and done["clusters"] == 2

        # The expired partitions are gone from the catalog, the others stay.
        assert partition_names(engine).isdisjoint(old_parts)
        for name in old_parts:
            assert relkind(engine, name) is None, name
        kept = partition_names(engine)
        for t in TABLES:
            assert {
                partitions.name_of(t, day(NOW - 10 * DAY)),
                partitions.name_of(t, day(NOW)),
                f"{t}_default",
            } <= kept
        # Those are in DEFAULT now.
        assert rows_by_partition(engine, "worker_samples")["worker_samples_default"] == len(
            kept_old
        )
        # As test_prune checks it: the kept clusters' rows as they were, nothing of the others.
        after = store.export()
        assert {c["cluster_id"] for c in after["clusters"]} == keep
        assert kept_part(after, keep) == kept_part(before, keep)
        for name, rows in kept_part(before, {ids["old"], ids["lost"]}).items():
            assert done[name] == len(rows), name
        assert prune(store, 90 * DAY, now=NOW)["clusters"] == 0


# --- reads name their range ---------------------------------------------------------
def scanned(engine: sa.Engine, statement: str, params: object) -> set[str]:
    """The tables PostgreSQL's plan of a statement reads."""
    with engine.connect() as conn:
        (plan,) = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, params).one()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "Relation Name" in node:
                found.add(node["Relation Name"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(plan)
    return found


class Statements:
    """The statements a Store sends that read a table."""

    def __init__(self, store, table: str):
        self.seen: list[tuple[str, object]] = []
        self.table = table
        sa.event.listen(store._engine, "before_cursor_execute", self._record)

    def _record(self, conn, cursor, statement, params, context, many) -> None:
        if f"FROM {self.table} " in statement + " ":
            self.seen.append((statement, params))


@pytest.mark.postgres
def test_a_computations_task_stream_read_touches_only_its_days_partitions(postgres_url, engine):
    today = day(NOW)
    with open_store(postgres_url) as store:
        with store.transaction() as conn:
            for d in range(1, 6):
                partitions.ensure(conn, today - d * DAY, ahead=0)
        c = Cluster(t0=today - 3 * DAY + 100)
        msgs = [c.cluster(started=c.t)]
        msgs += messages_at(c, "one-day", today - 3 * DAY + 100)
        # A computation across midnight: its rows on two days.
        c.t = today - 2 * DAY - 1
        rows = [
            {"worker": "w", "start": today - 2 * DAY - 1, "stop": today - 2 * DAY - 0.5},
            {"worker": "w", "start": today - 2 * DAY + 10, "stop": today - 2 * DAY + 11},
        ]
        msgs += [c.computation("overnight"), c.tasks("overnight", rows=rows)]
        store.ingest(msgs)
        reads = Statements(store, "task_stream")
        assert len(store.list_task_stream(f"{c.id}-one-day")) == 4
        assert len(store.list_task_stream("overnight")) == 2
        one_day, overnight = reads.seen
        assert scanned(engine, *one_day) == {partitions.name_of("task_stream", today - 3 * DAY)}
        assert scanned(engine, *overnight) == {
            partitions.name_of("task_stream", today - 3 * DAY),
            partitions.name_of("task_stream", today - 2 * DAY),
        }
        # Without a where on the time, every partition would be read.
        every = scanned(engine, "SELECT * FROM task_stream WHERE computation_id = 'overnight'", {})
        assert len(every) >= 8

        # A cluster's worker samples: the days of its life, give or take one.
        reads = Statements(store, "worker_samples")
        assert len(store.list_worker_samples(c.id)) == 2
        (samples,) = reads.seen
        assert scanned(engine, *samples) <= {
            partitions.name_of("worker_samples", today - d * DAY) for d in range(0, 5)
        }
        assert partitions.name_of("worker_samples", today - 5 * DAY) not in scanned(
            engine, *samples
        )


# --- SQLite ---------------------------------------------------------------------------
def test_sqlite_keeps_one_plain_table_each(sqlite_url):
    with open_store(sqlite_url) as store:
        assert store._ahead is None  # no partition DDL on SQLite
        c = Cluster(t0=NOW)
        store.ingest([c.cluster(started=NOW), *messages_at(c, "x", NOW)])
        engine = make_engine(sqlite_url)
        try:
            names = set(sa.inspect(engine).get_table_names())
            with engine.connect() as conn:
                pk = sa.inspect(conn).get_pk_constraint("task_stream")["constrained_columns"]
        finally:
            engine.dispose()
        assert names == set(schema.metadata.tables) | {"alembic_version"}
        assert not any(partitions.is_partition(n) for n in names)
        assert pk == ["id"]
        assert len(store.list_task_stream(f"{c.id}-x")) == 4
