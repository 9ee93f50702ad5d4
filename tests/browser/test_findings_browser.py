"""Issue 21 as a person sees it: a computation with a straggler on a real LocalCluster, in
the notebook monitor (its kernel-side feed, rendered by the built monitor.js in
Chromium): the top finding as a line above the task groups, and the Findings tab with
the finding's evidence and advice; a healthy computation has none.  A shared report of
it (reports/render.py, opened from disk in an offline page) shows the findings made
when the report was; so does the JupyterLab panel (js/lab/model.ts, over the server
extension's API) of a `jupyter lab` on the same store, and the team page's computation
page (js/team/app.ts) of a `dask-analytics server` on it.

The screenshot is test-artifacts/findings-monitor.png (docs/img/ holds a copy for the
README).
"""

from __future__ import annotations

import json
import shutil

import pytest
from dask import delayed

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.findings.finding import WHY
from dask_analytics_lab.reports.render import computation_report
from tests.browser_helpers import (
    WIDGET_HARNESS,
    jupyter_lab,
    offline_page,
    save,
    static_server,
    widget_state,
)
from tests.cluster_helpers import Scenarios, recorded_cluster
from tests.server_helpers import ServerThread
from tests.workloads import spin, total

VIEWPORT = {"width": 1100, "height": 700}  # the `page` fixture's (conftest.py)

pytestmark = pytest.mark.timeout(180)


def healthy_findings(url: str, cid: str) -> list[dict]:
    """The healthy twin's findings: none of its own.  On a busy machine it may have one
    about the machine (cpu-starved), true of anything run there: the views show that."""
    found = dal.explain(cid, store=url)
    assert all(f["kind"] == "cpu-starved" for f in found), found
    return found


def shows_healthy(root, found: list[dict]) -> None:
    """`root`'s findings pane says there is nothing to tell, or shows only the machine's."""
    pane = root.locator(".dal-pane[data-pane='findings']")
    if found:
        pane.locator(".dal-finding[data-kind='cpu-starved']").wait_for(timeout=30_000)
        assert pane.locator(".dal-finding").count() == len(found)
    else:
        pane.get_by_text("No findings").wait_for(timeout=30_000)
        assert pane.locator(".dal-finding").count() == 0
    assert root.locator(".dal-top-finding").count() == len(found[:1])


@pytest.fixture(scope="module")
def straggled(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('findings') / 'analytics.db'}"
    with recorded_cluster(url) as (client, info):
        run = Scenarios(client, url, info["cluster_id"])
        run(
            "straggler",
            lambda: client.compute(
                delayed(total)([delayed(spin)(3.0 if i == 5 else 0.05, i) for i in range(10)])
            ).result(),
        )
        run(
            "healthy",
            lambda: client.compute(
                delayed(total)([delayed(spin)(0.2, i) for i in range(8)])
            ).result(),
        )
    yield url, info["cluster_id"], run.ids
    close_readers()


def test_the_monitor_shows_why_it_was_slow(straggled, page, tmp_path):
    from dask_analytics_lab.widgets._base import STATIC

    url, cluster_id, ids = straggled
    state = widget_state(url, cluster_id, ids["straggler"])
    assert state["findings"]["computation_id"] == ids["straggler"]
    # What holds on a busy machine too: the straggler is among the top two (a loaded
    # machine can add a finding of its own beside it).
    findings = state["findings"]["findings"]
    assert "straggler" in [f["kind"] for f in findings[:2]], findings
    shutil.copy(STATIC / "monitor.js", tmp_path / "monitor.js")
    shutil.copy(STATIC / "style.css", tmp_path / "style.css")
    (tmp_path / "index.html").write_text(WIDGET_HARNESS)
    (tmp_path / "straggler.json").write_text(json.dumps(state))
    (tmp_path / "healthy.json").write_text(
        json.dumps(widget_state(url, cluster_id, ids["healthy"]))
    )
    with static_server(tmp_path) as base:
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        page.evaluate("() => window.show('straggler')")
        monitor = page.locator(".dal-monitor")
        top = monitor.locator(".dal-taskgroups .dal-top-finding")
        top.wait_for()
        assert findings[0]["title"] in top.inner_text()  # the line shows the costliest
        tab = monitor.locator(".dal-tab[data-tab='findings']")
        assert tab.inner_text() == f"Findings{len(findings)}"

        top.click()  # opens the Findings tab
        pane = monitor.locator(".dal-pane[data-pane='findings']")
        pane.wait_for(state="visible")
        card = pane.locator(".dal-finding[data-kind='straggler']")
        assert card.count() == 1
        assert "a task of spin ran" in card.locator(".dal-finding-evidence").inner_text()
        assert card.locator(".dal-finding-advice").inner_text().startswith("Advice")
        assert card.locator(".dal-chip").all_inner_texts()[0] == "spin"
        assert "to save" in card.locator(".dal-finding-cost").inner_text()
        assert card.locator(".dal-finding-why").inner_text() == WHY["straggler"]
        monitor.screenshot(path=save("findings-monitor.png"))

        # A healthy computation: no line, and the tab says there is nothing to tell.
        page.evaluate("() => window.show('healthy')")
        monitor.locator(".dal-taskgroups table").wait_for()
        monitor.locator(".dal-tab[data-tab='findings']").click()
        shows_healthy(monitor, healthy_findings(url, ids["healthy"]))


def test_a_shared_report_shows_why_it_was_slow(straggled, browser, tmp_path):
    url, _, ids = straggled
    html, twin, _ = computation_report(ids["straggler"], store=url)
    found = next(f for f in twin["findings"][:2] if f["kind"] == "straggler")
    assert found["groups"] == ["spin"]
    path = tmp_path / "report.html"
    path.write_text(html)
    page = offline_page(browser, viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    monitor = page.locator(".dal-monitor")
    top = monitor.locator(".dal-taskgroups .dal-top-finding")
    top.wait_for(timeout=30_000)
    assert twin["findings"][0]["title"] in top.inner_text()
    tab = monitor.locator(".dal-tab[data-tab='findings']")
    assert tab.inner_text() == f"Findings{len(twin['findings'])}"
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
    assert twin["findings"] == healthy_findings(url, ids["healthy"])
    path.write_text(html)
    page.goto(path.as_uri())
    monitor.locator(".dal-taskgroups table").wait_for(timeout=30_000)
    monitor.locator(".dal-tab[data-tab='findings']").click()
    shows_healthy(monitor, twin["findings"])


def test_the_lab_panel_shows_why_it_was_slow(straggled, browser, tmp_path):
    url, cluster_id, ids = straggled
    findings = dal.explain(ids["straggler"], store=url)
    found = next(f for f in findings[:2] if f["kind"] == "straggler")  # a busy machine may add one
    with jupyter_lab(tmp_path, url) as lab:
        page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(lab.url("lab"))
        page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.commands.hasCommand('dask-analytics:open')",
            timeout=60_000,
        )

        def open_panel(computation_id: str) -> None:
            page.evaluate(
                "([c, k]) => window.jupyterapp.commands.execute('dask-analytics:open', "
                "{clusterId: c, computationId: k})",
                [cluster_id, computation_id],
            )

        open_panel(ids["straggler"])
        panel = page.locator(".dal-lab-panel")
        top = panel.locator(".dal-taskgroups .dal-top-finding")
        top.wait_for(timeout=30_000)
        assert findings[0]["title"] in top.inner_text()
        panel.locator(".dal-tab[data-tab='findings']").click()
        card = panel.locator(".dal-pane[data-pane='findings'] .dal-finding[data-kind='straggler']")
        card.wait_for(state="visible", timeout=30_000)
        assert card.locator(".dal-finding-title").inner_text() == found["title"]
        assert found["evidence"] in card.locator(".dal-finding-evidence").inner_text()
        page.screenshot(path=save("findings-lab.png"))

        # Another computation in the same panel: its own findings (none), not the last one's.
        open_panel(ids["healthy"])
        panel.locator(".dal-tab[data-tab='findings']").click()
        shows_healthy(panel, healthy_findings(url, ids["healthy"]))
        assert errors == []


def test_the_team_page_shows_why_it_was_slow(straggled, browser):
    url, cluster_id, ids = straggled
    findings = dal.explain(ids["straggler"], store=url)
    found = next(f for f in findings[:2] if f["kind"] == "straggler")  # a busy machine may add one
    with ServerThread({"store_url": url}) as server:
        account = server.ctx.store.get_cluster(cluster_id)["account"]
        page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{server.url}/login?next=/computations/{ids['straggler']}")
        page.fill("input[name=token]", server.token(account))
        page.click("button[type=submit]")
        page.wait_for_selector(f"h2:has-text('Findings ({len(findings)})')")
        card = page.locator("main .dal-finding[data-kind='straggler']")
        assert card.locator(".dal-finding-title").inner_text() == found["title"]
        assert found["evidence"] in card.locator(".dal-finding-evidence").inner_text()
        assert found["advice"] in card.locator(".dal-finding-advice").inner_text()
        card.screenshot(path=save("findings-team.png"))

        calm = healthy_findings(url, ids["healthy"])
        page.goto(f"{server.url}/computations/{ids['healthy']}")
        page.wait_for_selector(f"h2:has-text('Findings ({len(calm)})')")
        if not calm:
            assert "No findings" in page.inner_text("main .dal-findings")
        assert errors == []
