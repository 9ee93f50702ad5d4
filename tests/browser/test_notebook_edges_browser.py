"""The notebook monitor's rough edges (issue 23, item 6), in Chromium, inside JupyterLab's
own output-area CSS: the Cluster tab's key/value lists, and the "vs previous" column in
a notebook-wide output.  The widget's state is what its kernel-side feed reads from a
real store (browser_helpers.widget_state); the built monitor.js draws it."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from dask_analytics_lab.api import close_readers
from dask_analytics_lab.messages import fingerprint
from dask_analytics_lab.store import open_store
from tests.browser_helpers import WIDGET_HARNESS, save, static_server, widget_state
from tests.factories import Cluster, group

VIEWPORT = {"width": 1000, "height": 800}  # the `page` fixture's (conftest.py)

pytestmark = pytest.mark.timeout(180)

LINE = "df.groupby('k').v.mean().compute()"


def jupyterlab_output_css() -> str:
    """JupyterLab's own rules for dl, dt and dd in an output area, from the JupyterLab
    installed here (its CSS ships inside its core bundle)."""
    static = Path(sys.prefix) / "share" / "jupyter" / "lab" / "static"
    rules = []
    for bundle in static.glob("*.js"):
        text = bundle.read_text(errors="replace")
        if ".jp-OutputArea-output dt" in text:
            rules += re.findall(r"\.jp-OutputArea-output d[ltd][^{}]*\{[^{}]*\}", text)
    assert rules, f"no output-area dl/dt/dd rules found in {static}"
    return "\n".join(rules)


def _runs(c: Cluster, comp: str, start: float, scale: float) -> dict:
    """One run of LINE: a long group that moved with `scale`, and tiny groups whose
    figures are noise (a few ms, one of them 4x the other run's)."""
    groups = [
        group(
            "read_parquet-1a2b3c4d5e",
            n_tasks=40,
            compute=20.0 * scale,
            start=start,
            stop=start + 30 * scale,
        ),
        group(
            "tiny_getitem-0f9e8d7c6b",
            n_tasks=2,
            compute=0.004 if scale > 1 else 0.001,
            start=start,
            stop=start + 0.01,
        ),
        group(
            "groupby_agg_chunk-6f7a8b9c0d",
            n_tasks=4,
            n_erred=1,
            n_not_run=1,
            disk_read=0.25,
            compute=0.5,
            start=start,
            stop=start + 2,
        ),
    ]
    return c.computation(
        comp,
        groups=groups,
        start=start,
        stop=start + 30 * scale,
        label="read_parquet → groupby",
        code_line=LINE,
        fingerprint=fingerprint(LINE, ["read_parquet", "groupby"]),
    )


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    from dask_analytics_lab.widgets._base import STATIC

    root = tmp_path_factory.mktemp("edges")
    url = f"sqlite:///{root / 'analytics.db'}"
    c = Cluster(t0=0)
    with open_store(url) as store:
        store.ingest(
            [
                c.cluster(),
                c.sample(),
                _runs(c, "first-run", 100.0, 1.0),
                _runs(c, "second-run", 200.0, 4.0),
            ]
        )
    state = widget_state(url, c.id, "second-run")
    close_readers()
    assert state["runs"]["baseline_id"] == "first-run"
    shutil.copy(STATIC / "monitor.js", root / "monitor.js")
    shutil.copy(STATIC / "style.css", root / "style.css")
    (root / "jupyterlab.css").write_text(jupyterlab_output_css())
    # The monitor inside an output area as JupyterLab nests it, JupyterLab's rules loaded;
    # 860 px: a notebook's output area in a 1280 px window with the file browser open.
    html = WIDGET_HARNESS.replace(
        '<link rel="stylesheet" href="./style.css">',
        '<link rel="stylesheet" href="./jupyterlab.css"><link rel="stylesheet" href="./style.css">',
    )
    html = html.replace(
        '<div id="app" style="max-width:1360px"></div>',
        '<div class="jp-OutputArea-output" style="width:860px"><div id="app"></div></div>',
    )
    (root / "index.html").write_text(html)
    (root / "second.json").write_text(json.dumps(state))
    with static_server(root) as base:
        yield base, state


def _show(page, base: str):
    page.goto(f"{base}/index.html")
    page.wait_for_function("() => window.harnessReady === true")
    page.evaluate("() => window.show('second')")
    page.wait_for_selector(".dal-monitor .dal-header .dal-badge")
    return page.locator(".dal-monitor")


def test_cluster_tab_key_values_are_pairs_on_a_line(harness, page):
    """JupyterLab floats every dt at 20% of the width and every dd at 80%: ours keep each
    key beside its value, in two columns as wide as they need."""
    base, _ = harness
    monitor = _show(page, base)
    monitor.locator(".dal-tab", has_text="Cluster").click()
    kv = monitor.locator(".dal-cluster dl.dal-kv").first
    kv.wait_for()
    assert kv.evaluate("e => getComputedStyle(e).display") == "grid"
    pairs = kv.evaluate("""dl => [...dl.querySelectorAll('dt')].map(dt => {
        const dd = dt.nextElementSibling, a = dt.getBoundingClientRect(), b = dd.getBoundingClientRect();
        return {float: getComputedStyle(dt).float, weight: getComputedStyle(dt).fontWeight,
                sameLine: Math.abs(a.top - b.top) < 2, after: b.left >= a.right, key: a.width};
    })""")
    assert pairs, "no key/value pairs"
    for p in pairs:
        assert p["float"] == "none" and p["sameLine"] and p["after"], p
        assert p["weight"] in ("400", "normal"), p
    # The keys' column is as wide as its widest key, the same for every row (a grid).
    assert len({round(p["key"]) for p in pairs}) == 1, pairs
    monitor.screenshot(path=save("notebook-edges-cluster-kv.png"))


def test_vs_previous_ignores_tiny_groups_and_keeps_wall_in_view(harness, page):
    base, state = harness
    monitor = _show(page, base)
    table = monitor.locator(".dal-taskgroups table")
    table.wait_for()
    headers = table.locator("thead th").all_inner_texts()
    assert "vs previous" in headers and "Wall" in headers, headers

    def vs(name: str) -> str:
        row = table.locator("tbody tr").filter(has=page.locator(".dal-group-name", has_text=name))
        return row.locator("td").nth(headers.index("vs previous")).inner_text().strip()

    assert vs("read_parquet") == "4.0x"
    assert vs("tiny_getitem") == "–"  # 4 ms against 1 ms: not news
    # Wall, the last column, inside the widget: nothing to scroll sideways to.
    pane = monitor.locator(".dal-taskgroups").evaluate("""t => {
        let p = t.parentElement;
        while (p && getComputedStyle(p).overflowX === 'visible') p = p.parentElement;
        const wall = t.querySelector('thead th:last-child').getBoundingClientRect();
        const box = (p || document.documentElement).getBoundingClientRect();
        return {scroll: p ? p.scrollWidth - p.clientWidth : 0, wallRight: wall.right, boxRight: box.right,
                monitorRight: t.closest('.dal-monitor').getBoundingClientRect().right};
    }""")
    monitor.screenshot(path=save("notebook-edges-vs-previous.png"))
    assert (
        pane["scroll"] <= 0
        and pane["wallRight"] <= min(pane["boxRight"], pane["monitorRight"]) + 0.5
    ), pane
