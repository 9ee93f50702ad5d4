"""Issue 36, item 1: every read is declared once (reads.py) and answers the same rows
from every store.

One real LocalCluster records into a SQLite file (two runs of one job, a failure, worker
samples, an event, profiles); the messages its recorder wrote are captured as they are
stored, and the same messages go into a PostgreSQL database, which a real team server
then serves over HTTP with a token.  Every declared read is called with the same
arguments on the three readers and must give the same rows; each row must be the one
its declaration types (read_rows.py: a column a query adds that no Struct names fails).
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import urllib.parse
from pathlib import Path

import msgspec
import msgspec.json
import pytest

from dask_analytics_lab import reads
from dask_analytics_lab.http_reader import HttpReader
from dask_analytics_lab.reader import Reader
from dask_analytics_lab.store import open_store
from dask_analytics_lab.store.store import Store

from ..cluster_helpers import recorded_cluster
from ..factories import Cluster
from ..server_helpers import ServerThread, add_token, request
from ..workloads import job

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "default"
# Stamped by each store with its own clock as a message arrives (when it heard of the
# cluster, and last): the same messages stored at other moments differ there alone.
ARRIVAL = {"first_seen", "last_seen", "updated"}


def arrival_free(value):
    if isinstance(value, dict):
        return {k: arrival_free(v) for k, v in value.items() if k not in ARRIVAL}
    if isinstance(value, list):
        return [arrival_free(v) for v in value]
    return value


def _boom(x: int) -> int:
    raise ValueError(f"no {x}")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The messages a real recorder stored, and what to ask about them."""
    folder = tmp_path_factory.mktemp("reads")
    url = "sqlite:///" + str(folder / "analytics.db")
    written: list = []
    ingest = Store.ingest

    def witness(self, messages, **kw):
        n = ingest(self, messages, **kw)
        written.extend(messages)
        return n

    Store.ingest = witness  # the recorder runs in this process (processes=False)
    try:
        with recorded_cluster(
            url, config={"analytics.events.allow": ["worker-joined", "my-topic"]}
        ) as (client, info):
            assert job(client, 0.02) == 6
            assert job(client, 0.05) == 6
            with pytest.raises(ValueError):
                client.submit(_boom, 1).result()
            client.log_event("my-topic", {"n": 1})
            assert client.sync(client.scheduler.analytics_flush, timeout=30)["flushed"]
    finally:
        Store.ingest = ingest
    gpu = Cluster(account=ACCOUNT)
    extra = [gpu.cluster(started=gpu.t), gpu.gpu(2), gpu.stop()]
    with open_store(url) as store:
        store.ingest(extra)
        comps = store.list_computations(info["cluster_id"], account=ACCOUNT)
    written.extend(extra)
    ran = [c for c in comps if c["n_erred"] == 0]
    failed = next(c for c in comps if c["n_erred"])
    return {
        "url": url,
        "messages": written,
        "cluster_id": info["cluster_id"],
        "gpu_cluster_id": gpu.id,
        "second": max(ran, key=lambda c: c["start"])["computation_id"],
        "failed": failed["computation_id"],
    }


def calls(r: dict) -> list[tuple[str, tuple, dict]]:
    cid, comp = r["cluster_id"], r["second"]
    return [
        ("list_clusters", (), {}),
        ("list_clusters", (), {"state": "stopped", "limit": 1}),
        ("get_cluster", (cid,), {}),
        ("list_cluster_samples", (cid,), {"limit": 5, "offset": 1}),
        ("list_computations", (), {}),
        ("list_computations", (cid,), {"state": "erred"}),
        ("cost_report", (), {}),
        ("cost_report", ("day",), {}),
        ("get_computation", (comp,), {}),
        ("list_task_groups", (comp,), {}),
        ("list_exceptions", (cid,), {}),
        ("list_exceptions", (), {"computation_id": r["failed"]}),
        ("list_events", (cid,), {"topic": "my-topic"}),
        ("list_topics", (cid,), {}),
        ("get_profile", (comp,), {}),
        ("get_profile", (), {"cluster_id": cid}),
        ("get_profile", (comp,), {"prefix": "spin"}),
        ("list_worker_samples", (cid,), {"limit": 20}),
        ("list_task_stream", (comp,), {"offset": 2}),
        ("list_task_stream", (comp,), {"fields": ["worker", "state"]}),
        ("list_task_stream", (comp,), {"fields": "task_group,busy,binned"}),
        ("list_gpu_metrics", (r["gpu_cluster_id"],), {}),
        ("list_runs", (comp,), {}),
        ("compare", (comp,), {}),
        ("run_summary", (comp,), {}),
        ("explain", (comp,), {}),
        ("explain", (r["failed"],), {}),
        ("list_computations", (), {"finding": "failures"}),
        ("list_clusters", (), {"finding": "failures"}),
        ("cluster_findings", (cid,), {}),
        ("export", (), {}),
    ]


@pytest.fixture(scope="module")
def readers(recorded, postgres_server, postgres_at_head):
    name = postgres_server.create_database(template=postgres_at_head)
    pg_url = postgres_server.url(name)
    sqlite = open_store(recorded["url"])
    pg = open_store(pg_url)
    pg.ingest(recorded["messages"])
    token = add_token(pg_url, ACCOUNT)
    server = ServerThread({"store_url": pg_url, "code_key": None}).start()
    http = HttpReader(server.url, token=token)
    yield {"sqlite": sqlite, "postgresql": pg, "team server": http}
    http.close()
    server.stop()
    pg.close()
    sqlite.close()
    postgres_server.drop_database(name)


def test_every_read_answers_the_same_rows_from_sqlite_postgresql_and_the_team_server(
    recorded, readers
):
    asked = calls(recorded)
    assert {name for name, *_ in asked} == set(reads.BY_NAME), "a declared read is not asked"
    answered: dict[str, bool] = {}
    for name, args, kwargs in asked:
        answers = {
            kind: arrival_free(getattr(reader, name)(*args, account=ACCOUNT, **kwargs))
            for kind, reader in readers.items()
        }
        first = answers["sqlite"]
        answered[name] = answered.get(name, False) or bool(first)
        for kind, answer in answers.items():
            assert answer == first, f"{name}{args}{kwargs}: {kind} differs from sqlite: " + (
                difference(first, answer)
            )
        read = reads.BY_NAME[name]
        if read.row is not reads.rows.Row:  # export: a dict of every table's rows
            for row in first if read.many else [first]:
                try:
                    # As JSON carries it (a store's keys are SQLAlchemy's str subclass).
                    msgspec.json.decode(msgspec.json.encode(row), type=read.row)
                except msgspec.ValidationError as e:
                    raise AssertionError(f"{name}: {e}: {row}") from None
    silent = [name for name, said in answered.items() if not said]
    assert not silent, (
        f"these reads answered nothing here, so the test proves nothing of them: {silent}"
    )


def difference(a, b, where: str = "") -> str:
    """Where two answers first differ, for the failure's message."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k, "<absent>") != b.get(k, "<absent>"):
                return difference(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{where}[{k!r}]")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return difference(x, y, f"{where}[{i}]")
    return f"{where}: {str(a)[:200]} != {str(b)[:200]}"


def test_a_bad_argument_is_refused_alike_by_every_reader(recorded, readers):
    for reader in readers.values():
        with pytest.raises(ValueError, match="state must be one of"):
            reader.list_clusters(state="dead")
        with pytest.raises(ValueError, match="exactly one of computation_id= or cluster_id="):
            reader.get_profile()
        with pytest.raises(ValueError, match="since="):
            reader.list_computations(since=30)
        with pytest.raises(ValueError, match=r"unknown field\(s\) \['password'\]"):
            reader.list_task_stream(recorded["second"], fields=["worker", "password"])
        with pytest.raises(ValueError, match="fields must be a list of field names"):
            reader.list_task_stream(recorded["second"], fields=[1])


def test_fields_give_only_those_and_a_hostile_list_is_refused_by_the_server(recorded, readers):
    """The findings read a 10,000-task stream without its ids and states (a third of the
    reading): `fields` gives those of each row, and start and stop always."""
    comp = recorded["second"]
    for reader in readers.values():
        rows = reader.list_task_stream(comp, account=ACCOUNT, fields=["worker"])
        assert rows and all(set(r) == {"worker", "start", "stop"} for r in rows), rows[:2]
    http = readers["team server"]
    path = f"{http.url}/api/computations/{comp}/tasks"
    for hostile in ("id;drop table task_stream", "worker,../../etc", ","):
        status, body, _ = request(
            f"{path}?fields={urllib.parse.quote(hostile)}", token=http.client.token
        )
        assert status == 400 and "field" in str(body), (hostile, status, body)


def test_every_reader_has_every_read_with_one_signature():
    for cls in (Store, HttpReader, *(c for c in Reader.__subclasses__())):
        for read in reads.READS:
            method = getattr(cls, read.name)
            assert method is getattr(Reader, read.name), f"{cls.__name__}.{read.name} is its own"
    # The api functions take the reader's arguments, and `store`; each is public at the
    # package's root too.
    import dask_analytics_lab
    from dask_analytics_lab import api

    assert set(reads.BY_NAME) <= set(dask_analytics_lab.__all__)

    for read in reads.READS:
        fn = inspect.signature(getattr(api, read.name))
        method = inspect.signature(getattr(Reader, read.name))
        assert list(fn.parameters) == [*list(method.parameters)[1:], "store"], read.name


def test_what_is_generated_from_the_declarations_is_up_to_date():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_reads.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_one_computation_has_one_answer_by_every_way_in(recorded, readers, capsys):
    """#38 item 2: its findings are the same by the full id and the 8 characters the CLI
    prints, from Python, the command line, every reader (the team server's HTTP too), the
    notebook monitor's state and a shared report's twin."""
    import dask_analytics_lab as dal
    from dask_analytics_lab.cli import main as cli
    from dask_analytics_lab.reports.render import computation_report

    from ..browser_helpers import widget_state

    full = recorded["failed"]
    short = full[:8]
    url = recorded["url"]
    answer = dal.explain(full, store=url)
    assert [f["kind"] for f in answer][:1] == ["failures"], answer  # it erred: never healthy
    ways = {"python, short id": dal.explain(short, store=url)}
    for cid in (full, short):
        assert cli(["--store", url, "explain", cid, "--json"]) == 0
        ways[f"cli {cid}"] = json.loads(capsys.readouterr().out)
        for kind, reader in readers.items():
            ways[f"{kind} {cid}"] = reader.explain(cid, account=ACCOUNT)
    _, twin, _ = computation_report(full, store=url)
    ways["report"] = twin["findings"]
    ways["monitor"] = widget_state(url, recorded["cluster_id"], full)["findings"]["findings"]
    for way, found in ways.items():
        assert found == answer, f"{way}: " + difference(answer, found)
