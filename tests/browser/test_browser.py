"""End to end, as a person would: `jupyter lab` on 127.0.0.1, Debian's Chromium driven by
Playwright, a notebook that loads the extension and runs a real LocalCluster workload.

One server and one notebook run for the whole module (the views are checked in turn on
the same page); screenshots of each view go to test-artifacts/.
"""

from __future__ import annotations

import re
from pathlib import Path

import anywidget  # noqa: F401,E402  (a test extra: a missing one fails the run)
import playwright  # noqa: F401,E402  (a test extra: a missing one fails the run)
import pytest

from tests.browser_helpers import (  # noqa: E402
    CHROMIUM,
    jupyter_lab,
    open_notebook,
    save,
    transitions_done,
)
from tests.views_data import build as build_history  # noqa: E402

if not Path(CHROMIUM).exists():  # pragma: no cover
    pytest.fail(
        f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/dev test does)", pytrace=False
    )

pytestmark = pytest.mark.timeout(240)

CELLS = [
    "%load_ext dask_analytics",
    "import logging\n"
    "from distributed import Client, LocalCluster\n"
    "cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0',\n"
    "                       silence_logs=logging.CRITICAL)\n"
    "client = Client(cluster)",
    "from dask_analytics_lab import monitor\nmonitor()",
    "import dask.array as da\n"
    "import dask.dataframe as dd\n"
    "from distributed import wait\n"
    "import pandas as pd\n"
    "import dask_analytics_lab as dal\n"
    "\n"
    "pdf = pd.DataFrame({'key': [i % 10 for i in range(200_000)], 'value': range(200_000)})\n"
    "df = dd.from_pandas(pdf, npartitions=16)\n"
    "df.groupby('key').value.mean().compute()\n"
    "\n"
    "x = da.random.random((3000, 3000), chunks=(250, 250))\n"
    "(x + x.T).mean(axis=0).std().compute()\n"
    "\n"
    "def check(i):\n"
    "    if i % 3 == 0:\n"
    "        raise ValueError(f'demo: {i} is divisible by 3')\n"
    "    return i\n"
    "\n"
    "futures = client.map(check, range(12))\n"
    "try:\n"
    "    client.gather(futures)\n"
    "except ValueError:\n"
    "    pass\n"
    "wait(futures)  # gather stops at the first failure: every task runs\n"
    "dal.flush(client)  # waits for the profiles too\n"
    "print('workload done')",
]


def _notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lab")
    url = f"sqlite:///{tmp / 'analytics.db'}"
    # Besides what the notebook records: a stopped and a lost cluster from before.
    build_history(url)
    env = {"DASK_ANALYTICS__INTERVAL": "500ms"}
    # This checkout's Lab extension, built by js/build.mjs, ahead of an installed one
    # (JUPYTER_PATH comes first): the panel under test is the code under test.
    built = Path(__file__).resolve().parents[2] / "dask_analytics_lab" / "labextension"
    if (built / "package.json").exists():
        (tmp / "jupyter-path" / "labextensions").mkdir(parents=True)
        (tmp / "jupyter-path" / "labextensions" / "dask-analytics-lab").symlink_to(built)
        env["JUPYTER_PATH"] = str(tmp / "jupyter-path")
    with jupyter_lab(tmp, url, env) as lab:
        _notebook(lab.root / "demo.ipynb")
        yield lab


@pytest.fixture(scope="module")
def page(lab, browser):
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, device_scale_factor=2)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # Wait for the kernel, then run everything.
    open_notebook(page, lab.url("lab/tree/demo.ipynb"))
    # Not awaited: the command's promise settles only when every cell has run.
    page.evaluate(
        "() => { window.__ran = window.jupyterapp.commands.execute('notebook:run-all-cells')"
        ".then(() => 'ok', e => String(e)); return true; }"
    )
    page.errors = errors  # type: ignore[attr-defined]
    yield page
    context.close()


def test_load_ext_says_where_it_records(page):
    out = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea-output")
    page.wait_for_function(
        "() => document.querySelectorAll('.jp-Cell')[1].innerText.includes('dask-analytics: recording')",
        timeout=60_000,
    )
    assert "sqlite:///" in page.locator(".jp-Cell").nth(0).inner_text() + out.first.inner_text()


def test_monitor_widget_shows_live_task_groups(page):
    widget = page.locator(".dal-monitor")
    widget.wait_for(timeout=90_000)
    # Live: rows appear while the workload cell is still running.
    page.wait_for_selector(".dal-monitor .dal-taskgroups tr.dal-row", timeout=90_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-OutputArea-output')].some(o => o.innerText.includes('workload done'))",
        timeout=180_000,
    )
    page.wait_for_function(
        "() => document.querySelectorAll('.dal-monitor .dal-comp').length >= 3", timeout=30_000
    )
    # Follows the newest computation: the failing map, whose erred group opens its traceback.
    page.wait_for_selector(".dal-monitor tr.dal-row.erred", timeout=30_000)
    page.locator(".dal-monitor tr.dal-row.erred .dal-err-link").first.click()
    # One row per failure (4 of the 12 tasks raised the same way, on one line), its
    # examples and traceback inside.
    failure = page.locator(".dal-monitor tr.dal-exc-row .dal-fail").first
    failure.wait_for(timeout=30_000)
    assert page.locator(".dal-monitor tr.dal-exc-row .dal-fail").count() == 1
    head = failure.locator("summary.dal-fail-head").inner_text()
    assert "ValueError" in head and "× 4" in head and "in check" in head, head
    failure.locator("summary.dal-fail-head").click()
    assert "divisible by 3" in failure.locator(".dal-fail-examples").inner_text()
    widget.scroll_into_view_if_needed()
    widget.screenshot(path=save("monitor-exceptions.png"))

    # The array computation: many groups in dependency order.
    # Listed by what it ran and the line that made it.
    array = page.locator(
        ".dal-monitor .dal-comp", has_text="(x + x.T).mean(axis=0).std().compute()"
    ).first
    assert array.locator(".dal-comp-name").inner_text().startswith("random_sample → ")
    array.click()
    page.wait_for_function(
        "() => document.querySelectorAll('.dal-monitor tr.dal-row').length >= 5", timeout=30_000
    )
    names = page.locator(".dal-monitor .dal-group-name").all_inner_texts()
    assert any(n.startswith("random_sample") for n in names), names
    bar = page.locator(".dal-monitor .dal-bar").first
    assert bar.locator("span").count() >= 2  # state segments + label
    transitions_done(page)
    widget.screenshot(path=save("monitor-taskgroups.png"))


def test_flamegraph_renders_zooms_searches_and_hovers(page):
    page.locator(".dal-monitor .dal-tab", has_text="Profile").click()
    canvas = page.locator(".dal-monitor .dal-flame canvas")
    canvas.wait_for(state="visible", timeout=60_000)
    painted = page.evaluate("""() => {
        const c = document.querySelector('.dal-monitor .dal-flame canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, Math.min(c.height, 200)).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++;
        return n / (d.length / 4);
    }""")
    assert painted > 0.05, painted
    page.locator(".dal-monitor").screenshot(path=save("flamegraph.png"))
    box = canvas.bounding_box()
    # Hover the second row: a function with its file, line number and line of code.
    page.mouse.move(box["x"] + 30, box["y"] + 18 + 9)
    tip = page.locator(".dal-tip")
    tip.wait_for(state="visible", timeout=5_000)
    assert re.search(r":\d+", tip.inner_text()), tip.inner_text()
    page.locator(".dal-monitor").screenshot(path=save("flamegraph-hover.png"))
    # Click zooms (the hovered frame: one that is surely there): the breadcrumb grows
    # and "Reset zoom" comes alive.
    page.mouse.click(box["x"] + 30, box["y"] + 18 + 9)
    page.wait_for_function(
        "() => document.querySelectorAll('.dal-monitor .dal-crumbs a').length >= 2", timeout=10_000
    )
    assert page.locator(".dal-monitor button", has_text="Reset zoom").is_enabled()
    page.locator(".dal-monitor button", has_text="Reset zoom").click()
    page.locator(".dal-monitor .dal-flame input[type=search]").fill("getitem")
    assert "match" in page.locator(".dal-monitor .dal-flame-bar").inner_text()
    page.locator(".dal-monitor .dal-flame input[type=search]").fill("")


def test_code_and_cluster_views(page):
    page.locator(".dal-monitor .dal-tab", has_text="Code").click()
    page.wait_for_selector(".dal-monitor .dal-code .dal-line.hit", timeout=30_000)
    assert ".compute()" in page.locator(".dal-monitor .dal-line.hit").first.inner_text()
    page.locator(".dal-monitor").screenshot(path=save("code.png"))
    # Where the time went: one bar per task group (of the array computation chosen above).
    page.locator(".dal-monitor .dal-tab", has_text="Time").click()
    page.wait_for_selector(
        ".dal-monitor .dal-time-row[data-prefix=random_sample] .dal-time-seg", timeout=30_000
    )
    # When and where each task ran: the live kernel's monitor.
    page.locator(".dal-monitor .dal-tab", has_text="Task stream").click()
    page.wait_for_selector(
        ".dal-monitor .dal-stream .dal-legend span[data-prefix=random_sample]", timeout=30_000
    )
    page.locator(".dal-monitor .dal-tab", has_text="Cluster").click()
    page.wait_for_selector(".dal-monitor .dal-kpi", timeout=30_000)
    assert "workers" in page.locator(".dal-monitor .dal-cards").inner_text().lower()
    # Its key/value lists are two columns in JupyterLab's output area too, whose own rules
    # float every dt and dd (issue 23, item 6).
    # One step in the page: the live summary is redrawn as samples arrive, and a list found
    # in one call may be detached (no computed style) by the next.
    layout = page.evaluate("""() => {
        const kv = document.querySelector('.dal-monitor .dal-cluster dl.dal-kv');
        return [getComputedStyle(kv).display, getComputedStyle(kv.querySelector('dt')).float];
    }""")
    assert layout == ["grid", "none"], layout
    # Workers over time, live: each worker's memory, drawn while the cluster runs.
    page.wait_for_selector(
        ".dal-monitor .dal-workers-memory svg path", state="attached", timeout=60_000
    )
    assert page.locator(".dal-monitor .dal-workers-table tr[data-worker]").count() == 2
    page.locator(".dal-monitor").screenshot(path=save("cluster.png"))
    page.locator(".dal-monitor .dal-tab", has_text="Task groups").click()


def test_share_button_link_opens_the_report(page):
    page.locator(".dal-monitor .dal-share-toggle").first.click()
    page.locator(".dal-monitor .dal-share-create").first.click()
    link = page.locator(".dal-monitor .dal-share-url")
    link.wait_for(timeout=60_000)
    href = link.get_attribute("href")
    assert "/dask-analytics/reports/" in href, href
    report = page.context.new_page()
    report.goto(href)
    report.wait_for_selector(".dal-monitor .dal-taskgroups tr.dal-row", timeout=30_000)
    assert "Dask performance report" in report.title()
    report.screenshot(path=save("report.png"), full_page=False)
    report.close()


def test_cluster_picker_shows_a_past_cluster_and_goes_back(page):
    # In the kernel: the picker switches the monitor to another recorded cluster.
    monitor = page.locator(".dal-monitor").first
    # The rows it checks are the Task groups tab's (where the test before leaves the monitor,
    # unless it failed half way).
    monitor.locator(".dal-tab", has_text="Task groups").click()
    monitor.locator(".dal-pick-btn").focus()
    page.keyboard.press("ArrowDown")  # opens it (the notebook's shortcuts leave the keys alone)
    pop = monitor.locator(".dal-pick-pop")
    pop.wait_for(state="visible", timeout=10_000)
    # This notebook's LocalCluster, then the two recorded before it, newest first.
    page.wait_for_function(
        "() => document.querySelectorAll('.dal-monitor .dal-pick-opt').length === 3", timeout=30_000
    )
    assert pop.locator(".dal-pick-name").all_inner_texts()[1:] == ["crashed-kernel", "etl-nightly"]
    assert (
        pop.locator(".dal-pick-opt").first.locator(".dal-pick-home").inner_text() == "this notebook"
    )
    assert [b.strip() for b in pop.locator(".dal-badge").all_inner_texts()] == [
        "live",
        "lost",
        "stopped",
    ]
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("() => document.activeElement.dataset.cluster") == pop.locator(
        ".dal-pick-opt", has_text="etl-nightly"
    ).get_attribute("data-cluster")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.dal-monitor .dal-comp-name')]"
        ".some(e => e.textContent === 'read_parquet → groupby-agg')",
        timeout=30_000,
    )
    monitor.locator("tr.dal-row[data-group='parse-5f6a7b8c9d']").wait_for(timeout=30_000)
    assert monitor.locator(".dal-header .dal-badge").inner_text().strip() == "stopped"
    monitor.screenshot(path=save("monitor-cluster-picker-lab.png"))
    monitor.locator(".dal-pick-back").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.dal-monitor .dal-comp-code')]"
        ".some(e => e.textContent.includes('(x + x.T).mean(axis=0).std().compute()'))",
        timeout=30_000,
    )
    assert monitor.locator(".dal-header .dal-badge").inner_text().strip() == "live"


def test_sidebar_lists_the_cluster_and_opens_a_computation(page):
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[title='Dask analytics']")
    if tab.count():
        tab.first.click()
    else:
        page.evaluate("() => window.jupyterapp.shell.activateById('dask-analytics-sidebar')")
    page.wait_for_selector("#dask-analytics-sidebar .dal-cl", timeout=30_000)
    sidebar = page.locator("#dask-analytics-sidebar")
    page.wait_for_selector("#dask-analytics-sidebar .dal-comp", timeout=30_000)
    assert sidebar.locator(".dal-cl").count() >= 1
    assert "live" in sidebar.locator(".dal-cl").first.inner_text()
    sidebar.locator(".dal-comp").nth(1).click()
    panel = page.locator(".dal-lab-panel")
    panel.wait_for(timeout=30_000)
    page.wait_for_selector(".dal-lab-panel tr.dal-row", timeout=30_000)
    transitions_done(page)
    page.screenshot(path=save("lab-sidebar-panel.png"))
    # The panel's share button works too (no kernel involved).
    panel.locator(".dal-share-toggle").click()
    panel.locator(".dal-share-create").click()
    link = panel.locator(".dal-share-url")
    link.wait_for(timeout=60_000)
    assert "/dask-analytics/reports/" in link.get_attribute("href")
    # The Time tab in the panel: the array computation's groups, one bar each.
    panel.locator(".dal-tab", has_text="Time").click()
    page.wait_for_selector(
        ".dal-lab-panel .dal-time-row[data-prefix=random_sample] .dal-time-seg", timeout=30_000
    )
    panel.locator(".dal-tab", has_text="Task stream").click()
    page.wait_for_selector(
        ".dal-lab-panel .dal-stream .dal-legend span[data-prefix=random_sample]", timeout=30_000
    )
    # The Cluster tab's Workers over time, read through the Jupyter server's API.
    panel.locator(".dal-tab", has_text="Cluster").click()
    page.wait_for_selector(
        ".dal-lab-panel .dal-workers-memory svg path", state="attached", timeout=30_000
    )
    assert panel.locator(".dal-workers-table tr[data-worker]").count() == 2
    panel.locator(".dal-tab", has_text="Task groups").click()


def test_sidebar_shows_stopped_and_lost_clusters_as_the_store_says(page):
    sidebar = page.locator("#dask-analytics-sidebar")
    if not sidebar.is_visible():
        page.evaluate("() => window.jupyterapp.shell.activateById('dask-analytics-sidebar')")
    stopped = sidebar.locator(".dal-cl", has=page.locator(".dal-cl-name", has_text="etl-nightly"))
    lost = sidebar.locator(".dal-cl", has=page.locator(".dal-cl-name", has_text="crashed-kernel"))
    stopped.wait_for(timeout=30_000)
    # Stopped: its end, how long it ran and how big it got (not "0 workers").
    assert stopped.locator(".dal-badge").inner_text().strip() == "stopped"
    assert stopped.locator(".dal-cl-size").inner_text() == "peak 4 workers · 16 threads · 64.0 GiB"
    assert stopped.locator(".dal-cl-uptime").inner_text() == "1h 00m"
    assert stopped.locator(".dal-cl-ended").inner_text().startswith("ended ")
    # Lost: the store's word, its uptime stopped when it was last seen.
    assert lost.locator(".dal-badge").inner_text().strip() == "lost"
    assert lost.locator(".dal-cl-uptime").inner_text() == "1h 00m"
    assert lost.locator(".dal-cl-ended").inner_text().startswith("last seen ")
    assert lost.locator(".dal-cl-size").inner_text().startswith("peak 3 workers")
    # Its computations by label and code line, with what became of their tasks.
    # By keyboard: Enter opens the cluster, the focus stays on it, the arrows walk on.
    stopped.locator(".dal-cl-head").focus()
    page.keyboard.press("Enter")
    stopped.locator(".dal-comp").first.wait_for(timeout=30_000)
    assert stopped.locator(".dal-cl-head").get_attribute("aria-expanded") == "true"
    page.wait_for_function(
        "() => document.activeElement.matches('.dal-cl-head')"
        " && document.activeElement.innerText.includes('etl-nightly')"
    )
    page.keyboard.press("ArrowDown")
    assert page.evaluate(
        "() => document.activeElement.matches('#dask-analytics-sidebar .dal-comp')"
    )
    parse = stopped.locator(".dal-comp", has_text="load → parse")
    assert (
        "client.gather(client.map(parse, records))" in parse.locator(".dal-comp-code").inner_text()
    )
    segments = parse.locator(".dal-mini").evaluate("b => [...b.children].map(s => s.className)")
    assert segments == ["seg-done", "seg-erred", "seg-not-run"], segments
    assert "500 erred" in parse.inner_text() and "200 never ran" in parse.inner_text()
    assert (
        'df.groupby("k").x.mean().compute()'
        in stopped.locator(".dal-comp", has_text="read_parquet → groupby-agg").inner_text()
    )
    sidebar.screenshot(path=save("lab-sidebar-history.png"))


def test_no_javascript_errors(page):
    # Any uncaught error on the page fails, whoever raised it.
    assert not page.errors, page.errors


def test_flamegraph_renders_10k_nodes(page):
    # How fast (target: 200 ms) is benchmarks/flamegraph_bench.py's to say, not a test's.
    from benchmarks.flamegraph_bench import measure

    r = measure(10_000, 1, browser=page.context.browser)
    assert r["nodes"] == 10_000 and r["first_ms"] >= 0, r


def test_kernel_restart_ends_the_cluster_and_keeps_its_record(page, lab):
    """Issue 18: restart the notebook's kernel while its cluster runs and its futures are
    held.  The sidebar stops calling the cluster live, and every computation reads what
    it read before the restart (none turns lost, no failure appears)."""
    import dask_analytics_lab as dal
    from dask_analytics_lab.api import close_readers
    from tests.waiting import wait_for

    store = lab.env["DASK_ANALYTICS__STORE"]
    page.wait_for_function("() => window.__ran !== undefined", timeout=30_000)
    # Futures the kernel still holds when it goes.
    page.evaluate("""async () => {
        const code = 'from distributed import wait\\nheld = client.map(lambda i: i + 1, range(40))\\n'
            + 'wait(held)\\ndal.flush(client)';
        for (const w of window.jupyterapp.shell.widgets('main')) {
            if (w.context && w.context.path.endsWith('demo.ipynb')) {
                const reply = await w.sessionContext.session.kernel.requestExecute({ code }).done;
                if (reply.content.status !== 'ok') throw new Error(JSON.stringify(reply.content));
                return;
            }
        }
        throw new Error('the notebook is not open');
    }""")
    (cluster,) = [c for c in dal.list_clusters(store=store) if c["status"] == "live"]
    cid = cluster["cluster_id"]
    before = {
        c["computation_id"]: (c["state"], c["n_done"], c["n_erred"])
        for c in dal.list_computations(cid, store=store)
    }
    failures = sum(f["count"] for f in dal.list_exceptions(cid, store=store, limit=None))
    close_readers()
    sidebar = page.locator("#dask-analytics-sidebar")
    if not sidebar.is_visible():
        page.evaluate("() => window.jupyterapp.shell.activateById('dask-analytics-sidebar')")
    head = sidebar.locator(f".dal-cl-head[data-cluster='{cid}']")
    head.wait_for(timeout=30_000)
    assert head.get_attribute("data-status") == "live"

    page.evaluate("""async () => {
        for (const w of window.jupyterapp.shell.widgets('main')) {
            if (w.context && w.context.path.endsWith('demo.ipynb')) {
                await w.sessionContext.session.kernel.restart();
                return;
            }
        }
        throw new Error('the notebook is not open');
    }""")
    page.wait_for_function(
        f"() => document.querySelector(\"#dask-analytics-sidebar .dal-cl-head[data-cluster='{cid}']\")"
        ".dataset.status !== 'live'",
        timeout=60_000,
    )
    status = head.get_attribute("data-status")
    sidebar.screenshot(path=save("lab-sidebar-after-restart.png"))
    row = wait_for(
        lambda: (r := dal.get_cluster(cid, store=store))["status"] != "live" and r,
        what="the store to say the cluster ended",
    )
    assert row["status"] == status == "stopped", (row["status"], status)
    after = {
        c["computation_id"]: (c["state"], c["n_done"], c["n_erred"])
        for c in dal.list_computations(cid, store=store)
    }
    assert after == before
    assert sum(f["count"] for f in dal.list_exceptions(cid, store=store, limit=None)) == failures
    close_readers()
