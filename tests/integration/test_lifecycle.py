"""A cluster's life: started by a preload, cancelled work, idle shutdown, read after restart,
a scheduler killed without closing (lost)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import dask
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab import cli
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.messages import HEARTBEAT, LOST_AFTER_HEARTBEATS
from dask_analytics_lab.store import queries

from ..cluster_helpers import FAST, preloaded_scheduler, recorded_cluster
from ..waiting import wait_for


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


def slow(x):
    time.sleep(5)  # the task under test: still running when it is cancelled or its scheduler dies
    return x


def test_cancelled_computation(store_url):
    with recorded_cluster(store_url) as (client, info):
        futures = client.map(slow, range(4))
        wait_for(lambda: any(client.processing().values()), what="the tasks to start")
        client.cancel(futures)
        wait_for(
            lambda: client.run_on_scheduler(lambda dask_scheduler: not dask_scheduler.tasks),
            what="the scheduler to forget the cancelled tasks",
        )
        dal.flush(client)
        cluster_id = info["cluster_id"]
    (comp,) = dal.list_computations(cluster_id, store=store_url)
    assert comp["state"] == "cancelled"


def test_idle_timeout_closes_scheduler_and_says_so(store_url):
    # Counted from the end of register (the plugin's start): 3 s leaves a loaded machine
    # time to submit before it runs out.
    config = {
        "analytics.idle.timeout": "3s",
        # LocalCluster.close() asks the scheduler, gone by then, to retire its workers:
        # Dask waits its connect timeout (30 s by default) before it gives up.
        "distributed.comm.timeouts.connect": "2s",
    }
    with dask.config.set({**FAST, **config}):
        cluster = LocalCluster(n_workers=1, processes=False, dashboard_address=":0")
        client = Client(cluster)
        try:
            info = dal.register(client, store=store_url)
            # The scheduler's own idle timeout (Scheduler.check_idle) does the closing.
            assert cluster.scheduler.idle_timeout == 3.0
            client.submit(sum, [1]).result()
            wait_for(
                lambda: cluster.scheduler.status.name in ("closed", "closing"),
                timeout=20,
                what="the scheduler to close itself",
                every=0.2,
            )
        finally:
            client.close()
            cluster.close()
    cluster_row = dal.get_cluster(info["cluster_id"], store=store_url)
    assert cluster_row["idle_shutdown"] and cluster_row["stop_reason"] == "idle-timeout"
    assert cluster_row["status"] == "stopped" and cluster_row["ended"] == cluster_row["stopped"]
    # its workers were gone when it closed; it still says how big it was
    assert cluster_row["peak_workers"] == 1 and cluster_row["peak_threads"] >= 1
    topics = [e["topic"] for e in dal.list_events(info["cluster_id"], store=store_url)]
    assert "analytics-idle-shutdown" in topics


def test_another_process_reads_the_same_file_after_restart(tmp_path):
    url = "sqlite:///" + str(tmp_path / "kept.db")
    with recorded_cluster(url) as (client, info):
        client.submit(sum, [1, 2]).result()
        dal.flush(client)
    close_readers()
    script = (
        "import dask_analytics_lab as dal, sys;"
        f"cs = dal.list_computations({info['cluster_id']!r}, store={url!r});"
        "print(len(cs), cs[0]['state'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "finished"]


def test_scheduler_preload(tmp_path):
    url = "sqlite:///" + str(tmp_path / "preload.db")
    with preloaded_scheduler(tmp_path, url) as (_, scheduler_file):
        with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            assert client.submit(sum, [3, 4]).result() == 7
            status = dal.flush(client)
            assert status["flushed"] and status["store"] == url
            cluster_id = status["cluster_id"]
    assert dal.get_cluster(cluster_id, store=url)["address"].startswith("tcp://127.0.0.1")
    assert len(dal.list_computations(cluster_id, store=url)) == 1


def test_a_killed_scheduler_reads_lost(tmp_path, monkeypatch, capsys):
    """kill -9: no cluster_stop ever comes.  The cluster reads live until N heartbeats
    went unheard, then lost, ended when it was last seen, and so does the computation
    that was running on it; the API and the CLI say the same."""
    url = "sqlite:///" + str(tmp_path / "killed.db")
    with preloaded_scheduler(tmp_path, url) as (sched, scheduler_file):
        with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            _running = client.submit(
                slow, 1, pure=False
            )  # held: still running when the scheduler dies
            wait_for(
                lambda: any(client.processing().values()), timeout=30, what="the task to start"
            )
            status = dal.flush(client)
            assert status["flushed"]
            cluster_id = status["cluster_id"]
            os.kill(sched.pid, signal.SIGKILL)
            sched.wait(timeout=30)
    row = dal.get_cluster(cluster_id, store=url)
    (comp,) = dal.list_computations(cluster_id, store=url)
    assert row["stopped"] is None
    if time.time() - row["last_seen"] < HEARTBEAT:  # read at once, as it should be: not lost yet
        assert row["status"] == "live" and row["ended"] is None
        assert comp["state"] == "running"

    later = row["last_seen"] + HEARTBEAT * LOST_AFTER_HEARTBEATS + 1
    monkeypatch.setattr(queries, "time", type("Clock", (), {"time": staticmethod(lambda: later)}))
    row = dal.get_cluster(cluster_id, store=url)
    assert (row["status"], row["ended"]) == ("lost", row["last_seen"])
    assert row["duration"] == row["last_seen"] - row["started"]
    assert row["peak_workers"] == 1
    (comp,) = dal.list_computations(cluster_id, store=url)
    assert (comp["state"], comp["stop"]) == ("lost", row["last_seen"])
    assert dal.get_computation(comp["computation_id"], store=url)["state"] == "lost"
    assert cli.main(["--store", url, "clusters"]) == 0
    # Lists print ids shortened as git does.
    (line,) = [
        x
        for x in capsys.readouterr().out.splitlines()
        if x.split() and len(x.split()[0]) >= 18 and cluster_id.startswith(x.split()[0])
    ]
    assert " lost " in line
