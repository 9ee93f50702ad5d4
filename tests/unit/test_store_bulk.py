"""A batch's many rows (store/bulk.py: one INSERT of arrays on PostgreSQL) are stored
as sent, value for value and in their order, on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

from dask_analytics_lab.store import open_store, schema

from ..factories import Cluster, group


def rows(store, table: sa.Table, cluster_id: str) -> list[dict]:
    with store.reading() as conn:
        q = sa.select(table).where(table.c.cluster_id == cluster_id).order_by(table.c.id)
        return [{k: v for k, v in r._mapping.items() if k != "id"} for r in conn.execute(q)]


def test_row_tables_hold_what_was_sent_in_order(store_url):
    c = Cluster(account="acme")
    # Starts out of order (ids must follow the rows, not the times), ints where floats
    # belong (1 s times exact in JSON), NULLs, text outside ASCII, JSON of every shape.
    tasks = [
        {
            "worker": f"tcp://10.0.0.{i % 3}:4000",
            "thread": 140000 + i,
            "prefix": "größe" if i == 1 else "ones",
            "task_group": None if i == 2 else "ones-abc",
            "state": "memory",
            "start": c.t + (5 - i),
            "stop": c.t + 7.25,
            "n_tasks": i + 1,
            "busy": None if i == 3 else 0.5 * i,
            "binned": i % 2 == 0,
        }
        for i in range(5)
    ]
    msgs = [
        c.cluster(),
        c.sample(worker_seconds=10, idle_since=None, n_workers=3.0),  # a whole float: a Count
        c.sample(worker_seconds=11.5),
        c.event(msg={"nested": [1, {"a": None}], "ü": "ß"}),
        c.event(topic="worker-joined", msg=[1, 2.5, "x"]),
        c.event(topic="plain", msg="text"),
        c.workers(3, cpu=7),
        c.tasks("comp-1", tasks),
    ]
    with open_store(store_url) as store:
        assert store.ingest(msgs) == len(msgs)
        got = rows(store, schema.task_stream, c.id)
        assert [r["thread"] for r in got] == [t["thread"] for t in tasks]
        for sent, stored in zip(tasks, got):
            assert stored == {**sent, "cluster_id": c.id, "computation_id": "comp-1"}
            assert type(stored["start"]) is float
        events = rows(store, schema.events, c.id)
        assert [(e["topic"], e["msg"]) for e in events] == [
            ("worker-fail-hard", {"nested": [1, {"a": None}], "ü": "ß"}),
            ("worker-joined", [1, 2.5, "x"]),
            ("plain", "text"),
        ]
        samples = rows(store, schema.cluster_samples, c.id)
        assert [s["worker_seconds"] for s in samples] == [10.0, 11.5]
        assert samples[0]["idle_since"] is None and samples[0]["memory_total"] == 2**34
        assert samples[0]["n_workers"] == 3 and type(samples[0]["n_workers"]) is int
        workers = rows(store, schema.worker_samples, c.id)
        assert [w["worker"] for w in workers] == [f"tcp://10.0.0.{i + 1}:4000" for i in range(3)]
        assert all(w["cpu"] == 7.0 and w["spilled"] == 0 for w in workers)


def test_upserts_of_a_batch_end_as_row_by_row_would(store_url):
    """A batch's upserts (one statement each on PostgreSQL) keep the newest value of each
    key, whatever else the batch or the store holds, and claim each (cluster, seq) once."""
    a, b = Cluster(account="acme"), Cluster(account="acme")

    def metric(value: float) -> list[dict]:
        row = {"prefix": "ones", "context": "execute", "activity": "cpu", "unit": "seconds"}
        return [{**row, "value": value}, {**row, "activity": "noncpu", "value": value / 2}]

    with open_store(store_url) as store:
        first = [a.cluster(), b.cluster(), a.metrics("c-a", metric(1.0))]
        newer = b.metrics("c-b", metric(9.0))
        assert store.ingest(first + [newer]) == 4
        older = {**b.metrics("c-b", metric(5.0)), "time": newer["time"] - 1}
        batch = [older, a.metrics("c-a", metric(2.0)), a.metrics("c-a", metric(3.0))]
        assert store.ingest(batch) == 3
        assert store.ingest(batch) == 0  # each (cluster, seq) is stored once
        m = schema.computation_metrics.c
        with store.reading() as conn:
            got = conn.execute(sa.select(m.cluster_id, m.activity, m.value)).all()
        assert sorted(map(tuple, got)) == sorted(
            [(a.id, "cpu", 3.0), (a.id, "noncpu", 1.5), (b.id, "cpu", 9.0), (b.id, "noncpu", 4.5)]
        )


def test_sqlite_rows_go_to_the_driver_as_tuples(tmp_path):
    """The embedded store writes in the scheduler's process: a batch's rows reach sqlite3
    as tuples in one executemany, not through SQLAlchemy's per-row parameters."""
    c = Cluster(account="acme")
    task = {"worker": "w", "thread": 1, "prefix": "p", "task_group": "g", "state": "memory"}
    tasks = [
        {**task, "start": c.t + i, "stop": c.t + i + 1, "n_tasks": 1, "busy": None, "binned": False}
        for i in range(5)
    ]
    seen: list[tuple[str, bool, bool]] = []

    def executed(conn, cursor, statement, params, context, many):
        if statement.startswith("INSERT INTO task_stream "):
            rows_are_tuples = many and all(type(p) is tuple for p in params)
            seen.append((statement, rows_are_tuples, context.compiled is None))

    with open_store(f"sqlite:///{tmp_path / 'a.db'}") as store:
        sa.event.listen(store._engine, "before_cursor_execute", executed)
        assert store.ingest([c.cluster(), c.tasks("comp-1", tasks)]) == 2
        got = rows(store, schema.task_stream, c.id)
    assert [(s.split("(")[0].strip(), tuples, driver) for s, tuples, driver in seen] == [
        ("INSERT INTO task_stream", True, True)
    ]
    assert [r["start"] for r in got] == [t["start"] for t in tasks]
    assert all(r["binned"] is False and r["busy"] is None for r in got)


@pytest.mark.postgres
def test_every_kinds_rows_reach_postgresql_as_one_document_a_table(postgres_url, monkeypatch):
    """A batch of every kind, single rows and JSON columns among them: each table's
    rows go as one INSERT ... json_to_recordset, none row by row, and read back as sent."""
    c = Cluster(account="acme")
    batch = [
        c.cluster(),
        c.sample(),
        c.computation("comp", code=["h"], groups=[group("ones"), group("twos")]),
        c.computation("older", frames=None),  # a JSON column left out: NULL, not 'null'
        c.code("h"),
        c.exception("comp", "ones"),
        c.event(msg={"k": [1, "x", None]}),
        c.metrics("comp"),
        c.workers(1),
        c.tasks("comp", [{"worker": "w", "start": c.t, "stop": c.t + 1}]),
        c.gpu(n=1),
        c.stop(),
    ]
    inserts: list[str] = []
    many: list[str] = []
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def seen_execute(self, query, *args, **kw):
        inserts.append(str(query))
        return execute(self, query, *args, **kw)

    def seen_executemany(self, query, *args, **kw):
        many.append(str(query))
        return executemany(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", seen_execute)
    monkeypatch.setattr(psycopg.Cursor, "executemany", seen_executemany)
    with open_store(postgres_url) as store:
        inserts.clear()
        assert store.ingest(batch) == len(batch)
        monkeypatch.undo()
        tables = {q.split()[2] for q in inserts if q.startswith("INSERT INTO")}
        assert {"clusters", "ingested", "task_groups", "computations", "events"} <= tables
        assert [q for q in inserts if q.startswith("INSERT") and "json_to_recordset" not in q] == []
        assert [q for q in many if q.startswith("INSERT")] == []
        comp = store.get_computation("comp")
        assert [g["name"] for g in comp["groups"]] == ["ones", "twos"]
        assert comp["groups"][0]["states"] == group("ones")["states"]
        (event,) = store.list_events(cluster_id=c.id, topic="worker-fail-hard")
        assert event["msg"] == {"k": [1, "x", None]}
        with store.reading() as conn:
            frames = conn.execute(
                sa.select(schema.computations.c.code_frames.is_(None)).where(
                    schema.computations.c.computation_id == "older"
                )
            ).scalar_one()
        assert frames is True


def test_a_nul_inside_json_is_stored_as_sent(store_url):
    """PostgreSQL's json type keeps a \\u0000 escape, but json_to_recordset cannot read
    one: such a batch goes row by row there, and nothing is refused."""
    c = Cluster(account="acme")
    with open_store(store_url) as store:
        msgs = [c.cluster(), c.event(msg={"raw": "a\x00b"}), c.event(msg={"k": 1})]
        assert store.ingest(msgs) == 3
        got = sorted((e["msg"] for e in store.list_events(cluster_id=c.id)), key=str)
        assert got == [{"k": 1}, {"raw": "a\x00b"}]
