"""Issue 12, item 1: Dask's fine performance metrics per computation and task prefix
(collect/metrics.py), on a real LocalCluster: a CPU-bound group shows thread-cpu, a
sleeping one thread-noncpu; computations back to back get their own changes; a re-run
of a prefix is the re-run's.  The Time tab draws them (js/widgets/time.ts) in Chromium,
once the cluster is gone: the notebook monitor, the team page and a shared report.

Screenshot: test-artifacts/time-tab.png (docs/img/time-tab.png).
"""
from __future__ import annotations

import json
import re
import shutil
import time
from urllib.parse import quote

import pytest
from dask import delayed

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.metrics import MetricsRecorder, split_key
from dask_analytics_lab.config import resolve

from .browser_helpers import WIDGET_HARNESS, save, static_server, widget_state
from .cluster_helpers import recorded_cluster
from .waiting import wait_for

VIEWPORT = {"width": 1200, "height": 720}  # the `page` fixture's (conftest.py)

SPIN = 0.3  # seconds of CPU per task
NAP = 0.3  # seconds asleep per task


def cpu_work(i: int) -> int:
    end = time.thread_time() + SPIN
    while time.thread_time() < end:
        pass
    return i


def nap_work(i: int) -> int:
    time.sleep(NAP)
    return i


def other_work(i: int) -> int:
    time.sleep(NAP)
    return i


def combine(parts: list) -> int:
    return sum(parts)



def _seconds(metrics: list[dict], prefix: str | None, activity: str, context: str = "execute") -> float:
    return sum(r["value"] for r in metrics if r["prefix"] == prefix and r["activity"] == activity
               and r["context"] == context and r["unit"] == "seconds")


def _execute_seconds(metrics: list[dict], prefix: str) -> float:
    return sum(r["value"] for r in metrics if r["prefix"] == prefix and r["context"] == "execute"
               and r["unit"] == "seconds")


def _metrics_when(client, store: str, comp_id: str, cond, what: str) -> list[dict]:
    """The computation's metrics once `cond` holds (they come with the workers' heartbeats)."""
    def ready():
        dal.flush(client)
        metrics = dal.get_computation(comp_id, store=store)["metrics"]
        return metrics if cond(metrics) else None
    return wait_for(ready, what=what)


def _newest(client, store: str, cluster_id: str, n: int) -> dict:
    def ready():
        dal.flush(client)
        comps = dal.list_computations(cluster_id, store=store)
        return comps[0] if len(comps) >= n and comps[0]["state"] == "finished" else None
    return wait_for(ready, what=f"computation {n} finished")


def _all_in(n: int, per_task: float):
    # Workers measure a little under what the task asked for: 90% of it is "all in".
    return lambda seconds: seconds >= 0.9 * n * per_task


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One cluster, three computations: (1) CPU-bound cpu_work and sleeping nap_work
    together (and their sum), (2) other_work alone, (3) nap_work again."""
    store = str(tmp_path_factory.mktemp("metrics") / "analytics.db")
    out: dict = {"store": store}
    # Worker processes, as LocalCluster makes by default: two spinning tasks in one
    # process would also wait for each other's GIL.
    with recorded_cluster(store, processes=True) as (client, info):
        out["cluster_id"] = cid = info["cluster_id"]
        parts = [delayed(cpu_work)(i) for i in range(4)] + [delayed(nap_work)(i) for i in range(4)]
        assert delayed(combine)(parts).compute() == 12
        first = _newest(client, store, cid, 1)["computation_id"]
        # Everything the first one ran has reached the scheduler before the next starts.
        out["first"] = _metrics_when(
            client, store, first,
            lambda m: _all_in(4, SPIN)(_seconds(m, "cpu_work", "thread-cpu"))
            and _all_in(4, NAP)(_execute_seconds(m, "nap_work")), "the first computation's metrics")
        assert sum(client.compute([delayed(other_work)(i) for i in range(3)], sync=True)) == 3
        second = _newest(client, store, cid, 2)["computation_id"]
        out["second"] = _metrics_when(client, store, second,
                                      lambda m: _all_in(3, NAP)(_execute_seconds(m, "other_work")),
                                      "the second computation's metrics")
        assert sum(client.compute([delayed(nap_work)(i) for i in range(2)], sync=True)) == 1
        third = _newest(client, store, cid, 3)["computation_id"]
        out["third"] = _metrics_when(client, store, third,
                                     lambda m: _all_in(2, NAP)(_execute_seconds(m, "nap_work")),
                                     "the re-run's metrics")
        # Nothing more arrives for the first two: read them again after the last one.
        out["first_after"] = dal.get_computation(first, store=store)["metrics"]
        out["second_after"] = dal.get_computation(second, store=store)["metrics"]
        out["status"] = dal.flush(client)
        out["ids"] = (first, second, third)
    yield out
    close_readers()


def test_a_cpu_bound_group_is_thread_cpu_and_a_sleeping_one_thread_noncpu(recorded):
    m = recorded["first"]
    assert {"prefix", "context", "activity", "unit", "value"} == set(m[0])
    # Each group's own activity holds what its tasks did (workers measure a hair under).
    assert _seconds(m, "cpu_work", "thread-cpu") >= 0.9 * 4 * SPIN, m
    assert _seconds(m, "nap_work", "thread-noncpu") >= 0.9 * 4 * NAP, m
    assert _seconds(m, "nap_work", "thread-cpu") < 0.1 * 4 * NAP, m
    # On a busy machine a spinning thread also waits (for the GIL, for a core): that is
    # thread-noncpu too, so "dominant" is read as shares, the CPU group's far above.
    cpu_share = _seconds(m, "cpu_work", "thread-cpu") / _execute_seconds(m, "cpu_work")
    nap_share = _seconds(m, "nap_work", "thread-cpu") / _execute_seconds(m, "nap_work")
    assert cpu_share > 5 * nap_share, (cpu_share, nap_share)


def test_back_to_back_computations_keep_their_own(recorded):
    first, second = recorded["first_after"], recorded["second"]
    assert {r["prefix"] for r in second if r["context"] == "execute"} == {"other_work"}
    assert not any(r["prefix"] == "other_work" for r in first)
    # The first computation's figures did not move once the others ran.
    assert _execute_seconds(first, "cpu_work") == _execute_seconds(recorded["first"], "cpu_work")
    assert _execute_seconds(first, "nap_work") == _execute_seconds(recorded["first"], "nap_work")


def test_a_rerun_of_a_prefix_is_the_reruns(recorded):
    third = recorded["third"]
    assert {r["prefix"] for r in third if r["context"] == "execute"} == {"nap_work"}
    # Two tasks' worth, not the first run's four added on.
    assert _execute_seconds(third, "nap_work") < 3.5 * NAP
    assert _execute_seconds(recorded["first_after"], "nap_work") == _execute_seconds(recorded["first"], "nap_work")
    assert _execute_seconds(recorded["second_after"], "other_work") == \
        _execute_seconds(recorded["second"], "other_work")


def test_list_computations_keeps_its_totals_and_status_counts_rows(recorded):
    comps = dal.list_computations(recorded["cluster_id"], store=recorded["store"])
    assert all("metrics" not in c for c in comps)
    status = recorded["status"]
    assert status["metrics_rows"] > 0 and status["metrics_dropped"] == 0
    assert status["metrics_seconds"] >= 0


def test_metrics_transmit_off_sends_none(tmp_path):
    assert resolve()["metrics_transmit"] is True
    store = str(tmp_path / "analytics.db")
    try:
        with recorded_cluster(store, config={"analytics.metrics.transmit": False}) as (client, info):
            assert sum(client.compute([delayed(nap_work)(i) for i in range(2)], sync=True)) == 1
            comp = _newest(client, store, info["cluster_id"], 1)
            status = dal.flush(client)
            assert status["metrics_rows"] == 0
            assert dal.get_computation(comp["computation_id"], store=store)["metrics"] == []
    finally:
        close_readers()


def test_the_widget_reads_metrics_that_land_after_the_stop(tmp_path):
    """The computation's row does not move when its last metrics land (they come with
    the heartbeats after its last task): the feed reads them again for a while."""
    from dask_analytics_lab.store import open_store
    from dask_analytics_lab.widgets.monitor_widget import MonitorWidget
    from dask_analytics_lab.widgets.views import TimeBreakdown

    from .factories import Cluster

    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    store = open_store(url)
    c = Cluster(t0=time.time() - 5)
    store.ingest([c.cluster(), c.computation("a", stop=time.time())])
    w, view = MonitorWidget(c.id, store=url, start=False), TimeBreakdown("a", store=url, start=False)
    try:
        for x in (w, view):
            x.refresh()
            x.refresh()
            assert x.metrics == []
        store.ingest([c.metrics("a")])
        for x in (w, view):
            x.refresh()
            assert {(m["prefix"], m["activity"]) for m in x.metrics} >= {("ones", "thread-cpu"), ("sleepy", "thread-noncpu")}
            assert "metrics" not in x.computation
    finally:
        w.close()
        view.close()
        store.close()
        close_readers()


# --- the recorder alone: what the scheduler's keys look like ------------------------

def test_keys_are_split_whatever_their_shape():
    assert split_key(("execute", "read_parquet", "thread-cpu", "seconds")) == \
        ("read_parquet", "execute", "thread-cpu", "seconds")
    assert split_key(("gather-dep", "network", "seconds")) == (None, "gather-dep", "network", "seconds")
    assert split_key(("memory-monitor", "evict", "disk-write", "seconds")) == \
        (None, "memory-monitor", "evict/disk-write", "seconds")
    assert split_key(("execute", "f", ("custom", 1), "count")) == ("f", "execute", "('custom', 1)", "count")
    assert split_key("latency") is None and split_key(("a", "b")) is None
    # What the messages' contract refuses is made fit or left out, never sent to fail.
    assert split_key(("execute", "f\x00", "a\udc80", "seconds")) == ("f", "execute", "a?", "seconds")
    assert split_key(("gather-dep", "", "seconds")) is None
    assert split_key(("execute", "x" * 500, "thread-cpu", "seconds"))[0] == "x" * 200


class _Prefix:
    def __init__(self, name):
        self.name = name


class _Group:
    def __init__(self, prefix):
        self.prefix = _Prefix(prefix)


class _Computation:
    def __init__(self, cid, *prefixes):
        self.id = cid
        self.groups = {_Group(p) for p in prefixes}


def test_the_recorder_sends_cumulative_rows_and_forgets_what_dask_forgot():
    # Dask's objects stand in here only for their shape: ids, groups and prefix names.
    sent = []
    cumulative = {("execute", "f", "thread-cpu", "seconds"): 5.0, "latency": 0.1}
    rec = MetricsRecorder(lambda kind, data: sent.append(data), cumulative)
    comps = [_Computation("a", "f")]
    rec.tick(cumulative, comps)
    assert sent == []  # what came before recording started is nobody's
    cumulative[("execute", "f", "thread-cpu", "seconds")] += 1.0
    cumulative[("gather-dep", "network", "seconds")] = 0.5
    cumulative["latency"] = 0.2
    rec.tick(cumulative, comps)
    assert {(r["prefix"], r["activity"]): r["value"] for d in sent for r in d["rows"]} == \
        {("f", "thread-cpu"): 1.0, (None, "network"): 0.5}
    sent.clear()
    cumulative[("execute", "f", "thread-cpu", "seconds")] += 2.0
    rec.tick(cumulative, comps)
    assert sent == [{"computation_id": "a", "rows": [
        {"prefix": "f", "context": "execute", "activity": "thread-cpu", "unit": "seconds", "value": 3.0}]}]
    # Dask keeps the last few computations: "a" rolls out, its totals go with it.
    comps = [_Computation(str(i), "g") for i in range(3)]
    sent.clear()
    cumulative[("execute", "f", "thread-cpu", "seconds")] += 1.0  # no computation has f now
    rec.tick(cumulative, comps)
    assert sent == [{"computation_id": "2", "rows": [
        {"prefix": "f", "context": "execute", "activity": "thread-cpu", "unit": "seconds", "value": 1.0}]}]
    assert "a" not in rec._totals and set(rec._indexed) == {"0", "1", "2"}


# --- the Time tab, in Chromium, once the cluster is gone ----------------------------------

def _bars(time_view) -> dict:
    """{prefix: {category: width %}} of the drawn bars, and each row's verdict."""
    rows = time_view.locator(".dal-time-row")
    rows.first.wait_for(state="visible")
    return rows.evaluate_all("""rows => Object.fromEntries(rows.map(r => [r.dataset.prefix, {
        dominant: r.dataset.dominant, label: r.getAttribute("aria-label"),
        parts: Object.fromEntries([...r.querySelectorAll(".dal-time-seg")].map(
          s => [s.dataset.category, parseFloat(s.style.width)]))}]))""")


def _check_first(bars: dict) -> None:
    assert bars["cpu_work"]["parts"]["cpu"] > 5 * bars["nap_work"]["parts"].get("cpu", 0), bars
    assert bars["nap_work"]["dominant"] == "wait" and bars["nap_work"]["parts"]["wait"] > 90, bars
    assert re.match(r"nap_work: [\d.]+ s in all; .*Waiting \(I/O, GIL\) [\d.]+ s", bars["nap_work"]["label"]), bars
    assert list(bars)[:2] == ["cpu_work", "nap_work"] or list(bars)[:2] == ["nap_work", "cpu_work"], bars


def test_the_time_tab_draws_each_groups_bar_in_the_monitor(recorded, page, tmp_path):
    from dask_analytics_lab.widgets._base import STATIC

    first = recorded["ids"][0]
    state = {**widget_state(recorded["store"], recorded["cluster_id"], first), "tab": "time"}
    assert state["metrics"] == recorded["first_after"]
    shutil.copy(STATIC / "monitor.js", tmp_path / "monitor.js")
    shutil.copy(STATIC / "style.css", tmp_path / "style.css")
    (tmp_path / "index.html").write_text(WIDGET_HARNESS)
    (tmp_path / "first.json").write_text(json.dumps(state))
    with static_server(tmp_path) as base:
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        page.evaluate("() => window.show('first')")
        monitor = page.locator(".dal-monitor")
        assert monitor.locator(".dal-tab.active").inner_text() == "Time"
        view = monitor.locator("[data-pane=time] .dal-time")
        bars = _bars(view)
        _check_first(bars)
        assert "combine" in bars
        legend = view.locator(".dal-time-legend").inner_text()
        for label in ("CPU", "Waiting (I/O, GIL)", "Serialization", "Disk", "Network", "Spill"):
            assert label in legend, legend
        page.wait_for_timeout(500)  # the bars' width transition
        monitor.screenshot(path=save("time-tab.png"))
        # A computation recorded without metrics says why it has no bars.
        page.evaluate("() => window.model.set('metrics', [])")
        view.locator(".dal-empty", has_text="No time breakdown recorded").wait_for()


def test_the_time_section_of_the_team_page_and_a_shared_report(recorded, page, tmp_path):
    from dask_analytics_lab.reports.render import computation_report
    from tests.server_helpers import ServerThread

    first = recorded["ids"][0]
    url = f"sqlite:///{recorded['store']}"
    with ServerThread({"store_url": url, "token_required": False}) as server:
        page.goto(f"{server.url}/computations/{quote(first, safe='')}")
        page.wait_for_selector("h2:has-text('Time')")
        _check_first(_bars(page.locator("main .time")))
    html, twin, _ = computation_report(first, store=url)
    assert twin["metrics"] == recorded["first_after"]
    (tmp_path / "report.html").write_text(html)
    page.goto((tmp_path / "report.html").as_uri())
    page.locator(".dal-tab", has_text="Time").click()
    _check_first(_bars(page.locator("[data-pane=time] .dal-time")))
