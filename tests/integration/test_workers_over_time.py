"""Issue 12, item 5: each worker over the cluster's life (collect/workers.py), on real
LocalClusters: samples of memory (managed grows while data is held), CPU and tasks
processing; worker-joined / worker-left events with why a worker left (closed by a
scale-down, retired, killed, killed by its nanny for its memory); the interval's validation; the
Workers section of the Cluster tab drawn in Chromium, live (the monitor as newer samples
arrive, the team page of a running cluster) and once the cluster is gone (the monitor,
the team page and a shared report).

Screenshots: test-artifacts/workers-{live,gone,team,report}.png.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from types import SimpleNamespace
from urllib.parse import quote

import dask
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.workers import LEFT_TOPIC, MEMORY_KILL_TTL, WorkerLifecycle
from dask_analytics_lab.config import ConfigError, resolve
from dask_analytics_lab.display import worker_peaks

from ..browser_helpers import WIDGET_HARNESS, save, static_server, widget_state
from ..cluster_helpers import FAST, recorded_cluster
from ..waiting import wait_for

VIEWPORT = {"width": 1200, "height": 900}  # the `page` fixture's (conftest.py)

HELD = 64 * 2**20  # bytes a task's result holds in a worker's memory


def hold() -> bytes:
    return b"x" * HELD


def nap(i: int) -> int:
    time.sleep(1.0)  # the task's work: workers busy for a while, seen in their samples
    return i


def hog(i: int) -> int:
    # Touch every page, so the process's RSS (what the nanny watches) really grows.
    block = bytearray(700 * 2**20)
    for at in range(0, len(block), 4096):
        block[at] = 1
    time.sleep(10)  # held until the nanny kills the worker for it
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

        out["holding"] = wait_for(holding, what="a sample with the held bytes managed")
        busy = client.map(nap, range(6))

        def processing():
            rows = dal.list_worker_samples(cid, store=store)
            return [r for r in rows if (r["processing"] or 0) > 0]

        out["busy"] = wait_for(processing, what="a sample with tasks processing")
        client.gather(busy)
        del held
        out["status"] = dal.flush(client)
        out["rows"] = dal.list_worker_samples(cid, store=store)
        # Retired: the scheduler moves its data elsewhere, then removes it as expected.
        out["retired"] = retired = sorted(out["workers"])[0]
        client.retire_workers([retired], close_workers=True)

        def left():
            dal.flush(client)
            return _events(store, cid, "worker-left")

        out["left"] = wait_for(left, what="the retired worker's departure")
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
    before = [
        r for r in sampled["rows"] if r["worker"] == sampled["holder"] and r["time"] < held["time"]
    ]
    assert before and min(r["managed"] for r in before) < HELD


def test_processing_counts_tasks_during_a_busy_computation(sampled):
    assert max(r["processing"] for r in sampled["busy"]) >= 1


def test_workers_already_there_are_recorded_as_joined(sampled):
    joined = _events(sampled["store"], sampled["cluster_id"], "worker-joined")
    assert {e["msg"]["worker"] for e in joined} == sampled["workers"]
    assert all(e["msg"]["already_running"] for e in joined)


def test_a_retired_worker_left_retired(sampled):
    (msg,) = [e["msg"] for e in sampled["left"]]
    assert msg["worker"] == sampled["retired"]
    assert msg["reason"] == "retired" and msg["expected"] is True and msg["died"] is False, msg


def test_interval_is_validated_with_a_clear_error():
    assert resolve()["workers_interval"] == 5.0
    assert resolve()["workers_transmit"] is True
    assert resolve({"analytics.workers.interval": "250ms"})["workers_interval"] == 0.25
    for bad in ("soon", "0s", -1):
        with pytest.raises(
            ConfigError, match=r"analytics\.workers\.interval = .* positive duration"
        ):
            resolve({"analytics.workers.interval": bad})
    with pytest.raises(ConfigError, match=r"analytics\.workers\.transmit"):
        resolve({"analytics.workers.transmit": "maybe"})
    # The lifecycle topics are recorded by default.
    assert {"worker-joined", "worker-left"} <= set(resolve()["events_allow"])


def test_transmit_off_records_no_worker(tmp_path):
    store = str(tmp_path / "analytics.db")
    with recorded_cluster(
        store,
        n_workers=1,
        config={"analytics.workers.transmit": False, "analytics.workers.interval": "100ms"},
    ) as (client, info):
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
    config = {
        **FAST,
        "analytics.workers.interval": "500ms",
        # The hog's task errs at its first killed worker instead of killing three.
        "distributed.scheduler.allowed-failures": 0,
    }
    with dask.config.set(config):
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, memory_limit="500MB", dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            client.wait_for_workers(2)
            out["cluster_id"] = cid = dal.register(client, store=store)["cluster_id"]
            first = set(client.scheduler_info()["workers"])
            cluster.scale(1)
            wait_for(lambda: len(client.scheduler_info()["workers"]) == 1, what="the scale-down")
            (kept,) = client.scheduler_info()["workers"]
            out["closed"] = (first - {kept}).pop()

            out["killed"] = kept
            pid = client.run(os.getpid, workers=[kept])[kept]
            os.kill(pid, signal.SIGKILL)
            wait_for(
                lambda: set(client.scheduler_info()["workers"]) - {kept}, what="the nanny's restart"
            )
            (restarted,) = client.scheduler_info()["workers"]
            out["hogged"] = restarted
            with pytest.raises(Exception, match="KilledWorker|died"):
                client.submit(hog, 1, pure=False).result()
            wait_for(
                lambda: set(client.scheduler_info()["workers"]) - {restarted},
                what="the restart after the hog",
            )
            (out["last"],) = client.scheduler_info()["workers"]

            def recorded():
                dal.flush(client)
                left = _events(store, cid, "worker-left")
                return left if len(left) >= 3 else None

            wait_for(recorded, what="three worker-left events")
            out["samples"] = dal.list_worker_samples(cid, store=store)
            # What the notebook's monitor holds while the cluster still runs.
            out["live_state"] = widget_state(store, cid, None)
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


# --- the Workers section, in Chromium, live and once the cluster is gone ---------------


def _drawn(view, lifecycle) -> dict:
    """What the Workers section drew: the memory chart's areas, its marks, the alert."""
    view.locator(".dal-workers-memory svg path").first.wait_for(state="attached")
    drawn = view.evaluate("""el => ({
        areas: [...el.querySelectorAll(".dal-workers-memory svg path")].filter(p => (p.getAttribute("d") || "").includes("L")).length,
        died: [...el.querySelectorAll(".dal-workers-memory .dal-mark-died title")].map(t => t.textContent),
        label: el.querySelector(".dal-workers-memory svg").getAttribute("aria-label"),
        picked: el.querySelector(".dal-workers-pick").value,
        alerts: [...el.querySelectorAll(".dal-workers-alert")].map(a => a.textContent),
        rows: el.querySelectorAll(".dal-workers-table tr[data-worker]").length,
        width: el.querySelector(".dal-workers-memory svg").getBoundingClientRect().width,
    })""")
    hogged = lifecycle["hogged"].split("://")[1]
    # The worker killed for its memory is the one shown, with its death on the axis.
    assert drawn["picked"] == lifecycle["hogged"], drawn
    assert drawn["areas"] >= 3 and drawn["width"] > 300, drawn
    assert any("killed by its nanny for its memory" in t for t in drawn["died"]), drawn
    assert hogged in drawn["label"], drawn
    memory = [a for a in drawn["alerts"] if hogged in a]
    assert (
        memory and "killed by its nanny for its memory" in memory[0] and "during hog" in memory[0]
    ), drawn
    assert drawn["rows"] >= 4, drawn  # both first workers, the restarted one and the last
    return drawn


def _show_widget(page, tmp_path, state: dict, name: str):
    from dask_analytics_lab.widgets._base import STATIC

    for f in ("monitor.js", "style.css"):
        shutil.copy(STATIC / f, tmp_path / f)
    (tmp_path / "index.html").write_text(WIDGET_HARNESS)
    (tmp_path / f"{name}.json").write_text(json.dumps({**state, "tab": "cluster"}))


def test_the_workers_section_draws_in_the_monitor_live_and_after(lifecycle, page, tmp_path):
    live = lifecycle["live_state"]
    assert live["cluster"]["status"] == "live"
    assert live["workers_base"]["rows"] and live["worker_events"]
    gone = widget_state(lifecycle["store"], lifecycle["cluster_id"], None)
    assert gone["cluster"]["status"] == "stopped"
    _show_widget(page, tmp_path, live, "live")
    _show_widget(page, tmp_path, gone, "gone")
    with static_server(tmp_path) as base:
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        for name in ("live", "gone"):
            page.evaluate(f"() => window.show('{name}')")
            view = page.locator("[data-pane=cluster] .dal-workers")
            _drawn(view, lifecycle)
            view.scroll_into_view_if_needed()
            view.screenshot(path=save(f"workers-{name}.png"))
        # Another worker from the table: its own chart, the same time axis.
        page.locator(f".dal-workers-table tr[data-worker='{lifecycle['killed']}']").click()
        assert page.locator(".dal-workers-pick").input_value() == lifecycle["killed"]
        page.locator(".dal-workers-memory .dal-mark-died title", has_text="died").first.wait_for(
            state="attached"
        )


def test_the_workers_section_of_the_team_page_and_a_shared_report(lifecycle, page, tmp_path):
    from dask_analytics_lab.reports.render import computation_report
    from tests.server_helpers import ServerThread

    url = f"sqlite:///{lifecycle['store']}"
    cid = lifecycle["cluster_id"]
    with ServerThread({"store_url": url, "token_required": False}) as server:
        page.goto(f"{server.url}/clusters/{quote(cid, safe='')}")
        page.wait_for_selector("h2:has-text('Workers over time')")
        _drawn(page.locator("main .dal-workers"), lifecycle)
        page.locator("main .dal-workers").screenshot(path=save("workers-team.png"))
    (comp,) = dal.list_computations(cid, store=lifecycle["store"])
    html, twin, _ = computation_report(comp["computation_id"], store=url)
    assert {r["worker"] for r in twin["worker_samples"]} >= {lifecycle["hogged"]}
    assert any(
        e["msg"]["reason"] == "memory" for e in twin["worker_events"] if e["topic"] == "worker-left"
    )
    (tmp_path / "report.html").write_text(html)
    page.goto((tmp_path / "report.html").as_uri())
    page.locator(".dal-tab", has_text="Cluster").click()
    _drawn(page.locator("[data-pane=cluster] .dal-workers"), lifecycle)
    page.locator("[data-pane=cluster] .dal-workers").screenshot(path=save("workers-report.png"))


def _memory_points(page) -> int:
    """Points on the shown worker's managed-memory line (its first stroked path)."""
    return page.locator(".dal-workers-memory svg").evaluate(
        """svg => { const line = [...svg.querySelectorAll("path")].find(p => p.getAttribute("fill") === "none");
                    return line ? (line.getAttribute("d").match(/[ML]/g) || []).length : 0; }"""
    )


def test_the_workers_section_draws_while_the_cluster_runs(page, tmp_path):
    """Live: the monitor's chart grows as the feed sends newer samples, and the team
    page draws a running cluster's workers."""
    from dask_analytics_lab.widgets.monitor_widget import MonitorWidget
    from tests.server_helpers import ServerThread

    store = str(tmp_path / "analytics.db")
    url = f"sqlite:///{store}"
    with recorded_cluster(store, config={"analytics.workers.interval": "200ms"}) as (client, info):
        cid = info["cluster_id"]
        held = client.submit(hold)
        held.result()
        wait_for(
            lambda: (
                dal.flush(client)
                and len({r["time"] for r in dal.list_worker_samples(cid, store=store)}) >= 3
            ),
            what="three samples",
        )
        w = MonitorWidget(cid, store=url, start=False)
        try:
            for _ in range(3):
                w.refresh()
            first = json.loads(
                json.dumps({k: v for k, v in w.get_state().items() if not k.startswith("_")})
            )
            assert first["cluster"]["status"] == "live" and first["workers_base"]["rows"]
            _show_widget(page, tmp_path, first, "first")
            with static_server(tmp_path) as base:
                page.goto(f"{base}/index.html")
                page.wait_for_function("() => window.harnessReady === true")
                page.evaluate("() => window.show('first')")
                page.locator("[data-pane=cluster] .dal-workers-memory svg path").first.wait_for(
                    state="attached"
                )
                before = _memory_points(page)
                assert before >= 1
                seen = len(first["workers_base"]["rows"])
                wait_for(
                    lambda: (
                        dal.flush(client)
                        and len(dal.list_worker_samples(cid, store=store)) >= seen + 10
                    ),
                    what="newer samples",
                )
                for _ in range(5):  # the feed reads workers every few ticks
                    w.refresh()
                state = json.loads(
                    json.dumps({k: w.get_state()[k] for k in ("workers_base", "workers_patch")})
                )
                page.evaluate(
                    "s => { window.model.set('workers_base', s.workers_base); "
                    "window.model.set('workers_patch', s.workers_patch); }",
                    state,
                )
                page.wait_for_function(
                    """n => { const svg = document.querySelector(".dal-workers-memory svg");
                              const line = [...svg.querySelectorAll("path")].find(p => p.getAttribute("fill") === "none");
                              return line && (line.getAttribute("d").match(/[ML]/g) || []).length > n; }""",
                    arg=before,
                )
        finally:
            w.close()
        with ServerThread({"store_url": url, "token_required": False}) as server:
            page.goto(f"{server.url}/clusters/{quote(cid, safe='')}")
            page.wait_for_selector("h2:has-text('Workers over time')")
            assert page.locator("h1 .state").inner_text() == "live"
            view = page.locator("main .dal-workers")
            view.locator(".dal-workers-memory svg path").first.wait_for(state="attached")
            assert view.locator(".dal-workers-table tr[data-worker]").count() == 2
            assert "Most memory" in view.locator(".dal-workers-peak").inner_text()
        del held
    close_readers()


# --- the lifecycle's bookkeeping, alone ------------------------------------------------


def _worker(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, host="127.0.0.1", nthreads=1, memory_limit=10**9)


def _lifecycle_alone() -> tuple[WorkerLifecycle, list]:
    events: list = []
    return WorkerLifecycle(lambda topic, msg, t: events.append((topic, msg))), events


def test_workers_still_there_when_the_scheduler_closes_leave_closed_with_it():
    # The scheduler closes its plugins before it lets its workers go (client.shutdown(),
    # an idle timeout): without this they would never have left.
    life, events = _lifecycle_alone()
    for a in ("tcp://a:1", "tcp://b:1"):
        life.joined(a, _worker(a), 100.0)
    life.left("tcp://a:1", "handle-worker-cleanup-1", 110.0)
    life.scheduler_closing(120.0)
    life.flush(120.0, force=True)
    left = {msg["worker"]: msg for topic, msg in events if topic == LEFT_TOPIC}
    assert set(left) == {"tcp://a:1", "tcp://b:1"}
    assert (
        left["tcp://b:1"]["reason"] == "closed"
        and left["tcp://b:1"]["stimulus_id"] == "scheduler-close"
    )
    assert left["tcp://a:1"]["reason"] == "died"  # no closing status, no memory kill
    life.scheduler_closing(121.0)  # nothing left to close: no second departure
    life.flush(121.0, force=True)
    assert sum(topic == LEFT_TOPIC for topic, _ in events) == 2


def test_an_address_reused_by_a_new_worker_starts_clean():
    life, events = _lifecycle_alone()
    life.memory_killed(
        {"worker": "tcp://a:1", "rss": 5 * 10**8}, 100.0
    )  # late: its worker long gone
    life.status_changed("tcp://a:1", {"status": "closing"})
    life.joined("tcp://a:1", _worker("new"), 200.0)  # a fixed --worker-port, a new process
    life.left("tcp://a:1", "handle-worker-cleanup-2", 300.0)
    life.flush(300.0, force=True)
    (msg,) = [m for topic, m in events if topic == LEFT_TOPIC]
    assert msg["reason"] == "died" and "rss" not in msg, msg


def test_a_memory_kill_whose_removal_never_came_is_forgotten_in_time_not_in_bulk():
    life, events = _lifecycle_alone()
    life.memory_killed({"worker": "tcp://old:1", "rss": 1}, 100.0)
    for i in range(150):  # a wave of kills: each waits for its own removal
        life.memory_killed({"worker": f"tcp://w{i}:1", "rss": 1}, 500.0)
    life.flush(500.0 + MEMORY_KILL_TTL / 2)
    life.left("tcp://w149:1", "x", 510.0)
    life.flush(510.0, force=True)
    (msg,) = [m for topic, m in events if topic == LEFT_TOPIC]
    assert msg["reason"] == "memory", msg  # kept, though 150 were held
    life.left("tcp://old:1", "y", 520.0)
    life.flush(520.0, force=True)
    assert [m for topic, m in events if topic == LEFT_TOPIC][-1][
        "reason"
    ] == "died"  # expired after its TTL


def test_thinned_samples_keep_each_stretchs_memory_cpu_and_tasks_peaks():
    rows = [
        {
            "worker": "w",
            "time": float(t),
            "managed": 0,
            "unmanaged": 10,
            "spilled": 0,
            "cpu": 5.0,
            "processing": 1,
        }
        for t in range(1000)
    ]
    rows[10].update(unmanaged=900)  # the memory peak
    rows[20].update(cpu=390.0)  # the CPU peak, in the same stretch
    rows[30].update(processing=64)
    rows[40].update(spilled=10**9)  # on disk: not the process's memory
    kept = worker_peaks(rows, 10)
    assert {r["time"] for r in kept} >= {10.0, 20.0, 30.0}
    assert 40.0 not in {r["time"] for r in kept}
    assert len(kept) <= 3 * 10 and [r["time"] for r in kept] == sorted(r["time"] for r in kept)
