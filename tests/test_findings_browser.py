"""Issue 21 as a person sees it: a computation with a straggler on a real LocalCluster, in
the notebook monitor (its kernel-side feed, rendered by the built monitor.js in
Chromium): the top finding as a line above the task groups, and the Findings tab with
the finding's evidence and advice; a healthy computation has none.  A shared report of
it (reports/render.py, opened from disk in an offline page) shows the findings made
when the report was.

The screenshot is test-artifacts/findings-monitor.png (docs/img/ holds a copy for the
README).
"""
from __future__ import annotations

import json
import shutil

import pytest
from dask import delayed

from dask_analytics_lab.api import close_readers
from dask_analytics_lab.reports.render import computation_report
from tests.browser_helpers import WIDGET_HARNESS, save, static_server, widget_state
from tests.cluster_helpers import recorded_cluster
from tests.test_report_links import offline_page
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


def test_a_shared_report_shows_why_it_was_slow(straggled, browser, tmp_path):
    url, _, ids = straggled
    html, twin, _ = computation_report(ids["straggler"], store=url)
    [found] = twin["findings"]
    assert found["kind"] == "straggler" and found["groups"] == ["spin"]
    path = tmp_path / "report.html"
    path.write_text(html)
    page = offline_page(browser, viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    monitor = page.locator(".dal-monitor")
    top = monitor.locator(".dal-taskgroups .dal-top-finding")
    top.wait_for(timeout=30_000)
    assert found["title"] in top.inner_text()
    assert monitor.locator(".dal-tab[data-tab='findings']").inner_text() == "Findings1"
    top.click()
    card = monitor.locator(".dal-pane[data-pane='findings'] .dal-finding[data-kind='straggler']")
    card.wait_for(state="visible")
    assert card.locator(".dal-finding-title").inner_text() == found["title"]
    assert found["evidence"] in card.locator(".dal-finding-evidence").inner_text()
    assert found["advice"] in card.locator(".dal-finding-advice").inner_text()
    monitor.screenshot(path=save("findings-report.png"))
    assert errors == [] and page.blocked == []

    # A healthy computation's report: nothing to tell, and it says so.
    html, twin, _ = computation_report(ids["healthy"], store=url)
    assert twin["findings"] == []
    path.write_text(html)
    page.goto(path.as_uri())
    monitor.locator(".dal-taskgroups table").wait_for(timeout=30_000)
    assert monitor.locator(".dal-top-finding").count() == 0
    monitor.locator(".dal-tab[data-tab='findings']").click()
    assert "No findings" in monitor.locator(".dal-pane[data-pane='findings']").inner_text()
