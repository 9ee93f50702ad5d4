"""Issue 13, part 1, as a person sees it: the same function run with 1x, then 10x the
work on a real LocalCluster; the notebook monitor (its kernel-side feed, rendered by
the built monitor.js in Chromium) and the team page show the second run against the
first: a banner, a "vs previous" column and the runs' trend.

The monitor's screenshot is test-artifacts/compare-monitor.png (docs/img/ holds a copy
for the README).

Issue 18, item 6: the same line run at another size is compared with the first run, and
both views say the inputs differ, in a neutral banner rather than a red "slower" one.
"""

from __future__ import annotations

import json
import re
import shutil
from urllib.parse import quote

import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from tests.browser_helpers import WIDGET_HARNESS, save, static_server, widget_state
from tests.cluster_helpers import recorded_cluster
from tests.workloads import etl, job

VIEWPORT = {"width": 1100, "height": 700}  # the `page` fixture's (conftest.py)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('runs') / 'analytics.db'}"
    with recorded_cluster(url) as (client, info):
        job(client, 0.05)
        job(client, 0.5)  # 10x the work: slower than a busy machine's noise can hide
        assert dal.flush(client)["flushed"]
    first, second = sorted(
        dal.list_computations(info["cluster_id"], store=url), key=lambda c: c["start"]
    )
    yield url, info["cluster_id"], first["computation_id"], second["computation_id"]
    close_readers()


def test_the_monitor_shows_the_second_run_against_the_first(runs, page, tmp_path):
    from dask_analytics_lab.widgets._base import STATIC

    url, cluster_id, first, second = runs
    state = widget_state(url, cluster_id, second)
    assert state["runs"]["baseline_id"] == first
    shutil.copy(STATIC / "monitor.js", tmp_path / "monitor.js")
    shutil.copy(STATIC / "style.css", tmp_path / "style.css")
    (tmp_path / "index.html").write_text(WIDGET_HARNESS)
    (tmp_path / "second.json").write_text(json.dumps(state))
    with static_server(tmp_path) as base:
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        page.evaluate("() => window.show('second')")
        monitor = page.locator(".dal-monitor")
        banner = monitor.locator(".dal-runs-banner")
        banner.wait_for()
        text = banner.inner_text()
        assert re.match(r"\d+(\.\d)?x slower than the previous run of this code", text), text
        assert "spin: compute" in text
        table = monitor.locator(".dal-taskgroups table")
        headers = table.locator("thead th").all_inner_texts()
        assert "vs previous" in headers
        spin = table.locator("tbody tr").filter(
            has=page.locator(".dal-group-name", has_text="spin")
        )
        vs = spin.locator("td").nth(headers.index("vs previous")).inner_text()
        assert float(vs.rstrip("x")) > 2, vs
        assert spin.locator(".dal-vs.slower").count() == 1
        bars = monitor.locator(".dal-runs-trend rect")
        assert bars.count() == 2 and monitor.locator(".dal-runs-trend rect.current").count() == 1
        monitor.screenshot(path=save("compare-monitor.png"))

        # The first run has nothing before it: no banner, no column.
        (tmp_path / "first.json").write_text(json.dumps(widget_state(url, cluster_id, first)))
        page.evaluate("() => window.show('first')")
        monitor.locator(".dal-taskgroups table").wait_for()
        assert monitor.locator(".dal-runs-banner").count() == 0
        assert "vs previous" not in monitor.locator(".dal-taskgroups thead th").all_inner_texts()


def test_the_team_page_shows_the_second_run_against_the_first(runs, page):
    from tests.server_helpers import ServerThread

    url, _cluster_id, first, second = runs
    with ServerThread({"store_url": url, "token_required": False}) as server:
        page.goto(f"{server.url}/computations/{quote(second, safe='')}")
        page.wait_for_selector("h2:has-text('Task groups')")
        assert re.match(
            r"\d+(\.\d)?x slower than the previous run", page.inner_text(".dal-runs-banner")
        )
        facts = page.inner_text("dl.facts")
        assert "Runs of this code" in facts and first[:12] in facts
        groups = page.locator("main table").first
        headers = groups.locator("thead th").all_inner_texts()
        spin = groups.locator("tbody tr").filter(
            has=page.locator("td:first-child", has_text=re.compile(r"^spin"))
        )
        assert (
            float(spin.locator("td").nth(headers.index("vs previous")).inner_text().rstrip("x")) > 2
        )
        page.click(f"dl.facts a:has-text('{first[:12]}')")
        page.wait_for_selector("h2:has-text('Task groups')")
        assert page.locator(".dal-runs-banner").count() == 0


@pytest.fixture(scope="module")
def sizes(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('sizes') / 'analytics.db'}"
    with recorded_cluster(url) as (client, info):
        etl(3000)
        etl(6000)
        assert dal.flush(client)["flushed"]
    small, large = sorted(
        dal.list_computations(info["cluster_id"], store=url), key=lambda c: c["start"]
    )
    sentence = dal.compare(large["computation_id"], store=url)["inputs_differ"]["sentence"]
    assert sentence.startswith("3 → 6 input tasks")
    yield url, info["cluster_id"], small["computation_id"], large["computation_id"], sentence
    close_readers()


def test_both_views_say_a_run_at_another_size_had_other_inputs(sizes, page, tmp_path):
    from dask_analytics_lab.widgets._base import STATIC
    from tests.server_helpers import ServerThread

    url, cluster_id, small, large, sentence = sizes
    state = widget_state(url, cluster_id, large)
    assert state["runs"]["baseline_id"] == small
    shutil.copy(STATIC / "monitor.js", tmp_path / "monitor.js")
    shutil.copy(STATIC / "style.css", tmp_path / "style.css")
    (tmp_path / "index.html").write_text(WIDGET_HARNESS)
    (tmp_path / "large.json").write_text(json.dumps(state))
    with static_server(tmp_path) as base:
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        page.evaluate("() => window.show('large')")
        banner = page.locator(".dal-monitor .dal-runs-banner")
        banner.wait_for()
        assert banner.get_attribute("class").split() == ["dal-runs-banner", "inputs"]
        assert banner.locator(".dal-runs-inputs").inner_text() == sentence
        assert (
            "vs previous" in page.locator(".dal-monitor .dal-taskgroups thead th").all_inner_texts()
        )

    with ServerThread({"store_url": url, "token_required": False}) as server:
        page.goto(f"{server.url}/computations/{quote(large, safe='')}")
        page.wait_for_selector("h2:has-text('Task groups')")
        banner = page.locator(".dal-runs-banner")
        assert banner.get_attribute("class").split() == ["dal-runs-banner", "inputs"]
        assert banner.locator(".dal-runs-inputs").inner_text() == sentence
        assert small[:12] in page.inner_text("dl.facts")
