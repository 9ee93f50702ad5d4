"""Several writers and readers at once: processes on one SQLite file, and PostgreSQL.

SQLite only takes several writer processes with BEGIN IMMEDIATE (engine.py); these
tests fail with "database is locked" without it.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import threading
import time
import traceback
from unittest import mock

import pytest
import sqlalchemy as sa

from dask_analytics_lab.store import StoreUnavailable, open_store, schema

from ..factories import Cluster, group
from ..waiting import wait_for

N_WRITERS = 4
SPAWN = mp.get_context("spawn")  # a fresh interpreter, as separate schedulers would be


def own_messages(worker: int) -> list[dict]:
    c = Cluster(cluster_id=f"own-{worker}", t0=1000.0 * worker)
    msgs = [c.cluster()]
    for i in range(40):
        msgs += [
            c.computation(f"own-{worker}-{i}", groups=[group("a"), group("b"), group("c")]),
            c.event("t", {"i": i}),
            c.sample(n_workers=i),
            c.exception(f"own-{worker}-{i}", "a"),
        ]
        if i % 4 == 0:  # where the time went: 4 metric rows, 2 worker samples, 4 task rows
            msgs += [c.metrics(f"own-{worker}-{i}"), c.workers(2), c.tasks(f"own-{worker}-{i}")]
    return msgs


def shared_messages() -> list[dict]:
    """The same messages, sent by every writer (a retried batch, many times over)."""
    c = Cluster(cluster_id="shared", t0=5000.0)
    msgs = [c.cluster()]
    for i in range(30):
        msgs += [
            c.computation(f"shared-{i}", groups=[group("x"), group("y")]),
            c.event("s", {"i": i}),
            c.code(f"h{i % 3}"),
        ]
        if i % 3 == 0:
            msgs += [c.metrics(f"shared-{i}"), c.workers(1), c.tasks(f"shared-{i}")]
    return msgs


def batches(msgs: list[dict], size: int, seed: int) -> list[list[dict]]:
    out = [msgs[i : i + size] for i in range(0, len(msgs), size)]
    random.Random(seed).shuffle(out)
    return out


def open_patiently(url: str, patience: float = 180.0):
    """open_store, tried again while another process holds the write lock longer than
    the busy timeout (its migration, on a starved 2-core machine), as the plugin's
    shipper does: a lock held too long is a wait, never a lost or doubled message."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return open_store(url)
        except StoreUnavailable as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise


def _writer(url: str, worker: int, barrier, results) -> None:
    try:
        barrier.wait(120)
        store = open_patiently(url)  # all at once, on a store nobody has made yet
        mine = batches(own_messages(worker), 10, seed=worker)
        shared = batches(shared_messages(), 3 + worker, seed=100 + worker)
        n = 0
        while mine or shared:
            for source in (mine, shared):
                if source:
                    n += store.ingest(source.pop())
        store.close()
        results.put((worker, n, None))
    except BaseException:
        results.put((worker, None, traceback.format_exc()))


@pytest.mark.timeout(240)
def test_writer_processes_store_every_message_once(store_url):
    barrier, results = SPAWN.Barrier(N_WRITERS), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=_writer, args=(store_url, w, barrier, results))
        for w in range(N_WRITERS)
    ]
    for p in procs:
        p.start()
    got = [results.get(timeout=200) for _ in procs]
    for p in procs:
        p.join(30)
    errors = [err for _, _, err in got if err]
    assert not errors, errors[0]
    own, shared = len(own_messages(0)), len(shared_messages())
    assert sum(n for _, n, _ in got) == N_WRITERS * own + shared

    with open_store(store_url) as store:
        counts = {t: len(rows) for t, rows in store.export().items()}
        assert counts == {
            "clusters": N_WRITERS + 1,
            "cluster_samples": N_WRITERS * 40,
            "computations": N_WRITERS * 40 + 30,
            "task_groups": N_WRITERS * 120 + 60,
            "code_snippets": 3,
            "exceptions": N_WRITERS * 40,
            "events": N_WRITERS * 40 + 30,
            "profiles": 0,
            "gpu_samples": 0,
            "computation_metrics": N_WRITERS * 40 + 40,
            "worker_samples": N_WRITERS * 20 + 10,
            "task_stream": N_WRITERS * 40 + 40,
        }
        assert store.get_cluster("shared")["name"] == "LocalCluster-1"


def _reader(url: str, stop, results, seen_now) -> None:
    """Reads until `stop`; `seen_now` says how many computations its last read saw."""
    reads, seen, problems = 0, 0, []
    try:
        store = open_store(url)
        while not stop.is_set():
            comps = store.list_computations(limit=10_000)
            if len(comps) < seen:
                problems.append(f"went back from {seen} to {len(comps)} computations")
            seen = seen_now.value = len(comps)
            if comps:
                full = store.get_computation(comps[0]["computation_id"])
                if len(full["groups"]) != 3:
                    problems.append(f"a computation without its groups: {full['groups']}")
            store.list_clusters()
            store.list_events(limit=50)
            reads += 1
        store.close()
    except BaseException:
        problems.append(traceback.format_exc())
    results.put((reads, seen, problems))


@pytest.mark.timeout(240)
def test_reader_process_while_writing(store_url):
    with open_store(store_url) as store:
        stop, results, seen_now = SPAWN.Event(), SPAWN.Queue(), SPAWN.Value("i", -1)
        reader = SPAWN.Process(target=_reader, args=(store_url, stop, results, seen_now))
        reader.start()
        c = Cluster()
        store.ingest([c.cluster()])
        wait_for(lambda: seen_now.value >= 0, what="the reader to start reading")
        for i in range(150):
            # groups come with their computation, in one transaction: never seen apart
            store.ingest(
                [c.computation(f"comp-{i}", groups=[group("a"), group("b"), group("c")]), c.event()]
            )
        wait_for(lambda: seen_now.value == 150, what="the reader to see every computation")
        stop.set()
        reads, seen, problems = results.get(timeout=60)
        reader.join(30)
    assert not problems, problems[0]
    assert reads > 5 and seen == 150


def test_same_batch_concurrently_is_stored_once(store_url):
    stores = [open_store(store_url) for _ in range(2)]
    c = Cluster()
    try:
        for round_ in range(5):
            batch = [c.cluster()] if round_ == 0 else []
            batch += [c.computation(f"comp-{round_}-{i}") for i in range(10)] + [
                c.event() for _ in range(10)
            ]
            counts: list[int] = []
            start = threading.Barrier(len(stores))

            def send(store):
                start.wait()
                counts.append(store.ingest(batch))

            threads = [threading.Thread(target=send, args=(s,)) for s in stores]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(counts) == [0, len(batch)], counts
        assert len(stores[0].list_computations(limit=None)) == 50
        assert len(stores[1].list_events(limit=None)) == 50
    finally:
        for s in stores:
            s.close()


def test_concurrent_first_opens(store_url):
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_one():
        try:
            start.wait()
            open_patiently(store_url).close()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_reads_do_not_wait_for_a_writer(store_url):
    """A read takes no write lock (deferred BEGIN on SQLite): it reads the last commit at once."""
    writer, reader = open_store(store_url), open_store(store_url)
    try:
        c = Cluster()
        writer.ingest([c.cluster()])
        with writer._engine.begin() as conn:  # an open write transaction holding the write lock
            conn.execute(sa.update(schema.clusters).values(name="not committed yet"))
            answers: list = []

            def read() -> None:
                try:
                    answers.append((reader.get_cluster(c.id)["name"], reader.list_computations()))
                except BaseException as e:  # a read that waited for the lock, then gave up
                    answers.append(e)

            # (A daemon thread: a read stuck behind the lock must not hold the test up.)
            threading.Thread(target=read, daemon=True).start()
            # The reads end while the writer still holds its lock: they never waited for it.
            wait_for(lambda: answers, what="the reads, while a writer holds its lock")
            assert answers == [("LocalCluster-1", [])], answers
    finally:
        writer.close()
        reader.close()


def _fail_first_event_insert(store, sqlstate: str) -> None:
    """A trigger that makes the next INSERT into `events` fail once, with `sqlstate`,
    raised by the server itself (as a deadlock or a refused value would be)."""
    with store._engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE fail_once (n int)")
        conn.exec_driver_sql(
            f"""CREATE FUNCTION fail_once() RETURNS trigger AS $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM fail_once) THEN
                    RAISE EXCEPTION 'injected' USING ERRCODE = '{sqlstate}';
                END IF;
                RETURN NEW; END $$ LANGUAGE plpgsql"""
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER fail_once BEFORE INSERT ON events FOR EACH STATEMENT "
            "EXECUTE FUNCTION fail_once()"
        )


@pytest.mark.postgres
def test_a_deadlock_in_a_batchs_writes_is_retried_and_stored_once(postgres_url):
    """PostgreSQL may pick a batch's transaction as a deadlock's victim after its claim:
    the whole batch is tried once more, and every message is stored once."""
    from dask_analytics_lab.store import ingest

    c = Cluster()
    with open_store(postgres_url) as store:
        store.ingest([c.cluster()])
        _fail_first_event_insert(store, "40P01")
        tries = []
        real = ingest._store

        def counted(engine, msgs, *args):
            tries.append(len(msgs))
            if len(tries) == 2:  # the retry: this time the trigger lets it through
                with engine.begin() as conn:
                    conn.exec_driver_sql("INSERT INTO fail_once VALUES (1)")
            return real(engine, msgs, *args)

        batch = [c.computation("comp-1"), c.event(), c.event()]
        with mock.patch.object(ingest, "_store", counted):
            assert store.ingest(batch) == 3
        assert tries == [3, 3]
        assert store.ingest(batch) == 0  # claimed once, by the retry
        assert len(store.list_events(limit=None)) == 2
        assert [r["computation_id"] for r in store.list_computations(limit=None)] == ["comp-1"]


@pytest.mark.postgres
def test_a_value_the_database_refuses_is_a_message_error(postgres_url):
    """A value the contract lets through but PostgreSQL refuses (SQLSTATE class 22) is
    the sender's to drop, not to retry (MessageError); the batch leaves nothing behind."""
    from dask_analytics_lab.messages import MessageError

    c = Cluster()
    with open_store(postgres_url) as store:
        store.ingest([c.cluster()])
        _fail_first_event_insert(store, "22023")
        batch = [c.computation("comp-1"), c.event()]
        with pytest.raises(MessageError, match="the store refused data in this batch: injected"):
            store.ingest(batch)
        assert store.list_events(limit=None) == []
        assert store.list_computations(limit=None) == []
