"""Issue 38, item 4: findings across the team.

A computation's findings are kept in the store once it is explained (findings/kept.py),
final once its record can no longer change, and read across computations: a list
filtered by finding kind (Python, CLI, HTTP) and a cluster's findings summed (`explain
--cluster`).  Other thresholds explain again.  Records here are stored messages
(tests/factories.py), so each figure is known; tests/integration/test_findings.py holds
the same invariant over a real cluster's scenarios.
"""

from __future__ import annotations

import time

import dask
import pytest
import sqlalchemy as sa
from dask import delayed

import dask_analytics_lab as dal
from dask_analytics_lab import config
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.cli import main as cli
from dask_analytics_lab.filters import FINDING_KINDS
from dask_analytics_lab.findings import across, explain, kept
from dask_analytics_lab.findings.kept import settings_key
from dask_analytics_lab.store import open_store
from dask_analytics_lab.store import schema as s

from ..cluster_helpers import recorded_cluster
from ..factories import Cluster, group, straggling
from ..server_helpers import ServerThread, request
from ..waiting import wait_for
from ..workloads import spin, total


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


def team(account: str = "acme") -> tuple[Cluster, list[dict]]:
    """A stopped cluster: two computations with a straggler, one healthy."""
    c = Cluster(account=account)
    msgs = [
        c.cluster(),
        *straggling(c, f"{account}-slow-1"),
        *straggling(c, f"{account}-slow-2"),
        c.computation(f"{account}-fine", groups=[group("ones", n_tasks=4)]),
        c.stop(),
    ]
    return c, msgs


def ids(rows: list[dict]) -> set[str]:
    return {r["computation_id"] for r in rows}


def explained_rows(store) -> dict[str, tuple[str, bool]]:
    e = s.explained.c
    with store.reading() as conn:
        rows = conn.execute(sa.select(e.computation_id, e.settings, e.final))
        return {r.computation_id: (r.settings, r.final) for r in rows}


def test_a_list_filters_by_finding_explaining_each_computation_once(store_url, monkeypatch):
    acme, acme_msgs = team("acme")
    _, rival_msgs = team("rival")
    with open_store(store_url) as store:
        store.ingest(acme_msgs + rival_msgs)
        # Nothing explained yet: the filter explains what it covers, then lists.
        assert ids(store.list_computations(finding="straggler", account="acme")) == {
            "acme-slow-1",
            "acme-slow-2",
        }
        kept = explained_rows(store)
        assert set(kept) == {"acme-slow-1", "acme-slow-2", "acme-fine"}  # not rival's
        assert all(final for _, final in kept.values())  # a stopped cluster: settled
        assert ids(store.list_computations(finding="straggler")) == {
            "acme-slow-1",
            "acme-slow-2",
            "rival-slow-1",
            "rival-slow-2",
        }
        assert ids(store.list_computations(acme.id, finding="straggler", limit=1)) <= {
            "acme-slow-1",
            "acme-slow-2",
        }
        assert store.list_computations(finding="spilling") == []
        # Clusters: those with a computation that has it.
        assert [
            c["cluster_id"] for c in store.list_clusters(finding="straggler", account="acme")
        ] == [acme.id]
        assert store.list_clusters(finding="spilling") == []

        # Kept: a second list, and explain, explain nothing again.
        def no_explaining(*args, **kwargs):
            raise AssertionError("explained again")

        monkeypatch.setattr(across, "explain", no_explaining)
        monkeypatch.setattr("dask_analytics_lab.findings._explain", no_explaining)
        assert len(store.list_computations(finding="straggler")) == 4
        (f,) = explain(store, "acme-slow-1")
        assert f["kind"] == "straggler"
        monkeypatch.undo()

        # Other thresholds: explained again, and the list follows them.
        with dask.config.set({"analytics.findings.min-impact": "10s"}):
            assert store.list_computations(finding="straggler") == []
            assert explain(store, "acme-slow-1") == []
        assert len(store.list_computations(finding="straggler")) == 4


def test_hundreds_of_computations_over_several_clusters(sqlite_url, monkeypatch):
    """At a size a team keeps: 3 clusters of 100 computations, every other one with a
    straggler.  The first filtered list explains each once; every later read is a query."""
    clusters, slow = [], set()
    msgs: list[dict] = []
    for k in range(3):
        c = Cluster(f"busy-{k}", account="acme")
        clusters.append(c)
        msgs.append(c.cluster(name=f"job-{k}"))
        for i in range(100):
            cid = f"c{k}-{i:03d}"
            if i % 2:
                msgs += straggling(c, cid)
                slow.add(cid)
            else:
                msgs.append(c.computation(cid, groups=[group("ones", n_tasks=4)]))
        msgs.append(c.stop())
    with open_store(sqlite_url) as store:
        store.ingest(msgs)
        listed = store.list_computations(finding="straggler", limit=1000)
        assert ids(listed) == slow
        assert len(explained_rows(store)) == 300

        def no_explaining(*args, **kwargs):
            raise AssertionError("explained again")

        monkeypatch.setattr(across, "explain", no_explaining)
        monkeypatch.setattr("dask_analytics_lab.findings._explain", no_explaining)
        assert len(store.list_clusters(finding="straggler")) == 3
        for c in clusters:
            (summed,) = store.cluster_findings(c.id)
            assert summed["kind"] == "straggler" and summed["n_computations"] == 50
            assert len(summed["computations"]) == across.TOP
            impacts = [x["impact"] for x in summed["computations"]]
            assert impacts == sorted(impacts, reverse=True)
        page = store.list_computations(finding="straggler", limit=40)
        older = store.list_computations(finding="straggler", limit=1000, before=page[-1]["cursor"])
        assert ids(page) | ids(older) == slow and not ids(page) & ids(older)


def test_findings_are_kept_final_only_once_the_record_can_no_longer_change(sqlite_url):
    """A live cluster's last computation: the idle time after it still grows (idle-cluster),
    so its findings are kept for the lists but explained again when asked."""
    now = time.time()
    c = Cluster(account="acme", t0=now - 60)
    msgs = [
        c.cluster(started=now - 60),
        c.computation("last", start=now - 50, stop=now - 49, groups=[group("ones", n_tasks=4)]),
        c.sample(at=now - 1),
    ]
    with dask.config.set({"analytics.findings.idle-min": "10s"}), open_store(sqlite_url) as store:
        store.ingest(msgs)
        assert [f["kind"] for f in explain(store, "last")] == ["idle-cluster"]
        assert explained_rows(store)["last"][1] is False  # provisional
        assert ids(store.list_computations(finding="idle-cluster")) == {"last"}
        # Then the cluster stops: explained again (the idle time up to the stop), and final.
        store.ingest([c.stop(stopped=now)])
        (f,) = explain(store, "last")
        assert "no computation for 49" in f["evidence"], f
        assert explained_rows(store)["last"][1] is True


def test_a_clusters_findings_are_summed_in_python_and_the_cli(store_url, capsys):
    c, msgs = team()
    with open_store(store_url) as store:
        store.ingest(msgs)
        one = explain(store, "acme-slow-1")[0]["impact"]
        two = explain(store, "acme-slow-2")[0]["impact"]
    (summed,) = dal.cluster_findings(c.id, store=store_url)
    assert summed["kind"] == "straggler" and summed["n_computations"] == 2
    assert summed["impact"] == pytest.approx(one + two)
    assert {x["computation_id"] for x in summed["computations"]} == {"acme-slow-1", "acme-slow-2"}
    assert summed["why"] and summed["advice"]
    # A short id takes, as everywhere.
    assert dal.cluster_findings(c.id[: len("tcp-scheduler-") + 8], store=store_url) == [summed]

    assert cli(["--store", store_url, "explain", "--cluster", c.id]) == 0
    out = capsys.readouterr().out
    assert "[straggler] in 2 computations" in out and "advice:" in out, out
    assert cli(["--store", store_url, "computations", "--finding", "straggler"]) == 0
    out = capsys.readouterr().out
    assert "acme-slo" in out and "acme-fin" not in out, out


def test_a_bad_finding_kind_says_which_are_known(sqlite_url, capsys):
    with open_store(sqlite_url) as store:
        with pytest.raises(ValueError, match="finding must be one of small-tasks, straggler"):
            store.list_computations(finding="slow")
    assert cli(["--store", sqlite_url, "computations", "--finding", "slow"]) == 2
    assert "straggler" in capsys.readouterr().err
    assert cli(["--store", sqlite_url, "explain"]) == 2
    assert "COMPUTATION_ID or --cluster" in capsys.readouterr().err
    assert cli(["--store", sqlite_url, "explain", "x" * 8, "--cluster", "y" * 8]) == 2
    assert "one of them" in capsys.readouterr().err


def test_across_the_team_server_each_token_sees_its_own(tmp_path):
    with ServerThread({"store_url": f"sqlite:///{tmp_path / 'team.db'}"}) as server:
        acme, acme_msgs = team("acme")
        rival, rival_msgs = team("rival")
        server.ctx.store.ingest(acme_msgs + rival_msgs)
        ann, eve = server.token("acme"), server.token("rival", user="eve")
        with dask.config.set({"analytics.token": ann}):
            listed = dal.list_computations(finding="straggler", store=server.url)
            assert ids(listed) == {"acme-slow-1", "acme-slow-2"}
            (summed,) = dal.cluster_findings(acme.id, store=server.url)
            assert summed["n_computations"] == 2
        close_readers()

        base = server.url + "/api"
        url = f"{base}/clusters/{acme.id}/findings"
        status, body, _ = request(url)
        assert status == 401, body
        status, body, _ = request(url, token=eve)  # another account's cluster: unknown
        assert status == 404, body
        status, body, _ = request(url + "?account=rival", token=ann)
        assert status == 403, body
        status, body, _ = request(url, token=ann, method="POST", body={"x": 1})
        assert status in (403, 405), body
        status, body, _ = request(url, token=ann)
        assert status == 200 and body["findings"][0]["n_computations"] == 2, body
        status, body, _ = request(f"{base}/computations?finding=straggler", token=eve)
        assert status == 200 and ids(body["computations"]) == {"rival-slow-1", "rival-slow-2"}
        status, body, _ = request(f"{base}/clusters?finding=straggler", token=eve)
        assert status == 200 and [c["cluster_id"] for c in body["clusters"]] == [rival.id]
        for what in ("computations", "clusters"):
            for hostile in ("nope", "straggler%00", "x" * 300, "straggler'--"):
                status, body, _ = request(f"{base}/{what}?finding={hostile}", token=ann)
                assert status == 400 and "finding" in body["error"], (what, hostile, body)
            status, body, _ = request(f"{base}/{what}?finding=straggler")
            assert status == 401, body


def test_every_kind_can_be_asked_for():
    """The list filter takes every kind the rules find, and only those."""
    from dask_analytics_lab.findings import RULES

    assert len(FINDING_KINDS) == len(RULES) == len(set(FINDING_KINDS))


def test_a_recorder_keeps_findings_as_its_computations_end(sqlite_url, monkeypatch):
    """On a real cluster, nothing read: the recorder's keeper explains a computation once
    it ended and the cluster moved on, and what it kept is what explain gives."""
    monkeypatch.setattr(kept, "SETTLE", 0.5)
    with recorded_cluster(sqlite_url, config={"analytics.findings.keep": True}) as (
        client,
        info,
    ):
        first = client.compute(
            delayed(total)([delayed(spin)(1.5 if i == 5 else 0.05, i) for i in range(10)])
        ).result()
        assert first == 45
        client.submit(spin, 0.05, pure=False).result()  # the cluster moves on
        dal.flush(client)
        comps = dal.list_computations(info["cluster_id"], store=sqlite_url)
        (straggled,) = [c for c in comps if c["n_tasks"] == 11]

        def kept_final():
            with open_store(sqlite_url) as store:
                return explained_rows(store).get(straggled["computation_id"], ("", False))[1]

        wait_for(kept_final, timeout=120, what="the first computation's findings kept, final")
        keeper = client.cluster.scheduler.plugins["dask-analytics-readers"].keeper
        assert keeper.kept >= 1 and keeper.failed == 0
    with open_store(sqlite_url) as store:
        e, f = s.explained.c, s.findings.c
        with store.reading() as conn:
            (key,) = conn.execute(
                sa.select(e.settings).where(e.computation_id == straggled["computation_id"])
            ).scalars()
            stored = [
                r.body
                for r in conn.execute(
                    sa.select(f.body)
                    .where(f.computation_id == straggled["computation_id"])
                    .order_by(f.rank)
                )
            ]
        assert key == settings_key(config.findings_settings())
        assert explain(store, straggled["computation_id"]) == stored


def test_a_team_server_keeps_findings_as_it_ingests(tmp_path, monkeypatch):
    """Sent as a recorder sends (HttpSink): kept by the server's keeper, nothing read."""
    from dask_analytics_lab.remote import HttpSink

    monkeypatch.setattr(kept, "SETTLE", 0.2)
    url = f"sqlite:///{tmp_path / 'team.db'}"
    with ServerThread({"store_url": url}) as server:
        _, msgs = team("acme")
        assert HttpSink(server.url, token=server.token("acme")).write(msgs) == len(msgs)
        assert server.ctx.keeper.idle(30)

        def kept_all() -> bool:
            server.ctx.keeper.idle(30)
            rows = explained_rows(server.ctx.store)
            return len(rows) == 3 and all(final for _, final in rows.values())

        wait_for(kept_all, timeout=60, what="the three computations' findings kept, final")
        assert server.ctx.keeper.failed == 0


def _stored_findings(store, computation_id: str) -> list[dict]:
    f = s.findings.c
    with store.reading() as conn:
        q = sa.select(f.body).where(f.computation_id == computation_id).order_by(f.rank)
        return [r.body for r in conn.execute(q)]


def _idle_then_later(now: float) -> tuple[Cluster, list[dict], dict]:
    """A live cluster whose straggling computation ended 90 s ago, idle since; and the
    computation that starts next."""
    c = Cluster(account="acme", t0=now - 100)
    first = [c.cluster(started=now - 100), *straggling(c, "first"), c.sample(at=now - 1)]
    return c, first, c.computation("next", state="running", start=now, groups=[group("ones")])


def test_a_cluster_moving_on_finishes_kept_findings_as_a_new_explain_would(store_url, tmp_path):
    """Its next computation starts: the last one's provisional findings become final by
    taking out the idle-cluster finding (kept.moved_on), not by a second explain, and
    they are what a store that never had them provisional explains."""
    now = time.time()
    c, first, nxt = _idle_then_later(now)
    with dask.config.set({"analytics.findings.idle-min": "10s"}):
        key = settings_key(config.findings_settings())
        with open_store(store_url) as a, open_store(f"sqlite:///{tmp_path / 'b.db'}") as b:
            a.ingest(first)
            provisional = explain(a, "first")
            assert {"straggler", "idle-cluster"} <= {f["kind"] for f in provisional}
            assert explained_rows(a)["first"] == (key, False)
            a.ingest([nxt])
            assert kept.moved_on(a, c.id, key) == []
            assert explained_rows(a)["first"] == (key, True)
            b.ingest([*first, nxt])
            fresh = explain(b, "first")
            assert "idle-cluster" not in {f["kind"] for f in fresh}
            assert _stored_findings(a, "first") == fresh == explain(a, "first")
            # Other thresholds, or a provisional set kept before the computation settled
            # (late events may change it): explained again, as before.
            a.ingest([c.computation("third", state="running", start=now + 1)])
            assert kept.moved_on(a, c.id, "other-key") == []  # nothing provisional is left
    c2, first2, nxt2 = _idle_then_later(now)
    with dask.config.set({"analytics.findings.idle-min": "10s"}):
        key = settings_key(config.findings_settings())
        with open_store(f"sqlite:///{tmp_path / 'c.db'}") as store:
            store.ingest(first2)
            explain(store, "first")
            store.ingest([nxt2])
            assert kept.moved_on(store, c2.id, "other-key") == ["first"]
            assert explained_rows(store)["first"] == (key, False)
            with store.transaction() as conn:  # kept as if it had been right at its stop
                conn.execute(sa.update(s.explained).values(kept=now - 93))
            assert kept.moved_on(store, c2.id, key) == ["first"]
            assert explained_rows(store)["first"] == (key, False)


def test_the_keeper_explains_a_computation_once_when_its_cluster_moves_on(store_url, monkeypatch):
    """The keeper keeps an ended computation's findings provisional while its cluster sits
    idle; the next computation's start makes them final without explaining it again."""
    from dask_analytics_lab.findings.keeper import Keeper
    from dask_analytics_lab.messages import check_batch

    monkeypatch.setattr(kept, "SETTLE", 0.2)
    now = time.time()
    c, first, nxt = _idle_then_later(now)
    with dask.config.set({"analytics.findings.idle-min": "10s"}), open_store(store_url) as store:
        keeper = Keeper(store, settings=config.findings_settings(), settle=0.2)
        try:
            store.ingest(first)
            keeper.written(check_batch(first), "acme")

            def kept_provisional() -> bool:
                keeper.idle(30)
                return explained_rows(store).get("first", ("", True))[1] is False

            wait_for(kept_provisional, timeout=60, what="the first computation kept provisional")
            assert "idle-cluster" in {f["kind"] for f in _stored_findings(store, "first")}
            store.ingest([nxt])
            keeper.written(check_batch([nxt]), "acme")

            def kept_final() -> bool:
                keeper.idle(30)
                return explained_rows(store)["first"][1] is True

            wait_for(kept_final, timeout=60, what="the first computation's findings final")
            assert keeper.kept == 1 and keeper.failed == 0  # explained once
            assert "idle-cluster" not in {f["kind"] for f in _stored_findings(store, "first")}
        finally:
            keeper.close()
