"""Issue 38, item 4, in Chromium: the finding filter of the team page and the Lab sidebar,
and a cluster's findings summed on its page.  Screenshots in test-artifacts/."""

from __future__ import annotations

from playwright import sync_api as playwright

from dask_analytics_lab.store import open_store

from ..factories import Cluster, group, straggling
from ..server_helpers import ARTIFACTS, ServerThread


def _store(url: str) -> Cluster:
    """Two stopped clusters of team-a: "slow-job" ran two computations with a straggler
    and a healthy one; "fine-job" one healthy computation.  Returns slow-job's."""
    store = open_store(url)
    slow, fine = (
        Cluster("slow-cluster", account="team-a"),
        Cluster("fine-cluster", account="team-a"),
    )
    fine.t = slow.t + 100
    store.ingest(
        [
            slow.cluster(name="slow-job"),
            *straggling(slow, "slow-1"),
            *straggling(slow, "slow-2"),
            slow.computation("slow-fine", groups=[group("ones", n_tasks=4)]),
            slow.stop(),
            fine.cluster(name="fine-job", started=fine.t),
            fine.computation("fine-1", groups=[group("ones", n_tasks=4)]),
            fine.stop(),
        ]
    )
    store.close()
    return slow


def test_the_team_page_filters_clusters_by_finding_and_sums_a_clusters(tmp_path, browser):
    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    _store(url)
    with ServerThread({"store_url": url}) as server:
        token = server.token("team-a", "ann")
        page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/login")
        page.fill("input[name=token]", token)
        page.click("button[type=submit]")
        expect = playwright.expect
        rows = page.locator("main table tbody tr")
        expect(rows).to_have_count(2)
        page.get_by_label("Finding").select_option("straggler")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url("**finding=straggler**")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("slow-job")
        page.get_by_label("Finding").select_option("spilling")
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("main")).to_contain_text("No cluster")

        # The cluster's page: its findings summed, each computation a link.
        page.goto(server.url + "/?finding=straggler")
        rows.first.locator("a").first.click()
        section = page.locator("main table").filter(has_text="straggler")
        expect(section).to_be_visible()
        expect(section).to_contain_text("2")  # computations with it
        expect(section.get_by_role("link")).to_have_count(2)
        page.screenshot(path=str(ARTIFACTS / "web-cluster-findings.png"), full_page=True)
        section.get_by_role("link").first.click()
        page.wait_for_url("**/computations/slow-**")
        expect(page.locator("main")).to_contain_text("straggler")
        assert errors == []


def test_the_lab_sidebar_filters_by_finding(tmp_path, browser):
    from ..browser_helpers import jupyter_lab, open_sidebar

    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    _store(url)
    with jupyter_lab(tmp_path / "lab", url) as lab:
        errors: list[str] = []
        page, sidebar = open_sidebar(browser, lab, errors)
        names = sidebar.locator(".dal-cl-name")
        expect = playwright.expect
        expect(names).to_have_count(2, timeout=30_000)
        sidebar.get_by_label("Finding").select_option("straggler")
        sidebar.get_by_role("button", name="Filter").click()
        expect(names).to_have_count(1)
        assert names.all_inner_texts() == ["slow-job"]
        sidebar.locator(".dal-cl-head").first.click()  # opens it: its computations with one
        comps = sidebar.locator(".dal-comp")
        expect(comps).to_have_count(2)
        sidebar.screenshot(path=str(ARTIFACTS / "lab-sidebar-finding.png"))
        sidebar.get_by_role("button", name="Clear").click()
        expect(names).to_have_count(2)
        assert errors == []
