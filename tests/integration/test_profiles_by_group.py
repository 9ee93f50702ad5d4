"""Issue 12, items 2 and 3: a profile per task group (prefix), and a live one.

Real LocalCluster, real worker profiles: one computation with two CPU-bound groups;
each group's profile holds its own function and none of the other's.  A computation
that runs for a while has a profile before it ends.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
from dask import delayed
from distributed import Event

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.store import NotFound

from ..browser_helpers import WIDGET_HARNESS, save, static_server, widget_state
from ..cluster_helpers import recorded_cluster
from ..waiting import wait_for


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def alpha_work(i: int, until: str | None = None) -> int:
    """0.4 s of CPU; given the name of a distributed Event, CPU until it is set."""
    if until is None:
        _spin(0.4)
        return i
    done = Event(until)
    while not done.is_set():
        _spin(0.1)
    return i


def beta_work(i: int) -> int:
    _spin(0.4)
    return i


def frames(tree: dict) -> set[str]:
    out, stack = set(), [tree]
    while stack:
        node = stack.pop()
        out.add(node.get("description", {}).get("name", ""))
        stack.extend(node.get("children", {}).values())
    return out


@pytest.fixture(scope="module")
def two_groups(tmp_path_factory):
    """One computation with two CPU-bound groups, alpha_work and beta_work."""
    store = str(tmp_path_factory.mktemp("profiles") / "analytics.db")
    with recorded_cluster(store) as (client, info):
        parts = [delayed(alpha_work)(i) for i in range(4)] + [
            delayed(beta_work)(i) for i in range(4)
        ]
        assert sum(client.compute(parts, sync=True)) == 12
        assert dal.flush(client, timeout=30)["flushed"]
    (comp,) = dal.list_computations(info["cluster_id"], store=store)
    yield store, info["cluster_id"], comp["computation_id"]
    close_readers()


def test_each_groups_profile_holds_only_its_own_frames(two_groups):
    store, _, cid = two_groups
    alpha = frames(dal.get_profile(cid, prefix="alpha_work", store=store))
    beta = frames(dal.get_profile(cid, prefix="beta_work", store=store))
    assert "alpha_work" in alpha and "beta_work" not in alpha, alpha
    assert "beta_work" in beta and "alpha_work" not in beta, beta
    assert {"alpha_work", "beta_work"} <= frames(dal.get_profile(cid, store=store))
    with pytest.raises(ValueError, match="pass computation_id= too"):
        dal.get_profile(cluster_id="x", prefix="alpha_work", store=store)


def test_the_widget_reads_the_profile_of_the_group_chosen(two_groups):
    from dask_analytics_lab.widgets.monitor_widget import MonitorWidget

    store, cluster_id, cid = two_groups
    w = MonitorWidget(cluster_id, computation_id=cid, store=store, start=False)
    try:
        for _ in range(3):
            w.refresh()
        assert w.profile_prefixes == ["alpha_work", "beta_work"]
        assert {"alpha_work", "beta_work"} <= frames(w.profile)
        w.profile_prefix = "beta_work"  # as the picker does
        w.refresh()
        assert "beta_work" in frames(w.profile) and "alpha_work" not in frames(w.profile)
        w.profile_prefix = ""
        w.refresh()
        assert {"alpha_work", "beta_work"} <= frames(w.profile)
    finally:
        w.close()


def test_the_flamegraph_picks_a_group_and_hides_dask_internals(two_groups, tmp_path, browser):
    from dask_analytics_lab.widgets._base import STATIC

    store, cluster_id, cid = two_groups
    state = {**widget_state(store, cluster_id, cid), "tab": "profile"}
    alpha = json.loads(json.dumps(dal.get_profile(cid, prefix="alpha_work", store=store)))
    shutil.copy(STATIC / "monitor.js", tmp_path / "monitor.js")
    shutil.copy(STATIC / "style.css", tmp_path / "style.css")
    (tmp_path / "index.html").write_text(WIDGET_HARNESS)
    (tmp_path / "profile.json").write_text(json.dumps(state))
    with static_server(tmp_path) as base:
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        page.evaluate("() => window.show('profile')")
        flame = page.locator(".dal-monitor .dal-flame")
        canvas = flame.locator("canvas")
        canvas.wait_for(state="visible")
        picker = flame.locator("select.dal-prefix-picker")
        assert picker.locator("option").all_inner_texts() == [
            "All task groups",
            "alpha_work",
            "beta_work",
        ]
        picker.select_option("alpha_work")
        assert page.evaluate("() => window.model.get('profile_prefix')") == "alpha_work"
        page.evaluate(
            "tree => window.model.set('profile', tree)", alpha
        )  # what the kernel sends back

        def first_below_root() -> str:
            """The frame drawn leftmost on the row under the root (hovered: its tooltip)."""
            box = canvas.bounding_box()
            page.mouse.move(box["x"] + 200, box["y"] + 300)
            page.mouse.move(box["x"] + 20, box["y"] + 18 + 9)
            tip = page.locator(".dal-tip")
            tip.wait_for(state="visible")
            return tip.inner_text().split("\n")[0]

        assert "alpha_work" not in first_below_root()  # Dask's task runner comes first
        flame.locator("label", has_text="Hide Dask internals").locator("input").check()
        assert first_below_root().startswith("alpha_work")
        flame.screenshot(path=save("flamegraph-group-no-internals.png"))
        page.close()


def test_a_running_computation_has_a_profile_before_it_ends(tmp_path):
    store = str(tmp_path / "analytics.db")
    try:
        with recorded_cluster(store) as (client, info):
            # Work on both threads until the test has seen a profile (after a live
            # interval): however busy the machine, the computation is still running.
            stop = Event("alpha-may-stop", client=client)
            parts = [delayed(alpha_work)(i, "alpha-may-stop") for i in range(2)]
            future = client.compute(delayed(sum)(parts))

            def profile_while_running() -> bool:
                try:
                    comps = dal.list_computations(info["cluster_id"], store=store)
                except NotFound:  # the cluster's first message is not in yet
                    return False
                if not comps or comps[0]["state"] != "running":
                    return False
                return dal.get_profile(comps[0]["computation_id"], store=store)["count"] > 0

            wait_for(profile_while_running, what="a profile while the computation runs")
            assert not future.done()
            stop.set()
            assert future.result() == sum(range(2))
            assert dal.flush(client, timeout=30)["flushed"]
        (comp,) = dal.list_computations(info["cluster_id"], store=store)
        assert comp["state"] == "finished"
        assert "alpha_work" in frames(dal.get_profile(comp["computation_id"], store=store))
    finally:
        close_readers()
