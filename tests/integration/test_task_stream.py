"""Each computation's task stream (collect/task_stream.py): rows per task on a real
LocalCluster, only its own tasks per computation, bins past the limit that still add up
to every task and its compute time, and bounded memory."""

from __future__ import annotations

import random
import time

import pytest
from distributed import wait

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.buffer import Later
from dask_analytics_lab.collect.task_stream import LATE_ROWS, Bins, TaskStreamRecorder, bin_rows
from dask_analytics_lab.config import ConfigError, resolve

from ..cluster_helpers import recorded_cluster
from ..waiting import wait_for


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


def inc(x):
    return x + 1


def busy(x, seconds=0.002):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return x


def _comps(cluster_id, store):
    """Computations oldest first."""
    return dal.list_computations(cluster_id, store=store)[::-1]


def _done_comps(client, info, store, n):
    cid = info["cluster_id"]

    def ready():
        dal.flush(client)
        comps = _comps(cid, store)
        return comps if len(comps) >= n and all(c["state"] != "running" for c in comps) else None

    return wait_for(ready)


# --- on a real cluster ---------------------------------------------------------------
def test_one_row_per_task_with_worker_thread_and_window(sqlite_url):
    with recorded_cluster(sqlite_url) as (client, info):
        futures = client.map(busy, range(40))
        wait(futures)
        workers = set(client.scheduler_info()["workers"])
        (comp,) = _done_comps(client, info, sqlite_url, 1)
        rows = dal.list_task_stream(comp["computation_id"], store=sqlite_url)
    assert len(rows) == 40
    assert {r["worker"] for r in rows} <= workers and len({r["worker"] for r in rows}) == 2
    for r in rows:
        assert r["prefix"] == "busy" and r["task_group"].startswith("busy")
        assert r["state"] == "memory" and r["n_tasks"] == 1 and not r["binned"]
        assert isinstance(r["thread"], int)
        assert comp["start"] - 1 <= r["start"] < r["stop"] <= comp["stop"] + 1
    # One thread per worker here: each worker's rows never overlap.
    for w in workers:
        mine = sorted((r["start"], r["stop"]) for r in rows if r["worker"] == w)
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(mine, mine[1:]))


def test_back_to_back_computations_each_get_only_their_own_tasks(sqlite_url):
    with recorded_cluster(sqlite_url) as (client, info):
        first = client.map(inc, range(30))
        wait(first)
        second = client.map(busy, range(20))
        wait(second)
        comps = _done_comps(client, info, sqlite_url, 2)
        streams = [dal.list_task_stream(c["computation_id"], store=sqlite_url) for c in comps]
    assert [len(s) for s in streams] == [30, 20]
    assert {r["prefix"] for r in streams[0]} == {"inc"}
    assert {r["prefix"] for r in streams[1]} == {"busy"}


def test_erred_tasks_are_in_the_stream(sqlite_url):
    def fail(x):
        raise ValueError(x)

    with recorded_cluster(sqlite_url) as (client, info):
        wait(client.map(fail, range(5)))
        (comp,) = _done_comps(client, info, sqlite_url, 1)
        rows = wait_for(lambda: dal.list_task_stream(comp["computation_id"], store=sqlite_url))
    assert len(rows) == 5 and {r["state"] for r in rows} == {"erred"}


def test_past_the_limit_the_stream_is_binned_and_adds_up(sqlite_url):
    n = 400
    config = {"analytics.task-stream.max-tasks": 50, "analytics.task-stream.max-bins": 40}
    with recorded_cluster(sqlite_url, config=config) as (client, info):
        small = client.map(inc, range(20))
        wait(small)
        futures = client.map(busy, range(n))
        wait(futures)
        small_comp, comp = _done_comps(client, info, sqlite_url, 2)
        groups = wait_for(lambda: dal.list_task_groups(comp["computation_id"], store=sqlite_url))
        rows = dal.list_task_stream(comp["computation_id"], store=sqlite_url)
        small_rows = dal.list_task_stream(small_comp["computation_id"], store=sqlite_url)
        status = dal.status(client)
    assert len(small_rows) == 20 and not any(r["binned"] for r in small_rows)
    assert rows and all(r["binned"] for r in rows)
    assert len(rows) <= 40 + 2  # bounded: max-bins (one bin per worker and prefix at worst)
    assert sum(r["n_tasks"] for r in rows) == n
    compute = sum(g["compute"] for g in groups)
    # The bins cover the same executions the task groups' compute time sums: what is
    # compared is coverage (every task's interval, split across bins), not speed: the
    # store keeps figures to the microsecond, and one task missing would be 2 ms off.
    assert sum(r["busy"] for r in rows) == pytest.approx(compute, abs=n * 1e-6)
    widths = {round(r["stop"] - r["start"], 9) for r in rows}
    assert len(widths) == 1  # one width for a computation's bins
    for r in rows:
        assert r["thread"] is None and r["prefix"] == "busy"
        assert 0 <= r["busy"] <= (r["stop"] - r["start"]) * 1 + 1e-9  # one thread per worker
    assert status["task_stream_tasks"] == n + 20 and status["task_stream_dropped"] == 0


# --- the recorder alone ---------------------------------------------------------------
def _task(rec, cid, i, *, worker=None, start=None, length=0.01):
    start = 1.7e9 + i * 0.001 if start is None else start
    rec.record(
        cid,
        worker or f"tcp://w{i % 4}",
        140000 + i % 2,
        f"p{i % 3}",
        f"p{i % 3}-abc",
        "memory",
        [
            {"action": "transfer", "start": start - 0.5, "stop": start},
            {"action": "compute", "start": start, "stop": start + length},
        ],
    )


def test_the_recorder_keeps_rows_then_bins_and_stays_bounded():
    out = []
    rec = TaskStreamRecorder(lambda kind, data: out.append(data), max_tasks=100, max_bins=50)
    for i in range(1_000_000):
        _task(rec, "big", i)
        if i % 50_000 == 0:
            rec.tick("big", float(i))  # i: a clock far enough apart for every replace
            assert rec.held_bins() <= 50 + 12 and rec.pending <= 100_001
    rec.tick("big", 2e6, force=True)
    last_replace = max(i for i, d in enumerate(out) if d.get("replace"))
    rows = out[last_replace]["rows"].build()  # as the shipper's writer thread does
    assert sum(r["n_tasks"] for r in rows) == 1_000_000
    assert sum(r["busy"] for r in rows) == pytest.approx(1_000_000 * 0.01)
    assert len(rows) <= 50 + 12
    assert all(len(d["rows"]) <= 5000 for d in out)
    # Transfers are not compute: only the compute interval is a row.
    assert rec.recorded == 1_000_000


def test_a_replace_sends_the_bins_as_they_were_and_its_rows_are_made_later():
    out = []
    rec = TaskStreamRecorder(lambda kind, data: out.append(data), max_tasks=10, max_bins=50)
    for i in range(20):
        _task(rec, "a", i)
    rec.tick("a", 100.0)  # past max_tasks: bins from now on, sent as a replace
    (replace,) = [d for d in out if d.get("replace")]
    rows = replace["rows"]
    # Not made on the event loop: the shipper's writer makes them (buffer.built).
    assert isinstance(rows, Later) and len(rows) == len(rec._streams["a"].bins)
    for i in range(20, 60):
        _task(rec, "a", i)  # the same bins' cells grow in place
    rec.tick("a", 101.0)  # within replace_every: nothing more sent
    assert [d for d in out if d.get("replace")] == [replace]
    made = rows.build()
    assert sum(r["n_tasks"] for r in made) == 20  # the bins as they were when sent
    assert sum(r["busy"] for r in made) == pytest.approx(20 * 0.01)
    assert [r["start"] for r in made] == sorted(r["start"] for r in made)
    rec.tick("a", 200.0, force=True)
    last = [d for d in out if d.get("replace")][-1]["rows"].build()
    assert sum(r["n_tasks"] for r in last) == 60


def test_raw_rows_are_sent_incrementally_and_old_computations_are_sealed():
    out = []
    rec = TaskStreamRecorder(lambda kind, data: out.append(data), max_tasks=100, max_bins=50)
    for i in range(30):
        _task(rec, "a", i)
    rec.tick("a", 1.0)
    rec.tick("a", 2.0)  # nothing new: nothing sent
    assert [len(d["rows"]) for d in out] == [30] and not out[0].get("replace")
    assert out[0]["rows"][0]["thread"] == 140000 and out[0]["rows"][0]["task_group"] == "p0-abc"
    for i in range(30):
        _task(rec, "b", i)
    rec.tick("b", 3.0)  # "a" is no longer the newest: sealed, its bins let go
    assert rec.held_bins() == len(rec._streams["b"].bins)
    assert rec._streams["a"].sealed and rec._streams["a"].bins is None
    # A task that still reaches a sealed computation (a lost result recomputed) is a row.
    _task(rec, "a", 99)
    rec.tick("b", 4.0)
    assert out[-1]["computation_id"] == "a" and len(out[-1]["rows"]) == 1
    rec.forget({"a"})
    assert "a" not in rec._streams
    rec.restart(5.0)
    assert rec.pending == 0 and not rec._streams


def test_a_sealed_binned_computation_takes_a_bounded_number_of_late_rows():
    out = []
    rec = TaskStreamRecorder(lambda kind, data: out.append(data), max_tasks=10, max_bins=50)
    for i in range(20):
        _task(rec, "a", i)
    rec.tick("b", 1.0)  # sealed at once, binned
    for i in range(LATE_ROWS + 5):
        _task(rec, "a", i)
    rec.tick("b", 2.0)
    assert rec.dropped == 5
    assert sum(len(d["rows"]) for d in out if not d.get("replace")) == LATE_ROWS


def test_bins_split_a_task_across_bins_and_double_when_too_many():
    b = Bins(1000, width=1.0)
    b.add("w", "p", 10.5, 12.25)
    rows = b.rows()
    assert [(r["start"], r["n_tasks"], r["busy"]) for r in rows] == [
        (10.0, 1, 0.5),
        (11.0, 0, 1.0),
        (12.0, 0, 0.25),
    ]
    b = Bins(10, width=1.0)
    for i in range(100):
        b.add("w", "p", i + 0.1, i + 0.6)
    assert len(b) <= 10 and b.width == 16.0
    assert sum(r["n_tasks"] for r in b.rows()) == 100
    assert sum(r["busy"] for r in b.rows()) == pytest.approx(50.0)
    # One very long task does not loop over a bin per width: the width grows first.
    b = Bins(10, width=1.0)
    b.add("w", "p", 0.0, 1e6)
    assert len(b) <= 11 and sum(r["busy"] for r in b.rows()) == pytest.approx(1e6)


def test_bin_rows_rebins_stored_rows_raw_or_binned():
    rng = random.Random(1)
    raw = [
        {"start": 1.7e9 + rng.random() * 60, "worker": f"w{i % 3}", "prefix": "p", "n_tasks": 1}
        for i in range(5000)
    ]
    for r in raw:
        r["stop"] = r["start"] + 0.05
    once = bin_rows(raw, 100)
    twice = bin_rows(once, 20)
    for rows in (once, twice):
        assert sum(r["n_tasks"] for r in rows) == 5000
        assert sum(r["busy"] for r in rows) == pytest.approx(250.0)
    assert len(twice) <= 20


@pytest.mark.parametrize(
    "key, value", [("max-tasks", 0), ("max-bins", "many"), ("transmit", "perhaps")]
)
def test_task_stream_settings_are_validated(key, value):
    with pytest.raises(ConfigError, match=f"analytics.task-stream.{key}"):
        resolve({f"analytics.task-stream.{key}": value})


def test_task_stream_off_records_nothing(sqlite_url):
    with recorded_cluster(sqlite_url, config={"analytics.task-stream.transmit": False}) as (
        client,
        info,
    ):
        wait(client.map(inc, range(10)))
        (comp,) = _done_comps(client, info, sqlite_url, 1)
        assert dal.list_task_stream(comp["computation_id"], store=sqlite_url) == []
        assert dal.status(client)["task_stream_tasks"] == 0
