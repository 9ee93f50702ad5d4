"""Issue 12, item 1: Dask's fine performance metrics per computation and task prefix
(collect/metrics.py), on a real LocalCluster: a CPU-bound group shows thread-cpu, a
sleeping one thread-noncpu; computations back to back get their own changes; a re-run
of a prefix is the re-run's.  Issue 18, item 5: runs back to back with no pause, and
runs sharing one of Dask's spans, each hold exactly what Dask measured for them.  The
Time tab draws them (js/widgets/time.ts) in Chromium, once the cluster is gone: the
notebook monitor, the team page and a shared report.

Screenshot: test-artifacts/time-tab.png (docs/img/time-tab.png).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from collections import deque
from urllib.parse import quote

import pytest
from dask import delayed

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.metrics import MetricsRecorder, split_key
from dask_analytics_lab.config import resolve

from ..browser_helpers import WIDGET_HARNESS, save, static_server, transitions_done, widget_state
from ..cluster_helpers import recorded_cluster
from ..waiting import wait_for

VIEWPORT = {"width": 1200, "height": 720}  # the `page` fixture's (conftest.py)

SPIN = 0.3  # seconds of CPU per task
NAP = 0.3  # seconds asleep per task


def cpu_work(i: int) -> int:
    end = time.thread_time() + SPIN
    while time.thread_time() < end:
        pass
    return i


def nap_work(i: int) -> int:
    time.sleep(NAP)  # the task's work: thread-noncpu time, what the test measures
    return i


def other_work(i: int) -> int:
    time.sleep(NAP)  # the task's work, as nap_work's
    return i


def combine(parts: list) -> int:
    return sum(parts)


def _seconds(
    metrics: list[dict], prefix: str | None, activity: str, context: str = "execute"
) -> float:
    return sum(
        r["value"]
        for r in metrics
        if r["prefix"] == prefix
        and r["activity"] == activity
        and r["context"] == context
        and r["unit"] == "seconds"
    )


def _execute_seconds(metrics: list[dict], prefix: str) -> float:
    return sum(
        r["value"]
        for r in metrics
        if r["prefix"] == prefix and r["context"] == "execute" and r["unit"] == "seconds"
    )


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
            client,
            store,
            first,
            lambda m: (
                _all_in(4, SPIN)(_seconds(m, "cpu_work", "thread-cpu"))
                and _all_in(4, NAP)(_execute_seconds(m, "nap_work"))
            ),
            "the first computation's metrics",
        )
        assert sum(client.compute([delayed(other_work)(i) for i in range(3)], sync=True)) == 3
        second = _newest(client, store, cid, 2)["computation_id"]
        out["second"] = _metrics_when(
            client,
            store,
            second,
            lambda m: _all_in(3, NAP)(_execute_seconds(m, "other_work")),
            "the second computation's metrics",
        )
        assert sum(client.compute([delayed(nap_work)(i) for i in range(2)], sync=True)) == 1
        third = _newest(client, store, cid, 3)["computation_id"]
        out["third"] = _metrics_when(
            client,
            store,
            third,
            lambda m: _all_in(2, NAP)(_execute_seconds(m, "nap_work")),
            "the re-run's metrics",
        )
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
    assert _execute_seconds(recorded["first_after"], "nap_work") == _execute_seconds(
        recorded["first"], "nap_work"
    )
    assert _execute_seconds(recorded["second_after"], "other_work") == _execute_seconds(
        recorded["second"], "other_work"
    )


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
        with recorded_cluster(store, config={"analytics.metrics.transmit": False}) as (
            client,
            info,
        ):
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

    from ..factories import Cluster

    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    store = open_store(url)
    c = Cluster(t0=time.time() - 5)
    store.ingest([c.cluster(), c.computation("a", stop=time.time())])
    w, view = (
        MonitorWidget(c.id, store=url, start=False),
        TimeBreakdown("a", store=url, start=False),
    )
    try:
        for x in (w, view):
            x.refresh()
            x.refresh()
            assert x.metrics == []
        store.ingest([c.metrics("a")])
        for x in (w, view):
            x.refresh()
            assert {(m["prefix"], m["activity"]) for m in x.metrics} >= {
                ("ones", "thread-cpu"),
                ("sleepy", "thread-noncpu"),
            }
            assert "metrics" not in x.computation
    finally:
        w.close()
        view.close()
        store.close()
        close_readers()


# --- back to back, no pause: each run's own, as Dask measured it (issue 18, item 5) ---------

# (tasks, CPU seconds each): three runs of one prefix, sizes differing.
RUNS = ((4, 0.3), (3, 0.15), (5, 0.05))


def spin(i: int, seconds: float) -> float:
    """Spin `seconds` of this thread's CPU; return what it spent."""
    start = time.thread_time()
    while time.thread_time() < start + seconds:
        pass
    return time.thread_time() - start


def _execute(metrics: list[dict]) -> dict:
    return {
        (r["prefix"], r["activity"], r["unit"]): r["value"]
        for r in metrics
        if r["context"] == "execute"
    }


def _runs_recorded(client, store: str, cluster_id: str, n: int) -> list[str]:
    """The ids of the cluster's `n` computations, oldest first, once all are finished."""

    def ready():
        dal.flush(client)
        comps = dal.list_computations(cluster_id, store=store)
        return comps if len(comps) >= n and all(c["state"] == "finished" for c in comps) else None

    comps = wait_for(ready, what=f"{n} finished computations")
    assert len(comps) == n, comps
    return [c["computation_id"] for c in reversed(comps)]


def _dask_span_execute(dask_scheduler, span_ids: list[str]) -> list[dict]:
    """Dask's own figures for each span (the whole tree, as its dashboard sums them)."""
    ext = dask_scheduler.extensions["spans"]
    return [
        {
            (k[1], k[2], k[3]): v
            for k, v in ext.spans[sid].cumulative_worker_metrics.items()
            if k[0] == "execute" and k[1] != "N/A"
        }
        for sid in span_ids
    ]


def _same(ours: dict, dask: dict) -> bool:
    return (
        bool(dask)
        and ours.keys() == dask.keys()
        and all(ours[k] == pytest.approx(v, rel=1e-9, abs=1e-12) for k, v in dask.items())
    )


@pytest.mark.usefixtures("both_sources")  # each run's span ids follow its computation
@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_back_to_back_runs_are_each_exactly_what_dask_measured_for_them(tmp_path, processes):
    """Three runs of one prefix with no pause between them, each in a user span (Dask's
    own per-span figures are the truth): each computation holds exactly its span's
    execute metrics, every activity, though workers' heartbeats with a run's last tasks
    land after the next run started."""
    from dask.base import tokenize
    from distributed import span

    store = str(tmp_path / "analytics.db")
    try:
        with recorded_cluster(store, processes=processes) as (client, info):
            span_ids = []
            for n, seconds in RUNS:
                # One prefix, "spin"; a group of its own per run, so that Dask's spans
                # keep the runs apart too (a re-run into a live group is the next test).
                name = f"spin-{tokenize(n, seconds, processes)}"
                with span(f"run-{n}") as span_id:
                    client.gather(
                        client.map(
                            spin, range(n), seconds=seconds, key=[(name, i) for i in range(n)]
                        )
                    )
                span_ids.append(span_id)
            comp_ids = _runs_recorded(client, store, info["cluster_id"], len(RUNS))

            def exact():
                dal.flush(client)
                dask = client.run_on_scheduler(_dask_span_execute, span_ids=span_ids)
                # Workers send metrics with their heartbeats: until Dask has every task's
                # CPU, equal to Dask's is not yet the whole run.
                heard = all(
                    d.get(("spin", "thread-cpu", "seconds"), 0) >= n * seconds
                    for (n, seconds), d in zip(RUNS, dask)
                )
                ours = [_execute(dal.get_computation(c, store=store)["metrics"]) for c in comp_ids]
                return (ours, dask) if heard and all(map(_same, ours, dask)) else None

            ours, dask = wait_for(
                exact, timeout=30, what="each run's metrics equal to Dask's span metrics"
            )
            for (n, seconds), run in zip(RUNS, ours):
                assert {p for p, _, _ in run} == {"spin"}, run
                assert run["spin", "thread-cpu", "seconds"] >= n * seconds, run
    finally:
        close_readers()


def _group_tasks(dask_scheduler, name: str) -> int:
    return sum(dask_scheduler.task_groups[name].states.values())


def _dask_view(dask_scheduler) -> dict:
    """What Dask's dashboard reads of spans: roots, names and tags, and their sums."""
    ext = dask_scheduler.extensions["spans"]
    merged = ext.merge_all().cumulative_worker_metrics
    return {
        "roots": [type(s).__name__ for s in ext.root_spans],
        "tags": sorted(ext.spans_search_by_tag),
        "named": sum(len(v) for v in ext.spans_search_by_name.values()),
        "spin": merged.get(("execute", "spin", "thread-cpu", "seconds"), 0.0),
        "cluster": dask_scheduler.cumulative_worker_metrics.get(
            ("execute", "spin", "thread-cpu", "seconds"), 0.0
        ),
    }


@pytest.mark.usefixtures("both_sources")
@pytest.mark.parametrize(
    "processes, shared",
    [(False, "group"), (True, "group"), (False, "span")],
    ids=["live-group-threads", "live-group-processes", "user-span-threads"],
)
def test_runs_that_share_a_span_are_each_their_own(tmp_path, processes, shared):
    """Two ways runs share one of Dask's spans: `futs = client.map(spin, ...)` three times
    with the old futures still held as the next run is submitted (Dask adds each run to
    the same TaskGroup, so to its span), or a user's `span()` around all three.  Each
    computation holds its own tasks' CPU (what they measured themselves), the three add
    up to Dask's to the last digit, and Dask's own view of its spans is what it was."""
    from dask.base import tokenize
    from distributed import span

    store = str(tmp_path / "analytics.db")
    try:
        with recorded_cluster(store, processes=processes) as (client, info):
            spent = []
            with span("sweep") if shared == "span" else contextlib.nullcontext():
                futs = None
                for n, seconds in RUNS:
                    keys = (
                        [(f"spin-{tokenize(n, seconds)}", i) for i in range(n)]
                        if shared == "span"
                        else None
                    )
                    futs = client.map(spin, range(n), seconds=seconds, key=keys)
                    spent.append(sum(client.gather(futs)))
            if shared == "group":  # the case under test: one TaskGroup took all three runs
                assert client.run_on_scheduler(_group_tasks, name="spin") == sum(n for n, _ in RUNS)
            comp_ids = _runs_recorded(client, store, info["cluster_id"], len(RUNS))

            def settled():
                dal.flush(client)
                view = client.run_on_scheduler(_dask_view)
                ours = [
                    _execute(dal.get_computation(c, store=store)["metrics"]).get(
                        ("spin", "thread-cpu", "seconds"), 0.0
                    )
                    for c in comp_ids
                ]
                # Workers send metrics with their heartbeats: Dask has every task's CPU
                # once its total reaches what the tasks measured themselves.
                heard = view["cluster"] >= sum(spent)
                done = heard and sum(ours) == pytest.approx(view["cluster"], rel=1e-9)
                return (ours, view) if done else None

            ours, view = wait_for(settled, timeout=30, what="all three runs' metrics recorded")
            for (n, _), own, measured in zip(RUNS, ours, spent):
                # Dask's thread-cpu is the task's own CPU and a hair of its bookkeeping;
                # a heartbeat's worth of the run before (whole tasks) is far more.
                assert measured <= own < measured + 0.01 * n, (ours, spent)
            assert view["spin"] == pytest.approx(view["cluster"], rel=1e-9), view
            assert view["roots"] == ["Span"] * len(view["roots"]), view
            assert view["tags"] == (["sweep"] if shared == "span" else ["default"]), view
            assert view["named"] == len(view["roots"]), view
    finally:
        close_readers()


# --- the recorder alone: what the scheduler's keys look like ------------------------


def test_keys_are_split_whatever_their_shape():
    assert split_key(("execute", "read_parquet", "thread-cpu", "seconds")) == (
        "read_parquet",
        "execute",
        "thread-cpu",
        "seconds",
    )
    assert split_key(("gather-dep", "network", "seconds")) == (
        None,
        "gather-dep",
        "network",
        "seconds",
    )
    assert split_key(("memory-monitor", "evict", "disk-write", "seconds")) == (
        None,
        "memory-monitor",
        "evict/disk-write",
        "seconds",
    )
    assert split_key(("execute", "f", ("custom", 1), "count")) == (
        "f",
        "execute",
        "('custom', 1)",
        "count",
    )
    assert split_key("latency") is None and split_key(("a", "b")) is None
    # What the messages' contract refuses is made fit or left out, never sent to fail.
    assert split_key(("execute", "f\x00", "a\udc80", "seconds")) == (
        "f",
        "execute",
        "a?",
        "seconds",
    )
    assert split_key(("gather-dep", "", "seconds")) is None
    assert split_key(("execute", "x" * 500, "thread-cpu", "seconds"))[0] == "x" * 200


class _Group:
    """A TaskGroup as the spans extension reads one."""

    done, stop = True, 1.0

    def __init__(self, span_id: str):
        self.span_id = span_id


def test_the_recorder_gives_span_metrics_to_their_computation_and_the_rest_to_the_newest():
    """Dask's own spans extension on a stand-in scheduler: what its heartbeats bring for a
    span is that span's computation's; metrics without a span go to the newest one."""
    from types import SimpleNamespace

    from distributed.spans import SpansSchedulerExtension

    sent = []
    before = ("execute", "f", "thread-cpu", "seconds")
    scheduler = SimpleNamespace(
        tasks={},
        computations=deque(maxlen=3),
        total_nthreads_history=[(0.0, 2)],
        _task_to_msg=lambda ts: {"key": "k", "span_id": ts.group.span_id},
        cumulative_worker_metrics={
            ("gather-dep", "network", "seconds"): 5.0,
            before: 5.0,
            "latency": 0.1,
        },
    )
    ext = SpansSchedulerExtension(scheduler)
    old = ext._ensure_default_span()  # ran before recording started
    scheduler.extensions = {"spans": ext}
    rec = MetricsRecorder(lambda kind, data: sent.append(data), scheduler)

    def submit(cid: str, key: str) -> SimpleNamespace:
        comp = SimpleNamespace(id=cid, groups=set())
        if not scheduler.computations or scheduler.computations[-1].id != cid:
            scheduler.computations.append(comp)
        tg = _Group(ext._ensure_span((f"run-{cid}",), (f"span-{cid}",)).id)
        ext.spans[tg.span_id].groups.add(tg)
        scheduler.tasks[key] = SimpleNamespace(group=tg)
        rec.spans.waiting(scheduler.tasks[key])
        return tg

    def heartbeat(tg, value: float, prefix: str = "f") -> None:
        ext.heartbeat(None, {("execute", tg.span_id, prefix, "thread-cpu", "seconds"): value})

    def rows() -> dict:
        out = {
            (d["computation_id"], r["prefix"], r["activity"]): r["value"]
            for d in sent
            for r in d["rows"]
        }
        sent.clear()
        return out

    a = submit("a", "f-1")
    heartbeat(a, 2.0)
    ext.heartbeat(None, {("execute", old.id, "f", "thread-cpu", "seconds"): 9.0})  # nobody's
    scheduler.cumulative_worker_metrics[("gather-dep", "network", "seconds")] += 0.5
    scheduler.cumulative_worker_metrics["latency"] = 0.2
    rec.tick(scheduler.cumulative_worker_metrics, scheduler.computations)
    assert rows() == {("a", "f", "thread-cpu"): 2.0, ("a", None, "network"): 0.5}
    assert rec.dropped == 1
    # Dask's own span holds what its heartbeat brought, as it would without us.
    assert ext.spans[a.span_id].cumulative_worker_metrics[before] == 2.0
    # "b" starts, then a's last heartbeat lands: still a's.
    b = submit("b", "g-1")
    heartbeat(a, 1.0)
    heartbeat(b, 0.25, "g")
    rec.tick(scheduler.cumulative_worker_metrics, scheduler.computations)
    assert rows() == {("a", "f", "thread-cpu"): 3.0, ("b", "g", "thread-cpu"): 0.25}
    # "c" submits into a's span (a group still alive): its tasks leave with a span id of
    # its own; Dask's group, span and spans stay as they were.
    scheduler.computations.append(SimpleNamespace(id="c", groups=set()))
    scheduler.tasks["f-2"] = SimpleNamespace(group=a)
    span_a = ext.spans[a.span_id]
    spans_before = dict(ext.spans)
    rec.spans.waiting(scheduler.tasks["f-2"])
    run = scheduler._task_to_msg(scheduler.tasks["f-2"])["span_id"]
    assert run != span_a.id and run not in ext.spans and ext.spans == spans_before
    assert a.span_id == span_a.id and a in span_a.groups
    ext.heartbeat(None, {("execute", run, "f", "thread-cpu", "seconds"): 4.0})  # c's task
    ext.heartbeat(None, {("execute", span_a.id, "f", "thread-cpu", "seconds"): 0.5})  # a's tail
    rec.tick(scheduler.cumulative_worker_metrics, scheduler.computations)
    assert rows() == {("a", "f", "thread-cpu"): 3.5, ("c", "f", "thread-cpu"): 4.0}
    assert span_a.cumulative_worker_metrics[before] == 7.5  # Dask's span: both, as before
    assert ext.root_spans == [old, span_a, ext.spans["span-b"]] and not span_a.children
    # Dask keeps the last few computations: "a" rolls out, its totals and spans go with it.
    scheduler.computations.append(SimpleNamespace(id="d", groups=set()))
    rec.tick(scheduler.cumulative_worker_metrics, scheduler.computations)
    ext.heartbeat(None, {("execute", span_a.id, "f", "thread-cpu", "seconds"): 1.0})
    rec.tick(scheduler.cumulative_worker_metrics, scheduler.computations)
    assert rows() == {} and "a" not in rec._totals and rec.dropped == 2
    # A run id still lands in its span for Dask, whoever it belonged to.
    ext.heartbeat(None, {("execute", run, "f", "thread-cpu", "seconds"): 1.0})
    assert span_a.cumulative_worker_metrics[before] == 9.5


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
    assert re.match(
        r"nap_work: [\d.]+ s in all; .*Waiting \(I/O, GIL\) [\d.]+ s", bars["nap_work"]["label"]
    ), bars
    assert list(bars)[:2] == ["cpu_work", "nap_work"] or list(bars)[:2] == [
        "nap_work",
        "cpu_work",
    ], bars


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
        transitions_done(page)
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


def test_a_large_heartbeat_is_folded_in_by_ticks_in_parts():
    """A heartbeat at thousands of prefixes holds tens of thousands of keys: the ticks fold
    it in a part at a time (their deadline), and send its rows once all of it is in, with
    the same totals as one fold."""
    from types import SimpleNamespace

    from distributed.spans import SpansSchedulerExtension

    from dask_analytics_lab.collect import metrics

    sent: list[dict] = []
    scheduler = SimpleNamespace(
        tasks={},
        computations=deque(maxlen=3),
        total_nthreads_history=[(0.0, 2)],
        _task_to_msg=lambda ts: {"key": "k", "span_id": ts.group.span_id},
        cumulative_worker_metrics={},
    )
    ext = SpansSchedulerExtension(scheduler)
    scheduler.extensions = {"spans": ext}
    rec = MetricsRecorder(lambda kind, data: sent.append(data), scheduler)
    scheduler.computations.append(SimpleNamespace(id="a", groups=set()))
    tg = _Group(ext._ensure_span(("run-a",), ("span-a",)).id)
    ext.spans[tg.span_id].groups.add(tg)
    scheduler.tasks["f-1"] = SimpleNamespace(group=tg)
    rec.spans.waiting(scheduler.tasks["f-1"])
    prefixes = 3 * metrics.FOLD_EVERY
    beat = {("execute", tg.span_id, f"p{i}", "thread-cpu", "seconds"): 1.0 for i in range(prefixes)}
    for _ in range(2):  # two workers' heartbeats
        ext.heartbeat(None, dict(beat))
    assert not sent and ext.spans[tg.span_id].cumulative_worker_metrics  # Dask's, at once
    ticks = 0
    while True:
        ticks += 1
        # A deadline already past: each call does its least, a part.
        rec.tick(scheduler.cumulative_worker_metrics, scheduler.computations, time.perf_counter())
        if not rec.behind:
            break
        assert not sent or ticks >= 6  # rows only once both heartbeats are in (6 parts)
        assert ticks < 100
    assert ticks > 6  # 6 parts of FOLD_EVERY keys, then the rows, a part at a time too
    rows = {r["prefix"]: r["value"] for d in sent for r in d["rows"]}
    assert rows == {f"p{i}": 2.0 for i in range(prefixes)}
    # Without a deadline (the last tick of a closing recorder): all at once.
    sent.clear()
    ext.heartbeat(None, dict(beat))
    rec.tick(scheduler.cumulative_worker_metrics, scheduler.computations)
    assert not rec.behind
    assert {r["prefix"]: r["value"] for d in sent for r in d["rows"]} == rows | {
        p: 3.0 for p in rows
    }
