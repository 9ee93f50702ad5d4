"""Issue 21 as a person sees it: a computation with a straggler on a real LocalCluster, in
the notebook monitor (its kernel-side feed, rendered by the built monitor.js in
Chromium): the top finding as a line above the task groups, and the Findings tab with
the finding's evidence and advice; a healthy computation has none.

The screenshot is test-artifacts/findings-monitor.png (docs/img/ holds a copy for the
README).
"""
from __future__ import annotations

import json
import shutil

import pytest
from dask import delayed

from dask_analytics_lab.api import close_readers
from tests.browser_helpers import WIDGET_HARNESS, save, static_server, widget_state
from tests.cluster_helpers import recorded_cluster
from tests.test_findings import Scenarios, spin, total

VIEWPORT = {"width": 1100, "height": 700}  # the `page` fixture's (conftest.py)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def straggled(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('findings') / 'analytics.db'}"
    with recorded_cluster(url) as (client, info):
        run = Scenarios(client, url, info["cluster_id"])
        run("straggler", lambda: client.compute(
            delayed(total)([delayed(spin)(1.5 if i == 5 else 0.05, i) for i in range(10)])).result())
        run("healthy", lambda: client.compute(delayed(total)([delayed(spin)(0.2, i) for i in range(8)])).result())
    yield url, info["cluster_id"], run.ids
    close_readers()


def test_the_monitor_shows_why_it_was_slow(straggled, page, tmp_path):
    from dask_analytics_lab.widgets._base import STATIC

    url, cluster_id, ids = straggled
    state = widget_state(url, cluster_id, ids["straggler"])
    assert state["findings"]["computation_id"] == ids["straggler"]
    assert [f["kind"] for f in state["findings"]["findings"]] == ["straggler"]
    shutil.copy(STATIC / "monitor.js", tmp_path / "monitor.js")
    shutil.copy(STATIC / "style.css", tmp_path / "style.css")
    (tmp_path / "index.html").write_text(WIDGET_HARNESS)
    (tmp_path / "straggler.json").write_text(json.dumps(state))
    (tmp_path / "healthy.json").write_text(json.dumps(widget_state(url, cluster_id, ids["healthy"])))
    with static_server(tmp_path) as base:
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        page.evaluate("() => window.show('straggler')")
        monitor = page.locator(".dal-monitor")
        top = monitor.locator(".dal-taskgroups .dal-top-finding")
        top.wait_for()
        assert top.inner_text().startswith("straggler") and "a straggler in spin held up the end" in top.inner_text()
        assert monitor.locator(".dal-tab[data-tab='findings']").inner_text() == "Findings1"

        top.click()  # opens the Findings tab
        pane = monitor.locator(".dal-pane[data-pane='findings']")
        pane.wait_for(state="visible")
        card = pane.locator(".dal-finding[data-kind='straggler']")
        assert card.count() == 1
        assert "a task of spin ran" in card.locator(".dal-finding-evidence").inner_text()
        assert card.locator(".dal-finding-advice").inner_text().startswith("Advice")
        assert card.locator(".dal-chip").all_inner_texts()[0] == "spin"
        assert "lost" in card.locator(".dal-finding-cost").inner_text()
        monitor.screenshot(path=save("findings-monitor.png"))

        # A healthy computation: no line, and the tab says there is nothing to tell.
        page.evaluate("() => window.show('healthy')")
        monitor.locator(".dal-taskgroups table").wait_for()
        assert monitor.locator(".dal-top-finding").count() == 0
        monitor.locator(".dal-tab[data-tab='findings']").click()
        assert "No findings" in monitor.locator(".dal-pane[data-pane='findings']").inner_text()
