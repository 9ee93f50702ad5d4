"""Retention (store/prune.py): prune removes exactly the clusters that ended before the
cut-off, with every row hanging off them, on SQLite and PostgreSQL, while other
clusters keep recording.  Issue 18, item 9: a dry run counts exactly what the prune
then deletes, table by table, also from the command line; a cluster still recording
survives however long ago it started."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from dask_analytics_lab.messages import check_batch
from dask_analytics_lab.store import open_store, schema
from dask_analytics_lab.store.prune import ACTIVE, CHILD_TABLES, parse_age, prune

from ..factories import Cluster, every_table
from ..retention_scenario import DAY, NOW, kept_part, scenario
from ..waiting import wait_for


def snippets(store) -> set[tuple[str, str]]:
    with store.reading() as conn:
        return {
            tuple(r)
            for r in conn.execute(
                sa.select(schema.code_snippets.c.account, schema.code_snippets.c.hash)
            )
        }


def ingested_ids(store) -> set[str]:
    with store.reading() as conn:
        return {r[0] for r in conn.execute(sa.select(schema.ingested.c.cluster_id).distinct())}


@pytest.mark.parametrize("batch,max_rows", [(20, 5000), (1, 3)])
def test_prune_removes_exactly_what_ended_before_the_cutoff(store_url, batch, max_rows):
    with open_store(store_url) as store:
        ids = scenario(store)
        keep = {ids["recent"], ids["long"], ids["live"]}
        before = store.export()
        before_snippets = snippets(store)

        dry = prune(store, 90 * DAY, dry_run=True)
        assert store.export() == before  # a dry run deletes nothing
        done = prune(store, 90 * DAY, batch=batch, max_rows=max_rows, pause=0)

        assert done["clusters"] == dry["clusters"] == 2
        for name in dry:
            if name != "seconds":
                assert done[name] == dry[name], name
        after = store.export()
        assert {c["cluster_id"] for c in after["clusters"]} == keep
        # Every row of the kept clusters is as it was, and nothing of the old ones is left.
        assert kept_part(after, keep) == kept_part(before, keep)
        assert sum(len(rows) for name, rows in after.items() if name != "code_snippets") == sum(
            len(rows) for rows in kept_part(before, keep).values()
        )
        for name, rows in kept_part(before, {ids["old"], ids["lost"]}).items():
            assert done[name] == len(rows), name
        assert ingested_ids(store) == keep
        # h-old goes from the default account (its only computation was old) but stays in
        # team-b's (the live cluster uses it); h-shared stays (the recent cluster uses it).
        assert before_snippets - snippets(store) == {("default", "h-old"), ("default", "h-lost")}
        assert done["code_snippets"] == 2
        # What is left reads as before.
        assert store.get_computation("c-recent")["code"][0]["text"] == "x.sum().compute()"
        assert store.get_computation("c-live")["code"][0]["text"] == "x.sum().compute()"

        again = prune(store, 90 * DAY)
        assert again["clusters"] == 0 and store.export() == after


def rows_of(store, cluster_ids: set[str]) -> dict[str, int]:
    """Rows per table that the clusters own, and every snippet of the store."""
    with store.reading() as conn:
        counts = {
            t.name: conn.execute(
                sa.select(sa.func.count())
                .select_from(t)
                .where(t.c.cluster_id.in_(sorted(cluster_ids)))
            ).scalar_one()
            for t in (schema.clusters, *CHILD_TABLES)
        }
        counts["code_snippets"] = conn.execute(
            sa.select(sa.func.count()).select_from(schema.code_snippets)
        ).scalar_one()
    return counts


def test_a_dry_run_counts_exactly_what_the_prune_then_deletes(store_url):
    """Twice over: old clusters with a row in every table a cluster owns, then a cluster
    that died after sending its code and before its first computation."""
    with open_store(store_url) as store:
        ids = scenario(store)
        old = {ids["old"], ids["lost"]}
        owned = rows_of(store, old)
        assert all(owned[t.name] for t in CHILD_TABLES), (
            owned
        )  # every table a cluster owns has rows here
        for gone, snippets_gone in ((old, 2), ({"died"}, 1)):
            if gone == {"died"}:
                died = Cluster("died", t0=NOW - 100 * DAY)
                store.ingest([died.cluster(started=died.t), died.sample(), died.code("h-died")])
            before = rows_of(store, gone)
            everything = rows_of(store, set(ids.values()) | gone)
            dry = prune(store, 90 * DAY, now=NOW, dry_run=True)
            assert (
                rows_of(store, set(ids.values()) | gone) == everything
            )  # a dry run deletes nothing
            done = prune(store, 90 * DAY, now=NOW, batch=1, max_rows=3, pause=0)
            del dry["seconds"], done["seconds"]
            assert done == dry
            assert {k: v for k, v in dry.items() if k != "code_snippets"} == {
                k: v for k, v in before.items() if k != "code_snippets"
            }
            assert (
                dry["code_snippets"]
                == before["code_snippets"] - rows_of(store, set())["code_snippets"]
                == snippets_gone
            )
            assert not any(n for name, n in rows_of(store, gone).items() if name != "code_snippets")
        assert ("default", "h-died") not in snippets(store)


def test_the_cli_dry_run_then_prune_as_of_deletes_exactly_what_it_counted(sqlite_url, capsys):
    """With a real cluster recording meanwhile that started 100 days ago, and a cluster
    that ended just after the dry run's cut-off: a prune after the clock moved on takes it
    unless it counts from the dry run's instant."""
    import re
    from datetime import datetime

    from dask_analytics_lab import cli

    from ..cluster_helpers import recorded_cluster

    def table(out: str) -> dict[str, int]:
        return {m[0]: int(m[1]) for m in re.findall(r"^\s*(\w+)\s+(\d+)\s*$", out, re.M)}

    with open_store(sqlite_url) as store:
        ids = scenario(store)
    with recorded_cluster(sqlite_url) as (client, info):
        assert client.submit(sum, [1, 2]).result() == 3
        wait_for(
            lambda: len(dal_computations(sqlite_url, info["cluster_id"])) == 1,
            what="its first computation",
        )
        with (
            open_store(sqlite_url) as store,
            store.transaction() as conn,
        ):  # as if it had started 100 days ago
            conn.execute(
                sa.update(schema.clusters)
                .where(schema.clusters.c.cluster_id == info["cluster_id"])
                .values(started=NOW - 100 * DAY)
            )

        assert cli.main(["prune", "--older-than", "90d", "--dry-run", "--store", sqlite_url]) == 0
        out = capsys.readouterr().out
        counted = table(out)
        as_of = re.search(
            r"to delete exactly these: dask-analytics prune --older-than 90d --as-of (\S+) ", out
        )[1]
        cutoff = datetime.fromisoformat(as_of).timestamp() - 90 * DAY
        # Ended half a second after the dry run's cut-off; wait until a fresh cut-off passes it.
        edge = Cluster("edge", t0=cutoff - 10)
        with open_store(sqlite_url) as store:
            store.ingest([edge.cluster(started=edge.t), edge.stop(stopped=cutoff + 0.5)])
        wait_for(
            lambda: time.time() - 90 * DAY > cutoff + 1, what="the clock to move past the edge"
        )

        assert (
            cli.main(["prune", "--older-than", "90d", "--as-of", as_of, "--store", sqlite_url]) == 0
        )
        out = capsys.readouterr().out
        assert table(out) == counted and counted["clusters"] == 2
        assert all(counted[t.name] for t in CHILD_TABLES), counted
        assert (
            counted["code_snippets"] == 0
        )  # the real cluster's account records now: its snippets wait
        with open_store(sqlite_url) as store:
            left = {r["cluster_id"] for r in store.list_clusters(limit=None)}
        assert left == {ids["recent"], ids["long"], ids["live"], "edge", info["cluster_id"]}
        # The real cluster goes on recording into the store it was pruned in.
        assert client.submit(sum, [3, 4]).result() == 7
        wait_for(
            lambda: len(dal_computations(sqlite_url, info["cluster_id"])) == 2,
            what="its next computation",
        )
    # Counted from now, the edge cluster has ended before the cut-off too.
    assert cli.main(["prune", "--older-than", "90d", "--store", sqlite_url]) == 0
    assert "deleted 1 clusters" in capsys.readouterr().out


def dal_computations(url: str, cluster_id: str) -> list[dict]:
    """The cluster's stored computations; none while its first messages are on their way."""
    from dask_analytics_lab.store_errors import NotFound

    with open_store(url) as store:
        try:
            return store.list_computations(cluster_id=cluster_id, limit=None)
        except NotFound:
            return []


@pytest.mark.parametrize(
    "args,says",
    [
        (["--as-of", "yesterday"], "expected a time such as"),
        (["--as-of", "2999-01-01T00:00:00Z"], "is in the future"),
    ],
)
def test_cli_prune_as_of_refuses(args, says, capsys, sqlite_url):
    from dask_analytics_lab import cli

    assert cli.main(["prune", "--older-than", "90d", *args, "--store", sqlite_url]) != 0
    assert says in capsys.readouterr().err


def test_a_cluster_that_records_again_is_not_pruned(sqlite_url):
    with open_store(sqlite_url) as store:
        c = Cluster("back", t0=NOW - 100 * DAY)
        store.ingest([c.cluster(), c.sample()])
        store.ingest([c.sample(at=NOW)])  # a message from today: it lives
        assert prune(store, 90 * DAY)["clusters"] == 0
        assert [r["cluster_id"] for r in store.list_clusters()] == ["back"]


def test_snippets_of_an_account_that_records_wait(sqlite_url):
    """A live cluster may have sent a snippet whose computation is still on its way:
    an account with a cluster seen lately keeps its snippets until it is quiet."""
    with open_store(sqlite_url) as store:
        old, live = Cluster("old", t0=NOW - 100 * DAY), Cluster("live", t0=NOW - 60)
        store.ingest(every_table(old, "c-old", ["h1"]) + [live.cluster(), live.code("h1")])
        done = prune(store, 90 * DAY)
        assert done["clusters"] == 1 and done["code_snippets"] == 0
        assert ("default", "h1") in snippets(store)
        store.ingest([live.computation("c-live", code=["h1"])])  # ... and here it is
        assert store.get_computation("c-live")["code"][0]["text"] == "x.sum().compute()"
        # Once the account has been quiet for ACTIVE seconds, a later prune takes what no one uses.
        store.ingest(every_table(Cluster("old2", t0=NOW - 100 * DAY), "c-old2", ["h2"]))
        later = prune(store, 90 * DAY, now=NOW + ACTIVE + 120)
        assert later["clusters"] == 1 and ("default", "h2") not in snippets(store)
        assert ("default", "h1") in snippets(store)  # c-live refers to it


@pytest.mark.parametrize(
    "value,seconds",
    [
        ("90d", 90 * DAY),
        ("90 days", 90 * DAY),
        ("12h", 12 * 3600.0),
        (30, 30 * DAY),
        ("2w", 14 * DAY),
    ],
)
def test_parse_age(value, seconds):
    assert parse_age(value) == seconds


@pytest.mark.parametrize("value", ["", "soon", "-1d", 0, None, True, "0s"])
def test_parse_age_refuses(value):
    with pytest.raises(ValueError, match="duration such as '90d'"):
        parse_age(value)


def test_prune_while_a_cluster_records(store_url):
    """A writer (its own Store, as a scheduler would be) records a live cluster while prune
    deletes many old clusters in small batches: nothing of the live cluster is lost, no
    error reaches the writer, and every old cluster goes."""
    n_old = 40
    with open_store(store_url) as setup:
        for i in range(n_old):
            c = Cluster(f"old-{i:03d}", t0=NOW - (100 + i) * DAY)
            setup.ingest(every_table(c, f"c-old-{i}", [f"h{i % 5}"]))
    live = Cluster("live", t0=NOW - 200 * DAY)
    sent: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def record() -> None:
        try:
            with open_store(store_url) as writer:
                writer.ingest([live.cluster(started=NOW - 200 * DAY)])
                i = 0
                while not stop.is_set() or i < 20:
                    i += 1
                    writer.ingest(
                        [
                            live.sample(at=time.time(), n_workers=i),
                            live.event("tick", {"i": i}),
                            live.computation(f"c-live-{i}", code=[f"h{i % 5}"]),
                            live.code(f"h{i % 5}"),
                        ]
                    )
                    sent.append(i)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    writer = threading.Thread(target=record)
    with open_store(store_url) as store:
        writer.start()
        try:
            deadline = time.monotonic() + 60
            while len(sent) < 5 and writer.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            done = prune(store, 90 * DAY, batch=2, max_rows=40)
        finally:
            stop.set()
            writer.join(120)
        assert not errors, errors
        assert done["clusters"] == n_old
        assert [r["cluster_id"] for r in store.list_clusters(limit=None)] == ["live"]
        n = len(sent)
        assert len(store.list_computations(cluster_id="live", limit=None)) == n
        assert len(store.list_cluster_samples("live", limit=None)) == n
        assert len(store.list_events(cluster_id="live", topic="tick", limit=None)) == n
        # The live cluster's snippets are all there (its account recorded all along).
        for i in range(1, min(n, 5) + 1):
            assert store.get_computation(f"c-live-{i}")["code"][0]["text"] == "x.sum().compute()"


# --- applying it: the CLI, analytics.retention, a scheduler's store sink -------------
def test_cli_prune(sqlite_url, capsys):
    from dask_analytics_lab import cli

    with open_store(sqlite_url) as store:
        ids = scenario(store)
    assert cli.main(["prune", "--older-than", "90d", "--dry-run", "--store", sqlite_url]) == 0
    out = capsys.readouterr().out
    assert "would delete 2 clusters that ended before" in out and "task_stream" in out
    with open_store(sqlite_url) as store:
        assert len(store.list_clusters(limit=None)) == 5
    assert cli.main(["--store", sqlite_url, "prune", "--older-than", "90 days"]) == 0
    assert "deleted 2 clusters" in capsys.readouterr().out
    with open_store(sqlite_url) as store:
        assert {r["cluster_id"] for r in store.list_clusters(limit=None)} == {
            ids["recent"],
            ids["long"],
            ids["live"],
        }


@pytest.mark.parametrize(
    "args,says",
    [
        (["--older-than", "soon"], "--older-than must be a positive duration"),
        (["--older-than", "-3d"], "--older-than must be a positive duration"),
        ([], "Missing option '--older-than'"),
        (["--older-than", "9d", "--store", "https://analytics.example.com"], "is a team server"),
    ],
)
def test_cli_prune_refuses(args, says, capsys, sqlite_url):
    from dask_analytics_lab import cli

    if "--store" not in args:
        args = [*args, "--store", sqlite_url]
    assert cli.main(["prune", *args]) != 0
    assert says in capsys.readouterr().err


def test_retention_setting():
    import dask

    from dask_analytics_lab import config

    assert config.resolve()["retention"] is None  # off by default
    with dask.config.set({"analytics.retention": "90 days"}):
        assert config.resolve()["retention"] == 90 * DAY
    with dask.config.set({"analytics.retention": 30}):
        assert config.resolve()["retention"] == 30 * DAY
    for bad in ("forever", "-1d", 0, True):
        with (
            dask.config.set({"analytics.retention": bad}),
            pytest.raises(
                config.ConfigError,
                match=r"analytics.retention = .* is not valid; expected a duration",
            ),
        ):
            config.resolve()


def test_a_store_sink_prunes_in_the_background(sqlite_url, monkeypatch):
    """A scheduler writing straight into the store applies analytics.retention itself."""
    from dask_analytics_lab.collect.sinks import open_sink
    from dask_analytics_lab.store import retention

    # Its first prune comes an hour or two after it starts (the next test): now, here.
    monkeypatch.setattr(retention, "FIRST_DELAY", 0.0)
    monkeypatch.setattr(retention, "FIRST_JITTER", 0.0)

    with open_store(sqlite_url) as store:
        store.ingest(every_table(Cluster("old", t0=NOW - 100 * DAY), "c-old", ["h1"]))
        store.ingest(every_table(Cluster("recent", t0=NOW - DAY), "c-recent", ["h2"]))
    sink = open_sink(sqlite_url, retention=90 * DAY)
    try:
        live = Cluster("live", t0=time.time())
        sink.write(check_batch([live.cluster(), live.sample()]))
        deadline = time.monotonic() + 60
        while sink.retention.runs == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sink.retention.last["clusters"] == 1
        assert {r["cluster_id"] for r in sink.store.list_clusters(limit=None)} == {"recent", "live"}
    finally:
        sink.close()
    # Off by default: no thread at all.
    plain = open_sink(sqlite_url)
    assert plain.retention is None
    plain.close()


def test_a_store_sink_prunes_first_after_an_hour_jittered(sqlite_url):
    """Not at the scheduler's start: an hour or two later, at random, so schedulers
    started together spread their prunes (the schedule, not a wait)."""
    import time

    from dask_analytics_lab.collect.sinks import open_sink
    from dask_analytics_lab.store.retention import HOUR

    sinks = []
    try:
        for _ in range(5):
            before = time.monotonic()
            sink = open_sink(sqlite_url, retention=90 * DAY)
            sinks.append(sink)
            assert sink.retention.runs == 0
            assert HOUR <= sink.retention.delay < 2 * HOUR
            assert sink.retention.next_at >= before + HOUR
            assert sink.retention.every == DAY
        assert len({s.retention.delay for s in sinks}) == 5  # jittered
    finally:
        for sink in sinks:
            sink.close()
    assert all(s.retention.runs == 0 for s in sinks)


@pytest.mark.postgres
def test_a_prune_batch_hit_by_a_deadlock_is_tried_again(postgres_url):
    """PostgreSQL may pick the prune as a deadlock's victim (a writer locked the other way
    round); the store reports it as StoreUnavailable, and the batch still gets its second go."""
    from dask_analytics_lab.store.prune import _retrying

    store = open_store(postgres_url)
    calls = []

    def body(conn: sa.Connection) -> bool:
        calls.append(1)
        if len(calls) == 1:
            # A real driver error with a deadlock's SQLSTATE, raised by the server itself.
            conn.exec_driver_sql(
                "DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$"
            )
        return True

    try:
        assert _retrying(store, body) is True
        assert len(calls) == 2
    finally:
        store.close()
