"""The store goes away and comes back: the scheduler never notices, nothing within the buffer is lost."""

from __future__ import annotations

import logging
import time

import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.buffer import DETAILS, SAMPLES, TIER_OF

from ..cluster_helpers import recorded_cluster


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


def _unreachable_sqlite(tmp_path):
    blocker = tmp_path / "not-yet-a-folder"
    blocker.write_text("a file where the store's folder should be")
    return blocker, "sqlite:///" + str(blocker / "analytics.db")


def _wait(predicate, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_store_down_then_up_loses_nothing(tmp_path, caplog):
    blocker, url = _unreachable_sqlite(tmp_path)
    caplog.set_level(logging.WARNING, logger="dask_analytics_lab")
    with pytest.warns(UserWarning, match="retry"):
        ctx = recorded_cluster(url)
        client, info = ctx.__enter__()
    try:
        for i in range(5):
            assert client.submit(sum, [i, 1]).result() == i + 1
        status = dal.status(client)
        assert status["pending"] > 0 and status["stored"] == 0 and status["failing_since"]
        assert any("cannot write to" in r.getMessage() for r in caplog.records)

        blocker.unlink()
        blocker.mkdir()
        assert dal.flush(client, timeout=20)["flushed"]
        assert dal.status(client)["dropped"] == 0
    finally:
        ctx.__exit__(None, None, None)
    assert any("reachable again" in r.getMessage() for r in caplog.records)
    comps = dal.list_computations(info["cluster_id"], store=url)
    # Dask files repeated submits of one function under the first computation's group.
    assert sum(c["n_tasks"] for c in comps) == 5 and {c["state"] for c in comps} == {"finished"}


def test_full_buffer_drops_oldest_and_says_so(tmp_path, caplog):
    blocker, url = _unreachable_sqlite(tmp_path)
    caplog.set_level(logging.WARNING, logger="dask_analytics_lab")
    config = {"analytics.buffer.max-messages": 20, "analytics.events.allow": ["fill"]}
    with pytest.warns(UserWarning):
        ctx = recorded_cluster(url, config=config)
        client, info = ctx.__enter__()
    try:
        client.run_on_scheduler(
            lambda dask_scheduler: [dask_scheduler.log_event("fill", i) for i in range(50)]
        )
        status = dal.status(client)
        assert status["pending"] == 20 and status["dropped"] >= 30
        assert any(
            "buffer is full (analytics.buffer.max-messages = 20)" in r.getMessage()
            for r in caplog.records
        )
        blocker.unlink()
        blocker.mkdir()
        # Until the writer has drained the full buffer, each snapshot it queues pushes
        # out one more message after counting the drops: wait, then take the last count.
        assert _wait(lambda: dal.status(client)["pending"] < 20)
        assert dal.flush(client, timeout=20)["flushed"]
        dropped = dal.status(client)["dropped"]
    finally:
        ctx.__exit__(None, None, None)
    cluster = dal.get_cluster(info["cluster_id"], store=url)
    # The count of what was dropped reaches the store with the next sample.
    assert cluster["dropped_messages"] == dropped > 0


def test_scheduler_unaffected_when_store_never_comes(tmp_path):
    _, url = _unreachable_sqlite(tmp_path)
    with pytest.warns(UserWarning):
        with recorded_cluster(url) as (client, info):
            futures = client.map(lambda x: x * 2, range(200))
            assert sum(client.gather(futures)) == 2 * sum(range(200))
            assert dal.status(client)["stored"] == 0
    # and closing the cluster did not hang past the shipper's bounded wait


EXPENDABLE = {kind for kind, tier in TIER_OF.items() if tier in (SAMPLES, DETAILS)}


def test_a_full_buffer_on_a_real_cluster_gives_up_samples_not_the_record(tmp_path, caplog):
    """Issue 19, item 7, end to end: the store is unreachable while a cluster samples its
    workers every 100 ms and runs a computation with failures; the buffer stays within
    analytics.buffer.max-bytes by dropping samples (and, once none is left, details), says
    so, and once the store is
    back the computation and its failures are stored as Dask reported them."""
    from distributed import wait

    from ..waiting import wait_for

    blocker, url = _unreachable_sqlite(tmp_path)
    caplog.set_level(logging.WARNING, logger="dask_analytics_lab")
    config = {"analytics.buffer.max-bytes": "128 KiB", "analytics.workers.interval": "100ms"}
    with pytest.warns(UserWarning):
        ctx = recorded_cluster(url, config=config)
        client, info = ctx.__enter__()
    try:
        futures = client.map(lambda i: 1 / (i % 10), range(50))
        wait(futures)
        said = [f.status for f in futures]
        status = wait_for(
            lambda: (s := dal.status(client))["dropped_by_kind"].get("worker_samples") and s,
            what="the buffer to fill with worker samples",
        )
        assert status["buffer_max_bytes"] == 128 * 1024 and status["buffer_bytes"] <= 128 * 1024
        # Never the record; its details (a task stream) only once no sample was left to
        # drop, which a busy machine, whose writer falls further behind, can reach.
        assert set(status["dropped_by_kind"]) <= EXPENDABLE, status
        assert status["dropped"] == sum(status["dropped_by_kind"].values())
        warning = next(r.getMessage() for r in caplog.records if "buffer is full" in r.getMessage())
        assert "samples first" in warning and "Raise analytics.buffer.max-bytes" in warning

        blocker.unlink()
        blocker.mkdir()
        assert dal.flush(client, timeout=30)["flushed"]
        final = dal.status(client)
    finally:
        ctx.__exit__(None, None, None)
    assert set(final["dropped_by_kind"]) <= EXPENDABLE, final
    (comp,) = dal.list_computations(info["cluster_id"], store=url)
    assert (comp["state"], comp["n_tasks"], comp["n_done"], comp["n_erred"]) == (
        "erred",
        50,
        said.count("finished"),
        said.count("error"),
    )
    (failure,) = dal.list_exceptions(info["cluster_id"], store=url)
    assert (failure["exc_type"], failure["count"]) == ("ZeroDivisionError", said.count("error"))
    assert (
        dal.get_cluster(info["cluster_id"], store=url)["dropped_messages"] == final["dropped"] > 0
    )
