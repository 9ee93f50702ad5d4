"""Issue 12, item 4 (the view) and issue 11, item 5: the task stream drawn in Chromium
(js/widgets/stream.ts) from what a real LocalCluster recorded, live while a computation
runs and after the cluster is gone: the notebook monitor's "Task stream" tab, the team
page's computation page and a shared report; past the collector's limit it is drawn
from bins.  The report also carries the cluster's GPU samples of the computation's window.

Screenshot: test-artifacts/task-stream.png.
"""

from __future__ import annotations

import json
import shutil
import time
from urllib.parse import quote

import pytest
from distributed import wait

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers

from ..browser_helpers import WIDGET_HARNESS, browser_table, save, static_server, widget_state
from ..cluster_helpers import recorded_cluster
from ..waiting import wait_for

VIEWPORT = {"width": 1200, "height": 720}  # the `page` fixture's (conftest.py)

N_SLOW = 24  # tasks of the live computation: 0.25 s each on 2 single-thread workers
N_BINNED = 300


def slow_inc(x: int) -> int:
    time.sleep(0.25)  # the task's work: a bar of some width in the stream
    return x + 1


def nap_a(x: int) -> int:
    time.sleep(0.3)  # the task's work: two prefixes side by side in the stream
    return x


def nap_b(x: int) -> int:
    time.sleep(0.3)  # as nap_a
    return x


def quick(x: int) -> int:
    time.sleep(0.002)  # the task's work: a short one
    return x


def _table(state) -> list[dict]:
    """The task stream a widget (or its state) holds, as the browser reads it."""
    return list(browser_table(state, "stream", "id").values())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One cluster, two computations: slow_inc (rows, watched live by a monitor widget)
    then quick past the limit (bins)."""
    from dask_analytics_lab.widgets.monitor_widget import MonitorWidget

    store = str(tmp_path_factory.mktemp("stream") / "analytics.db")
    url = f"sqlite:///{store}"
    out: dict = {"store": url}
    config = {"analytics.task-stream.max-tasks": 100, "analytics.task-stream.max-bins": 60}
    with recorded_cluster(store, config=config) as (client, info):
        out["cluster_id"] = cid = info["cluster_id"]
        w = MonitorWidget(cid, store=url, start=False)
        try:
            futures = client.map(slow_inc, range(N_SLOW))

            def seen_running():
                w.refresh()
                return (
                    w.computation.get("state") == "running"
                    and 0 < len(_table(w)) < N_SLOW
                    and json.loads(
                        json.dumps(
                            {
                                k: v
                                for k, v in w.get_state().items()
                                if not k.startswith("_") and k != "layout"
                            }
                        )
                    )
                )

            out["live_state"] = wait_for(
                seen_running, what="a running computation's first tasks in the widget"
            )
            wait(futures)

            def all_in():
                w.refresh()
                return w.computation.get("state") == "finished" and len(_table(w)) == N_SLOW

            wait_for(all_in, what="every task of the finished computation in the widget")
        finally:
            w.close()
        out["slow"] = w.computation["computation_id"]
        wait(client.map(quick, range(N_BINNED)))

        def binned():
            dal.flush(client)
            comps = dal.list_computations(cid, store=url)
            if len(comps) < 2 or comps[0]["state"] == "running":
                return None
            rows = dal.list_task_stream(comps[0]["computation_id"], store=url)
            return (
                comps[0]["computation_id"]
                if rows and sum(r["n_tasks"] for r in rows) == N_BINNED
                else None
            )

        out["binned"] = wait_for(binned, what="the binned computation's stream")
        futures = client.map(nap_a, range(4)) + client.map(nap_b, range(4))
        wait(futures)

        def newest_done():
            dal.flush(client)
            c = dal.list_computations(cid, store=url)[0]
            return (
                c["computation_id"]
                if c["computation_id"] != out["binned"] and c["state"] != "running"
                else None
            )

        out["two"] = wait_for(newest_done, what="the two-prefix computation")
    yield out
    close_readers()


def test_the_widget_receives_the_stream_while_it_runs_and_all_of_it_after(recorded):
    live = recorded["live_state"]
    assert live["computation"]["state"] == "running"
    assert 0 < len(_table(live)) < N_SLOW
    row = _table(live)[0]
    assert set(row) == {
        "id",
        "start",
        "stop",
        "worker",
        "thread",
        "prefix",
        "state",
        "n_tasks",
        "busy",
        "binned",
    }
    assert (
        row["prefix"] == "slow_inc" and row["stop"] - row["start"] >= 0.2 and "//" in row["worker"]
    )
    after = _table(widget_state(recorded["store"], recorded["cluster_id"], recorded["slow"]))
    assert len(after) == N_SLOW and {r["prefix"] for r in after} == {"slow_inc"}
    assert len({r["worker"] for r in after}) == 2


def test_a_report_carries_the_task_stream_and_the_windows_gpu_samples(recorded):
    from dask_analytics_lab.reports.render import computation_report

    html, twin, _ = computation_report(recorded["slow"], store=recorded["store"])
    assert len(twin["task_stream"]) == N_SLOW and twin["gpu"] == []  # no GPU on this machine
    assert html.count('"prefix":"slow_inc"') >= N_SLOW  # in the page's state, not only the twin
    _, twin, _ = computation_report(recorded["binned"], store=recorded["store"])
    assert (
        all(r["binned"] for r in twin["task_stream"])
        and sum(r["n_tasks"] for r in twin["task_stream"]) == N_BINNED
    )


# --- in Chromium ---------------------------------------------------------------------


def _drawn(view) -> dict:
    """The canvas's label and how many of its pixels are painted."""
    canvas = view.locator("canvas")
    canvas.wait_for(state="visible")
    return canvas.evaluate("""c => {
        const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        let painted = 0;
        for (let i = 3; i < d.length; i += 4) if (d[i] > 0) painted++;
        return { label: c.getAttribute("aria-label"), painted, height: c.height };
    }""")


def _hover_first_bar(page, view) -> str:
    """Move the mouse over the first painted pixel of the first lane: the tooltip's text."""
    canvas = view.locator("canvas")
    x = canvas.evaluate("""c => {
        const ctx = c.getContext("2d"), y = Math.round(5 * c.height / c.clientHeight);
        const d = ctx.getImageData(0, y, c.width, 1).data;
        for (let x = Math.round(c.width / 6); x < c.width; x++) if (d[4 * x + 3] > 0) return x * c.clientWidth / c.width;
        return -1;
    }""")
    assert x >= 0, "nothing drawn in the first lane"
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + x + 2, box["y"] + 5)
    tip = page.locator(".dal-tip:visible")
    tip.wait_for(state="visible")
    return tip.inner_text()


def _show(page, tmp_path, states: dict) -> None:
    from dask_analytics_lab.widgets._base import STATIC

    shutil.copy(STATIC / "monitor.js", tmp_path / "monitor.js")
    shutil.copy(STATIC / "style.css", tmp_path / "style.css")
    (tmp_path / "index.html").write_text(WIDGET_HARNESS)
    for name, state in states.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({**state, "tab": "stream"}))


def test_the_monitor_draws_the_stream_live_and_after_the_cluster_is_gone(recorded, page, tmp_path):
    after = widget_state(recorded["store"], recorded["cluster_id"], recorded["slow"])
    binned = widget_state(recorded["store"], recorded["cluster_id"], recorded["binned"])
    _show(page, tmp_path, {"live": recorded["live_state"], "after": after, "binned": binned})
    with static_server(tmp_path) as base:
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        monitor = page.locator(".dal-monitor")
        pane = monitor.locator("[data-pane=stream]")

        page.evaluate("() => window.show('live')")
        assert monitor.locator(".dal-tab.active").inner_text() == "Task stream"
        live = _drawn(pane)
        n_live = len(_table(recorded["live_state"]))
        assert (
            live["label"].startswith(f"Task stream: {n_live} tasks on ") and live["painted"] > 200
        ), live

        page.evaluate("() => window.show('after')")
        done = _drawn(pane)
        assert done["label"].startswith(f"Task stream: {N_SLOW} tasks on 2 workers over "), done
        assert done["painted"] > live["painted"], (done, live)
        assert "slow_inc" in pane.locator(".dal-legend").inner_text()
        tip = _hover_first_bar(page, pane)
        assert tip.startswith("slow_inc") and "thread" in tip, tip
        monitor.screenshot(path=save("task-stream.png"))

        page.evaluate("() => window.show('binned')")
        drawn = _drawn(pane)
        assert (
            drawn["label"].startswith(f"Task stream: {N_BINNED} tasks on ")
            and "binned in" in drawn["label"]
        ), drawn
        assert drawn["painted"] > 100, drawn
        assert "tasks started here" in _hover_first_bar(page, pane)

        # Recorded without a task stream: it says why, rather than drawing nothing.
        page.evaluate(
            "() => { window.model.set('stream_patch', {v: 0, rows: [], removed: []}); "
            "window.model.set('stream_base', {v: 0, rows: []}); }"
        )
        pane.locator(".dal-empty", has_text="No task stream recorded").wait_for()


def test_the_team_page_and_a_shared_report_draw_it(recorded, page, tmp_path):
    from dask_analytics_lab.reports.render import computation_report
    from tests.server_helpers import ServerThread

    slow = recorded["slow"]
    with ServerThread({"store_url": recorded["store"], "token_required": False}) as server:
        page.goto(f"{server.url}/computations/{quote(slow, safe='')}")
        page.wait_for_selector("h2:has-text('Task stream')")
        drawn = _drawn(page.locator("main .stream"))
        assert drawn["label"].startswith(f"Task stream: {N_SLOW} tasks on 2 workers"), drawn
    html, _, _ = computation_report(slow, store=recorded["store"])
    (tmp_path / "report.html").write_text(html)
    page.goto((tmp_path / "report.html").as_uri())
    page.locator(".dal-tab", has_text="Task stream").click()
    drawn = _drawn(page.locator("[data-pane=stream]"))
    assert (
        drawn["label"].startswith(f"Task stream: {N_SLOW} tasks on 2 workers")
        and drawn["painted"] > 200
    ), drawn


def test_a_reports_flamegraph_picker_shows_each_groups_own_profile_offline(
    recorded, page, tmp_path
):
    from dask_analytics_lab.reports.render import computation_report

    two, store = recorded["two"], recorded["store"]
    for prefix in ("nap_a", "nap_b"):
        wait_for(
            lambda: dal.get_profile(computation_id=two, prefix=prefix, store=store).get("count"),
            what=f"{prefix}'s profile",
        )
    html, twin, _ = computation_report(two, store=store)
    assert sorted(twin["profiles"]) == ["nap_a", "nap_b"]
    whole, b = twin["profile"]["count"], twin["profiles"]["nap_b"]["count"]
    assert 0 < b < whole < 10_000  # the view writes counts under 10,000 in full
    (tmp_path / "report.html").write_text(html)
    page.goto((tmp_path / "report.html").as_uri())
    page.locator(".dal-tab", has_text="Profile").click()
    info = page.locator("[data-pane=profile] .dal-flame-bar")
    info.get_by_text(f"{whole} samples").wait_for()
    page.locator("[data-pane=profile] select.dal-prefix-picker").select_option("nap_b")
    info.get_by_text(f"{b} samples").wait_for()
