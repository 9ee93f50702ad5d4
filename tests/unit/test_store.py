"""The store: every message kind in and back out, idempotency, stubs, accounts, NotFound.

Each test runs on SQLite and on a real PostgreSQL (the `store_url` fixture).
"""

from __future__ import annotations

import json
import random

import pytest

from dask_analytics_lab.store import NotFound, open_store

from ..factories import T0, Cluster, group, tree


@pytest.fixture
def store(store_url):
    s = open_store(store_url)
    yield s
    s.close()


def test_every_kind_round_trips(store):
    c = Cluster(account="acme")
    t = tree("main", "compute", "spin", count=5)
    msgs = [
        c.cluster(),
        c.sample(),
        c.code("h1", "df.groupby('k').v.sum().compute()"),
        c.computation(
            "comp-1",
            code=["h1", "h-never-sent"],
            groups=[group("ones"), group("sum-aggregate", dependencies=["ones"])],
        ),
        c.exception("comp-1", "ones", count=7),
        c.event(msg={"nested": [1, {"a": None}]}),
        c.profile("comp-1", t),
        c.profile(None, tree("idle", count=2)),
        c.gpu(n=3),
        c.metrics("comp-1"),
        c.workers(2),
        c.tasks("comp-1"),
        c.stop(),
    ]
    assert store.ingest(msgs) == len(msgs)

    cl = store.get_cluster(c.id)
    assert (cl["name"], cl["user"], cl["account"], cl["address"]) == (
        "LocalCluster-1",
        "ann",
        "acme",
        "tcp://127.0.0.1:8786",
    )
    assert cl["versions"]["distributed"] == "2026.8.0" and cl["platform"]["os"] == "Linux"
    assert cl["settings"]["events_allow"] == ["worker-fail-hard"]
    assert (
        cl["n_workers"] == 2 and cl["memory_total"] == 2**34 and cl["cost"] == pytest.approx(0.0003)
    )
    assert (
        cl["stopped"] is not None and cl["stop_reason"] == "closed" and cl["idle_shutdown"] is False
    )
    assert cl["last_seen"] == msgs[-1]["time"] and cl["first_seen"] == msgs[0]["time"]
    assert store.list_clusters() == [cl]

    (sample,) = store.list_cluster_samples(c.id)
    assert sample["n_threads"] == 4 and sample["time"] == msgs[1]["time"]

    (comp,) = store.list_computations()
    assert comp["computation_id"] == "comp-1" and comp["state"] == "finished"
    assert (comp["n_tasks"], comp["n_groups"], comp["nbytes"]) == (8, 2, 64000)
    full = store.get_computation("comp-1")
    assert {g["name"] for g in full["groups"]} == {"ones", "sum-aggregate"}
    by_name = {g["name"]: g for g in full["groups"]}
    assert by_name["sum-aggregate"]["dependencies"] == ["ones"]
    assert by_name["ones"]["states"] == {"memory": 4} and by_name["ones"]["nbytes"] == 32000
    assert full["code"][0] == {
        "hash": "h1",
        "text": "df.groupby('k').v.sum().compute()",
        "filename": "/home/ann/nb.py",
        "lineno_frame": 12,
        "lineno_relative": 3,
    }
    assert full["code"][1]["hash"] == "h-never-sent" and full["code"][1]["text"] is None
    assert store.list_task_groups("comp-1") == full["groups"]

    (exc,) = store.list_exceptions(cluster_id=c.id)
    assert (exc["computation_id"], exc["task_group"], exc["count"]) == ("comp-1", "ones", 7)
    assert "raise ValueError" in exc["traceback_text"] and exc["example_key"] == "('boom-abc', 3)"
    assert store.list_exceptions(computation_id="comp-1") == [exc]

    (ev,) = store.list_events(cluster_id=c.id)
    assert ev["topic"] == "worker-fail-hard" and ev["msg"] == {"nested": [1, {"a": None}]}

    assert store.get_profile(computation_id="comp-1") == t
    merged = store.get_profile(cluster_id=c.id)
    assert merged["count"] == 7 and set(merged["children"]) == {"main;file.py;0", "idle;file.py;0"}

    gpu = store.list_gpu_metrics(cluster_id=c.id)
    assert len(gpu) == 6 and [r["time"] for r in gpu] == sorted(r["time"] for r in gpu)
    assert {(r["host"], r["gpu_uuid"]) for r in gpu} == {
        ("gpu-host-1", "GPU-0"),
        ("gpu-host-1", "GPU-1"),
    }
    assert gpu[0]["task_groups"] == ["train-step"] and gpu[0]["mem_total"] == 80 * 2**30
    assert len(store.list_gpu_metrics(monitor_id="m1", worker="tcp://10.0.0.5:4000")) == 6
    assert store.list_gpu_metrics(monitor_id="other") == []

    metrics = {(m["prefix"], m["context"], m["activity"]): m["value"] for m in full["metrics"]}
    assert metrics == {
        ("ones", "execute", "thread-cpu"): 4.0,
        ("ones", "execute", "thread-noncpu"): 0.1,
        ("sleepy", "execute", "thread-noncpu"): 3.0,
        (None, "gather-dep", "network"): 0.2,
    }
    workers = store.list_worker_samples(c.id)
    assert [w["worker"] for w in workers] == ["tcp://10.0.0.1:4000", "tcp://10.0.0.2:4000"]
    assert workers[1]["managed"] == 2 * 2**30 and workers[1]["cpu"] == 95.0
    assert len(store.list_worker_samples(c.id, worker="tcp://10.0.0.2:4000")) == 1
    stream = store.list_task_stream("comp-1")
    assert [r["n_tasks"] for r in stream] == [1, 1, 1, 1] and not any(r["binned"] for r in stream)
    assert [r["start"] for r in stream] == sorted(r["start"] for r in stream)

    exported = store.export()
    assert set(exported) == {
        "clusters",
        "cluster_samples",
        "computations",
        "task_groups",
        "code_snippets",
        "exceptions",
        "events",
        "profiles",
        "gpu_samples",
        "computation_metrics",
        "worker_samples",
        "task_stream",
    }
    assert {k: len(v) for k, v in exported.items()} == {
        "clusters": 1,
        "cluster_samples": 1,
        "computations": 1,
        "task_groups": 2,
        "code_snippets": 1,
        "exceptions": 1,
        "events": 1,
        "profiles": 2,
        "gpu_samples": 6,
        "computation_metrics": 4,
        "worker_samples": 2,
        "task_stream": 4,
    }
    assert {p["computation_id"] for p in exported["profiles"]} == {"comp-1", None}


def test_a_computation_has_a_profile_per_task_prefix(store):
    c = Cluster()
    store.ingest(
        [
            c.cluster(),
            c.computation("a"),
            c.msg(
                "profile",
                {
                    "computation_id": "a",
                    "prefix": "ones",
                    "tree": tree("ones_fn", count=3),
                    "count": 3,
                },
            ),
            c.msg(
                "profile",
                {
                    "computation_id": "a",
                    "prefix": "sum",
                    "tree": tree("sum_fn", count=2),
                    "count": 2,
                },
            ),
        ]
    )
    assert set(store.get_profile(computation_id="a", prefix="ones")["children"]) == {
        "ones_fn;file.py;0"
    }
    assert store.get_profile(computation_id="a", prefix="sum")["count"] == 2
    both = store.get_profile(computation_id="a")
    assert both["count"] == 5 and set(both["children"]) == {"ones_fn;file.py;0", "sum_fn;file.py;0"}
    assert store.get_profile(computation_id="a", prefix="nope")["count"] == 0
    assert store.get_profile(cluster_id=c.id)["count"] == 5


def test_a_binned_task_stream_replaces_the_tasks_kept_before(store):
    c = Cluster()
    t = c.t
    bins = [
        {
            "worker": "tcp://10.0.0.1:4000",
            "prefix": "ones",
            "start": t,
            "stop": t + 1,
            "n_tasks": 900,
            "busy": 0.9,
            "binned": True,
        }
    ]
    store.ingest([c.cluster(), c.computation("a"), c.tasks("a"), c.tasks("a"), c.tasks("b")])
    assert len(store.list_task_stream("a")) == 8
    # In one batch: the tasks before the replace go, the ones after it stay.
    store.ingest([c.tasks("a"), c.tasks("a", bins, replace=True), c.tasks("a", bins[:1])])
    stream = store.list_task_stream("a")
    assert [(r["n_tasks"], r["binned"]) for r in stream] == [(900, True), (900, True)]


def test_rows_are_json_able(store):
    import json

    c = Cluster()
    store.ingest(
        [c.cluster(), c.computation("a"), c.exception(None, None), c.profile(None, tree("f"))]
    )
    json.dumps(store.export(), allow_nan=False)
    json.dumps(store.get_computation("a"), allow_nan=False)


def test_same_batch_twice_and_overlapping_batches(store):
    c = Cluster()
    msgs = [c.cluster()] + [c.event(msg={"i": i}) for i in range(20)]
    assert store.ingest(msgs) == 21
    assert store.ingest(msgs) == 0
    more = [c.event(msg={"i": i}) for i in range(20, 30)]
    assert store.ingest(msgs[15:] + more) == 10  # overlapping: only the new ones
    assert store.ingest(more + more) == 0  # duplicates within one batch, all known
    assert len(store.list_events(cluster_id=c.id)) == 30
    # a pair repeated inside one new batch is stored once
    again = c.event(msg={"i": 30})
    assert store.ingest([again, again]) == 1
    assert len(store.list_events(cluster_id=c.id)) == 31


def test_empty_batch(store):
    assert store.ingest([]) == 0


def test_stub_cluster_then_cluster_message_fills_it(store):
    c = Cluster(account="acme")
    first = c.computation("comp-1")
    cluster_msg = c.cluster(name="late")
    assert store.ingest([first]) == 1
    stub = store.get_cluster(c.id)
    assert stub["name"] is None and stub["account"] is None and stub["started"] == first["time"]
    assert store.list_computations(cluster_id=c.id)[0]["computation_id"] == "comp-1"
    assert store.ingest([cluster_msg]) == 1
    filled = store.get_cluster(c.id)
    assert filled["name"] == "late" and filled["account"] == "acme" and filled["started"] == T0
    assert filled["first_seen"] == first["time"] and filled["last_seen"] == cluster_msg["time"]
    assert store.get_cluster(c.id, account="acme")["name"] == "late"


def test_later_messages_replace_and_older_ones_do_not(store):
    c = Cluster()
    running = c.computation(
        "comp", state="running", groups=[group("ones", n_tasks=16, states={"processing": 16})]
    )
    finished = c.computation("comp", state="finished", groups=[group("ones", n_tasks=16)])
    more = c.computation("comp", state="finished", groups=[group("sum", n_tasks=1)])
    exc1 = c.exception("comp", "ones", count=1)
    exc2 = c.exception("comp", "ones", count=500)
    s1, s2 = c.sample(n_workers=1), c.sample(n_workers=5)
    # the newer messages arrive first (a retried older batch comes after)
    assert store.ingest([finished, exc2, s2]) == 3
    assert store.ingest([running, exc1, s1]) == 3
    comp = store.get_computation("comp")
    assert comp["state"] == "finished" and comp["stop"] is not None
    assert comp["groups"][0]["states"] == {"memory": 16}
    (exc,) = store.list_exceptions(computation_id="comp")
    assert exc["count"] == 500 and exc["last_time"] == exc2["data"]["last_time"]
    assert store.get_cluster(c.id)["n_workers"] == 5
    assert len(store.list_cluster_samples(c.id)) == 2
    # groups arrive in parts: a later message adds to them
    store.ingest([more])
    assert {g["name"] for g in store.list_task_groups("comp")} == {"ones", "sum"}


def test_one_batch_with_several_versions_keeps_the_latest(store):
    c = Cluster()
    msgs = [
        c.computation("comp", state="running"),
        c.computation("comp", state="finished"),
        c.profile("comp", tree("a", count=1)),
        c.profile("comp", tree("b", count=2)),
        c.sample(n_workers=1),
        c.sample(n_workers=3),
        c.code("h", "one"),
        c.code("h", "one"),
    ]
    assert store.ingest(msgs) == len(msgs)
    assert store.get_computation("comp")["state"] == "finished"
    assert store.get_profile(computation_id="comp")["count"] == 2
    assert store.get_cluster(c.id)["n_workers"] == 3


def test_code_snippet_stored_once_across_computations(store):
    c = Cluster()
    cell = "\n".join(f"line {i}" for i in range(2000))
    msgs = [c.code("cell-hash", cell)] + [
        c.computation(f"comp-{i}", code=["cell-hash"]) for i in range(5)
    ]
    msgs.append(c.code("cell-hash", cell))
    store.ingest(msgs)
    assert len(store.export()["code_snippets"]) == 1
    assert all(store.get_computation(f"comp-{i}")["code"][0]["text"] == cell for i in range(5))


def test_code_is_scoped_by_account(store):
    """Another account that names a snippet's hash in its own computation learns nothing:
    the hash is no oracle for code it did not send."""
    ann, eve = Cluster(account="acme"), Cluster(account="evil")
    store.ingest(
        [
            ann.cluster(),
            ann.code("secret-hash", "password = 'hunter2'"),
            ann.computation("ann-comp", code=["secret-hash"]),
        ]
    )
    store.ingest([eve.cluster(), eve.computation("eve-comp", code=["secret-hash"])])
    assert store.get_computation("ann-comp")["code"][0]["text"] == "password = 'hunter2'"
    (probe,) = store.get_computation("eve-comp")["code"]
    assert probe["text"] is None and probe["filename"] is None
    assert store.export(account="evil")["code_snippets"] == []
    assert [r["hash"] for r in store.export(account="acme")["code_snippets"]] == ["secret-hash"]
    # The same text sent by both accounts is stored once for each.
    store.ingest([eve.code("secret-hash", "password = 'hunter2'")])
    assert store.get_computation("eve-comp")["code"][0]["text"] == "password = 'hunter2'"
    assert len(store.export()["code_snippets"]) == 2


def test_upgrade_gives_each_account_its_own_copy_of_the_code_it_used(store_url):
    """A store from before snippets were scoped (revision 0003: one row per hash for
    everyone) keeps every account's code readable by that account, and no one else's."""
    from alembic import command

    from dask_analytics_lab.store.engine import make_engine
    from dask_analytics_lab.store.migrate import alembic_config

    ann, bob = Cluster(account="acme"), Cluster(account="beta")
    with open_store(store_url) as st:
        st.ingest(
            [
                ann.cluster(),
                bob.cluster(),
                ann.computation("a", code=["h1"]),
                bob.computation("b", code=["h1", "h2"]),
            ]
        )
    engine = make_engine(store_url)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0003")
        conn.exec_driver_sql(
            "INSERT INTO code_snippets (hash, text) VALUES ('h1', 'one'), ('h2', 'two')"
        )
    engine.dispose()
    with open_store(store_url) as st:
        assert [c["text"] for c in st.get_computation("a")["code"]] == ["one"]
        assert [c["text"] for c in st.get_computation("b")["code"]] == ["one", "two"]
        assert sorted((r["account"], r["hash"]) for r in st.export()["code_snippets"]) == [
            ("acme", "h1"),
            ("beta", "h1"),
            ("beta", "h2"),
        ]


def test_orders_and_limits(store):
    c = Cluster()
    msgs = [c.cluster()] + [c.computation(f"comp-{i:02d}", start=T0 + i) for i in range(30)]
    msgs += [c.sample(n_workers=i) for i in range(10)] + [c.event("t", {"i": i}) for i in range(10)]
    msgs += [c.exception(f"comp-{i:02d}", "ones", h=f"h{i}", last_time=T0 + i) for i in range(10)]
    store.ingest(msgs)
    comps = store.list_computations(limit=5)
    assert [x["computation_id"] for x in comps] == [f"comp-{i:02d}" for i in (29, 28, 27, 26, 25)]
    assert len(store.list_computations()) == 30 and store.list_computations(limit=0) == []
    samples = store.list_cluster_samples(c.id, limit=3)  # the newest three, oldest first
    assert [x["n_workers"] for x in samples] == [7, 8, 9]
    assert [e["msg"]["i"] for e in store.list_events(cluster_id=c.id, limit=3)] == [9, 8, 7]
    assert [e["hash"] for e in store.list_exceptions(limit=2)] == ["h9", "h8"]
    older, newer = Cluster(t0=T0 - 1000), Cluster(t0=T0 + 1000)
    store.ingest([older.cluster(started=T0 - 1000), newer.cluster(started=T0 + 1000)])
    assert [x["cluster_id"] for x in store.list_clusters()] == [newer.id, c.id, older.id]
    assert [x["cluster_id"] for x in store.list_clusters(limit=1)] == [newer.id]
    with pytest.raises(ValueError):
        store.list_clusters(limit=-1)


def test_events_by_topic(store):
    c = Cluster()
    store.ingest([c.event("a", {"n": 1}), c.event("b", {"n": 2}), c.event("a", {"n": 3})])
    assert [e["msg"]["n"] for e in store.list_events(topic="a")] == [3, 1]
    assert [e["msg"]["n"] for e in store.list_events(cluster_id=c.id, topic="b")] == [2]


def test_account_filtering(store):
    a, b = Cluster(account="team-a"), Cluster(account="team-b")
    for c, comp in ((a, "comp-a"), (b, "comp-b")):
        store.ingest(
            [
                c.cluster(),
                c.sample(),
                c.code(f"h-{comp}"),
                c.computation(comp, code=[f"h-{comp}"]),
                c.exception(comp, "ones"),
                c.event(),
                c.profile(comp, tree("f")),
                c.gpu(),
            ]
        )

    def ids(rows, key="cluster_id"):
        return {r[key] for r in rows}

    assert ids(store.list_clusters(account="team-a")) == {a.id}
    assert ids(store.list_clusters()) == {a.id, b.id}
    assert ids(store.list_computations(account="team-b"), "computation_id") == {"comp-b"}
    assert ids(store.list_exceptions(account="team-a")) == {a.id}
    assert ids(store.list_events(account="team-a")) == {a.id}
    assert ids(store.list_gpu_metrics(account="team-b")) == {b.id}
    assert store.list_clusters(account="nobody") == []
    exported = store.export(account="team-a")
    assert all(
        r["cluster_id"] == a.id
        for t, rows in exported.items()
        if t != "code_snippets"
        for r in rows
    )
    assert [s["hash"] for s in exported["code_snippets"]] == ["h-comp-a"]

    # an id of another account is NotFound, exactly like an unknown one
    with pytest.raises(NotFound):
        store.get_cluster(b.id, account="team-a")
    with pytest.raises(NotFound):
        store.list_cluster_samples(b.id, account="team-a")
    with pytest.raises(NotFound):
        store.list_computations(cluster_id=b.id, account="team-a")
    with pytest.raises(NotFound):
        store.get_computation("comp-b", account="team-a")
    with pytest.raises(NotFound):
        store.list_task_groups("comp-b", account="team-a")
    with pytest.raises(NotFound):
        store.list_exceptions(computation_id="comp-b", account="team-a")
    with pytest.raises(NotFound):
        store.list_events(cluster_id=b.id, account="team-a")
    with pytest.raises(NotFound):
        store.get_profile(computation_id="comp-b", account="team-a")
    with pytest.raises(NotFound):
        store.get_profile(cluster_id=b.id, account="team-a")
    with pytest.raises(NotFound):
        store.list_gpu_metrics(cluster_id=b.id, account="team-a")
    assert store.get_computation("comp-a", account="team-a")["code"][0]["hash"] == "h-comp-a"


def test_computation_id_of_another_cluster_is_not_overwritten(store):
    a, b = Cluster(account="team-a"), Cluster(account="team-b")
    store.ingest([a.cluster(), a.computation("same-id", groups=[group("mine")])])
    store.ingest([b.cluster(), b.computation("same-id", state="erred", groups=[group("theirs")])])
    comp = store.get_computation("same-id")
    assert comp["cluster_id"] == a.id and comp["state"] == "finished"
    assert [g["name"] for g in comp["groups"]] == ["mine"]
    with pytest.raises(NotFound):
        store.get_computation("same-id", account="team-b")


def test_not_found_messages(store):
    with pytest.raises(
        NotFound, match=r"^unknown cluster id 'nope'; dask-analytics clusters lists the known ones$"
    ):
        store.get_cluster("nope")
    with pytest.raises(NotFound, match="unknown cluster id 'nope'"):
        store.list_computations(cluster_id="nope")
    with pytest.raises(NotFound, match="unknown cluster id 'nope'"):
        store.list_cluster_samples("nope")
    with pytest.raises(NotFound, match="unknown cluster id 'nope'"):
        store.list_events(cluster_id="nope")
    with pytest.raises(NotFound, match="unknown cluster id 'nope'"):
        store.list_exceptions(cluster_id="nope")
    with pytest.raises(NotFound, match="unknown cluster id 'nope'"):
        store.get_profile(cluster_id="nope")
    with pytest.raises(NotFound, match="unknown cluster id 'nope'"):
        store.list_gpu_metrics(cluster_id="nope")
    with pytest.raises(
        NotFound,
        match=r"^unknown computation id 'x'; dask-analytics computations lists the known ones$",
    ):
        store.get_computation("x")
    with pytest.raises(NotFound, match="unknown computation id 'x'"):
        store.list_task_groups("x")
    with pytest.raises(NotFound, match="unknown computation id 'x'"):
        store.get_profile(computation_id="x")
    assert isinstance(NotFound("x"), LookupError)


def test_empty_profile(store):
    c = Cluster()
    store.ingest([c.cluster(), c.computation("comp")])
    empty = {
        "count": 0,
        "identifier": "root",
        "children": {},
        "description": {"filename": "", "name": "", "line_number": 0, "line": ""},
    }
    assert store.get_profile(computation_id="comp") == empty
    assert store.get_profile(cluster_id=c.id) == empty
    with pytest.raises(ValueError, match="exactly one of computation_id= or cluster_id="):
        store.get_profile()


def test_empty_store_reads(store):
    assert store.list_clusters() == [] and store.list_computations() == []
    assert (
        store.list_exceptions() == []
        and store.list_events() == []
        and store.list_gpu_metrics() == []
    )
    assert all(rows == [] for rows in store.export().values())


# --- the cluster lifecycle: one rule, below every reader ------------------------------
from dask_analytics_lab.messages import HEARTBEAT, LEGACY_HEARTBEAT, LOST_AFTER_HEARTBEATS  # noqa: E402
from dask_analytics_lab.store import queries  # noqa: E402

# The factories' clusters say no heartbeat (as a release before heartbeats): 3 x 30 s.
LOST_AFTER = LEGACY_HEARTBEAT * LOST_AFTER_HEARTBEATS


def read(store, fn: str, *args, now: float, **kw):
    """A query at a chosen "now"."""
    with store.reading() as conn:
        return getattr(queries, fn)(conn, *args, now=now, **kw)


def test_lost_after_n_silent_heartbeats():
    # 3 heartbeats of 3 s: a killed scheduler's cluster reads lost within 10 s of its
    # last word, so of its death ...
    life = queries.lifecycle
    assert HEARTBEAT * LOST_AFTER_HEARTBEATS == 9.0
    assert life(None, T0 + 100, T0, T0 + 109, HEARTBEAT)["status"] == "live"
    assert life(None, T0 + 100, T0, T0 + 109.5, HEARTBEAT) == {
        "status": "lost",
        "ended": T0 + 100,
        "duration": 100,
    }
    # ... and one recorded before heartbeats (a sample at least every 30 s) after 90 s.
    assert LOST_AFTER == 90.0
    assert life(None, T0 + 100, T0, T0 + 100 + LOST_AFTER) == {
        "status": "live",
        "ended": None,
        "duration": 100 + LOST_AFTER,
    }
    assert life(None, T0 + 100, T0, T0 + 100 + LOST_AFTER + 0.5) == {
        "status": "lost",
        "ended": T0 + 100,
        "duration": 100,
    }
    assert life(T0 + 50, T0 + 60, T0, T0 + 10**6) == {
        "status": "stopped",
        "ended": T0 + 50,
        "duration": 50,
    }
    # a clock behind the scheduler's never makes a negative duration
    assert life(None, T0 + 5, T0, T0 - 5)["duration"] == 0.0


def test_live_stopped_and_lost_clusters(store):
    live, lost, stopped = Cluster(), Cluster(), Cluster()
    store.ingest(
        [
            live.cluster(),
            live.sample(),
            lost.cluster(),
            lost.sample(),
            stopped.cluster(),
            stopped.sample(),
            stopped.stop(),
        ]
    )
    seen = {c.id: store.get_cluster(c.id)["last_seen"] for c in (live, lost, stopped)}
    # `live` sends another heartbeat much later; `lost` never again
    later = T0 + 600
    store.ingest([live.sample(at=later)])
    now = later + LOST_AFTER / 2

    rows = {r["cluster_id"]: r for r in read(store, "list_clusters", now=now)}
    assert (rows[live.id]["status"], rows[live.id]["ended"]) == ("live", None)
    assert rows[live.id]["duration"] == now - T0
    assert rows[lost.id]["status"] == "lost"
    assert rows[lost.id]["ended"] == seen[lost.id]  # its end is when it was last seen
    assert rows[lost.id]["duration"] == seen[lost.id] - T0
    assert rows[stopped.id]["status"] == "stopped"
    assert rows[stopped.id]["ended"] == rows[stopped.id]["stopped"]
    assert rows[stopped.id]["duration"] == rows[stopped.id]["stopped"] - T0
    for c in (live, lost, stopped):
        assert read(store, "get_cluster", c.id, now=now) == rows[c.id]

    # the same cluster at different times: live while it heartbeats, lost after N silent ones
    assert read(store, "get_cluster", lost.id, now=seen[lost.id] + LOST_AFTER)["status"] == "live"
    assert (
        read(store, "get_cluster", lost.id, now=seen[lost.id] + LOST_AFTER + 1)["status"] == "lost"
    )
    # ... and a lost cluster that speaks again is live again
    store.ingest([lost.sample(at=now)])
    assert read(store, "get_cluster", lost.id, now=now + 1)["status"] == "live"


def test_a_cluster_that_promised_heartbeats_is_lost_after_three_silent_ones(store):
    """A scheduler of this release says it sends a heartbeat every HEARTBEAT seconds: three
    silent ones and it is lost, in Python and in the SQL state filter alike."""
    beating, legacy = Cluster(), Cluster()
    store.ingest(
        [
            beating.cluster(heartbeat=HEARTBEAT),
            beating.sample(at=T0 + 10),
            legacy.cluster(),
            legacy.sample(at=T0 + 10),
        ]
    )
    quiet = T0 + 10 + HEARTBEAT * LOST_AFTER_HEARTBEATS
    for now, beating_state, legacy_state in [
        (quiet, "live", "live"),
        (quiet + 1, "lost", "live"),
        (T0 + 10 + LOST_AFTER + 1, "lost", "lost"),
    ]:
        assert read(store, "get_cluster", beating.id, now=now)["status"] == beating_state
        assert read(store, "get_cluster", legacy.id, now=now)["status"] == legacy_state
        for state in ("live", "lost"):
            ids = {r["cluster_id"] for r in read(store, "list_clusters", state=state, now=now)}
            assert (beating.id in ids, legacy.id in ids) == (
                beating_state == state,
                legacy_state == state,
            )


def test_each_cluster_is_lost_after_three_silent_heartbeats_of_its_own(store):
    """A cluster of this release is lost 9 s after its last word; one recorded by the
    release before (it promised a heartbeat every 5 s) keeps its 15 s, and one from
    before heartbeats its 90 s: in Python and in the SQL state filter alike."""
    now_, older, legacy = Cluster(), Cluster(), Cluster()
    store.ingest(
        [
            now_.cluster(heartbeat=HEARTBEAT),
            now_.sample(at=T0 + 10),
            older.cluster(heartbeat=5.0),
            older.sample(at=T0 + 10),
            legacy.cluster(),
            legacy.sample(at=T0 + 10),
        ]
    )
    assert queries.lost_after(HEARTBEAT) <= 10.0
    for now, states in [
        (T0 + 19, ("live", "live", "live")),
        (T0 + 19.5, ("lost", "live", "live")),
        (T0 + 25, ("lost", "live", "live")),
        (T0 + 25.5, ("lost", "lost", "live")),
        (T0 + 100.5, ("lost", "lost", "lost")),
    ]:
        for c, state in zip((now_, older, legacy), states):
            row = read(store, "get_cluster", c.id, now=now)
            assert (row["status"], row["ended"]) == (state, T0 + 10 if state == "lost" else None)
        for state in ("live", "lost"):
            ids = {r["cluster_id"] for r in read(store, "list_clusters", state=state, now=now)}
            assert ids == {c.id for c, s in zip((now_, older, legacy), states) if s == state}


def test_the_store_and_its_readers_use_the_rule(store, monkeypatch):
    """Store methods (and so the server, the API and the CLI) read the same fields."""
    c = Cluster()
    store.ingest([c.cluster(), c.sample()])
    last = store.get_cluster(c.id)["last_seen"]
    monkeypatch.setattr(
        queries, "time", type("Clock", (), {"time": staticmethod(lambda: last + 1)})
    )
    assert store.get_cluster(c.id)["status"] == "live"
    assert store.list_clusters()[0]["status"] == "live"
    monkeypatch.setattr(
        queries, "time", type("Clock", (), {"time": staticmethod(lambda: last + 1000)})
    )
    assert store.get_cluster(c.id)["status"] == "lost"


def test_running_computations_of_an_ended_cluster_read_lost(store):
    live, lost, stopped = Cluster(), Cluster(), Cluster()
    store.ingest(
        [
            live.cluster(),
            live.computation("live-run", state="running"),
            lost.cluster(),
            lost.computation("lost-run", state="running"),
            lost.computation("lost-done", state="finished"),
            stopped.cluster(),
            stopped.computation("stopped-run", state="running"),
            stopped.stop(),
        ]
    )
    last_live = store.get_cluster(live.id)["last_seen"]
    store.ingest([live.sample(at=last_live + 500)])
    now = last_live + 500 + LOST_AFTER / 2
    lost_seen = store.get_cluster(lost.id)["last_seen"]
    stopped_at = store.get_cluster(stopped.id)["stopped"]

    comps = {r["computation_id"]: r for r in read(store, "list_computations", now=now)}
    assert (comps["live-run"]["state"], comps["live-run"]["stop"]) == ("running", None)
    assert (comps["lost-run"]["state"], comps["lost-run"]["stop"]) == ("lost", lost_seen)
    assert comps["lost-done"]["state"] == "finished"
    assert (comps["stopped-run"]["state"], comps["stopped-run"]["stop"]) == ("lost", stopped_at)
    for cid, row in comps.items():
        full = read(store, "get_computation", cid, now=now)
        assert (full["state"], full["stop"]) == (row["state"], row["stop"])
    # by cluster, and limit-first: a page of one still reads right
    (one,) = read(store, "list_computations", cluster_id=lost.id, limit=1, now=now)
    assert one["state"] in ("lost", "finished") and (one["state"] == "lost") == (
        one["computation_id"] == "lost-run"
    )
    (page,) = read(store, "list_computations", cluster_id=stopped.id, limit=1, now=now)
    assert page["state"] == "lost"
    # before the cluster went quiet, the same computation was running
    assert read(store, "get_computation", "lost-run", now=lost_seen + 1)["state"] == "running"


def test_peaks_survive_a_stop(store):
    c = Cluster()
    store.ingest(
        [
            c.cluster(),
            c.sample(n_workers=1, n_threads=2, memory_total=2**30),
            c.sample(n_workers=4, n_threads=8, memory_total=2**32),
            c.sample(n_workers=2, n_threads=4, memory_total=2**31),
            c.sample(n_workers=0, n_threads=0, memory_total=0, memory_used=0),
            c.stop(),
        ]
    )
    row = store.get_cluster(c.id)
    assert row["status"] == "stopped"
    assert (row["n_workers"], row["n_threads"], row["memory_total"]) == (0, 0, 0)
    assert (row["peak_workers"], row["peak_threads"], row["peak_memory"]) == (4, 8, 2**32)
    assert store.list_clusters()[0]["peak_workers"] == 4


def test_a_batch_leaves_the_cluster_rows_as_its_messages_one_at_a_time_do(store):
    """One statement writes what a batch does to its clusters' rows (last_seen, the
    newest sample's figures, the peaks): the same rows as the messages one call each,
    arriving in any order (each call then holds one sample: nothing to merge)."""
    rng = random.Random(7)

    def messages(c: Cluster) -> list[dict]:
        msgs = [c.cluster()]
        for i in range(6):
            n = rng.choice([0, 1, 3, 5.0, None])  # a Count may come as a whole float
            at = T0 + 100 + rng.random() * 50 + i * 100  # distinct times, any order of seq
            msgs.append(c.sample(at=at, n_workers=n, memory_total=rng.choice([2**30, None])))
        msgs.append(c.msg("heartbeat", {}, time=T0 + 900))
        return msgs

    batch, alone = [], []
    for k in range(2):  # two clusters in the batch: one statement for several rows
        template = messages(Cluster())
        rest = template[1:]  # the `cluster` message first: first_seen is the first arrival's
        rng.shuffle(rest)
        template[1:] = rest
        for ms, into in ((template, batch), (json.loads(json.dumps(template)), alone)):
            for m in ms:
                m["cluster_id"] = f"cluster-{k}-{'alone' if into is alone else 'batch'}"
            into.extend(ms)
    assert store.ingest(batch[:5]) == 5  # the rest after: stored figures meet older ones
    assert store.ingest(batch[5:]) == len(batch) - 5
    for m in alone:
        assert store.ingest([m]) == 1
    rows = {r["cluster_id"]: r for r in store.export()["clusters"]}
    for k in range(2):
        got, want = rows[f"cluster-{k}-batch"], rows[f"cluster-{k}-alone"]
        assert got["sample_time"] is not None and got["last_seen"] == T0 + 900
        assert {**got, "cluster_id": None} == {**want, "cluster_id": None}


def test_each_computation_reads_its_own_code_line(store):
    """A snippet (a cell, a function) is stored once; each computation made from it
    says which line made it."""
    c = Cluster()
    cell = "import dask.array as da\nx = da.ones(10)\nx.sum().compute()\nx.mean().compute()\n"
    store.ingest(
        [
            c.code("cell", cell),  # its own lineno_* are the first sender's: 12 / 3
            c.computation(
                "first",
                code=["cell"],
                frames=[{"hash": "cell", "lineno_frame": 3, "lineno_relative": 3}],
                code_line="x.sum().compute()",
                label="ones → sum",
            ),
            c.computation(
                "second",
                code=["cell"],
                frames=[{"hash": "cell", "lineno_frame": 4, "lineno_relative": 4}],
                code_line="x.mean().compute()",
                label="ones → mean",
            ),
            c.computation("old", code=["cell"], frames=None, code_line=None, label=None),
        ]
    )
    assert len(store.export()["code_snippets"]) == 1
    first, second, old = (store.get_computation(x) for x in ("first", "second", "old"))
    assert [(s["lineno_frame"], s["lineno_relative"]) for s in first["code"]] == [(3, 3)]
    assert [(s["lineno_frame"], s["lineno_relative"]) for s in second["code"]] == [(4, 4)]
    assert first["code"][0]["text"] == second["code"][0]["text"] == cell
    assert (first["code_line"], first["label"]) == ("x.sum().compute()", "ones → sum")
    assert (second["code_line"], second["label"]) == ("x.mean().compute()", "ones → mean")
    # recorded before code_frames: the snippet's own line numbers
    assert [(s["lineno_frame"], s["lineno_relative"]) for s in old["code"]] == [(12, 3)]
    rows = {r["computation_id"]: r for r in store.list_computations()}
    assert (rows["second"]["label"], rows["second"]["code_line"]) == (
        "ones → mean",
        "x.mean().compute()",
    )
    assert rows["old"]["label"] is None


def test_one_snippet_for_several_frames(store):
    """With nframes > 1 one snippet may hold two frames of one computation (a function
    calling itself): each entry of "code" gets its own frame, in order."""
    c = Cluster()
    store.ingest(
        [
            c.code("f", "def f(n):\n    return f(n - 1)\n"),
            c.computation(
                "rec",
                code=["f", "f"],
                frames=[
                    {"hash": "f", "lineno_frame": 2, "lineno_relative": 2},
                    {"hash": "f", "lineno_frame": 1, "lineno_relative": 1},
                ],
            ),
        ]
    )
    assert [s["lineno_frame"] for s in store.get_computation("rec")["code"]] == [2, 1]


def test_counts_and_failures_read_back(store):
    c = Cluster()
    store.ingest(
        [
            c.cluster(),
            c.computation(
                "bad",
                state="erred",
                groups=[group("load", n_tasks=10, n_erred=3), group("sum", n_tasks=1, n_not_run=1)],
            ),
            c.exception(
                "bad",
                "load",
                count=3,
                examples=["KeyError('k-1')", "KeyError('k-2')"],
                exc_type="KeyError",
                pattern="KeyError(<str>)",
            ),
        ]
    )
    (row,) = store.list_computations()
    assert (row["n_tasks"], row["n_done"], row["n_erred"], row["n_not_run"]) == (11, 7, 3, 1)
    groups = {g["name"]: g for g in store.get_computation("bad")["groups"]}
    assert (groups["load"]["n_done"], groups["load"]["n_erred"], groups["sum"]["n_not_run"]) == (
        7,
        3,
        1,
    )
    (exc,) = store.list_exceptions(computation_id="bad")
    assert (exc["exc_type"], exc["pattern"], exc["count"]) == ("KeyError", "KeyError(<str>)", 3)
    assert exc["examples"] == ["KeyError('k-1')", "KeyError('k-2')"] and exc["workers"] == [
        "tcp://127.0.0.1:4001"
    ]
