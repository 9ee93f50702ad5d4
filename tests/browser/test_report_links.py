"""Issue 11, items 1 and 2: the link `performance_report` prints opens, and the report it
opens draws its plots with every request to the outside world blocked.

- a plain script (a real subprocess with a LocalCluster) with the default set-up: a
  file:// link to the HTML it wrote, and the line on how to get a shareable one;
- the same script recording to a team server: the server's link;
- a kernel of a real Jupyter server: that server's dask-analytics/reports/<id>, opened in
  Chromium logged in to that server; a kernel recording into another store: file://;
- a report made with BokehJS from the CDN (mode="cdn", or uploaded as distributed wrote
  it) is stored with the installed BokehJS inline;
- the Share button's report of a stored computation renders offline too.

Each link is opened in Chromium with every request not to 127.0.0.1 (or a file) aborted,
and Bokeh's plots must be drawn: canvases with pixels on them.  The control: the same
report made with BokehJS from the CDN (distributed's default) draws nothing there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import dask
import dask.array as da
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.reports import (
    list_performance_reports,
    performance_report,
    share_computation,
)
from dask_analytics_lab.reports.publish import SHARE_HINT

from ..browser_helpers import jupyter_lab, offline_page, run_in_kernel
from ..cluster_helpers import recorded_cluster
from ..server_helpers import ServerThread, on_report_origin, report_server, request

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"^Performance Report Available at: (\S+)$", re.M)

# Counts the canvases (in the page and in Bokeh's shadow roots) with a visible pixel
# that is not the white background: plots actually drawn, not just a document loaded.
DRAWN_CANVASES = """() => {
  const canvases = [];
  const walk = (root) => root.querySelectorAll('*').forEach(e => {
    if (e.tagName === 'CANVAS') canvases.push(e);
    if (e.shadowRoot) walk(e.shadowRoot);
  });
  walk(document);
  return canvases.filter(c => {
    if (!c.width || !c.height) return false;
    const ctx = c.getContext('2d');
    if (!ctx) return false;
    const px = ctx.getImageData(0, 0, c.width, c.height).data;
    for (let i = 0; i < px.length; i += 4)
      if (px[i + 3] > 0 && (px[i] < 250 || px[i + 1] < 250 || px[i + 2] < 250)) return true;
    return false;
  }).length;
}"""

SCRIPT = """
import dask.array as da
from distributed import Client, LocalCluster

from dask_analytics_lab import list_performance_reports, performance_report

if __name__ == "__main__":
    with LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=":0") as cluster, Client(cluster):
        with performance_report(filename="dask-report.html"{mode}):
            assert da.ones((400, 400), chunks=100).sum().compute() == 160_000
    print("LISTED", list_performance_reports()[0]["url"])
"""


def run_script(tmp_path: Path, env: dict, mode: str | None = None) -> str:
    """Run SCRIPT as a user would (`python script.py` in its folder); its stdout.
    `env` over this process's environment, a None value removing a variable."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(mode=f", mode={mode!r}" if mode else ""))
    full = {
        k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT), **env}.items() if v is not None
    }
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def printed_link(out: str) -> str:
    match = LINK.search(out)
    assert match, out
    return match.group(1)


def assert_plots_drawn(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function(
        "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents[0].roots().length > 0",
        timeout=30_000,
    )
    page.wait_for_function(DRAWN_CANVASES, timeout=30_000)
    text = page.evaluate(
        "Array.from(document.querySelectorAll('*')).map(e => e.shadowRoot ? "
        "e.shadowRoot.textContent : '').join(' ') + document.body.textContent"
    )
    assert "Dask Performance Report" in text


@pytest.fixture(autouse=True)
def _fresh_readers():
    yield
    close_readers()


def test_a_script_with_the_default_setup_prints_a_file_link_that_opens_offline(tmp_path, browser):
    # The default store (a SQLite file under the user's data folder), no server anywhere.
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "DASK_ANALYTICS__STORE": None,
        "DASK_ANALYTICS__REPORTS__BASE_URL": None,
    }
    out = run_script(tmp_path, env)
    link = printed_link(out)
    assert link == (tmp_path / "dask-report.html").as_uri(), out
    assert SHARE_HINT in out and "dask-analytics server" in SHARE_HINT
    assert "127.0.0.1:8765" not in out
    # list_performance_reports() follows the same rule, in the script and here.
    assert f"LISTED {link}" in out
    store = "sqlite:///" + str(tmp_path / "data" / "dask-analytics" / "analytics.db")
    assert [r["url"] for r in list_performance_reports(store=store)] == [link]

    page = offline_page(browser)
    assert_plots_drawn(page, link)

    # The control: distributed's default (BokehJS from its CDN) draws nothing offline.
    cdn = tmp_path / "cdn"
    cdn.mkdir()
    out = run_script(cdn, {**env, "XDG_DATA_HOME": str(cdn / "data")}, mode="cdn")
    page = offline_page(browser)
    # goto returns at the load event: by then every script was loaded or refused, and
    # without BokehJS nothing can draw later.
    page.goto(printed_link(out), wait_until="load")
    assert any("bokeh" in u for u in page.blocked), page.blocked
    assert page.evaluate("typeof window.Bokeh") == "undefined"
    assert page.evaluate(DRAWN_CANVASES) == 0

    # Stored, the same report has the installed BokehJS inline: served, it draws offline,
    # as does that page uploaded to a team server as distributed wrote it.
    cdn_store = "sqlite:///" + str(cdn / "data" / "dask-analytics" / "analytics.db")
    [stored] = list_performance_reports(store=cdn_store)
    # (Uploaded HTML is served on the server's report origin only.)
    with report_server(cdn_store) as server:
        assert_plots_drawn(
            offline_page(browser),
            on_report_origin(server, f"{server.url}/reports/{stored['id']}"),
        )
        status, body, _ = request(
            server.url + "/api/reports",
            method="POST",
            token=server.token("team-a"),
            body={
                "html": (cdn / "dask-report.html").read_text(),
                "twin": {"summary": {}},
                "filename": "dask-report.html",
                "private": False,
            },
        )
        assert status == 201, body
        assert_plots_drawn(offline_page(browser), on_report_origin(server, body["report"]["url"]))


def test_a_script_recording_to_a_team_server_prints_its_link(tmp_path, sqlite_url, browser):
    with report_server(sqlite_url) as server:
        out = run_script(
            tmp_path,
            {"DASK_ANALYTICS__STORE": server.url, "DASK_ANALYTICS__TOKEN": server.token("team-a")},
        )
        link = printed_link(out)
        assert link.startswith(server.url + "/reports/"), out
        assert SHARE_HINT not in out and f"LISTED {link}" in out
        status, html, _ = request(link)  # public by link: a teammate needs no token
        assert status == 200 and "dal-state" in html  # the server's page, from the twin
        status, html, _ = request(on_report_origin(server, link))
        assert status == 200 and "Dask Performance Report" in html
        page = offline_page(browser)
        assert_plots_drawn(page, on_report_origin(server, link))


KERNEL_CODE = """
import dask, dask.array as da
from distributed import Client, LocalCluster
import dask_analytics_lab as dal
from dask_analytics_lab import list_performance_reports, performance_report

with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster, \\
        Client(cluster) as client:
    dal.register(client)  # the report's twin is what the recorder stored of the block
    with performance_report(filename="in-lab.html"):
        da.ones((400, 400), chunks=100).sum().compute()
    print("LISTED", list_performance_reports()[0]["url"])
    # Recording into a store this Jupyter server does not serve: its link would be dead.
    with dask.config.set({"analytics.store": "sqlite:///" + __import__("os").path.abspath("other.db")}):
        with performance_report(filename="elsewhere.html"):
            da.ones(10, chunks=5).sum().compute()
"""


def test_a_kernel_under_jupyter_prints_that_servers_link(tmp_path, browser):
    store = f"sqlite:///{tmp_path / 'analytics.db'}"
    with jupyter_lab(tmp_path, store, {"PYTHONPATH": str(ROOT)}) as lab:
        _, out = run_in_kernel(lab, KERNEL_CODE)
        [link, elsewhere] = LINK.findall(out)
        assert link.startswith(f"{lab.base}/dask-analytics/reports/"), out
        assert f"LISTED {link}" in out
        assert elsewhere.startswith("file://") and elsewhere.endswith("/elsewhere.html"), out
        assert Path(elsewhere.removeprefix("file://")).is_file()
        # Without Jupyter's login the link leads to its login page; logged in, the report:
        # the page rendered from its twin (Jupyter has no report origin for the uploaded HTML).
        with urllib.request.urlopen(link, timeout=30) as r:
            assert "/login" in r.url
        page = offline_page(browser)
        page.goto(lab.url("api/status"))  # the token in the URL logs this browser in
        page.goto(link)
        page.wait_for_selector(".dal-monitor .dal-comp", timeout=30_000)
        page.wait_for_function("document.body.textContent.includes('sum')", timeout=30_000)


def test_a_shared_computation_report_renders_offline(sqlite_url, browser):
    """The Share button's report (the monitor's own views, not Bokeh) is whole too."""
    with recorded_cluster(sqlite_url) as (client, info):
        assert da.ones((400, 400), chunks=100).sum().compute() == 160_000
        dal.flush(client)
    [comp] = dal.list_computations(info["cluster_id"], store=sqlite_url)
    with (
        ServerThread({"store_url": sqlite_url}) as server,
        dask.config.set({"analytics.reports.base-url": server.url}),
    ):
        row = share_computation(comp["computation_id"], store=sqlite_url)
        assert row["url"] == f"{server.url}/reports/{row['id']}"
        page = offline_page(browser)
        page.goto(row["url"])
        page.wait_for_selector(".dal-monitor .dal-taskgroups tr.dal-row", timeout=30_000)
        assert "sum" in page.locator(".dal-monitor .dal-taskgroups").inner_text()
        assert page.blocked == []  # it asked for nothing outside


def test_no_link_for_a_file_a_browser_cannot_show(sqlite_url, tmp_path, capsys):
    """A compressed report (distributed writes .gz when asked) has no file:// link that
    would show it: the location is printed instead, with how to get a link."""
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster),
        dask.config.set({"analytics.reports.base-url": None}),
    ):
        with performance_report(filename=str(tmp_path / "r.html.gz"), store=sqlite_url) as report:
            da.ones(10, chunks=5).sum().compute()
    out = capsys.readouterr().out
    assert report.url is None and report.report["id"]
    assert f"Performance report saved to {tmp_path / 'r.html.gz'}\n{SHARE_HINT}" in out
    assert "Available at" not in out
    [listed] = list_performance_reports(store=sqlite_url)
    assert listed["url"] is None and listed["json_url"] is None
