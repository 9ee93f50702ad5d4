"""Issue 11, items 4 and 7, in a real Chromium (Debian's, driven by Playwright).

- A frozen report reads as frozen: a report made while its cluster was live, opened with
  every outside request blocked and the viewer's clock two days later, says "live then"
  and when it was made, and its uptime, durations and "… ago" are as of that moment; a
  computation of 239.6 s reads "4m 00s".
- Layout, in the notebook monitor (the built monitor.js over the state a kernel-side
  widget had, as in test_views_browser.py) at an 800 px and a wide notebook width: the
  share panel opens under the tab bar (no tab overlaps the button), an opened traceback
  with a long line leaves the task-group table inside its pane, and the charts' axis
  labels are drawn at least 10 px tall.  Screenshots: test-artifacts/share-*.png.
(The Share button end to end, in JupyterLab with a team server: test_share_lab.py.)
"""

from __future__ import annotations

import json
import re
import shutil
import time
from datetime import datetime

import anywidget  # noqa: F401  (a test extra: a missing one fails the run)
import dask.array as da
import playwright  # noqa: F401  (a test extra: a missing one fails the run)
import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.reports.render import computation_report
from tests.browser_helpers import WIDGET_HARNESS, offline_page, save, static_server, widget_state
from tests.cluster_helpers import recorded_cluster
from tests.views_data import build

pytestmark = pytest.mark.timeout(180)

STATE = re.compile(r'(<script type="application/json" id="dal-state">)(.*?)(</script>)', re.S)


@pytest.fixture(scope="module")
def live_report(tmp_path_factory):
    """(html, state) of a report made while its cluster was live."""
    url = "sqlite:///" + str(tmp_path_factory.mktemp("frozen") / "analytics.db")
    with recorded_cluster(url) as (client, info):
        assert da.ones((400, 400), chunks=100).sum().compute() == 160_000
        dal.flush(client)
        [comp] = dal.list_computations(info["cluster_id"], store=url)
        page, _, _ = computation_report(comp["computation_id"], store=url)
    close_readers()
    state = json.loads(STATE.search(page).group(2).replace("<\\/", "</"))
    assert state["cluster"]["status"] == "live" and state["snapshot_time"]
    return page, state


def _with_state(page: str, state: dict) -> str:
    text = json.dumps(state).replace("</", "<\\/")
    return STATE.sub(lambda m: m.group(1) + text + m.group(3), page, count=1)


def _open(browser, tmp_path, html: str, clock: float):
    """The report as a file in an offline page whose clock reads `clock`."""
    path = tmp_path / "report.html"
    path.write_text(html)
    page = offline_page(browser, viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.clock.set_fixed_time(datetime.fromtimestamp(clock))
    page.goto(path.as_uri())
    page.wait_for_selector(".dal-monitor .dal-header .dal-badge", timeout=30_000)
    page.errors = errors  # type: ignore[attr-defined]
    return page


def _seconds(text: str) -> float:
    """fmt.duration's text back to seconds ("12.5 s", "4m 00s", "2h 03m", "2d 1h")."""
    text = text.strip()
    if m := re.fullmatch(r"([\d.]+) (µs|ms|s)", text):
        return float(m.group(1)) * {"µs": 1e-6, "ms": 1e-3, "s": 1}[m.group(2)]
    m = re.fullmatch(r"(\d+)([dhm]) (\d+)([hms])", text)
    assert m, text
    unit = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return int(m.group(1)) * unit[m.group(2)] + int(m.group(3)) * unit[m.group(4)]


def test_a_report_reads_as_of_when_it_was_made(browser, live_report, tmp_path):
    html, state = live_report
    made = state["snapshot_time"]
    page = _open(browser, tmp_path, html, clock=made + 2 * 86400)  # opened two days later
    monitor = page.locator(".dal-monitor")
    badge = monitor.locator(".dal-header .dal-badge")
    assert badge.inner_text().strip() == "live then"
    assert "when this report was made" in badge.get_attribute("title")
    stamp = datetime.fromtimestamp(made).strftime("%Y-%m-%d %H:%M:%S")
    assert stamp in page.locator(".dal-asof").inner_text()
    # Up as long as it had been when the report was made (the cluster's start to then), not two days.
    uptime = _seconds(monitor.locator(".dal-header .dal-uptime b").inner_text())
    assert uptime == pytest.approx(made - state["cluster"]["started"], abs=1.5)
    monitor.locator(".dal-tab", has_text="Cluster").click()
    cards = monitor.locator(".dal-cluster .dal-cards")
    cards.wait_for()
    text = cards.inner_text()
    assert not re.search(r"\b\d+d \d+h\b", text), text  # nothing counted to the viewer's clock
    assert "no contact" not in monitor.inner_text()
    assert monitor.locator(".dal-cluster .dal-badge").first.inner_text().strip() == "live then"
    assert (
        "live when the report was made"
        in monitor.locator(".dal-cluster .dal-kv").first.inner_text()
    )
    assert page.blocked == [] and page.errors == []  # type: ignore[attr-defined]
    page.screenshot(path=save("share-report-frozen.png"))


def test_a_report_formats_durations_as_minutes_and_seconds(browser, live_report, tmp_path):
    html, state = live_report
    state = json.loads(json.dumps(state))
    comp = state["computation"]
    comp["stop"] = comp["start"] + 239.6  # the "3m 60s"
    state["computations_base"]["rows"][0]["stop"] = comp["stop"]
    page = _open(browser, tmp_path, _with_state(html, state), clock=time.time())
    item = page.locator(".dal-monitor .dal-comp.selected")
    totals = page.locator(".dal-monitor .dal-taskgroups .dal-totals")
    totals.wait_for()
    assert "4m 00s" in item.inner_text() and re.search(r"wall\s+4m 00s", totals.inner_text()), (
        totals.inner_text()
    )
    assert "60s" not in page.locator(".dal-monitor").inner_text()


# --- layout ----------------------------------------------------------------------------
LONG_LINE = (
    '  File "/home/ann/project/'
    + "very_long_module_name/" * 12
    + 'etl.py", line 42, in parse  # '
    + "x" * 200
)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    from dask_analytics_lab.widgets._base import STATIC

    tmp = tmp_path_factory.mktemp("layout")
    url = f"sqlite:///{tmp / 'analytics.db'}"
    sc = build(url)
    root = tmp / "site"
    root.mkdir()
    shutil.copy(STATIC / "monitor.js", root / "monitor.js")
    shutil.copy(STATIC / "style.css", root / "style.css")
    (root / "index.html").write_text(
        WIDGET_HARNESS.replace("max-width:1360px", "max-width:var(--w)")
    )
    state = widget_state(url, sc.stopped["cluster_id"], sc.stopped["parse"])
    for e in state["exceptions"]:
        e["traceback_text"] = (e.get("traceback_text") or "") + LONG_LINE + "\n"
    (root / "parse.json").write_text(json.dumps(state))
    close_readers()
    with static_server(root) as base:
        yield base


def _box(locator) -> dict:
    return locator.evaluate(
        "e => { const r = e.getBoundingClientRect(); "
        "return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, height: r.height}; }"
    )


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"] - 0.5
        and b["left"] < a["right"] - 0.5
        and a["top"] < b["bottom"] - 0.5
        and b["top"] < a["bottom"] - 0.5
    )


@pytest.mark.parametrize("width", [800, 1360])
def test_layout_at_a_narrow_and_a_wide_notebook(browser, harness, width):
    context = browser.new_context(
        viewport={"width": width + 32, "height": 1000}, device_scale_factor=1
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{harness}/index.html")
        page.add_style_tag(content=f":root {{ --w: {width}px; }}")
        page.wait_for_function("() => window.harnessReady === true")
        page.evaluate("() => window.show('parse')")
        monitor = page.locator(".dal-monitor")
        monitor.locator(".dal-taskgroups tr.dal-row").first.wait_for()
        assert abs(_box(monitor)["right"] - _box(monitor)["left"] - width) <= 1

        # Share: the panel opens under the tab bar, with a long link and a message.
        monitor.locator(".dal-share-toggle").click()
        page.evaluate("""() => window.model.set("share", {state: "done", server: "http://analytics.example:8765",
            url: "http://analytics.example:8765/reports/" + "a".repeat(40), id: "a".repeat(40), private: true,
            message: "Only people who can log in to this Jupyter server open this link."})""")
        monitor.locator(".dal-share-url").wait_for()
        tabs, toggle = monitor.locator(".dal-tabs"), monitor.locator(".dal-share-toggle")
        for i in range(monitor.locator(".dal-tab").count()):
            assert not _overlap(_box(monitor.locator(".dal-tab").nth(i)), _box(toggle)), i
        assert (
            _box(toggle)["bottom"] <= _box(tabs)["bottom"] + 0.5
            and _box(toggle)["right"] <= _box(tabs)["right"]
        )
        panel = monitor.locator(".dal-share-panel")
        assert (
            _box(panel)["top"] >= _box(tabs)["bottom"] - 0.5
            and _box(panel)["right"] <= _box(monitor)["right"] + 0.5
        )
        assert _box(monitor.locator(".dal-share-link"))["right"] <= _box(panel)["right"]

        # A traceback with a long line, opened in its group's row: the table stays in its pane.
        monitor.locator(".dal-err-link").first.click()
        row = monitor.locator(".dal-exc-row .dal-fail").first
        row.locator("summary").first.click()
        row.locator(".dal-tb summary").click()
        row.locator(".dal-tb pre").wait_for()
        pane = monitor.locator(".dal-pane[data-pane='groups']")
        table = monitor.locator(".dal-taskgroups table.dal-table")
        assert _box(table)["right"] <= _box(pane)["right"] + 0.5, (_box(table), _box(pane))
        assert pane.evaluate("p => p.scrollWidth <= p.clientWidth + 1")
        pre = row.locator(".dal-tb pre")
        assert pre.evaluate("p => p.scrollWidth > p.clientWidth")  # the long line scrolls inside it
        monitor.screenshot(path=save(f"share-layout-{width}-taskgroups.png"))

        # The cluster's charts: axis labels a person can read.
        monitor.locator(".dal-tab", has_text="Cluster").click()
        monitor.locator(".dal-chart svg text.axis").first.wait_for()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.dal-chart svg')].every(s => "
            "s.getAttribute('viewBox') === `0 0 ${Math.round(s.clientWidth)} ${Math.round(s.clientHeight)}`)"
        )
        heights = monitor.locator(".dal-chart svg text.axis").evaluate_all(
            "ts => ts.map(t => t.getBoundingClientRect().height)"
        )
        assert heights and min(heights) >= 10, heights
        monitor.screenshot(path=save(f"share-layout-{width}-cluster.png"))
        assert errors == []
    finally:
        context.close()
