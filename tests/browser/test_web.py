"""The team web view in a real Chromium (Debian's, driven by Playwright), over what a
real LocalCluster recorded: login, clusters over time, a cluster's computations, a
computation's task groups, code, exceptions with tracebacks, the flamegraph, reports.
Screenshots land in test-artifacts/.  Stored text is shown as text, never as markup."""

from __future__ import annotations

import time

import dask.array as da
import pytest
from distributed import get_worker

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.remote import HttpSink

from ..cluster_helpers import recorded_cluster
from ..server_helpers import ARTIFACTS, ServerThread, full_cluster, request

HOSTILE = "<img src=x onerror=alert(1)>"


def _spin() -> int:
    x = 0
    for i in range(20_000):
        x += i * i
    return x


def _busy(x: int) -> int:
    # Together over two seconds: workers hand out their profile in 1 s cycles, and the
    # plugin asks for it when the computation ends.
    end = time.perf_counter() + 0.25
    while time.perf_counter() < end:
        _spin()
    return x + 1


def _boom(x: int) -> float:
    return 1 / (x - x)


def _shout() -> None:
    get_worker().log_event("team-notes", {"note": "hello from a task"})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A server over a store a real cluster recorded into; yields (server, token)."""
    url = "sqlite:///" + str(tmp_path_factory.mktemp("web") / "analytics.db")
    config = {
        "analytics.account": "team-a",
        "analytics.user": "ann",
        "analytics.events.allow": ["team-notes", "worker-fail-hard"],
    }
    with recorded_cluster(url, config=config) as (client, info):
        assert sum(client.gather(client.map(_busy, range(16)))) == 136
        assert da.ones((400, 400), chunks=100).sum().compute() == 160_000
        with pytest.raises(ZeroDivisionError):
            client.submit(_boom, 3).result()
        client.submit(_shout).result()
        assert dal.flush(client, timeout=20)["flushed"]
    close_readers()
    with ServerThread({"store_url": url}) as server:
        token = server.token("team-a", "ann")
        _, hostile = full_cluster("team-a", name=HOSTILE, user=HOSTILE)
        assert HttpSink(server.url, token=token).write(hostile)
        for private in (False, True):
            status, _, _ = request(
                server.url + "/api/reports",
                method="POST",
                token=token,
                body={
                    "html": "<html><body><h1>A shared report</h1></body></html>",
                    "filename": f"report-{private}.html",
                    "private": private,
                    "twin": {"summary": {"duration": 1.5, "n_tasks": 22}},
                },
            )
            assert status == 201
        yield server, token, info["cluster_id"]


def _watch(page) -> list[str]:
    """Collect console errors (CSP violations included) and any dialog (an injected alert)."""
    problems: list[tuple[str, str]] = []
    page.on(
        "console",
        lambda m: (
            problems.append((f"console {m.type}: {m.text}", m.location.get("url")))
            if m.type == "error"
            else None
        ),
    )
    page.on("pageerror", lambda e: problems.append((f"page error: {e}", page.url)))
    page.on("dialog", lambda d: (problems.append((f"dialog: {d.message}", page.url)), d.dismiss()))
    return problems


def test_team_view_in_chromium(site, browser):
    server, token, cluster_id = site
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    problems = _watch(page)

    # Not logged in: the page sends us to the login form, which brings us back.
    page.goto(server.url + "/")
    page.wait_for_url("**/login?next=*")
    page.screenshot(path=str(ARTIFACTS / "web-login.png"))
    assert all("401" in p for p, _ in problems)  # the API said "log in": expected
    problems.clear()
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_selector("table")
    assert "ann · team-a" in page.inner_text("#whoami")
    rows = page.locator("main table tbody tr")
    assert rows.count() == 2
    assert page.locator("svg.chart rect").count() == 2  # clusters over time
    # The hostile cluster name is text on the page, not an element.
    assert page.get_by_text(HOSTILE).count() >= 1 and page.locator("main img").count() == 0
    page.screenshot(path=str(ARTIFACTS / "web-clusters.png"), full_page=True)

    # A cluster: facts, chart, computations, exceptions, events.
    page.click(f"main table a[href$='{cluster_id}']")
    page.wait_for_selector("h2:has-text('Computations')")
    text = page.inner_text("main")
    assert "team-a" in text and "ZeroDivisionError" in text and "hello from a task" in text
    # The computations table (the Workers section above it has a table of its own).
    computations = page.locator("main table", has=page.locator("th", has_text="Never ran")).locator(
        "tbody tr"
    )
    assert computations.count() >= 4
    assert page.locator("main .state.erred").count() >= 1
    page.screenshot(path=str(ARTIFACTS / "web-cluster.png"), full_page=True)

    # The computation that ran _busy: task groups, its code (decrypted), its flamegraph.
    comps = request(f"{server.url}/api/clusters/{cluster_id}/computations", token=token)[1][
        "computations"
    ]
    busy = next(
        c
        for c in comps
        if request(f"{server.url}/api/computations/{c['computation_id']}", token=token)[1][
            "computation"
        ]["groups"][0]["prefix"]
        == "busy"
    )
    page.click(f"a[href$='/computations/{busy['computation_id']}']")
    page.wait_for_selector("h2:has-text('Task groups')")
    assert "busy" in page.inner_text("main table")
    assert "client.map(_busy" in page.inner_text("pre.code")
    # The same flamegraph view as the notebook widget: search, then zoom on click.
    canvas = page.locator(".flame canvas")
    canvas.wait_for()
    # styled by the views' one stylesheet (the widgets' _css), which the page links
    assert page.eval_on_selector(".dal-flame-bar", "el => getComputedStyle(el).display") == "flex"
    page.fill(".flame input[type=search]", "_spin")
    # _spin is the innermost frame, where Dask's tree leaves a count of 0: it still shows.
    assert "of samples match" in page.inner_text(
        ".flame"
    ) and "0.0% of samples" not in page.inner_text(".flame")
    box = canvas.bounding_box()
    canvas.click(position={"x": box["width"] / 2, "y": 30})
    page.wait_for_selector(".flame button:has-text('Reset zoom'):not([disabled])")
    page.screenshot(path=str(ARTIFACTS / "web-computation.png"), full_page=True)

    # Exceptions, with their tracebacks.
    page.click("nav a:has-text('Exceptions')")
    page.wait_for_selector("details.dal-fail")
    failure = page.locator("details.dal-fail").first
    failure.locator("summary").first.click()
    assert "ZeroDivisionError" in failure.locator("summary").first.inner_text()
    assert "× 1" in failure.locator("summary").first.inner_text()
    failure.locator(".dal-tb summary").click()  # the traceback on demand
    assert "ZeroDivisionError" in page.inner_text(".dal-tb pre")
    assert "_boom" in page.inner_text(".dal-tb pre")
    page.screenshot(path=str(ARTIFACTS / "web-exceptions.png"), full_page=True)

    # Reports: both listed for the account; the public one opens for anyone.
    page.click("nav a:has-text('Reports')")
    page.wait_for_selector("main table")
    assert page.locator("main table tbody tr").count() == 2
    assert "anyone with the link" in page.inner_text("main") and "private" in page.inner_text(
        "main"
    )
    page.screenshot(path=str(ARTIFACTS / "web-reports.png"), full_page=True)
    links = page.locator("main table tbody tr td:first-child a")
    urls = {links.nth(i).inner_text(): links.nth(i).get_attribute("href") for i in range(2)}
    # The private one opens with the login cookie: the page rendered from its twin (the
    # uploaded HTML never runs on the server's origin).
    page.goto(urls["report-True.html"])
    assert page.inner_text("h1") == "report-True.html" and "A shared report" not in page.content()

    stranger = browser.new_context().new_page()
    stranger.goto(urls["report-False.html"])
    assert stranger.inner_text("h1") == "report-False.html"
    stranger.screenshot(path=str(ARTIFACTS / "web-public-report.png"))
    response = stranger.goto(urls["report-True.html"])
    assert response.status == 401 and "private" in stranger.inner_text("main")
    stranger.context.close()

    # Log out: the cookie is gone and the API says so.
    page.goto(server.url + "/")
    page.wait_for_selector("#whoami button")
    page.click("#whoami button")
    page.wait_for_url("**/login")
    if problems:
        pytest.fail("\n".join(f"{p} at {u}" for p, u in problems))
    context.close()
