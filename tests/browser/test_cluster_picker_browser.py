"""The monitor's cluster picker in a real Chromium (Debian's, driven by Playwright).

The built ES module (dask_analytics_lab/static/monitor.js) renders in a page whose model
talks to a real MonitorWidget in this process: what the page sets and saves goes to the
widget as the kernel's comm would hand it over (set_state), its messages to the widget's
handlers, and each answer is the widget's synced state after its feed read the real
SQLite store.  So choosing a cluster in the page goes through the real feed and comes
back as that cluster's history.

Screenshot: test-artifacts/views-widget-cluster-picker.png (docs/img/monitor-cluster-picker.png).
"""

from __future__ import annotations

import contextlib
import json
import shutil

import anywidget  # noqa: F401  (a test extra: a missing one fails the run)
import playwright  # noqa: F401  (a test extra: a missing one fails the run)
import pytest

from dask_analytics_lab.api import close_readers
from tests.browser_helpers import save, static_server
from tests.views_data import HOSTILE, build, live_cluster

pytestmark = pytest.mark.timeout(180)

HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><title>picker</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="./style.css"></head>
<body style="margin:0;padding:16px;background:#f3f4f6"><div id="app" style="max-width:1360px"></div>
<script type="module">
import monitor from "./monitor.js";
// anywidget's model interface; window.kernel (exposed by the test) is the widget's side.
class Model {
  constructor(state) { this.state = state; this.handlers = {}; this.dirty = {}; }
  get(name) { return this.state[name]; }
  set(name, value) { this.state[name] = value; this.dirty[name] = value; this.trigger(name); }
  apply(state) {
    for (const [k, v] of Object.entries(state)) {
      if (JSON.stringify(this.state[k]) === JSON.stringify(v)) continue;
      this.state[k] = v;
      this.trigger(k);
    }
  }
  trigger(name) { for (const cb of this.handlers[`change:${name}`] || []) cb(); }
  on(event, cb) { (this.handlers[event] = this.handlers[event] || []).push(cb); }
  off() {}
  async save_changes() { const changes = this.dirty; this.dirty = {}; this.apply(await window.kernel({ changes })); }
  async send(msg) { this.apply(await window.kernel({ msg })); }
}
window.start = async () => {
  window.model = new Model(await window.kernel({}));
  const el = document.createElement("div");
  document.getElementById("app").replaceChildren(el);
  monitor.render({ model: window.model, el });
  // The feed's ticks: look again now and then, as the kernel's widget would.
  setInterval(async () => window.model.apply(await window.kernel({})), 400);
  return true;
};
window.harnessReady = true;
</script></body></html>
"""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('picker-views') / 'analytics.db'}"
    sc = build(url)  # a stopped cluster (etl-nightly) and a lost one (crashed-kernel)
    live = live_cluster(url)  # and a live one whose name is an HTML tag
    yield url, sc, live
    close_readers()


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    from dask_analytics_lab.widgets._base import STATIC

    root = tmp_path_factory.mktemp("picker-harness")
    shutil.copy(STATIC / "monitor.js", root / "monitor.js")
    shutil.copy(STATIC / "style.css", root / "style.css")
    (root / "index.html").write_text(HARNESS)
    with static_server(root) as base:
        yield base


@pytest.fixture()
def widget(scenario):
    from dask_analytics_lab.widgets.monitor_widget import MonitorWidget

    url, _, live = scenario
    w = MonitorWidget(live, store=url, start=False)  # the feed ticks when the page asks
    yield w
    w.close()


@contextlib.contextmanager
def monitor_page(browser, harness: str, widget):
    """The harness page, its model wired to `widget`."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=1.5)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on(
        "console",
        lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )

    def kernel(call: dict) -> dict:
        """One round trip to the widget: the page's changes and messages in, its state out."""
        if call.get("changes"):
            widget.set_state(call["changes"])
        if call.get("msg") is not None:
            widget._handle_custom_msg(call["msg"], [])
        widget.refresh()
        assert not widget.error, widget.error
        state = {
            k: v for k, v in widget.get_state().items() if not k.startswith("_") and k != "layout"
        }
        return json.loads(json.dumps(state))

    page.expose_function("kernel", kernel)
    page.goto(f"{harness}/index.html")
    page.wait_for_function("() => window.harnessReady === true")
    page.evaluate("() => window.start()")
    yield page
    context.close()
    assert not errors, errors


@pytest.fixture()
def page(browser, harness, widget):
    with monitor_page(browser, harness, widget) as page:
        yield page


def _names(page) -> list[str]:
    return page.locator(".dal-monitor .dal-side .dal-comp .dal-comp-name").all_inner_texts()


def _no_injected_html(page) -> None:
    assert page.evaluate("() => window.__xss") is None
    assert page.locator(".dal-monitor img").count() == 0


def test_picker_lists_clusters_and_switches_every_tab(page, scenario):
    url, sc, live = scenario
    monitor = page.locator(".dal-monitor")
    button = monitor.locator(".dal-pick-btn")
    # The live cluster's hostile name is the button's text, not markup.
    page.wait_for_function(
        "name => document.querySelector('.dal-pick-btn .dal-title')?.textContent === name",
        arg=HOSTILE,
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('.dal-side .dal-comp-name')].some(e => e.textContent === 'ones → sum')"
    )
    assert monitor.locator(".dal-header .dal-badge").inner_text().strip() == "live"
    assert not monitor.locator(".dal-pick-back").is_visible()  # on the cluster it opened on
    _no_injected_html(page)

    # Keyboard: the button opens the list, the chosen cluster has the focus.
    button.focus()
    page.keyboard.press("ArrowDown")
    pop = monitor.locator(".dal-pick-pop")
    pop.wait_for(state="visible")
    assert button.get_attribute("aria-expanded") == "true"
    options = pop.locator(".dal-pick-opt[role=option]")
    page.wait_for_function("() => document.querySelectorAll('.dal-pick-opt').length === 3")
    assert options.locator(".dal-pick-name").all_inner_texts() == [
        HOSTILE,
        "crashed-kernel",
        "etl-nightly",
    ]
    assert [b.strip() for b in options.locator(".dal-badge").all_inner_texts()] == [
        "live",
        "lost",
        "stopped",
    ]
    assert [options.nth(i).get_attribute("data-cluster") for i in range(3)] == [
        live,
        sc.lost["cluster_id"],
        sc.stopped["cluster_id"],
    ]
    assert options.nth(0).get_attribute("aria-selected") == "true"
    assert options.nth(0).locator(".dal-pick-home").inner_text() == "opened here"
    assert all("started " in t for t in options.locator(".dal-pick-meta").all_inner_texts())
    assert page.evaluate("() => document.activeElement.dataset.cluster") == live
    _no_injected_html(page)
    monitor.screenshot(path=save("views-widget-cluster-picker.png"))

    # Arrows to the stopped cluster, Enter: its history in every tab.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("() => document.activeElement.dataset.cluster") == sc.stopped["cluster_id"]
    page.keyboard.press("Enter")
    pop.wait_for(state="hidden")
    assert page.evaluate("() => document.activeElement.classList.contains('dal-pick-btn')")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.dal-side .dal-comp-name')].some(e => e.textContent === 'read_parquet → groupby-agg')"
    )
    assert sorted(_names(page)) == [
        "from_pandas → sum",
        "load → parse",
        "read_parquet → groupby-agg",
    ]
    assert button.locator(".dal-title").inner_text() == "etl-nightly"
    assert monitor.locator(".dal-header .dal-badge").inner_text().strip() == "stopped"
    # Task groups: its newest computation's (load → parse), with its failure.
    monitor.locator("tr.dal-row[data-group='parse-5f6a7b8c9d']").wait_for()
    monitor.locator(".dal-taskgroups > .dal-fails > .dal-fail").first.wait_for()
    # A click on another of its computations.
    monitor.locator(".dal-side .dal-comp", has_text="read_parquet → groupby-agg").click()
    monitor.locator("tr.dal-row[data-group='read_parquet-1a2b3c4d5e']").wait_for()
    # The cluster tab: that cluster, its peak size.
    monitor.locator(".dal-tab", has_text="Cluster").click()
    page.wait_for_function(
        "() => /PEAK WORKERS\\s+4/i.test(document.querySelector('.dal-cluster .dal-cards')?.innerText || '')"
    )
    monitor.locator(".dal-tab", has_text="Task groups").click()

    # A click opens it again; typing filters; Enter takes the one match.
    button.click()
    pop.wait_for(state="visible")
    page.keyboard.type("crash")  # from the focused option: the keys land in the filter
    page.wait_for_function("() => document.querySelectorAll('.dal-pick-opt').length === 1")
    assert pop.locator(".dal-pick-opt .dal-pick-name").inner_text() == "crashed-kernel"
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.dal-side .dal-comp-name')].some(e => e.textContent === 'random_sample → fit')"
    )
    assert _names(page) == ["random_sample → fit"]
    assert monitor.locator(".dal-header .dal-badge").inner_text().strip() == "lost"

    # Back to the live cluster it opened on.
    back = monitor.locator(".dal-pick-back")
    assert back.is_visible() and back.inner_text() == "↩ Back to the cluster it opened on"
    back.click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.dal-side .dal-comp-name')].map(e => e.textContent).join() === 'ones → sum'"
    )
    page.wait_for_function(
        "name => document.querySelector('.dal-pick-btn .dal-title').textContent === name",
        arg=HOSTILE,
    )
    monitor.locator("tr.dal-row[data-group='ones-aaa']").wait_for()
    assert not back.is_visible()
    _no_injected_html(page)


def test_escape_and_a_click_elsewhere_close_the_picker(page):
    monitor = page.locator(".dal-monitor")
    button = monitor.locator(".dal-pick-btn")
    pop = monitor.locator(".dal-pick-pop")
    page.wait_for_function("() => document.querySelectorAll('.dal-side .dal-comp').length > 0")
    button.click()
    pop.wait_for(state="visible")
    page.wait_for_function("() => document.querySelectorAll('.dal-pick-opt').length === 3")
    page.keyboard.press("Escape")
    pop.wait_for(state="hidden")
    assert button.get_attribute("aria-expanded") == "false"
    assert page.evaluate("() => document.activeElement.classList.contains('dal-pick-btn')")
    button.click()
    pop.wait_for(state="visible")
    monitor.locator(".dal-header .dal-where").click()  # beside the list, not under it
    pop.wait_for(state="hidden")
    assert page.evaluate("() => window.model.get('cluster_id')") == page.evaluate(
        "() => window.model.get('home').cluster_id"
    )


def test_docs_figure_of_the_picker(browser, harness, tmp_path):
    """docs/img/monitor-cluster-picker.png: the picker open over a few recorded clusters."""
    from dask_analytics_lab.widgets.monitor_widget import MonitorWidget

    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    build(url)
    live = live_cluster(
        url, name="LocalCluster-ann", cluster_id="tcp://127.0.0.1:8786-ann", user="ann"
    )
    w = MonitorWidget(live, store=url, start=False, home_label="this notebook")
    try:
        with monitor_page(browser, harness, w) as page:
            page.wait_for_function(
                "() => document.querySelectorAll('.dal-taskgroups tr.dal-row').length === 2"
            )
            page.locator(".dal-pick-btn").click()
            page.wait_for_function("() => document.querySelectorAll('.dal-pick-opt').length === 3")
            assert page.locator(".dal-pick-opt .dal-pick-home").inner_text() == "this notebook"
            page.evaluate("() => document.activeElement.blur()")  # no focus ring in the figure
            page.locator(".dal-pick-opt").nth(1).hover()
            page.locator(".dal-monitor").screenshot(path=save("monitor-cluster-picker.png"))
    finally:
        w.close()
        close_readers()
