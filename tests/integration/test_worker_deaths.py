"""Issue 44, item 5: only a task a dead worker was running counts as WorkerDied; the
tasks that only waited in its queue lost nothing but their place."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.collect.lost import WORKER_DIED, LostTasks, running

from ..cluster_helpers import recorded_cluster
from ..waiting import wait_for

# Every sequence on both sources of computations (collect/sources.py).
pytestmark = pytest.mark.usefixtures("both_sources")


# --- what the scheduler knows of a departed worker, on stand-ins ----------------------
class _Task:
    """A scheduler TaskState's part that matters here (hashed by identity, as Dask's)."""

    def __init__(self, key: str, priority: tuple) -> None:
        self.key, self.priority = key, priority


def _task(key: str, priority: tuple) -> _Task:
    return _Task(key, priority)


def _worker(nthreads: int, executing=(), long_running=()) -> SimpleNamespace:
    return SimpleNamespace(
        nthreads=nthreads, executing={ts: 1.0 for ts in executing}, long_running=set(long_running)
    )


def test_the_tasks_its_last_heartbeat_said_it_ran_and_no_queued_one():
    tasks = {k: _task(k, (0, i)) for i, k in enumerate("abcd")}
    # Its heartbeat said it ran "c"; its one thread was busy: the others waited.
    ws = _worker(1, executing=[tasks["c"]])
    assert running(ws, list(tasks), tasks) == ["c"]
    # A seceded task gave its thread back: the worker took the next by priority.
    ws = _worker(1, executing=[tasks["c"]], long_running=[tasks["c"]])
    assert running(ws, list(tasks), tasks) == ["c", "a"]


def test_a_task_that_killed_its_worker_before_any_heartbeat_counts():
    """The worker's heartbeat named nothing it ran (it died as the task started): each
    free thread went to the task the worker would have started, by priority."""
    tasks = {"late": _task("late", (0, 5)), "first": _task("first", (0, 1))}
    assert running(_worker(1), ["late", "first"], tasks) == ["first"]
    assert sorted(running(_worker(2), ["late", "first"], tasks)) == ["first", "late"]
    # A finished task the heartbeat still named frees its thread; one not there any more
    # (forgotten) is nobody's.
    stale = _task("done", (0, 0))
    assert running(_worker(1, executing=[stale]), ["late", "first", "gone"], tasks) == ["first"]
    # A worker the plugin never saw join: nothing tells what it ran.
    assert running(None, ["first"], tasks) == []


def test_a_departure_remembers_only_the_running_tasks():
    tasks = {k: _task(k, (0, i)) for i, k in enumerate("abc")}
    lost = LostTasks()
    lost.workers["w"] = _worker(1, executing=[tasks["b"]])
    msg = {"worker": "w", "processing-tasks": ["a", "b", "c"]}
    lost.departed(msg, 1.0, closing=False, tasks=tasks)
    assert {k: e.kind for k, e in lost.keys.items()} == {"b": WORKER_DIED}
    (departure,) = {e.departure for e in lost.keys.values()}
    assert departure.processing == 1


# --- a real worker process killed with one task running and others queued on it ------
def gate(i: int, where: str) -> int:
    """Say it started, then wait for the test to let it finish."""
    Path(where, f"started-{i}-{os.getpid()}").touch()
    deadline = time.monotonic() + 300
    while not Path(where, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return i


def _started(where: Path) -> list[tuple[int, int]]:
    return [
        (int(i), int(pid)) for i, pid in (p.name.split("-")[1:] for p in where.glob("started-*"))
    ]


def _executing(dask_scheduler) -> list[str]:
    return [str(ts.key) for ws in dask_scheduler.workers.values() for ts in ws.executing]


def test_a_killed_worker_counts_the_task_it_ran_not_those_queued_on_it(tmp_path, sqlite_url):
    where = tmp_path / "gate"
    where.mkdir()
    # One thread, and every task sent to the worker at once (no queue on the scheduler):
    # one runs, three wait in the worker's own queue, all four "processing" there.
    config = {"distributed.scheduler.worker-saturation": float("inf")}
    with recorded_cluster(
        sqlite_url, processes=True, n_workers=1, threads_per_worker=1, config=config
    ) as (client, info):
        futures = client.map(gate, range(4), where=str(where), pure=False)
        ((i, pid),) = wait_for(lambda: _started(where), what="a task to start")
        ran = futures[i].key
        wait_for(
            lambda: [len(v) for v in client.processing().values()] == [4],
            what="the four tasks processing on the worker",
        )
        # Dask's processing set says nothing of which runs: the worker's heartbeat does.
        wait_for(
            lambda: client.run_on_scheduler(_executing) == [str(ran)],
            what="the worker's heartbeat to name the task it runs",
        )
        assert pid in client.run(os.getpid).values()
        os.kill(pid, signal.SIGKILL)
        # Its nanny starts a new worker; Dask runs all four again there.
        wait_for(lambda: any(p != pid for _, p in _started(where)), what="the tasks to run again")
        (where / "go").touch()
        assert sorted(client.gather(futures)) == [0, 1, 2, 3]
        dal.flush(client)
        cluster_id = info["cluster_id"]
    died = [
        r
        for r in dal.list_exceptions(cluster_id, store=sqlite_url)
        if r["exc_type"] == "WorkerDied"
    ]
    assert [(r["count"], r["example_key"]) for r in died] == [(1, str(ran))]
    (event,) = dal.list_events(cluster_id, topic="analytics-worker-lost", store=sqlite_url)
    assert event["msg"]["processing"] == 1
