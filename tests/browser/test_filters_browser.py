"""The team page in Chromium: the clusters' filter bar, the "Older" button following the
cursor, and the Costs page by user, day and month.  Screenshots in test-artifacts/."""

from __future__ import annotations

import pytest
from playwright import sync_api as playwright

from dask_analytics_lab.store import open_store

from ..factories import T0, Cluster
from ..server_helpers import ARTIFACTS, ServerThread

DAY = 86400.0


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Five stopped clusters of team-a (ann: 3, bob: 2) a day apart, one of team-b."""
    url = "sqlite:///" + str(tmp_path_factory.mktemp("filters-web") / "analytics.db")
    store = open_store(url)
    for i, (account, user) in enumerate(
        [
            ("team-a", "ann"),
            ("team-a", "bob"),
            ("team-a", "ann"),
            ("team-a", "bob"),
            ("team-a", "ann"),
            ("team-b", "ann"),
        ]
    ):
        started = T0 + i * DAY
        c = Cluster(f"cluster-{i}", account=account, t0=started)
        store.ingest(
            [
                c.cluster(name=f"{user}-job-{i}", user=user, started=started),
                c.sample(core_seconds=3600.0 * (i + 1), cost=0.05 * (i + 1)),
                c.computation(f"comp-{i}", start=started + 1),
                c.stop(),
            ]
        )
    store.close()
    with ServerThread({"store_url": url}) as server:
        yield server, server.token("team-a", "ann")


def _names(page) -> list[str]:
    return page.locator("main table tbody tr td:first-child").all_inner_texts()


def test_filter_older_and_costs_in_chromium(site, browser):
    server, token = site
    page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.url + "/login?next=" + "/%3Flimit%3D2")
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    expect = playwright.expect

    # Two a page, newest first; Older follows the cursor to the end, never team-b's.
    expect(page.locator("main table tbody tr")).to_have_count(2)
    assert _names(page) == ["ann-job-4", "bob-job-3"]
    page.get_by_role("button", name="Older »").click()
    expect(page.locator("main table tbody tr td:first-child").first).to_have_text("ann-job-2")
    assert _names(page) == ["ann-job-2", "bob-job-1"]
    page.get_by_role("button", name="Older »").click()
    expect(page.locator("main table tbody tr td:first-child").first).to_have_text("ann-job-0")
    assert _names(page) == ["ann-job-0"]
    expect(page.get_by_role("button", name="Older »")).to_have_count(
        0
    )  # a short page: nothing older
    page.get_by_role("button", name="« Newest").click()
    expect(page.locator("main table tbody tr td:first-child").first).to_have_text("ann-job-4")

    # Filters: user and text, then a date range (UTC days, the "to" day included).
    page.get_by_label("User").fill("ann")
    page.get_by_label("Name contains").fill("JOB")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**user=ann**")
    expect(page.locator("main table tbody tr td:first-child").first).to_have_text("ann-job-4")
    assert _names(page) == ["ann-job-4", "ann-job-2"]
    page.get_by_role("button", name="Older »").click()
    expect(page.locator("main table tbody tr td:first-child").first).to_have_text("ann-job-0")
    assert "user=ann" in page.url and "before=" in page.url
    page.get_by_role("button", name="Clear").click()
    page.wait_for_url(lambda u: "user=" not in u)
    page.get_by_label("From (UTC day)").fill("2023-11-15")
    page.get_by_label("To (UTC day, included)").fill("2023-11-16")
    page.get_by_label("State").select_option("stopped")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**state=stopped**")
    expect(page.locator("main table tbody tr")).to_have_count(2)
    assert _names(page) == ["ann-job-2", "bob-job-1"]  # started 2023-11-16 and -15 (UTC)
    page.screenshot(path=str(ARTIFACTS / "web-filters.png"), full_page=True)
    # A value the store refuses is said on the page, not swallowed.
    page.goto(server.url + "/?since=not-a-date")
    expect(page.get_by_role("alert")).to_contain_text("since must be seconds since the epoch")

    # Costs: by user (the dearest first), then by month.
    page.click("nav a:has-text('Costs')")
    expect(page.locator("main h1")).to_have_text("Costs")
    expect(page.locator("main table tbody tr")).to_have_count(2)
    rows = [r.split("\t") for r in page.locator("main table tbody tr").all_inner_texts()]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        ("ann", "3", "3", "9.00", "$0.45"),
        ("bob", "2", "2", "6.00", "$0.30"),
    ]
    page.get_by_role("tab", name="by day").click()
    expect(page.locator("main table tbody tr")).to_have_count(5)
    page.get_by_role("tab", name="by month").click()
    expect(page.locator("main table tbody tr")).to_have_count(1)
    assert page.locator("main table tbody tr td").first.inner_text() == "2023-11"
    page.get_by_label("Since (UTC day)").fill("2023-11-17")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**since=2023-11-17**")
    expect(page.locator("main table tbody tr td").nth(1)).to_have_text("2")  # clusters 3 and 4
    page.screenshot(path=str(ARTIFACTS / "web-costs.png"), full_page=True)
    assert errors == []


def test_sidebar_filter_and_older_in_jupyterlab(tmp_path, browser):
    """The Lab sidebar over 35 clusters (30 a page): Older, Newest, a user filter, and a
    refused value said under the bar."""
    from ..browser_helpers import jupyter_lab, open_sidebar

    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    store = open_store(url)
    for i in range(35):
        c = Cluster(f"side-{i:02d}", account="team-a", t0=T0 + i * 60)
        user = "zoe" if i % 10 == 3 else "ann"
        store.ingest(
            [c.cluster(name=f"{user}-run-{i:02d}", user=user, started=T0 + i * 60), c.stop()]
        )
    store.close()
    with jupyter_lab(tmp_path / "lab", url) as lab:
        errors: list[str] = []
        page, sidebar = open_sidebar(browser, lab, errors)
        names = sidebar.locator(".dal-cl-name")
        expect = playwright.expect
        expect(names).to_have_count(30, timeout=30_000)
        assert names.first.inner_text() == "ann-run-34"
        sidebar.get_by_role("button", name="Older »").click()
        expect(names).to_have_count(5)
        assert names.all_inner_texts() == [
            "ann-run-04",
            "zoe-run-03",
            "ann-run-02",
            "ann-run-01",
            "ann-run-00",
        ]
        sidebar.get_by_role("button", name="« Newest").click()
        expect(names).to_have_count(30)
        sidebar.get_by_label("User").fill("zoe")
        sidebar.get_by_role("button", name="Filter").click()
        expect(names).to_have_count(4)
        assert names.all_inner_texts() == ["zoe-run-33", "zoe-run-23", "zoe-run-13", "zoe-run-03"]
        expect(sidebar.get_by_role("button", name="Older »")).to_have_count(0)
        sidebar.get_by_label("Name contains").fill("run-2")
        sidebar.get_by_role("button", name="Filter").click()
        expect(names).to_have_count(1)
        sidebar.screenshot(path=str(ARTIFACTS / "lab-sidebar-filters.png"))
        sidebar.get_by_role("button", name="Clear").click()
        expect(names).to_have_count(30)
        assert errors == []
