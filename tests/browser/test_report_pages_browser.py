"""Issue 36, item 5: every report page a person opens shows the same report, in a real
Chromium (Debian's, driven by Playwright).

One computation on a real LocalCluster, recorded into a real SQLite file: a run of a
line, then the same line again with a straggler (slower than the first, so the views
compare it with it), inside a `performance_report` block.  Its report is opened where
people open one:
  - the Jupyter server extension's link (what Share gives without a team server):
    refused without Jupyter's login, shown with it;
  - the team server's link (Share against analytics.store = the server, made by the
    server itself): a public one logged out; a private one refused to another
    account's login and shown to its own account's;
  - the downloaded HTML (Download HTML), offline, from disk;
  - the `performance_report`'s own link (its twin is the store's rows of the block).
Each must show the same findings (their kinds, as explain() makes them), the top
finding's line above the task groups and the banner comparing it with the earlier run;
none may still say "Reading the record…".  Screenshots: test-artifacts/report-page-*.png.
"""

from __future__ import annotations

import json
import urllib.request

import dask
import pytest
from dask import delayed
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.readers import open_reader
from dask_analytics_lab.reports import performance_report
from dask_analytics_lab.reports.rows import open_blob
from dask_analytics_lab.reports.share import report_file, share_computation
from dask_analytics_lab.reports.twin_page import twin_report_page
from dask_analytics_lab.store.team import TeamStore
from tests.browser_helpers import jupyter_lab, offline_page, save
from tests.cluster_helpers import recorded_cluster
from tests.server_helpers import ServerThread
from tests.workloads import spin, total

VIEWPORT = {"width": 1300, "height": 900}

pytestmark = pytest.mark.timeout(300)


def run(client, straggle: bool) -> int:
    # One line makes both runs: they share their fingerprint, and the second is compared.
    return client.compute(
        delayed(total)([delayed(spin)(3.0 if straggle and i == 5 else 0.05, i) for i in range(10)])
    ).result()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(store URL, the straggled computation's id, the team server, its performance
    report's row, explain()'s findings of it)."""
    tmp = tmp_path_factory.mktemp("pages")
    url = f"sqlite:///{tmp / 'analytics.db'}"
    with ServerThread({"store_url": url}) as server:
        with (
            dask.config.set({"analytics.store": url, "analytics.reports.base-url": server.url}),
            recorded_cluster(url) as (client, info),
        ):
            run(client, False)
            with performance_report(filename=str(tmp / "block.html")) as block:
                run(client, True)
        assert block.report is not None
        first, second = sorted(
            dal.list_computations(info["cluster_id"], store=url), key=lambda c: c["start"]
        )
        cid = second["computation_id"]
        account = server.ctx.store.get_cluster(info["cluster_id"])["account"]
        server.ann, server.eve = server.token(account, "ann"), server.token("elsewhere", "eve")
        found = dal.explain(cid, store=url)
        assert "straggler" in {f["kind"] for f in found}, found
        assert open_reader(url).run_summary(cid)["baseline_id"] == first["computation_id"]
        yield url, cid, server, block.report, found
    close_readers()


def shown(page, name: str) -> dict:
    """What the report page in `page` shows of its findings: the top finding's line,
    the runs banner, and the Findings tab's kinds."""
    monitor = page.locator(".dal-monitor")
    top = monitor.locator(".dal-taskgroups .dal-top-finding")
    top.wait_for(timeout=30_000)
    banner = monitor.locator(".dal-taskgroups .dal-runs-banner")
    banner.wait_for(timeout=10_000)
    monitor.locator(".dal-tab[data-tab='findings']").click()
    pane = monitor.locator(".dal-pane[data-pane='findings']")
    pane.locator(".dal-finding").first.wait_for(timeout=10_000)
    page.screenshot(path=save(f"report-page-{name}.png"))
    assert "Reading the record" not in page.inner_text("body")
    seen = {
        "top": top.inner_text(),
        "banner": banner.inner_text(),
        "kinds": pane.locator(".dal-finding").evaluate_all("els => els.map(e => e.dataset.kind)"),
        "tab": monitor.locator(".dal-tab[data-tab='findings']").inner_text(),
    }
    for tab in ("profile", "time", "stream", "code", "cluster", "gpu"):
        monitor.locator(f".dal-tab[data-tab='{tab}']").click()
        monitor.locator(f".dal-pane[data-pane='{tab}']").wait_for(state="visible")
    # Views draw once on screen: let the last one settle before reading them all.
    page.wait_for_function(
        "() => document.querySelector(\".dal-pane[data-pane='gpu'] .dal-empty, "
        ".dal-pane[data-pane='gpu'] canvas, .dal-pane[data-pane='gpu'] svg\")"
    )
    seen["empty"] = monitor.locator(".dal-empty").all_inner_texts()
    seen["unknown code"] = [
        t
        for t in monitor.locator(".dal-code-head").all_inner_texts()
        if "<unknown>" in t or "line ?" in t
    ]
    return seen


def log_in(page, server: ServerThread, token: str) -> None:
    page.goto(f"{server.url}/login")
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/")


def test_every_report_page_shows_the_same_findings(recorded, browser, tmp_path):
    url, cid, server, block, found = recorded
    kinds = [f["kind"] for f in found]
    pages: dict[str, dict] = {}
    errors: list[str] = []

    def new_page():
        page = offline_page(browser, viewport=VIEWPORT)
        page.on("pageerror", lambda e: errors.append(str(e)))
        return page

    # The team server's link, made by the server from its own store: public, logged out.
    with dask.config.set(
        {
            "analytics.store": server.url,
            "analytics.token": server.ann,
            "analytics.reports.server": None,
        }
    ):
        public = share_computation(cid)
        private = share_computation(cid, private=True)
    assert public["url"].startswith(server.url + "/reports/")
    page = new_page()
    page.goto(public["url"])
    pages["team server"] = shown(page, "team")

    # A private one: another account's login is refused, its own account's is shown.
    page = new_page()
    log_in(page, server, server.eve)
    answer = page.goto(private["url"])
    assert answer.status == 404 and page.locator(".dal-monitor").count() == 0
    page = new_page()
    log_in(page, server, server.ann)
    page.goto(private["url"])
    pages["team server, private"] = shown(page, "team-private")

    # The downloaded HTML, from disk, offline.
    filename, html = report_file(cid, store=url)
    (tmp_path / filename).write_text(html)
    page = new_page()
    page.goto((tmp_path / filename).as_uri())
    pages["download"] = shown(page, "download")

    # The performance_report's link: the store's rows of its block, the same computation.
    page = new_page()
    page.goto(block["url"])
    pages["performance_report"] = shown(page, "performance-report")

    # The Jupyter server extension's link, as Share makes it without a team server.
    with dask.config.set({"analytics.store": url, "analytics.reports.base-url": None}):
        local = share_computation(cid)
    assert local["local"] is True
    with jupyter_lab(tmp_path / "lab", url) as lab:
        link = f"{lab.base}/dask-analytics/reports/{local['id']}"
        with urllib.request.urlopen(link, timeout=30) as r:  # logged out: Jupyter's login
            assert "/login" in r.url and "dal-state" not in r.read().decode()
        page = new_page()
        page.goto(lab.url("api/status"))  # the token in the URL logs this browser in
        page.goto(link)
        pages["jupyter"] = shown(page, "jupyter")
        # The share endpoint, mounted in Jupyter: a logged-in browser's write without
        # Jupyter's XSRF token is refused; with it, the report is made there.
        endpoint = f"{lab.base}/dask-analytics/api/computations/{cid}/share"
        # The browser's own cookies (its Jupyter login), sent as its pages would send them.
        page.goto(f"{lab.base}/lab", wait_until="commit")  # Jupyter's page sets its _xsrf
        xsrf = next(c["value"] for c in page.context.cookies() if c["name"] == "_xsrf")
        headers = {"Content-Type": "application/json", "Origin": lab.base}
        answer = page.context.request.post(endpoint, headers=headers, data="{}")
        assert answer.status == 403, answer.text()
        answer = page.context.request.post(
            endpoint, headers={**headers, "X-XSRFToken": xsrf}, data="{}"
        )
        status, text = answer.status, answer.text()
        assert status == 201, text
        made = json.loads(text)["report"]["id"]
        page.goto(f"{lab.base}/dask-analytics/reports/{made}")
        pages["jupyter, made by the endpoint"] = shown(page, "jupyter-endpoint")

    # Every tab of every page: where a view has nothing, the page says what the report
    # lacks; it never asks its reader to run something in a notebook.
    for where, seen in pages.items():
        assert seen["empty"], (where, seen)  # this machine has no GPU: that tab says so
        for said in seen["empty"]:
            assert "%load_ext" not in said and "registered" not in said, (where, said)
            assert said.startswith(("This report holds no", "The recorder kept no")), (where, said)
        assert not seen["unknown code"], (where, seen)
    for where, seen in pages.items():
        assert seen["kinds"] == kinds, (where, seen)
        assert seen["tab"] == f"Findings{len(kinds)}", (where, seen)
        assert seen["top"].startswith(kinds[0]) and found[0]["title"] in seen["top"], (where, seen)
        assert "slower than the previous run" in seen["banner"], (where, seen)
    assert len({(s["top"], s["banner"]) for s in pages.values()}) == 1, pages
    assert errors == []


def test_a_report_of_an_unrecorded_cluster_says_what_it_lacks(sqlite_url, browser, tmp_path):
    """A performance_report of a cluster analytics does not record: its page (from the
    twin stored, through the one builder) says the report holds no cluster record and
    shows the block's code as text; it asks its reader to run nothing."""
    with (
        LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
        dask.config.set({"analytics.store": sqlite_url}),
    ):
        with performance_report(filename=str(tmp_path / "r.html")) as report:
            client.submit(sum, [1, 2]).result()  # marker-of-the-block
    assert report.report is not None and report.report["summary"]["computation_ids"] == []
    stored = TeamStore(open_reader(sqlite_url)).get_report(report.report["id"], content="twin")
    twin = json.loads(open_blob(stored, "twin_gz"))
    path = tmp_path / "page.html"
    path.write_text(twin_report_page(twin, {"title": "block"}))
    page = offline_page(browser, viewport=VIEWPORT)
    page.goto(path.as_uri())
    page.wait_for_selector(".dal-report-norecord", timeout=30_000)
    said = page.inner_text(".dal-report-norecord .dal-empty")
    assert said.startswith("This report holds no cluster record"), said
    # (The block's code is this test's source: its own words are checked apart from it.)
    assert "%load_ext" not in said and "Run " not in said
    code = page.inner_text(".dal-report-norecord .dal-code-body")
    assert "marker-of-the-block" in code  # the block's code, as text
    head = page.inner_text(".dal-report-norecord .dal-code-head")
    assert head == "The report's block", head


def test_a_performance_report_of_two_computations_shows_each_its_own(sqlite_url, browser, tmp_path):
    """A block that ran two computations: its page lists both, opens on the longer, and
    choosing the other shows that one's own task groups and findings (they came with
    the report: nothing is fetched)."""
    with (
        dask.config.set({"analytics.store": sqlite_url}),
        recorded_cluster(sqlite_url) as (client, info),
    ):
        with performance_report(filename=str(tmp_path / "two.html")) as report:
            client.submit(sum, [1, 2], key="quick-one").result()
            run(client, True)
    twin_row = report.report
    assert twin_row is not None and len(twin_row["summary"]["computation_ids"]) == 2
    stored = TeamStore(open_reader(sqlite_url)).get_report(twin_row["id"], content="twin")
    twin = json.loads(open_blob(stored, "twin_gz"))
    quick, slow = twin["summary"]["computation_ids"]  # by start
    assert twin["summary"]["computation_id"] == slow  # the longer one is shown first
    assert set(twin["by_computation"]) == {quick}
    path = tmp_path / "two-page.html"
    path.write_text(twin_report_page(twin, {"title": "two"}))
    page = offline_page(browser, viewport=VIEWPORT)
    page.goto(path.as_uri())
    monitor = page.locator(".dal-monitor")
    monitor.locator(".dal-taskgroups .dal-top-finding").wait_for(timeout=30_000)
    assert monitor.locator(".dal-comp").count() == 2
    names = monitor.locator(".dal-taskgroups tbody tr").all_inner_texts()
    assert any("spin" in n for n in names), names
    monitor.locator(f".dal-comp[data-computation='{quick}']").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.dal-taskgroups tbody tr')]"
        ".some((r) => r.textContent.includes('quick'))"
    )
    names = monitor.locator(".dal-taskgroups tbody tr").all_inner_texts()
    assert not any("spin" in n for n in names), names
    assert monitor.locator(".dal-top-finding").count() == 0  # the quick one has none
    monitor.locator(".dal-tab[data-tab='findings']").click()
    assert "No findings" in monitor.locator(".dal-pane[data-pane='findings']").inner_text()
    # And back: the first one's own again (its traits are the page state's).
    monitor.locator(f".dal-comp[data-computation='{slow}']").click()
    monitor.locator(
        ".dal-pane[data-pane='findings'] .dal-finding[data-kind='straggler']"
    ).wait_for()
    monitor.locator(".dal-tab[data-tab='groups']").click()
    monitor.locator(".dal-taskgroups .dal-top-finding").wait_for()
    names = monitor.locator(".dal-taskgroups tbody tr").all_inner_texts()
    assert any("spin" in n for n in names), names
