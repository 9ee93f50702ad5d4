"""The views in a real Chromium (Debian's, driven by Playwright) over a real store that
holds what issue 8 is about: a stopped cluster and how big it was, a cluster whose
scheduler died without a word (lost), a computation whose tasks partly erred and partly
never ran, a failure raised by 500 tasks, and computations named by what they ran.

- The notebook monitor: the widget's Python feed reads the store (as in a kernel), and
  its state is rendered by the built ES module (dask_analytics_lab/static/monitor.js) in
  a page with a stand-in model (no kernel needed for what is drawn).
- The team web page: the real server over the same store.
(The JupyterLab sidebar is checked in tests/browser/test_browser.py, in a real `jupyter lab`.)

Screenshots land in test-artifacts/views-*.png.
"""

from __future__ import annotations

import json
import re
import shutil
from urllib.parse import quote

import anywidget  # noqa: F401  (a test extra: a missing one fails the run)
import playwright  # noqa: F401  (a test extra: a missing one fails the run)
import pytest

from dask_analytics_lab.api import close_readers
from tests.browser_helpers import (
    WIDGET_HARNESS,
    save,
    static_server,
    transitions_done,
    widget_state,
)
from tests.views_data import KEYERROR_EXAMPLES, build

VIEWPORT = {"width": 1400, "height": 900}  # the `page` fixture's (conftest.py)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("views")
    url = f"sqlite:///{tmp / 'analytics.db'}"
    sc = build(url)
    yield url, sc
    close_readers()


@pytest.fixture(scope="module")
def harness(scenario, tmp_path_factory):
    from dask_analytics_lab.widgets._base import STATIC

    url, sc = scenario
    root = tmp_path_factory.mktemp("harness")
    shutil.copy(STATIC / "monitor.js", root / "monitor.js")
    shutil.copy(STATIC / "style.css", root / "style.css")  # what anywidget's _css loads
    (root / "index.html").write_text(WIDGET_HARNESS)
    states = {
        "stopped": widget_state(url, sc.stopped["cluster_id"], sc.stopped["groupby"]),
        "parse": widget_state(url, sc.stopped["cluster_id"], sc.stopped["parse"]),
        "lost": widget_state(url, sc.lost["cluster_id"], None),
    }
    for name, state in states.items():
        (root / f"{name}.json").write_text(json.dumps(state))
    with static_server(root) as base:
        yield base, states


def _show(page, base: str, name: str):
    page.goto(f"{base}/index.html")
    page.wait_for_function("() => window.harnessReady === true")
    page.evaluate(f"() => window.show({json.dumps(name)})")
    page.wait_for_selector(".dal-monitor .dal-header .dal-badge")
    return page.locator(".dal-monitor")


# --- the notebook monitor ---------------------------------------------------------------
def test_widget_stopped_cluster_shows_its_end_and_peak_size(harness, page):
    base, _ = harness
    monitor = _show(page, base, "stopped")
    header = monitor.locator(".dal-header")
    assert header.locator(".dal-badge").inner_text().strip() == "stopped"
    text = header.inner_text()
    # How big it was, not what is left of it (no worker at all once it stopped).
    assert re.search(r"peak\s+4\s+workers", text), text
    assert re.search(r"16\s+threads", text) and "64.0 GiB" in text, text
    assert not re.search(r"\b0\s+workers", text), text
    # It ended an hour after it started: "ran 1h 00m", not a clock still counting.
    assert "ended" in text and re.search(r"ran\s+1h 00m", text), text
    monitor.locator(".dal-tab", has_text="Cluster").click()
    cards = monitor.locator(".dal-cluster .dal-cards")
    cards.wait_for()
    cards_text = cards.inner_text()
    assert re.search(r"PEAK WORKERS\s+4", cards_text, re.I) and re.search(
        r"RAN FOR\s+1h 00m", cards_text, re.I
    ), cards_text
    monitor.screenshot(path=save("views-widget-stopped-cluster.png"))


def test_widget_lost_cluster_says_lost_and_stops_counting(harness, page):
    base, states = harness
    assert states["lost"]["cluster"]["status"] == "lost"
    monitor = _show(page, base, "lost")
    badge = monitor.locator(".dal-header .dal-badge")
    assert badge.inner_text().strip() == "lost"
    text = monitor.locator(".dal-header").inner_text()
    # Up from its start to the last time it was seen (3,600 s), not to now (3,800 s+).
    assert re.search(r"ran\s+1h 00m", text), text
    assert "last seen" in text and re.search(r"peak\s+3\s+workers", text), text
    # Its computation was running when the scheduler died: it reads lost, not running.
    item = monitor.locator(".dal-comp").first
    assert item.locator(".dal-badge").inner_text().strip() == "lost"
    assert "51m 40s" in item.inner_text()  # from its start to when the cluster ended
    # The header redraws every 5 s: still the same uptime after a redraw.
    page.evaluate("() => window.model.set('where', 'redraw')")
    page.wait_for_function("() => document.querySelector('.dal-where').textContent === 'redraw'")
    assert re.search(r"ran\s+1h 00m", monitor.locator(".dal-header").inner_text())
    monitor.screenshot(path=save("views-widget-lost-cluster.png"))


def _widths(bar) -> dict[str, float]:
    return bar.evaluate("""b => Object.fromEntries([...b.children].filter(s => s.className.startsWith('seg-'))
        .map(s => [s.className.slice(4), parseFloat(s.style.width)]))""")


def test_widget_draws_erred_and_never_ran_tasks_as_such(harness, page):
    base, _ = harness
    monitor = _show(page, base, "parse")
    monitor.locator(".dal-taskgroups tr.dal-row").first.wait_for()
    parse = monitor.locator("tr.dal-row[data-group='parse-5f6a7b8c9d']")
    # 400 finished, 500 erred, 100 never ran, of 1,000; Dask said "forgotten" for 900.
    widths = _widths(parse.locator(".dal-bar"))
    assert widths == pytest.approx({"done": 40.0, "erred": 50.0, "not-run": 10.0}), widths
    cells = {c: parse.locator(f"td[data-col='{c}']").inner_text() for c in ("erred", "not-run")}
    assert cells == {"erred": "500", "not-run": "100"}, cells
    assert parse.locator(".dal-bar-label").inner_text() == "400 / 1000"  # finished of all
    # A group none of whose tasks ran: all "never ran", nothing done.
    store = monitor.locator("tr.dal-row[data-group='store-1c2d3e4f5a']")
    assert _widths(store.locator(".dal-bar")) == pytest.approx({"not-run": 100.0})
    assert store.locator(".dal-bar-label").inner_text() == "0 / 100"
    # The colours have a legend, and the totals say the same.
    legend = monitor.locator(".dal-taskgroups .dal-legend").inner_text()
    assert "finished" in legend and "erred" in legend and "never ran" in legend, legend
    totals = monitor.locator(".dal-taskgroups .dal-totals").inner_text()
    assert (
        re.search(r"1400 / 2100\s+finished", totals)
        and re.search(r"500\s+erred", totals)
        and re.search(r"200\s+never ran", totals)
    ), totals
    # The computation's own duration uses its stop (12.5 s), and its list entry says the same.
    assert re.search(r"wall\s+12\.5 s", totals), totals
    item = monitor.locator(".dal-comp.selected")
    assert (
        "12.5 s" in item.inner_text()
        and "500 erred" in item.inner_text()
        and "200 never ran" in item.inner_text()
    )
    assert set(_widths(item.locator(".dal-mini"))) >= {"done", "erred", "not-run"}
    transitions_done(page)
    monitor.screenshot(path=save("views-widget-taskgroups-counts.png"))


def test_widget_failure_of_500_tasks_is_one_row(harness, page):
    base, states = harness
    assert [e["count"] for e in states["parse"]["exceptions"]] == [500]
    monitor = _show(page, base, "parse")
    fails = monitor.locator(".dal-taskgroups > .dal-fails > .dal-fail")
    fails.first.wait_for()
    assert fails.count() == 1
    row = fails.first
    head = row.locator("summary.dal-fail-head").inner_text()
    assert "× 500" in head and "KeyError('key-…')" in head and "etl.py:42 in parse" in head, head
    assert not row.locator(".dal-fail-examples").is_visible()
    row.locator("summary.dal-fail-head").click()
    examples = row.locator(".dal-fail-examples li").all_inner_texts()
    assert examples == KEYERROR_EXAMPLES
    assert "10.1.2.4:40001" in row.locator(".dal-fail-meta").inner_text()
    # The traceback on demand.
    traceback = row.locator(".dal-tb pre")
    assert not traceback.is_visible()
    row.locator(".dal-tb summary").click()
    assert 'lookup[record["key"]]' in traceback.inner_text()
    # The erred group opens the same single row.
    monitor.locator("tr.dal-row[data-group='parse-5f6a7b8c9d'] .dal-err-link").click()
    monitor.locator("tr.dal-exc-row .dal-fail").first.wait_for()
    assert monitor.locator("tr.dal-exc-row .dal-fail").count() == 1
    monitor.screenshot(path=save("views-widget-failures.png"))


def test_widget_lists_computations_by_label_and_code_line(harness, page):
    base, _ = harness
    monitor = _show(page, base, "stopped")
    items = monitor.locator(".dal-side .dal-comp")
    items.first.wait_for()
    texts = items.all_inner_texts()
    assert len(texts) == 3, texts
    groupby = next(t for t in texts if "read_parquet → groupby-agg" in t)
    assert 'df.groupby("k").x.mean().compute()' in groupby
    assert any(
        "load → parse" in t and "client.gather(client.map(parse, records))" in t for t in texts
    ), texts
    assert not any(re.search(r"computation comp-", t) for t in texts), texts


def test_keyboard_reaches_computations_tabs_and_flamegraph_frames(harness, page):
    base, _ = harness
    monitor = _show(page, base, "stopped")
    items = monitor.locator(".dal-side .dal-comp")
    items.first.wait_for()
    assert (
        monitor.locator(".dal-side [role=listbox] .dal-comp[role=option]").count()
        == items.count()
        == 3
    )
    # The list is one stop in the tab order: Tab from the "follow" box lands on the chosen row.
    chosen = page.evaluate("() => window.model.get('computation_id')")
    monitor.locator(".dal-follow input").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.dataset.computation") == chosen
    assert monitor.locator(".dal-side .dal-comp[tabindex='0']").count() == 1
    # Arrows move between rows; Enter chooses; the row keeps the focus through the redraw.
    ids = [items.nth(i).get_attribute("data-computation") for i in range(3)]
    page.keyboard.press("ArrowUp" if ids.index(chosen) == 2 else "ArrowDown")
    target = page.evaluate("() => document.activeElement.dataset.computation")
    assert target != chosen and target in ids
    page.keyboard.press("Enter")
    page.wait_for_function("id => window.model.get('computation_id') === id", arg=target)
    page.wait_for_function(
        "id => document.activeElement.dataset.computation === id"
        " && document.activeElement.getAttribute('aria-selected') === 'true'",
        arg=target,
    )
    focus_ring = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert focus_ring == "solid", focus_ring

    # Tabs: a tablist; the arrows move to the next tab and show its pane.
    tab = monitor.locator(".dal-tab[role=tab][aria-selected=true]")
    assert tab.get_attribute("data-tab") == "groups"
    tab.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => window.model.get('tab') === 'findings'")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => window.model.get('tab') === 'profile'")
    assert page.evaluate("() => document.activeElement.dataset.tab") == "profile"
    assert monitor.locator(".dal-tab[data-tab=profile]").get_attribute("aria-selected") == "true"
    assert monitor.locator(".dal-pane[data-pane=profile][role=tabpanel]").is_visible()

    # The flamegraph: Tab reaches it; arrows walk the frames, Enter zooms, Escape zooms out.
    frame = lambda name, count, children=(), f="work.py": {  # noqa: E731
        "count": count,
        "identifier": name,
        "description": {"name": name, "filename": f, "line_number": 3},
        "children": {c["identifier"]: c for c in children},
    }
    tree = {
        "count": 10,
        "identifier": "root",
        "description": {},
        "children": {"f": frame("f", 6, [frame("g", 6)]), "h": frame("h", 4)},
    }
    page.evaluate("tree => window.model.set('profile', tree)", tree)
    canvas = monitor.locator(".dal-flame canvas")
    canvas.wait_for(state="visible")
    canvas.focus()
    reset = monitor.locator(".dal-flame button", has_text="Reset zoom")
    for key, name in (
        ("ArrowDown", "all"),
        ("ArrowDown", "f"),
        ("ArrowRight", "h"),
        ("ArrowLeft", "f"),
        ("ArrowDown", "g"),
        ("ArrowUp", "f"),
    ):
        page.keyboard.press(key)
        assert canvas.get_attribute("data-frame") == name, (key, name)
    assert canvas.get_attribute("aria-label").startswith("f: 6 samples")
    page.keyboard.press("Enter")
    assert reset.is_enabled() and monitor.locator(".dal-crumbs a").all_inner_texts() == ["all", "f"]
    # A refreshed profile (it grows while a computation runs) keeps the zoom while the
    # frame is still there, and falls back to the whole profile when it is not.
    grown = {
        **tree,
        "count": 20,
        "children": {"f": frame("f", 16, [frame("g", 16)]), "h": frame("h", 4)},
    }
    page.evaluate("tree => window.model.set('profile', tree)", grown)
    assert reset.is_enabled() and monitor.locator(".dal-crumbs a").all_inner_texts() == ["all", "f"]
    page.evaluate(
        "tree => window.model.set('profile', tree)", {**tree, "children": {"h": frame("h", 10)}}
    )
    assert reset.is_disabled() and monitor.locator(".dal-crumbs a").all_inner_texts() == ["all"]
    page.evaluate("tree => window.model.set('profile', tree)", tree)
    canvas.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    assert monitor.locator(".dal-crumbs a").all_inner_texts() == ["all", "f"]
    page.keyboard.press("Escape")
    assert reset.is_disabled()


# --- the team web page ------------------------------------------------------------------
@pytest.fixture(scope="module")
def site(scenario):
    from tests.server_helpers import ServerThread

    url, sc = scenario
    with ServerThread({"store_url": url, "token_required": False}) as server:
        yield server.url, sc


def test_team_page_clusters_stopped_and_lost(site, page):
    base, sc = site
    page.goto(base + "/")
    page.wait_for_selector("main table tbody tr")
    rows = {
        r.locator("td").first.inner_text(): r for r in page.locator("main table tbody tr").all()
    }
    stopped, lost = rows["etl-nightly"], rows["crashed-kernel"]
    headers = page.locator("main table thead th").all_inner_texts()
    cell = lambda row, name: row.locator("td").nth(headers.index(name)).inner_text().strip()  # noqa: E731
    assert cell(stopped, "State") == "stopped"
    assert cell(stopped, "Workers").startswith("4") and "peak" in cell(stopped, "Workers")
    assert cell(stopped, "Threads").startswith("16") and cell(stopped, "Memory").startswith(
        "64.0 GiB"
    )
    assert cell(stopped, "Duration") == "1h 00m" and cell(stopped, "Ended")
    assert cell(lost, "State") == "lost"
    assert cell(lost, "Duration") == "1h 00m"  # to when it was last seen, not to now
    assert cell(lost, "Workers").startswith("3")
    page.screenshot(path=save("views-web-clusters.png"), full_page=True)

    page.click("main table a:has-text('etl-nightly')")
    page.wait_for_selector("h2:has-text('Computations')")
    facts = page.inner_text("dl.facts")
    assert re.search(r"Peak workers\s+4", facts) and re.search(r"Peak threads\s+16", facts), facts
    assert re.search(r"Peak memory\s+64\.0 GiB", facts) and re.search(r"Ended\s+\d{4}-", facts), (
        facts
    )
    assert page.locator("h1 .state").inner_text() == "stopped"
    # Computations by label and code line.
    comps = page.locator("h2:has-text('Computations') + table").inner_text()
    assert (
        "read_parquet → groupby-agg" in comps and 'df.groupby("k").x.mean().compute()' in comps
    ), comps
    page.screenshot(path=save("views-web-cluster-stopped.png"), full_page=True)

    page.goto(f"{base}/clusters/{quote(sc.lost['cluster_id'], safe='')}")
    page.wait_for_selector("h2:has-text('Computations')")
    assert page.locator("h1 .state").inner_text() == "lost"
    facts = page.inner_text("dl.facts")
    assert re.search(r"Last seen\s+\d{4}-", facts) and re.search(r"Duration\s+1h 00m", facts), facts
    assert page.locator("main table .state").first.inner_text() == "lost"  # its running computation


def test_team_page_computation_counts_and_failures(site, page):
    base, sc = site
    page.goto(f"{base}/computations/{quote(sc.stopped['parse'], safe='')}")
    page.wait_for_selector("h2:has-text('Task groups')")
    assert page.inner_text("h1").startswith("load → parse")
    assert "client.gather(client.map(parse, records))" in page.inner_text("pre.code-line")
    groups = page.locator("main table").first
    headers = groups.locator("thead th").all_inner_texts()
    parse = groups.locator("tbody tr").filter(
        has=page.locator("td:first-child", has_text=re.compile(r"^parse-5f6a7b8c9d$"))
    )
    widths = parse.locator(".bar").evaluate(
        "b => Object.fromEntries([...b.children].map(s => [s.className.replace('seg ', ''), parseFloat(s.style.width)]))"
    )
    assert widths == pytest.approx({"done": 40.0, "erred": 50.0, "not-run": 10.0}), widths
    cell = lambda name: parse.locator("td").nth(headers.index(name)).inner_text().strip()  # noqa: E731
    assert (cell("Finished"), cell("Erred"), cell("Never ran")) == ("400 / 1,000", "500", "100")
    legend = page.inner_text("main .legend")
    assert "erred" in legend and "never ran" in legend and "finished" in legend
    assert re.search(r"Duration\s+12\.5 s", page.inner_text("dl.facts"))
    # One failure, raised by 500 tasks: one row, its examples, its traceback on demand.
    fails = page.locator(".failures details.dal-fail")
    assert fails.count() == 1
    summary = fails.first.locator("summary").first.inner_text()
    assert (
        "× 500" in summary and "KeyError('key-…')" in summary and "etl.py:42 in parse" in summary
    ), summary
    fails.first.locator("summary").first.click()
    assert fails.first.locator(".dal-fail-examples li").all_inner_texts() == KEYERROR_EXAMPLES
    assert not fails.first.locator(".dal-tb pre").is_visible()
    fails.first.locator(".dal-tb summary").click()
    assert 'lookup[record["key"]]' in fails.first.locator(".dal-tb pre").inner_text()
    page.screenshot(path=save("views-web-computation.png"), full_page=True)

    page.goto(f"{base}/exceptions")
    page.wait_for_selector(".failures details.dal-fail")
    assert page.locator(".failures details.dal-fail").count() == 1
    assert "× 500" in page.locator(".failures details.dal-fail summary").first.inner_text()
