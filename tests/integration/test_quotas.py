"""Issue 37, R5: storage quotas bound every kind that grows the store, in bytes, per
account and kind, and hold across replicas.

Before, only reports and events were counted, each replica by itself: five 12 MB
task-stream batches were accepted after the event quota said 507, and three replicas
overshot the event quota 2.4x.  Here, against real server processes on SQLite and
PostgreSQL (and three replicas behind HAProxy on one PostgreSQL):
- one account's task stream past its quota is refused (507, naming the quota, the usage
  and the option), and nothing of a refused batch is stored; a retried batch is
  counted once; one batch larger than the quota is 413 before any write; another
  account is unaffected; prune gives the bytes back;
- every kind lands in its own count, and the account's total quota bounds them all;
- concurrent posts through three replicas never take an account past its quota.
"""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from dask_analytics_lab.messages import check_batch
from dask_analytics_lab.server.quota import FLAGS
from dask_analytics_lab.store import open_store, usage
from dask_analytics_lab.store.engine import make_engine
from dask_analytics_lab.store.prune import prune
from dask_analytics_lab.store.team import TeamStore

from ..factories import tree
from ..server_helpers import Cluster, ServerProcess, ServerThread, add_token, free_port, request

DAY = 86400.0
ROW_BYTES = 150  # about a task stream row's JSON


def task_batch(c: Cluster, nbytes: int) -> list[dict]:
    """One task stream message of about `nbytes`."""
    t = c.t
    rows = [
        {
            "worker": f"tcp://10.0.0.{i % 7 + 1}:4000",
            "thread": 140000 + i % 4,
            "prefix": "ones",
            "task_group": "ones-abc",
            "state": "memory",
            "start": t + i * 1e-3,
            "stop": t + i * 1e-3 + 5e-4,
        }
        for i in range(nbytes // ROW_BYTES)
    ]
    return [c.tasks("comp-1", rows)]


def event_batch(c: Cluster, nbytes: int) -> list[dict]:
    """Events of about `nbytes` in all."""
    return [c.event(msg={"text": "x" * 1000}) for _ in range(nbytes // 1100)]


def counted(batch: list[dict], kind: str) -> int:
    """The bytes of `kind` a batch adds to its account's usage, as the server measures them
    (messages that the server does not change on the way: no cluster or code message)."""
    code = usage.CODES[kind]
    return sum(n for k, n in usage.measure(check_batch(batch)).values() if k == code)


def post(url: str, token: str, batch: list[dict]) -> tuple[int, dict]:
    status, body, _ = request(url + "/api/ingest", method="POST", token=token, body=batch)
    return status, body


def scalar(url: str, sql: str, **params) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(sql), params).scalar_one())
    finally:
        engine.dispose()


def used(url: str, account: str) -> dict[str, int]:
    with open_store(url) as st:
        return TeamStore(st).usage(account)


def test_task_stream_past_its_quota_is_refused_and_nothing_of_it_is_stored(store_url):
    quota = 1_000_000
    a_token, b_token = add_token(store_url, "A"), add_token(store_url, "B")
    flags = ["--task-stream-quota-bytes", str(quota)]
    with ServerProcess(store_url, free_port(), flags) as server:
        a = Cluster(account="A")
        assert post(server.url, a_token, [a.cluster()])[0] == 200
        batches = [task_batch(a, 400_000) for _ in range(4)]
        answers = [post(server.url, a_token, b) for b in batches]
        assert [status for status, _ in answers] == [200, 200, 507, 507], answers[2]
        have = counted(batches[0], "task_stream") + counted(batches[1], "task_stream")
        error = answers[2][1]["error"]
        assert f"account 'A' has used {have:,} of its {quota:,}-byte task stream quota" in error
        assert "--task-stream-quota-bytes" in error and "quota_task_stream_bytes" in error
        # Nothing of the refused batches: no row, no claim (a later retry stores them).
        n_rows = len(batches[0][0]["data"]["rows"])
        sql = "SELECT count(*) FROM task_stream WHERE cluster_id = :c"
        assert scalar(store_url, sql, c=a.id) == 2 * n_rows
        assert scalar(store_url, "SELECT count(*) FROM ingested WHERE cluster_id = :c", c=a.id) == 3
        # A retried batch (its answer lost) is stored once and counted once.
        assert post(server.url, a_token, batches[1]) == (200, {"stored": 0, "received": 1})
        assert used(store_url, "A")["task_stream"] == have

        b = Cluster(account="B")  # another account: a quota of its own
        for batch in ([b.cluster()], task_batch(b, 400_000), task_batch(b, 400_000)):
            assert post(server.url, b_token, batch)[0] == 200

        # One batch larger than the whole quota: 413, before any write (not even the
        # cluster id's claim).
        big = Cluster(account="B")
        status, body = post(server.url, b_token, [big.cluster(), *task_batch(big, 1_200_000)])
        assert status == 413, body
        assert "the whole task stream quota of 1,000,000 bytes of account 'B'" in body["error"]
        assert "--task-stream-quota-bytes" in body["error"]
        sql = "SELECT count(*) FROM cluster_owners WHERE cluster_id = :c"
        assert scalar(store_url, sql, c=big.id) == 0

        # Retention gives the bytes back: A's cluster pruned, its quota is free again.
        with open_store(store_url) as st:
            assert prune(st, older_than=30 * DAY)["clusters"] == 2
        assert used(store_url, "A") == dict.fromkeys(usage.KINDS, 0)
        again = Cluster(account="A")
        for batch in ([again.cluster()], task_batch(again, 400_000), task_batch(again, 400_000)):
            assert post(server.url, a_token, batch)[0] == 200


def test_every_kind_is_counted_and_the_account_total_bounds_them_all(store_url):
    with ServerThread({"store_url": store_url, "quota_account_bytes": 400_000}) as server:
        token = server.token("A")
        c = Cluster(account="A")
        code = c.code()
        batch = [
            c.cluster(),
            code,
            c.computation("comp-1", code=[code["data"]["hash"]]),
            c.sample(),
            c.workers(),
            c.metrics("comp-1"),
            c.gpu(),
            c.event(),
            c.exception("comp-1", "ones-abc"),
            c.profile("comp-1", tree("main", "work")),
            *task_batch(c, 3_000),
        ]
        assert post(server.url, token, batch)[0] == 200, post(server.url, token, batch)
        have = server.ctx.team.usage("A")
        assert all(have[k] > 0 for k in usage.KINDS if k != "reports"), have
        assert have["events"] == counted(batch, "events")  # events and exceptions
        assert have["samples"] == counted(batch, "samples")  # samples, GPU samples, metrics
        assert have["task_stream"] == counted(batch, "task_stream")
        assert have["profiles"] == counted(batch, "profiles")

        # Kinds without a quota of their own still fill the account's total.
        assert post(server.url, token, event_batch(c, 300_000))[0] == 200
        status, body = post(server.url, token, task_batch(c, 150_000))
        assert status == 507, body
        assert "400,000-byte total storage quota" in body["error"]
        assert "--account-quota-bytes" in body["error"]


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["task_stream", "events"])
def test_replicas_hold_one_quota_between_them(postgres_url, tmp_path, kind):
    from ..balancer import BalancerUnavailable, Replicas

    make = task_batch if kind == "task_stream" else event_batch
    size = counted(make(Cluster(), 200_000), kind)
    quota = int(10.5 * size)
    replicas = Replicas(postgres_url, tmp_path / "replicas", n=3, extra=[FLAGS[kind], str(quota)])
    try:
        replicas.start()
    except BalancerUnavailable as e:
        pytest.fail(str(e), pytrace=False)
    try:
        a_token, b_token = replicas.token("A"), replicas.token("B")
        threads, tries = 6, 5  # 30 batches offered: three times what the quota holds
        start = threading.Barrier(threads)
        answers: list[tuple[int, int, str | None]] = []  # (bytes, status, replica)

        def client() -> None:
            start.wait()
            for _ in range(tries):
                c = Cluster(account="A")
                batch = [c.cluster(), *make(c, 200_000)]
                status, _, headers = request(
                    replicas.url + "/api/ingest", method="POST", token=a_token, body=batch
                )
                replica = {k.lower(): v for k, v in headers.items()}.get("x-replica")
                answers.append((counted(batch, kind), status, replica))
                if status != 200:
                    break  # the plugin keeps a 507'd batch and retries it later

        workers = [threading.Thread(target=client) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        assert {status for _, status, _ in answers} == {200, 507}, answers
        accepted = [n for n, status, _ in answers if status == 200]
        assert sum(accepted) <= quota  # never past it, whichever replica took what
        assert quota - sum(accepted) < max(accepted)  # and only refused once it is full
        assert len({r for _, status, r in answers if status == 200}) >= 2  # replicas shared it
        sql = f"SELECT {kind} FROM account_usage WHERE account = 'A'"
        assert scalar(postgres_url, sql) == sum(accepted)
        table = "task_stream" if kind == "task_stream" else "events"
        clusters = "SELECT cluster_id FROM cluster_owners WHERE account = 'A'"
        rows = scalar(
            postgres_url, f"SELECT count(*) FROM {table} WHERE cluster_id IN ({clusters})"
        )
        per_batch = make(Cluster(), 200_000)
        one = len(per_batch[0]["data"]["rows"]) if kind == "task_stream" else len(per_batch)
        assert rows == len(accepted) * one  # nothing of a refused batch

        b = Cluster(account="B")  # A's full quota is A's alone
        assert post(replicas.url, b_token, [b.cluster(), *make(b, 200_000)])[0] == 200
    finally:
        replicas.stop()
