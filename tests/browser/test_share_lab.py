"""Issue 11's done-when, in a real `jupyter lab` and Debian's Chromium: a user clicks Share
and a teammate in a second browser session (no Jupyter login: no access to the first
user's machine) opens what they were sent, with every request to the outside blocked.

- Without a team server: the link is this Jupyter server's (the teammate meets its
  login page) and the panel says so; Download HTML saves one file that the teammate
  opens offline and sees the report in.
- With a team server (`analytics.reports.server` + ann's token of team-a): the link is
  the server's; a private report opens for bob (another token of team-a, logged in on
  the team server's page) and not for eve (team-b).
- A refused token: the panel says so and how to make one.
- The JupyterLab panel (no kernel: the Jupyter server's extension) does the same with
  the server configured for the Jupyter server.
Screenshots: test-artifacts/share-lab-*.png.
"""

from __future__ import annotations

from pathlib import Path

import anywidget  # noqa: F401  (a test extra: a missing one fails the run)
import playwright  # noqa: F401  (a test extra: a missing one fails the run)
import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from tests.browser_helpers import jupyter_lab, offline_page, open_notebook, save
from tests.server_helpers import ServerThread

pytestmark = pytest.mark.timeout(420)
ROOT = Path(__file__).resolve().parents[2]
WRONG = "dal_0123456789abcdef_wrong"


def cells(team_url: str, ann: str) -> list[str]:
    return [
        # The Jupyter server has a team server configured (for its Lab panels); this
        # kernel starts without one.
        "import dask\ndask.config.set({'analytics.reports.server': None})\n%load_ext dask_analytics",
        "import logging\nimport dask.array as da\nimport dask_analytics_lab as dal\n"
        "from distributed import Client, LocalCluster\n"
        "cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0',\n"
        "                       silence_logs=logging.CRITICAL)\n"
        "client = Client(cluster)\n"
        "da.ones((400, 400), chunks=100).sum().compute()\n"
        "dal.flush(client)\nprint('workload done')",
        "from dask_analytics_lab import monitor\nmonitor()",
        f"dask.config.set({{'analytics.reports.server': {team_url!r}, 'analytics.token': {ann!r}}})\n"
        "print('team server set')",
        f"dask.config.set({{'analytics.token': {WRONG!r}}})\nprint('wrong token set')",
    ]


def _notebook(path: Path, sources: list[str]) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in sources]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


def run_cell(page, index: int) -> None:
    """Run one cell of the open notebook and wait until it has run."""
    page.evaluate(
        """async (i) => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = i;
        await window.jupyterapp.commands.execute('notebook:run-cell');
    }""",
        index,
    )
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)


def teammate(browser, team_url: str | None = None, token: str | None = None):
    """A second browser session, outside requests blocked; logged in to the team server
    with `token` when given."""
    page = offline_page(browser, viewport={"width": 1280, "height": 900})
    if token:
        page.goto(f"{team_url}/login")
        page.fill("input[name=token]", token)
        page.locator("form.login [type=submit], form.login button").first.click()
        page.wait_for_load_state()
    return page


def sees_report(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(".dal-monitor .dal-taskgroups tr.dal-row", timeout=30_000)
    assert "sum" in page.locator(".dal-monitor .dal-taskgroups").inner_text()
    assert page.blocked == [], page.blocked  # it asked for nothing outside


def share(panel, *, private: bool = False) -> str:
    """Open the share panel, create a link; the link."""
    if panel.locator(".dal-share-panel").is_hidden():
        panel.locator(".dal-share-toggle").click()
    box = panel.locator(".dal-share-private")
    if box.is_checked() != private:
        box.click()
    old = (
        panel.locator(".dal-share-url").get_attribute("href")
        if panel.locator(".dal-share-url").count()
        else None
    )
    panel.locator(".dal-share-create").click()
    panel.page.wait_for_function(
        "([el, old]) => { const a = el.querySelector('.dal-share-url'); const b = el.querySelector('.dal-share-msg.bad');"
        " return (a && a.href !== old) || b; }",
        arg=[panel.element_handle(), old],
        timeout=60_000,
    )
    bad = panel.locator(".dal-share-msg.bad")
    assert not bad.count(), bad.inner_text()
    return panel.locator(".dal-share-url").get_attribute("href")


def test_share_reaches_a_teammate_with_and_without_a_team_server(tmp_path, browser):
    team_db = "sqlite:///" + str(tmp_path / "team.db")
    store = "sqlite:///" + str(tmp_path / "analytics.db")
    with ServerThread({"store_url": team_db}) as team:
        ann, bob, eve = (
            team.token("team-a", "ann"),
            team.token("team-a", "bob"),
            team.token("team-b", "eve"),
        )
        env = {
            "PYTHONPATH": str(ROOT),
            "DASK_ANALYTICS__INTERVAL": "500ms",
            "DASK_ANALYTICS__REPORTS__SERVER": team.url,
            "DASK_ANALYTICS__TOKEN": ann,
        }
        with jupyter_lab(tmp_path / "lab", store, env) as lab:
            _notebook(lab.root / "share.ipynb", cells(team.url, ann))
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            open_notebook(page, lab.url("lab/tree/share.ipynb"))
            for i in range(3):
                run_cell(page, i)
            widget = page.locator(".jp-Notebook .dal-monitor").first
            widget.locator(".dal-taskgroups tr.dal-row").first.wait_for(timeout=60_000)

            # 1. No team server: this Jupyter's link, and the panel says who opens it.
            link = share(widget)
            assert link.startswith(f"{lab.base}/dask-analytics/reports/"), link
            assert (
                "Only people who can log in to this Jupyter server"
                in widget.locator(".dal-share-msg").inner_text()
            )
            widget.screenshot(path=save("share-lab-no-server.png"))
            other = teammate(browser)
            other.goto(link)
            assert (
                "/login" in other.url and not other.locator(".dal-monitor").count()
            )  # not their machine
            # ... so they get the file: Download HTML.
            with page.expect_download(timeout=60_000) as download:
                widget.locator(".dal-share-download").click()
            saved = tmp_path / download.value.suggested_filename
            download.value.save_as(saved)
            assert saved.name.startswith("dask-report-") and saved.suffix == ".html"
            sees_report(other, saved.as_uri())
            other.context.close()

            # 2. A team server: its link; private, so bob (team-a) opens it and eve (team-b) does not.
            run_cell(page, 3)
            link = share(widget, private=True)
            assert link.startswith(f"{team.url}/reports/"), link
            assert "private to your account" in widget.locator(".dal-share-where").inner_text()
            sees_report(teammate(browser, team.url, bob), link)
            stranger = teammate(browser, team.url, eve)
            answer = stranger.goto(link)
            assert answer.status == 404 and not stranger.locator(".dal-monitor").count()
            stranger.context.close()

            # 3. A refused token: what to do.
            run_cell(page, 4)
            widget.locator(".dal-share-create").click()
            bad = widget.locator(".dal-share-msg.bad")
            bad.wait_for(timeout=60_000)
            assert (
                "refused analytics.token" in bad.inner_text()
                and "dask-analytics token create" in bad.inner_text()
            )
            widget.screenshot(path=save("share-lab-refused.png"))

            # 4. The Lab panel: the Jupyter server's extension uploads to its team server.
            [cluster] = [c for c in dal.list_clusters(store=store) if c.get("status") == "live"]
            comp = dal.list_computations(cluster["cluster_id"], store=store)[0]
            close_readers()
            page.evaluate(
                "([c, k]) => window.jupyterapp.commands.execute('dask-analytics:open', "
                "{clusterId: c, computationId: k})",
                [cluster["cluster_id"], comp["computation_id"]],
            )
            panel = page.locator(".dal-lab-panel")
            panel.locator("tr.dal-row").first.wait_for(timeout=60_000)
            link = share(panel, private=True)
            assert link.startswith(f"{team.url}/reports/"), link
            panel.screenshot(path=save("share-lab-panel.png"))
            sees_report(teammate(browser, team.url, bob), link)
            with page.expect_download(timeout=60_000) as download:
                panel.locator(".dal-share-download").click()
            saved = tmp_path / ("panel-" + download.value.suggested_filename)
            download.value.save_as(saved)
            sees_report(teammate(browser), saved.as_uri())
            assert errors == []
            context.close()
