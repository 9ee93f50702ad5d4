"""Issue 18: the record survives how programs end.

Each test runs a real program (a script in its own interpreter, a `dask scheduler`
process) that ends the way users' programs end (no close, still holding futures,
Client garbage-collected, SIGTERM, SIGKILL) and checks the stored record against what
Dask itself reported before the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from distributed import Client, wait

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers

from ..cluster_helpers import FAST, preloaded_scheduler, recorded_cluster
from ..waiting import wait_for

# Every sequence on both sources of computations (collect/sources.py).
pytestmark = pytest.mark.usefixtures("both_sources")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


# What every script starts with: a cluster of its own, recording into argv[1]; what
# Dask reported goes to stdout as one JSON line, the last thing the script does.
PRELUDE = """
import json, sys
import dask
from distributed import Client, wait
import dask_analytics_lab as dal

def inc(i):
    if i % 10 == 7:
        raise ValueError(f"bad {i}")
    return i + 1

def double(i):
    return 2 * i
"""


def run_script(tmp_path: Path, body: str, store: str, processes: bool) -> dict:
    """Run PRELUDE + body as `python script.py STORE PROCESSES`; what it printed last."""
    script = tmp_path / "script.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        **{"DASK_" + k.upper().replace(".", "__").replace("-", "_"): v for k, v in FAST.items()},
    }
    out = subprocess.run(
        [sys.executable, str(script), store, "1" if processes else "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # Nothing of ours may fail while the program ends.
    assert "Plugin call failed" not in out.stderr and "dask-analytics" not in out.stderr, (
        out.stderr[-3000:]
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def stored(store: str) -> tuple[dict, list[dict], list[dict]]:
    """The one cluster of the store, its computations oldest first, its failures."""
    (cluster,) = dal.list_clusters(store=store)
    comps = sorted(
        dal.list_computations(cluster["cluster_id"], store=store), key=lambda c: c["start"]
    )
    return cluster, comps, dal.list_exceptions(cluster["cluster_id"], store=store, limit=None)


def assert_as_dask_said(comp: dict, said: dict) -> None:
    assert {k: comp[k] for k in said} == said, comp


# --- a script that ends without client.close() ------------------------------------
NO_CLOSE = """
if __name__ == "__main__":
    client = Client(n_workers=2, threads_per_worker=1, processes=sys.argv[2] == "1", dashboard_address=":0")
    dal.register(client, store=sys.argv[1])
    first = client.gather(client.map(double, range(40)))
    second = client.gather(client.map(double, range(100, 130)))
    print(json.dumps({"first": len(first), "second": len(second)}))
"""


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_script_that_never_closes_leaves_a_stopped_cluster(tmp_path, sqlite_url, processes):
    """The README's quick start never closes its client: at interpreter exit the plugin's
    close runs after the executors are gone, and must still write everything."""
    said = run_script(tmp_path, NO_CLOSE, sqlite_url, processes)
    cluster, comps, failures = stored(sqlite_url)
    assert cluster["status"] == "stopped" and cluster["stopped"] is not None
    assert cluster["stop_reason"] == "closed"
    assert [c["state"] for c in comps] == ["finished", "finished"]
    assert_as_dask_said(
        comps[0], {"n_tasks": said["first"], "n_done": said["first"], "n_erred": 0, "n_not_run": 0}
    )
    assert_as_dask_said(
        comps[1],
        {"n_tasks": said["second"], "n_done": said["second"], "n_erred": 0, "n_not_run": 0},
    )
    assert all(c["stop"] <= cluster["stopped"] for c in comps)
    assert failures == []


def test_the_same_script_twice_records_two_stopped_clusters(tmp_path, sqlite_url):
    for _ in range(2):
        run_script(tmp_path, NO_CLOSE, sqlite_url, False)
    clusters = dal.list_clusters(store=sqlite_url)
    assert [c["status"] for c in clusters] == ["stopped", "stopped"]
    for c in clusters:
        assert [x["state"] for x in dal.list_computations(c["cluster_id"], store=sqlite_url)] == [
            "finished"
        ] * 2


# --- a script that ends while it still holds futures, some failed -------------------
HOLDING = """
if __name__ == "__main__":
    client = Client(n_workers=2, threads_per_worker=1, processes=sys.argv[2] == "1", dashboard_address=":0")
    dal.register(client, store=sys.argv[1])
    futures = client.map(inc, range(100))
    wait(futures)
    statuses = [f.status for f in futures]
    print(json.dumps({"n_tasks": len(futures), "n_done": statuses.count("finished"),
                      "n_erred": statuses.count("error")}))
"""


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_script_that_ends_holding_futures_keeps_its_record(tmp_path, sqlite_url, processes):
    """At exit the workers close while the client still holds 100 results: Dask reads
    that as data lost; nothing is computed again, so it is no failure and the finished
    work stays finished."""
    said = run_script(tmp_path, HOLDING, sqlite_url, processes)
    assert said == {"n_tasks": 100, "n_done": 90, "n_erred": 10}
    cluster, (comp,), failures = stored(sqlite_url)
    assert cluster["status"] == "stopped"
    assert comp["state"] == "erred"  # not "lost", not "running"
    assert_as_dask_said(comp, {**said, "n_not_run": 0})
    assert [(f["exc_type"], f["count"]) for f in failures] == [("ValueError", 10)]
    events = [e["topic"] for e in dal.list_events(cluster["cluster_id"], store=sqlite_url)]
    assert "analytics-worker-lost" not in events


def test_client_garbage_collected_without_close(tmp_path, sqlite_url):
    """`Client.__del__` closes the client and the cluster it made."""
    said = run_script(
        tmp_path,
        """
        import gc

        def work():
            client = Client(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
            dal.register(client, store=sys.argv[1])
            return len(client.gather(client.map(double, range(20))))

        if __name__ == "__main__":
            n = work()
            gc.collect()
            print(json.dumps({"n": n}))
    """,
        sqlite_url,
        False,
    )
    cluster, (comp,), _ = stored(sqlite_url)
    assert cluster["status"] == "stopped"
    assert_as_dask_said(comp, {"state": "finished", "n_tasks": said["n"], "n_done": said["n"]})


def test_a_client_disconnecting_leaves_its_computations_as_they_were(sqlite_url):
    """A client that goes away releases what it held: that is no failure and no loss."""
    with recorded_cluster(sqlite_url) as (client, info):
        with Client(client.scheduler.address) as other:
            futures = other.map(lambda i: i + 1 if i % 10 != 7 else 1 / 0, range(50))
            wait(futures)
            said = [f.status for f in futures]
        dal.flush(client)
        (comp,) = dal.list_computations(info["cluster_id"], store=sqlite_url)
        assert (comp["state"], comp["n_done"], comp["n_erred"]) == (
            "erred",
            said.count("finished"),
            said.count("error"),
        )
        assert [
            f["exc_type"] for f in dal.list_exceptions(info["cluster_id"], store=sqlite_url)
        ] == ["ZeroDivisionError"]


# --- a `dask scheduler` process ended by a signal -----------------------------------
def test_sigterm_to_the_scheduler_stops_the_cluster(tmp_path, sqlite_url):
    with preloaded_scheduler(tmp_path, sqlite_url) as (sched, scheduler_file):
        with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            futures = client.map(lambda i: i * 3, range(30))  # held when the scheduler goes
            wait(futures)
            cluster_id = client.scheduler_info()["id"]
            sched.send_signal(signal.SIGTERM)
            assert sched.wait(timeout=60) == 0
    cluster = dal.get_cluster(cluster_id, store=sqlite_url)
    assert cluster["status"] == "stopped" and cluster["stopped"] is not None
    (comp,) = dal.list_computations(cluster_id, store=sqlite_url)
    assert_as_dask_said(comp, {"state": "finished", "n_tasks": 30, "n_done": 30, "n_erred": 0})
    assert dal.list_exceptions(cluster_id, store=sqlite_url) == []


def test_a_killed_scheduler_reads_lost_within_three_heartbeats(tmp_path, sqlite_url):
    """kill -9: nothing can be written, so the record is what was heard last; readers
    see the cluster lost once three heartbeats went unheard (no clock is faked here),
    which is within 10 s of its death (issue 44, item 5)."""
    from dask_analytics_lab.store.queries import lost_after

    with preloaded_scheduler(tmp_path, sqlite_url) as (sched, scheduler_file):
        with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            assert client.submit(sum, [1, 2], pure=False).result() == 3
            cluster_id = dal.flush(client)["cluster_id"]
            # Idle now: only heartbeats keep it live.
            seen = dal.get_cluster(cluster_id, store=sqlite_url)["last_seen"]
            wait_for(
                lambda: dal.get_cluster(cluster_id, store=sqlite_url)["last_seen"] > seen,
                what="a heartbeat of the idle scheduler",
            )
            assert dal.get_cluster(cluster_id, store=sqlite_url)["status"] == "live"
            killed = time.time()
            os.kill(sched.pid, signal.SIGKILL)
            sched.wait(timeout=30)
    row = wait_for(
        lambda: (r := dal.get_cluster(cluster_id, store=sqlite_url))["status"] == "lost" and r,
        what="the killed scheduler's cluster to read lost",
    )
    assert row["ended"] == row["last_seen"] and row["stopped"] is None
    # Its last word came before the kill, and the rule calls it lost that long after:
    # every reader sees it lost within 10 s of the death.
    assert row["last_seen"] <= killed
    assert row["last_seen"] + lost_after(row["heartbeat"]) <= killed + 10.0
    (comp,) = dal.list_computations(cluster_id, store=sqlite_url)
    assert comp["state"] == "finished"  # it had finished before the kill


# --- cancelled while running ----------------------------------------------------------
# Set once the test is done with the running tasks: a cancelled task's thread cannot be
# stopped, and the cluster's close waits for it.
_CANCELLED = threading.Event()


def nap(seconds):
    _CANCELLED.wait(seconds)  # the task's work: still running when it is cancelled
    return seconds


def test_cancel_counts_running_tasks_as_cancelled_and_ends_the_wall_time(store_url):
    """Two quick tasks finish, two run when the user cancels, two never start: the running
    ones are cancelled (not "never ran"), and the computation ended at the cancel."""
    import time

    _CANCELLED.clear()
    # One task per thread at a time, so what the scheduler calls processing is running.
    with recorded_cluster(
        store_url, n_workers=2, config={"distributed.scheduler.worker-saturation": 1.0}
    ) as (client, info):
        try:
            futures = client.map(nap, [0.01, 0.01, 30, 30, 30, 30], pure=False)
            wait(futures[:2])
            wait_for(
                lambda: sum(map(len, client.processing().values())) == 2, what="two tasks running"
            )
            before = time.time()
            client.cancel(futures)
            after = time.time()
            wait_for(
                lambda: (
                    not client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
                ),
                what="the scheduler to forget the cancelled tasks",
            )
            dal.flush(client)
            (comp,) = dal.list_computations(info["cluster_id"], store=store_url)
        finally:
            _CANCELLED.set()
    assert comp["state"] == "cancelled"
    assert {k: comp[k] for k in ("n_tasks", "n_done", "n_cancelled", "n_not_run")} == {
        "n_tasks": 6,
        "n_done": 2,
        "n_cancelled": 2,
        "n_not_run": 2,
    }
    assert before <= comp["stop"] <= after + 1.0  # the cancel, not the quick tasks' end
    (group,) = dal.get_computation(comp["computation_id"], store=store_url)["groups"]
    assert (group["n_cancelled"], group["n_not_run"]) == (2, 2)


def test_releasing_results_a_closed_worker_took_leaves_the_computation_finished(sqlite_url):
    """A worker closes holding the only copies of held results; Dask wants them again but
    nothing may run them (they are pinned to that worker); then the client lets go of them.
    Nothing was cancelled and nothing failed: the computation stays finished."""
    with recorded_cluster(sqlite_url, n_workers=2) as (client, info):
        a = sorted(client.scheduler_info()["workers"])[0]
        futures = client.map(lambda i: i * 2, range(10), workers=[a], allow_other_workers=False)
        wait(futures)
        client.run_on_scheduler(
            lambda dask_scheduler, addr: dask_scheduler.close_worker(addr), addr=a
        )
        wait_for(lambda: a not in client.scheduler_info()["workers"], what="the worker to leave")
        del futures
        wait_for(
            lambda: not client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)),
            what="the scheduler to let go of the results",
        )
        dal.flush(client)
        (comp,) = dal.list_computations(info["cluster_id"], store=sqlite_url)
        assert (comp["state"], comp["n_done"], comp["n_cancelled"], comp["n_not_run"]) == (
            "finished",
            10,
            0,
            0,
        )
        assert dal.list_exceptions(info["cluster_id"], store=sqlite_url) == []


# --- the bookkeeping under it, in the order Dask gave it when a program ended -------
def test_a_lost_result_lost_again_while_recomputed_is_still_done_when_let_go():
    """Seen at interpreter exit (1 run in 10): the first worker closes holding results a
    client still wants, Dask starts them again on the second, which closes under them;
    the client then lets go.  The result was done once: letting go of it cancels no work."""
    from dask_analytics_lab.collect.lost import LostTasks

    lost = LostTasks()
    lost.departed({"worker": "a", "lost-computed-tasks": ["k"]}, 1.0, closing=False)
    assert lost.wanted_again("k")  # counted as done, waiting to be computed again
    assert lost.started("k") is not None
    lost.departed({"worker": "b", "processing-tasks": ["k"]}, 2.0, closing=True)
    assert not lost.wanted_again("k")  # already counted once
    assert lost.let_go("k")
    assert not lost.keys
