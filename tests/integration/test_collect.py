"""End to end: a real LocalCluster records into a real store, and the API reads it back."""

from __future__ import annotations

import time

import dask.array as da
import dask.bag as db
import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import get_worker, wait

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers

from ..cluster_helpers import recorded_cluster
from ..waiting import wait_for


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


def boom(x):
    raise ValueError(f"bad value {x % 2}")


def _groupby(client):
    pdf = pd.DataFrame({"k": [i % 7 for i in range(5000)], "v": range(5000)})
    return dd.from_pandas(pdf, npartitions=4).groupby("k").v.sum().compute()


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_cluster_and_computations_recorded(store_url, processes):
    with recorded_cluster(store_url, processes=processes) as (client, info):
        _groupby(client)
        da.ones((200, 200), chunks=50).sum().compute()
        dal.flush(client)
        cluster_id = info["cluster_id"]

    (cluster,) = [c for c in dal.list_clusters(store=store_url) if c["cluster_id"] == cluster_id]
    assert cluster["user"] and cluster["account"] == "default"
    assert cluster["stopped"] is not None and cluster["stopped"] >= cluster["started"]
    assert cluster["versions"]["distributed"] == __import__("distributed").__version__
    assert cluster["platform"]["python_executable"]
    assert cluster["n_workers"] is not None and cluster["worker_seconds"] > 0

    comps = dal.list_computations(cluster_id, store=store_url)
    assert len(comps) == 2
    assert all(c["state"] == "finished" for c in comps)
    assert comps[0]["start"] >= comps[1]["start"], "newest first"
    array_comp, frame_comp = comps
    groups = {
        g["prefix"]: g for g in dal.list_task_groups(array_comp["computation_id"], store=store_url)
    }
    assert {"sum-partial", "sum-aggregate"} <= set(groups), groups.keys()
    total = sum(g["n_tasks"] for g in groups.values())
    assert total == array_comp["n_tasks"] > 16
    assert array_comp["compute"] > 0
    # dependencies name other groups of the same computation
    names = {g["name"] for g in groups.values()}
    deps = {d for g in groups.values() for d in g["dependencies"]}
    assert deps and deps <= names
    assert dal.list_task_groups(frame_comp["computation_id"], store=store_url)


def test_failed_tasks_grouped_with_traceback(store_url):
    with recorded_cluster(store_url) as (client, info):
        futures = client.map(boom, range(1000))
        wait(futures)
        dal.flush(client)
        cluster_id = info["cluster_id"]

    # One failure (type, raising frame, message with literals masked), counted exactly.
    (row,) = dal.list_exceptions(cluster_id, store=store_url)
    assert row["count"] == 1000
    assert row["exc_type"] == "ValueError" and row["pattern"] == "ValueError('bad value …')"
    assert row["location"].endswith(f"test_collect.py:{boom.__code__.co_firstlineno + 1} in boom")
    assert sorted(row["examples"]) == ["ValueError('bad value 0')", "ValueError('bad value 1')"]
    assert "boom" in row["traceback_text"]
    (comp,) = dal.list_computations(cluster_id, store=store_url)
    assert comp["state"] == "erred" and comp["n_erred"] == 1000 and comp["n_done"] == 0
    assert row["computation_id"] == comp["computation_id"]
    assert row["task_group"] == "boom"


def log_user_event(x):
    get_worker().log_event("my-topic", {"x": x, "note": "hello"})
    get_worker().log_event("not-allowed", {"x": x})
    return x


def test_user_events_follow_allow_list(store_url):
    allow = {"analytics.events.allow": ["my-topic", "worker-fail-hard"]}
    with recorded_cluster(store_url, config=allow) as (client, info):
        client.gather(client.map(log_user_event, range(3)))
        # Worker events reach the scheduler on a later batched send (the unlisted topic's
        # in the same one).
        wait_for(lambda: len(client.get_events("my-topic")) == 3, what="the workers' events")
        dal.flush(client)
        cluster_id = info["cluster_id"]

    events = dal.list_events(cluster_id, store=store_url)
    assert sorted(e["msg"]["x"] for e in events if e["topic"] == "my-topic") == [0, 1, 2]
    assert not [e for e in events if e["topic"] == "not-allowed"]
    assert dal.list_events(cluster_id, topic="my-topic", store=store_url)


def test_a_message_the_store_would_refuse_is_dropped_alone(store_url):
    """The shipper checks each message against the contract: an event holding NaN (no
    JSON can carry it) is dropped and counted, and the rest of its batch is stored."""
    allow = {"analytics.events.allow": ["my-topic"]}
    with recorded_cluster(store_url, config=allow) as (client, info):
        for x in (1, float("nan"), 2):
            client.log_event("my-topic", {"x": x})
        assert da.ones((100, 100), chunks=50).sum().compute() == 10_000
        flushed = dal.flush(client)
        cluster_id = info["cluster_id"]

    assert flushed["flushed"] and flushed["rejected"] == 1, flushed
    events = dal.list_events(cluster_id, topic="my-topic", store=store_url)
    assert sorted(e["msg"]["x"] for e in events) == [1, 2]
    assert dal.get_cluster(cluster_id, store=store_url)["name"]
    assert [
        c for c in dal.list_computations(cluster_id, store=store_url) if c["state"] == "finished"
    ]


def test_code_snippet_lands_on_its_computation(store_url):
    with recorded_cluster(store_url) as (client, info):

        def first_step():
            return da.arange(100, chunks=10).sum().compute()  # marker-first-step

        def second_step():
            return (
                db.from_sequence(range(100), npartitions=4).map(lambda x: x + 1).sum().compute()
            )  # marker-second

        first_step()
        second_step()
        dal.flush(client)
        cluster_id = info["cluster_id"]

    second, first = dal.list_computations(cluster_id, store=store_url)
    first_code = dal.get_computation(first["computation_id"], store=store_url)["code"]
    second_code = dal.get_computation(second["computation_id"], store=store_url)["code"]
    assert any("marker-first-step" in c["text"] for c in first_code)
    assert any("marker-second" in c["text"] for c in second_code)
    assert all(c["filename"].endswith("test_collect.py") for c in first_code + second_code)


def test_privacy_switches(store_url):
    off = {"analytics.computation.code.transmit": False, "analytics.profile.transmit": False}
    with recorded_cluster(store_url, config=off) as (client, info):
        client.submit(sum, range(10)).result()
        da.random.random((2000, 2000), chunks=500).dot(
            da.ones((2000, 10), chunks=500)
        ).sum().compute()
        dal.flush(client)  # waits for the computations' profiles, were any fetched
        cluster_id = info["cluster_id"]

    for comp in dal.list_computations(cluster_id, store=store_url):
        assert dal.get_computation(comp["computation_id"], store=store_url)["code"] == []
        assert dal.get_profile(comp["computation_id"], store=store_url)["count"] == 0
    exported = dal.export(store=store_url)
    snippet_tables = [t for t in exported if "code" in t]
    assert all(not exported[t] for t in snippet_tables)
    assert all(not rows for t, rows in exported.items() if "profile" in t)


def spin(x):
    end = time.time() + 0.4
    while time.time() < end:
        sum(range(1000))
    return x


def test_profile_recorded_per_computation_and_cluster(store_url):
    with recorded_cluster(store_url, processes=False) as (client, info):
        client.gather(client.map(spin, range(8)))
        dal.flush(client)  # waits for the profile, fetched once the workers' cycle ended
        cluster_id = info["cluster_id"]

    (comp,) = dal.list_computations(cluster_id, store=store_url)
    tree = dal.get_profile(comp["computation_id"], store=store_url)
    assert tree["count"] > 0

    def names(node):
        yield node["description"]["name"]
        for child in node["children"].values():
            yield from names(child)

    assert "spin" in set(names(tree))
    assert dal.get_profile(cluster_id=cluster_id, store=store_url)["count"] >= tree["count"]


def test_register_twice_records_once(store_url):
    with recorded_cluster(store_url) as (client, info):
        again = dal.register(client, store=store_url)
        assert again["cluster_id"] == info["cluster_id"]
        client.submit(sum, [1, 2]).result()
        dal.flush(client)
        cluster_id = info["cluster_id"]
    assert (
        len([c for c in dal.list_clusters(store=store_url) if c["cluster_id"] == cluster_id]) == 1
    )
    assert len(dal.list_computations(cluster_id, store=store_url)) == 1


def test_erred_state_kept_when_failed_futures_are_released_before_a_snapshot(store_url):
    # A long interval: the failed tasks are forgotten before the plugin looks.
    with recorded_cluster(store_url, config={"analytics.interval": "1h"}) as (client, info):
        futures = client.map(boom, range(10))
        wait(futures)
        del futures
        wait_for(
            lambda: client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0,
            what="the scheduler to forget the failed tasks",
        )
        dal.flush(client)
        cluster_id = info["cluster_id"]
    (comp,) = dal.list_computations(cluster_id, store=store_url)
    assert comp["state"] == "erred" and comp["n_erred"] == 10
    assert sum(r["count"] for r in dal.list_exceptions(cluster_id, store=store_url)) == 10
