"""Everyday sequences of runs on a real process-based LocalCluster, and the stored record of each.

Each test is one thing a user does (a re-run after a failure, two computations back to
back, a task that kills its worker ...) and asserts what the store says against what
Dask did.
"""

from __future__ import annotations

import logging
import os
import time
import uuid

import dask
import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client, LocalCluster, wait

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect import ticks as ticks_module

from ..cluster_helpers import FAST, executing_everywhere, recorded_cluster, scheduler_forgot_all
from ..waiting import wait_for

# Every sequence on both sources of computations (collect/sources.py).
pytestmark = pytest.mark.usefixtures("both_sources")


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


def flaky(x):
    if x < 0:
        raise ValueError(f"negative input {x}")
    return x


def inc(x):
    return x + 1


def slow(x):
    time.sleep(3)  # the task under test: still running when it is cancelled or restarted
    return x


def _flaky_or_inc(task: tuple[str, int]) -> int:
    kind, x = task
    return flaky(x) if kind == "flaky" else inc(x)


def _one_graph(client, flaky_inputs, n: int, tag: str) -> list:
    """One run: `flaky` over flaky_inputs and n groups g{i}x of one `inc` each, sent in one
    update_graph, so it is one computation however soon a busy or quiet machine finishes
    the first tasks (two map calls are two computations when the first ends between)."""
    tasks = [("flaky", x) for x in flaky_inputs] + [("inc", i) for i in range(n)]
    keys = [f"flaky-{tag}{i}" for i in range(len(flaky_inputs))]
    keys += [f"g{i}x-{tag}" for i in range(n)]
    return client.map(_flaky_or_inc, tasks, key=keys)


def _comps(cluster_id, store):
    """Computations oldest first."""
    return dal.list_computations(cluster_id, store=store)[::-1]


@pytest.mark.parametrize("hold", [False, True], ids=["released", "held"])
def test_clean_rerun_after_a_failed_run_is_finished(sqlite_url, hold):
    """Item 1: the failed run's state and counts stay with it; held futures keep the
    scheduler's TaskGroup `flaky` alive, so the second run lands in the same group."""
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        first = client.map(flaky, range(-5, 5))
        wait(first)
        if not hold:
            del first
        second = client.map(flaky, range(100, 120))
        assert client.gather(second) == list(range(100, 120))
        third = client.map(flaky, range(200, 203))
        client.gather(third)
        dal.flush(client)
        cluster_id = info["cluster_id"]

    failed, clean, clean_again = _comps(cluster_id, sqlite_url)
    assert (failed["state"], failed["n_tasks"], failed["n_erred"], failed["n_done"]) == (
        "erred",
        10,
        5,
        5,
    )
    assert (clean["state"], clean["n_tasks"], clean["n_erred"], clean["n_done"]) == (
        "finished",
        20,
        0,
        20,
    )
    assert (clean_again["state"], clean_again["n_tasks"], clean_again["n_done"]) == (
        "finished",
        3,
        3,
    )
    (row,) = dal.list_exceptions(cluster_id, store=sqlite_url)
    assert row["computation_id"] == failed["computation_id"] and row["count"] == 5
    (group,) = dal.list_task_groups(clean["computation_id"], store=sqlite_url)
    assert (group["n_tasks"], group["n_done"], group["n_erred"], group["n_not_run"]) == (
        20,
        20,
        0,
        0,
    )


@pytest.mark.parametrize("tick_between", [True, False], ids=["tick-between", "no-tick"])
def test_a_rerun_into_held_groups_is_recorded_whether_a_tick_came_between(sqlite_url, tick_between):
    """The re-run takes the first run's live groups inside update_graph: without reading
    them when a tick has summarised them since they last moved, reading them when none has
    (no periodic tick here: only the flushes).  Either way the record is what Dask ran."""
    n = 40
    tag = uuid.uuid4().hex[:8]
    with recorded_cluster(sqlite_url, config={"analytics.interval": "1h"}) as (client, info):
        first = _one_graph(client, range(-2, 8), n, tag + "a")
        wait(first)
        if tick_between:
            dal.flush(client)
        second = _one_graph(client, range(100, 110), n, tag + "b")
        wait(second)  # the first still held: the same TaskGroup objects
        dal.flush(client)
        cluster_id = info["cluster_id"]

    failed, clean = _comps(cluster_id, sqlite_url)
    assert (failed["state"], failed["n_tasks"], failed["n_done"], failed["n_erred"]) == (
        "erred",
        n + 10,
        n + 8,
        2,
    )
    assert (clean["state"], clean["n_tasks"], clean["n_done"], clean["n_erred"]) == (
        "finished",
        n + 10,
        n + 10,
        0,
    )
    for comp, flaky_figures in ((failed, (10, 8, 2)), (clean, (10, 10, 0))):
        groups = {
            g["name"]: (g["n_tasks"], g["n_done"], g["n_erred"])
            for g in dal.list_task_groups(comp["computation_id"], store=sqlite_url)
        }
        assert groups.pop("flaky") == flaky_figures
        assert sorted(groups.values()) == [(1, 1, 0)] * n


def test_clean_rerun_after_a_cancelled_run_is_finished(sqlite_url):
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        futures = client.map(slow, range(4))
        wait_for(lambda: executing_everywhere(client), what="a task running on each worker")
        client.cancel(futures)
        client.gather(client.map(slow, range(10, 12)))
        dal.flush(client)
        cluster_id = info["cluster_id"]
    cancelled, clean = _comps(cluster_id, sqlite_url)
    assert cancelled["state"] == "cancelled"
    # The tasks on workers when the user cancelled are cancelled, the rest never ran.
    assert cancelled["n_done"] == 0 and cancelled["n_cancelled"] + cancelled["n_not_run"] == 4
    assert cancelled["n_cancelled"] >= 2  # 2 workers, each running one
    assert cancelled["stop"] and cancelled["stop"] >= cancelled["start"]
    assert (clean["state"], clean["n_done"], clean["n_not_run"]) == ("finished", 2, 0)


def test_restart_finishes_the_record_and_clears_the_plugin(sqlite_url):
    """client.restart() forgets every task: what ran is kept, what was running is
    cancelled with a real stop, and runs after it start clean."""
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        wait(client.map(flaky, [-1, -2]))
        running = client.map(slow, range(4))
        wait_for(lambda: executing_everywhere(client), what="a task running on each worker")
        client.restart()
        client.gather(client.map(flaky, range(3)))
        dal.flush(client)
        cluster_id = info["cluster_id"]
        del running
    failed, interrupted, after = _comps(cluster_id, sqlite_url)
    assert (failed["state"], failed["n_erred"]) == ("erred", 2)
    assert interrupted["state"] == "cancelled" and interrupted["stop"] >= interrupted["start"]
    assert interrupted["n_done"] == 0 and interrupted["n_not_run"] == 4
    assert (after["state"], after["n_erred"], after["n_done"]) == ("finished", 0, 3)


def alpha_work(x):
    end = time.time() + 0.3
    while time.time() < end:
        sum(range(1000))
    return x


def beta_work(x):
    end = time.time() + 0.3
    while time.time() < end:
        sum(range(1000))
    return x


def _functions(node):
    yield node["description"]["name"]
    for child in node["children"].values():
        yield from _functions(child)


def test_back_to_back_profiles_hold_only_their_own_work(sqlite_url):
    """Item 2: alpha then beta at once; each profile has only its own function, and the
    cluster-wide profile is the sum of both (no sample counted twice)."""
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        client.gather(client.map(alpha_work, range(4)))
        client.gather(client.map(beta_work, range(4)))
        client.gather(client.map(alpha_work, range(10, 14)))  # alpha again, same prefix
        dal.flush(client)
        cluster_id = info["cluster_id"]
    alpha, beta, alpha_again = _comps(cluster_id, sqlite_url)
    trees = [
        dal.get_profile(c["computation_id"], store=sqlite_url) for c in (alpha, beta, alpha_again)
    ]
    assert all(t["count"] > 0 for t in trees)
    names = [set(_functions(t)) for t in trees]
    assert "alpha_work" in names[0] and "beta_work" not in names[0]
    assert "beta_work" in names[1] and "alpha_work" not in names[1]
    assert "alpha_work" in names[2] and "beta_work" not in names[2]
    whole = dal.get_profile(cluster_id=cluster_id, store=sqlite_url)
    assert whole["count"] == sum(t["count"] for t in trees)


def two_runs(client):
    client.submit(inc, 1).result()  # first-line
    client.submit(inc, 2).result()  # second-line


def test_each_computation_keeps_its_own_code_line(sqlite_url):
    """Item 3: one snippet stored once, each computation with the line that made it."""
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        two_runs(client)
        dal.flush(client)
        cluster_id = info["cluster_id"]
    first, second = _comps(cluster_id, sqlite_url)
    assert first["code_line"] == "client.submit(inc, 1).result()  # first-line"
    assert second["code_line"] == "client.submit(inc, 2).result()  # second-line"
    code1 = dal.get_computation(first["computation_id"], store=sqlite_url)["code"]
    code2 = dal.get_computation(second["computation_id"], store=sqlite_url)["code"]
    assert [c["hash"] for c in code1] == [c["hash"] for c in code2]
    # Snippets come outermost first (this test, then two_runs): the last made the computation.
    assert code2[-1]["lineno_frame"] == code1[-1]["lineno_frame"] + 1
    snippets = [
        s for s in dal.export(store=sqlite_url)["code_snippets"] if s["hash"] == code1[-1]["hash"]
    ]
    assert len(snippets) == 1


def test_fast_failure_has_a_real_stop_and_honest_counts(sqlite_url):
    """Item 4: a sub-second computation whose tasks erred; its dependents never ran."""
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        parts = [dask.delayed(flaky)(x) for x in (-1, -2, 3)]
        t0 = time.time()
        after = client.compute([dask.delayed(inc)(p) for p in parts])
        wait(after)
        t1 = time.time()
        del after  # Dask forgets them: the counts must survive that
        wait_for(lambda: scheduler_forgot_all(client), what="the scheduler to forget them")
        dal.flush(client)
        cluster_id = info["cluster_id"]
    (comp,) = _comps(cluster_id, sqlite_url)
    assert comp["state"] == "erred"
    # Its start and stop are Dask's: between the submission and the results' arrival (with
    # a second's slack: Dask shifts worker times by its estimate of their clock's offset).
    assert t0 - 1 <= comp["start"] <= comp["stop"] <= t1 + 1, (t0, comp, t1)
    groups = {
        g["prefix"]: g for g in dal.list_task_groups(comp["computation_id"], store=sqlite_url)
    }
    f, i = groups["flaky"], groups["inc"]
    assert (f["n_tasks"], f["n_done"], f["n_erred"], f["n_not_run"]) == (3, 1, 2, 0)
    assert (i["n_tasks"], i["n_done"], i["n_erred"], i["n_not_run"]) == (3, 1, 0, 2)
    assert f["start"] and f["stop"] and f["start"] <= f["stop"]
    assert (comp["n_tasks"], comp["n_done"], comp["n_erred"], comp["n_not_run"]) == (6, 2, 2, 2)


WORDS = ["".join(chr(ord("g") + (i // 5**k) % 5) for k in range(3)) for i in range(30)]


def many_kinds(i):
    raise KeyError(f"missing {WORDS[i % len(WORDS)]}")


def numbered(i):
    raise KeyError(f"key-{i}")


def test_failures_grouped_and_bounded_with_exact_counts(sqlite_url):
    """Item 5: 500 distinct messages of one kind are one row (the masking is the point,
    not the number: no bound lies near it); 30 kinds of message raised on one line are
    20 rows and an overflow row of that type and line, and no failure is lost."""
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        wait(client.map(numbered, range(500)))
        wait(client.map(many_kinds, range(300)))
        dal.flush(client)
        cluster_id = info["cluster_id"]
    numbered_comp, kinds_comp = _comps(cluster_id, sqlite_url)
    (row,) = dal.list_exceptions(computation_id=numbered_comp["computation_id"], store=sqlite_url)
    assert (
        row["count"] == 500 and row["pattern"] == "KeyError('key-…')" and len(row["examples"]) == 3
    )
    rows = dal.list_exceptions(
        computation_id=kinds_comp["computation_id"], limit=None, store=sqlite_url
    )
    assert len(rows) == 21 and sum(r["count"] for r in rows) == 300
    (overflow,) = [
        r for r in rows if r["pattern"] == "(10 other distinct messages, counted together)"
    ]
    assert overflow["count"] == 300 - 20 * 10
    assert overflow["exc_type"] == "KeyError" and {r["location"] for r in rows} == {
        overflow["location"]
    }


def die(x):
    os._exit(1)


def test_task_that_kills_its_workers_is_recorded(sqlite_url):
    """Item 6: KilledWorker, the worker deaths and the lost task are exception rows and
    events, with the workers involved."""
    config = {**FAST, "distributed.scheduler.allowed-failures": 1}
    with dask.config.set(config):
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            info = dal.register(client, store=sqlite_url)
            future = client.submit(die, 1)
            with pytest.raises(Exception, match="KilledWorker|died"):
                future.result(timeout=120)
            dal.flush(client)
            cluster_id = info["cluster_id"]
    (comp,) = _comps(cluster_id, sqlite_url)
    assert comp["state"] == "erred" and comp["n_erred"] == 1
    rows = {r["exc_type"]: r for r in dal.list_exceptions(cluster_id, store=sqlite_url)}
    killed = rows["KilledWorker"]
    assert killed["computation_id"] == comp["computation_id"] and killed["task_group"] == "die"
    assert len(killed["workers"]) == 2 and killed["example_key"].startswith("die-")
    assert rows["WorkerDied"]["count"] == 2 and len(rows["WorkerDied"]["workers"]) == 2
    topics = [e["topic"] for e in dal.list_events(cluster_id, store=sqlite_url)]
    assert (
        topics.count("analytics-worker-lost") == 2 and topics.count("analytics-killed-worker") == 1
    )


def test_computation_rows_say_what_they_ran(sqlite_url):
    """Item 8: a label from the task groups, inputs to outputs, and the line of code."""
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        pdf = pd.DataFrame({"k": [i % 7 for i in range(1000)], "v": range(1000)})
        dd.from_pandas(pdf, npartitions=4).groupby("k").v.sum().compute()  # the-groupby
        dal.flush(client)
        cluster_id = info["cluster_id"]
    (comp,) = _comps(cluster_id, sqlite_url)
    assert "the-groupby" in comp["code_line"]
    assert " → " in comp["label"]
    first, *_, last = comp["label"].split(" → ")
    assert "from" in first or "pandas" in first, comp["label"]
    assert "sum" in last or "agg" in last, comp["label"]


def log_topics(x):
    from distributed import get_worker

    for _ in range(3):
        get_worker().log_event("my-unlisted-topic", {"x": x})
    return x


def test_unlisted_topic_says_once_how_to_record_it(sqlite_url, caplog):
    """Item 12: an event on a topic not allowed is not recorded, and the log says so once."""
    with caplog.at_level(logging.WARNING, logger="dask_analytics_lab"):
        with recorded_cluster(sqlite_url, processes=True) as (client, info):
            client.gather(client.map(log_topics, range(3)))
            # Worker events reach the scheduler on a later batched send.
            wait_for(
                lambda: len(client.get_events("my-unlisted-topic")) == 9, what="the workers' events"
            )
            dal.flush(client)
            cluster_id = info["cluster_id"]
    said = [r.getMessage() for r in caplog.records if "my-unlisted-topic" in r.getMessage()]
    assert len(said) == 1 and "analytics.events.allow" in said[0]
    assert not dal.list_events(cluster_id, topic="my-unlisted-topic", store=sqlite_url)


def test_ticks_cut_short_still_record_what_dask_did(sqlite_url, monkeypatch):
    """A tick stops at a deadline and goes on in the next turns of the event loop.  With
    the deadline at once, every tick does the least it may: a computation of 300
    one-task groups and its re-run into the live groups are still recorded as Dask ran
    them (groups, totals, the task stream), with no flush to complete them."""
    monkeypatch.setattr(ticks_module, "TICK_SLICE", 0.0)  # the scheduler runs in this process
    n = 300
    tag = uuid.uuid4().hex[:8]
    with recorded_cluster(sqlite_url) as (client, info):
        first = client.map(inc, range(n), key=[f"g{i}x-{tag}a" for i in range(n)])
        wait(first)
        second = client.map(
            inc, range(n), key=[f"g{i}x-{tag}b" for i in range(n)]
        )  # first still held
        wait(second)
        cluster_id = info["cluster_id"]

        def recorded():
            comps = _comps(cluster_id, sqlite_url)
            return (
                len(comps) == 2
                and all(
                    (c["state"], c["n_tasks"], c["n_done"]) == ("finished", n, n) for c in comps
                )
                and comps
            )

        runs = wait_for(recorded, what="both runs recorded in full")
        for comp in runs:
            groups = dal.list_task_groups(comp["computation_id"], store=sqlite_url)
            assert len(groups) == n
            assert all(
                (g["n_tasks"], g["n_done"], g["n_erred"], g["n_not_run"]) == (1, 1, 0, 0)
                for g in groups
            )
            assert comp["compute"] == pytest.approx(sum(g["compute"] for g in groups))
            wait_for(
                lambda: len(dal.list_task_stream(comp["computation_id"], store=sqlite_url)) == n,
                what="one task-stream row per task",
            )
