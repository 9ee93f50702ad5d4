"""Issue 43: failures that `retries=` hid are recorded.  Dask sends a retried task back
to waiting (processing -> waiting), never through erred, so only the worker's message
says it failed: each failed attempt is an exception row, with how many were run again
and how many tasks then succeeded, and the failures finding says retries hid them.
A real LocalCluster (threads in this process, so the attempts share a counter).
"""

from __future__ import annotations

import threading
import time

import dask
import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers

from ..cluster_helpers import Scenarios, recorded_cluster

ATTEMPTS: dict[str, int] = {}
_LOCK = threading.Lock()


def flaky(name: str, fails: int) -> str:
    """Fails its first `fails` attempts (a connection reset, as a flaky service does)."""
    with _LOCK:
        ATTEMPTS[name] = ATTEMPTS.get(name, 0) + 1
        n = ATTEMPTS[name]
    time.sleep(0.3)  # each attempt costs time
    if n <= fails:
        raise ConnectionResetError(f"[Errno 104] Connection reset by peer (attempt {n})")
    return name


@pytest.fixture(scope="module")
def retried(tmp_path_factory):
    store = str(tmp_path_factory.mktemp("retries") / "analytics.db")
    with recorded_cluster(store) as (client, info):
        run = Scenarios(client, store, info["cluster_id"])
        run("hidden", lambda: client.submit(flaky, "hidden", 3, retries=3).result())
        run("ran-out", lambda: client.submit(flaky, "ran-out", 9, retries=2).result())
        run("clean", lambda: client.submit(flaky, "clean", 0, retries=3).result())
    yield store, run.ids
    close_readers()


def rows(store: str, cid: str) -> list[dict]:
    return dal.list_exceptions(computation_id=cid, store=store)


def test_failures_that_retries_hid_are_recorded(retried):
    store, ids = retried
    assert dal.get_computation(ids["hidden"], store=store)["state"] == "finished"
    (row,) = rows(store, ids["hidden"])
    assert (row["exc_type"], row["count"], row["retried"], row["recovered"]) == (
        "ConnectionResetError",
        3,
        3,
        1,
    ), row
    assert row["task_group"] == "flaky" and "Connection reset by peer" in row["exception_text"]
    assert "in flaky" in row["location"]


def test_retries_that_ran_out_end_in_the_failure_they_hid(retried):
    store, ids = retried
    assert dal.get_computation(ids["ran-out"], store=store)["state"] == "erred"
    (row,) = rows(store, ids["ran-out"])
    # Two attempts run again, the third failed for good: three failures, none recovered.
    assert (row["count"], row["retried"], row["recovered"]) == (3, 2, 0), row
    assert rows(store, ids["clean"]) == []


def test_the_failures_finding_says_retries_hid_them(retried):
    store, ids = retried
    with dask.config.set({"analytics.findings.min-impact": "100ms"}):
        found = dal.explain(ids["hidden"], store=store)
    f = next(f for f in found if f["kind"] == "failures")
    assert f["title"] == "3 hidden failure(s) in flaky: ConnectionResetError", f
    assert (
        "Dask ran 3 of the failed attempts again (retries=) and 1 task(s) then succeeded"
        in (f["evidence"])
    )
    assert "retries hid them" in f["evidence"]
    assert f"--computation {ids['hidden']}" in f["advice"]
