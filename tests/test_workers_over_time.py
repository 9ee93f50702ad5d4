"""Issue 12, item 5: each worker over the cluster's life (collect/workers.py), on real
LocalClusters: samples of memory (managed grows while data is held), CPU and tasks
processing; worker-joined / worker-left events with why a worker left (closed by a
scale-down, killed, killed by its nanny for its memory); the interval's validation.
"""
from __future__ import annotations

import os
import signal
import time

import dask
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.config import ConfigError, resolve

from .cluster_helpers import FAST, recorded_cluster

HELD = 64 * 2**20  # bytes a task's result holds in a worker's memory


def _wait_for(condition, timeout=90.0, what="condition"):
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def hold() -> bytes:
    return b"x" * HELD


def nap(i: int) -> int:
    time.sleep(1.0)
    return i


def hog(i: int) -> int:
    # Touch every page, so the process's RSS (what the nanny watches) really grows.
    block = bytearray(700 * 2**20)
    for at in range(0, len(block), 4096):
        block[at] = 1
    time.sleep(10)
    return len(block) + i


def _events(store: str, cluster_id: str, topic: str) -> list[dict]:
    return sorted(dal.list_events(cluster_id, topic=topic, store=store), key=lambda e: e["time"])


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """Two thread workers sampled every 200 ms while one holds 64 MiB and both run naps."""
    store = str(tmp_path_factory.mktemp("workers") / "analytics.db")
    out: dict = {"store": store}
    with recorded_cluster(store, config={"analytics.workers.interval": "200ms"}) as (client, info):
        out["cluster_id"] = cid = info["cluster_id"]
        out["workers"] = set(client.scheduler_info()["workers"])
        held = client.submit(hold)
        held.result()
        holder = next(iter(client.who_has(held)[held.key]))
        out["holder"] = holder

        def holding():
            dal.flush(client)
            rows = dal.list_worker_samples(cid, worker=holder, store=store)
            return [r for r in rows if (r["managed"] or 0) >= HELD]
        out["holding"] = _wait_for(holding, what="a sample with the held bytes managed")
        busy = client.map(nap, range(6))

        def processing():
            rows = dal.list_worker_samples(cid, store=store)
            return [r for r in rows if (r["processing"] or 0) > 0]
        out["busy"] = _wait_for(processing, what="a sample with tasks processing")
        client.gather(busy)
        del held
        out["status"] = dal.flush(client)
        out["rows"] = dal.list_worker_samples(cid, store=store)
    yield out
    close_readers()


def test_samples_hold_each_workers_figures(sampled):
    rows = sampled["rows"]
    assert {r["worker"] for r in rows} == sampled["workers"]
    for r in rows:
        assert r["nthreads"] == 1
        assert r["memory_limit"] > 0
        assert r["host"] and r["host"] in r["worker"]
        assert r["name"] is not None
        assert r["managed"] >= 0 and r["unmanaged"] >= 0 and r["spilled"] == 0
        assert r["cpu"] is None or 0 <= r["cpu"] <= 100 * os.cpu_count() * 2
        assert r["processing"] >= 0
    # Each sample has one row per worker, at one time.
    by_time: dict = {}
    for r in rows:
        by_time.setdefault(r["time"], set()).add(r["worker"])
    assert all(len(ws) <= 2 for ws in by_time.values())
    assert sampled["status"]["worker_samples"] >= 3


def test_managed_memory_grows_while_data_is_held(sampled):
    held = sampled["holding"][0]
    assert held["worker"] == sampled["holder"]
    assert held["managed"] >= HELD
    before = [r for r in sampled["rows"] if r["worker"] == sampled["holder"] and r["time"] < held["time"]]
    assert before and min(r["managed"] for r in before) < HELD


def test_processing_counts_tasks_during_a_busy_computation(sampled):
    assert max(r["processing"] for r in sampled["busy"]) >= 1


def test_workers_already_there_are_recorded_as_joined(sampled):
    joined = _events(sampled["store"], sampled["cluster_id"], "worker-joined")
    assert {e["msg"]["worker"] for e in joined} == sampled["workers"]
    assert all(e["msg"]["already_running"] for e in joined)


def test_interval_is_validated_with_a_clear_error():
    assert resolve()["workers_interval"] == 5.0
    assert resolve()["workers_transmit"] is True
    assert resolve({"analytics.workers.interval": "250ms"})["workers_interval"] == 0.25
    for bad in ("soon", "0s", -1):
        with pytest.raises(ConfigError, match=r"analytics\.workers\.interval = .* positive duration"):
            resolve({"analytics.workers.interval": bad})
    with pytest.raises(ConfigError, match=r"analytics\.workers\.transmit"):
        resolve({"analytics.workers.transmit": "maybe"})
    # The lifecycle topics are recorded by default.
    assert {"worker-joined", "worker-left"} <= set(resolve()["events_allow"])


def test_transmit_off_records_no_worker(tmp_path):
    store = str(tmp_path / "analytics.db")
    with recorded_cluster(store, n_workers=1, config={"analytics.workers.transmit": False,
                                                      "analytics.workers.interval": "100ms"}) as (client, info):
        assert client.submit(nap, 1).result() == 1
        status = dal.flush(client)
        cid = info["cluster_id"]
    assert status["worker_samples"] == 0
    assert dal.list_worker_samples(cid, store=store) == []
    assert _events(store, cid, "worker-joined") == []
    close_readers()


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory):
    """Worker processes with nannies: one closed by a scale-down, one SIGKILLed, one
    killed by its nanny for going over its memory limit; then the cluster closes."""
    store = str(tmp_path_factory.mktemp("lifecycle") / "analytics.db")
    out: dict = {"store": store}
    config = {**FAST, "analytics.workers.interval": "500ms",
              # The hog's task errs at its first killed worker instead of killing three.
              "distributed.scheduler.allowed-failures": 0}
    with dask.config.set(config):
        with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="500MB",
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            client.wait_for_workers(2)
            out["cluster_id"] = cid = dal.register(client, store=store)["cluster_id"]
            first = set(client.scheduler_info()["workers"])
            cluster.scale(1)
            _wait_for(lambda: len(client.scheduler_info()["workers"]) == 1, what="the scale-down")
            (kept,) = client.scheduler_info()["workers"]
            out["closed"] = (first - {kept}).pop()

            out["killed"] = kept
            pid = client.run(os.getpid, workers=[kept])[kept]
            os.kill(pid, signal.SIGKILL)
            _wait_for(lambda: set(client.scheduler_info()["workers"]) - {kept}, what="the nanny's restart")
            (restarted,) = client.scheduler_info()["workers"]
            out["hogged"] = restarted
            with pytest.raises(Exception, match="KilledWorker|died"):
                client.submit(hog, 1, pure=False).result()
            _wait_for(lambda: set(client.scheduler_info()["workers"]) - {restarted}, what="the restart after the hog")
            (out["last"],) = client.scheduler_info()["workers"]

            def recorded():
                dal.flush(client)
                left = _events(store, cid, "worker-left")
                return left if len(left) >= 3 else None
            _wait_for(recorded, what="three worker-left events")
            out["samples"] = dal.list_worker_samples(cid, store=store)
    out["joined"] = _events(store, cid, "worker-joined")
    out["left"] = _events(store, cid, "worker-left")
    yield out
    close_readers()


def _left(lifecycle, address):
    found = [e["msg"] for e in lifecycle["left"] if e["msg"]["worker"] == address]
    assert len(found) == 1, lifecycle["left"]
    return found[0]


def test_a_scaled_down_worker_left_closed(lifecycle):
    msg = _left(lifecycle, lifecycle["closed"])
    assert msg["reason"] == "closed" and msg["died"] is False, msg
    assert msg["stimulus_id"] and msg["name"] is not None and msg["time"] > 0


def test_a_killed_worker_died(lifecycle):
    msg = _left(lifecycle, lifecycle["killed"])
    assert msg["reason"] == "died" and msg["died"] is True, msg
    assert "died" in msg["why"]


def test_a_worker_over_its_memory_limit_was_killed_by_its_nanny(lifecycle):
    msg = _left(lifecycle, lifecycle["hogged"])
    assert msg["reason"] == "memory" and msg["died"] is True, msg
    assert msg["rss"] > 0.9 * 500e6
    assert msg["processing"] == 1  # the hog was running on it
    # Its samples carry the limit it went over.
    rows = [r for r in lifecycle["samples"] if r["worker"] == lifecycle["hogged"]]
    assert rows and all(r["memory_limit"] == 500_000_000 for r in rows)


def test_restarted_workers_joined_and_the_last_one_left_with_the_cluster(lifecycle):
    joined = {e["msg"]["worker"]: e["msg"] for e in lifecycle["joined"]}
    assert {lifecycle["hogged"], lifecycle["last"]} <= set(joined)
    assert not joined[lifecycle["last"]].get("already_running")
    assert joined[lifecycle["closed"]]["already_running"]
    last = _left(lifecycle, lifecycle["last"])
    assert last["reason"] == "closed", last
    times = [e["time"] for e in lifecycle["left"]]
    assert times == sorted(times)
