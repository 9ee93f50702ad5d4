"""Issue 11, item 3: the Share button reaches teammates, without a browser.

A real LocalCluster records into an embedded SQLite store (as in a notebook); a real
team server (`dask-analytics server`'s app, its own database) is configured with
`analytics.reports.server` and a token of account team-a.  Share uploads there as that
account: the link is the server's; a teammate (another token of team-a) opens a private
report, another account's token and no token do not.  What goes wrong (a refused token,
no token, a server that is down, no team server at all) comes back as a message that
says what to do, in share_computation and in the widget's `share` trait.  Download HTML
is the same page as one file.  (The browser half: tests/browser/test_share_browser.py.)
"""

from __future__ import annotations

import dask
import dask.array as da
import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.reports import list_performance_reports
from dask_analytics_lab.reports.share import (
    NO_TEAM_SERVER,
    ShareError,
    report_file,
    share_computation,
)

from ..browser_helpers import free_port
from ..cluster_helpers import recorded_cluster
from ..server_helpers import ServerThread, request

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def computation(tmp_path_factory):
    """(store URL, computation id) of a real computation in an embedded store."""
    url = "sqlite:///" + str(tmp_path_factory.mktemp("share") / "analytics.db")
    with recorded_cluster(url) as (client, info):
        assert da.ones((400, 400), chunks=100).sum().compute() == 160_000
        dal.flush(client)
        [comp] = dal.list_computations(info["cluster_id"], store=url)
    yield url, comp["computation_id"]
    close_readers()


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A team server on its own database, and tokens: ann and bob of team-a, eve of team-b."""
    db = "sqlite:///" + str(tmp_path_factory.mktemp("team") / "team.db")
    with ServerThread({"store_url": db}) as server:
        server.ann, server.bob, server.eve = (
            server.token("team-a", "ann"),
            server.token("team-a", "bob"),
            server.token("team-b", "eve"),
        )
        yield server


def configured(server_url: str | None, token: str | None):
    return dask.config.set(
        {
            "analytics.reports.server": server_url,
            "analytics.token": token,
            "analytics.account": "team-a",
            "analytics.user": "ann",
        }
    )


def test_share_uploads_to_the_team_server_and_a_teammate_opens_it(computation, team):
    store, cid = computation
    with configured(team.url, team.ann):
        row = share_computation(cid, store=store, private=True)
    assert row["url"] == f"{team.url}/reports/{row['id']}"
    assert (
        row["server"] == team.url
        and row["private"] is True
        and row["local"] is False
        and row["hint"] is None
    )
    # Private: bob (team-a) opens it; eve (team-b) learns nothing; nobody without a token.
    status, page, _ = request(row["url"], token=team.bob)
    assert status == 200 and "Dask performance report" in page and cid in page
    assert request(row["url"], token=team.eve)[0] == 404
    assert request(row["url"])[0] == 401
    # Stored as ann's account's, not the embedded store's "default".
    status, listed, _ = request(team.url + "/api/reports", token=team.bob)
    assert status == 200 and [r["id"] for r in listed["reports"]] == [row["id"]]
    assert listed["reports"][0]["account"] == "team-a"
    # Public by link: anyone with it.
    with configured(team.url, team.ann):
        public = share_computation(cid, store=store)
    assert public["private"] is False and request(public["url"])[0] == 200
    # list_performance_reports reads where reports go: the team server, the token's account's.
    with configured(team.url, team.ann):
        assert {r["id"] for r in list_performance_reports(store=store)} == {row["id"], public["id"]}


@pytest.mark.parametrize("case", ["wrong token", "no token", "server down"])
def test_share_errors_say_what_to_do(computation, team, case):
    store, cid = computation
    server_url, token = {
        "wrong token": (team.url, "dal_0123456789abcdef_wrong"),
        "no token": (team.url, None),
        "server down": (f"http://127.0.0.1:{free_port()}", team.ann),
    }[case]
    with configured(server_url, token), pytest.raises(ShareError) as caught:
        share_computation(cid, store=store)
    message = str(caught.value)
    assert server_url in message, message
    if case == "server down":
        assert "is not answering" in message and "`dask-analytics server`" in message
        assert "analytics.reports.server" in message and "Download HTML" in message
    else:
        assert "`dask-analytics token create --store DB --account team-a --user ann`" in message
        assert "analytics.token" in message
        assert ("refused analytics.token" in message) is (case == "wrong token")


def test_without_a_team_server_the_link_says_who_opens_it(computation):
    store, cid = computation
    with configured(None, None):
        row = share_computation(cid, store=store)
    assert row["server"] is None and row["local"] is True and row["hint"] == NO_TEAM_SERVER
    assert "analytics.reports.server" in NO_TEAM_SERVER and "Download HTML" in NO_TEAM_SERVER


def test_a_team_server_that_is_not_a_url_is_named(computation, tmp_path):
    store, cid = computation
    with (
        configured(str(tmp_path / "not-a-server.db"), "x"),
        pytest.raises(ShareError, match="analytics.reports.server"),
    ):
        share_computation(cid, store=store)


def test_download_is_the_report_page_as_one_file(computation):
    store, cid = computation
    filename, page = report_file(cid, store=store)
    assert filename.startswith("dask-report-") and filename.endswith(".html")
    assert (
        page.startswith("<!doctype html>") and "DaskAnalyticsReport.render" in page and cid in page
    )
    assert (
        "<script src=" not in page and "<link " not in page
    )  # nothing to fetch: it opens anywhere


def test_the_widget_shares_privately_and_reports_errors(computation, team):
    from dask_analytics_lab.widgets.views import ShareButton

    store, cid = computation
    w = ShareButton(cid, store=store)
    sent: list[tuple[dict, list]] = []
    w.send = lambda content, buffers=None: sent.append(
        (content, buffers or [])
    )  # the comm, in a kernel
    try:
        with configured(team.url, team.ann):
            w.share_report(private=True, wait=True)
        assert w.share["state"] == "done" and w.share["private"] is True, w.share
        assert w.share["url"].startswith(team.url + "/reports/") and w.share["server"] == team.url
        assert request(w.share["url"], token=team.bob)[0] == 200
        with configured(team.url, "dal_0123456789abcdef_wrong"):
            w.share_report(wait=True)
        assert w.share["state"] == "error" and "refused analytics.token" in w.share["message"], (
            w.share
        )
        assert "dask-analytics token create" in w.share["message"]

        w.download_report(wait=True)
        [(content, buffers)] = [s for s in sent if s[0].get("type") == "download"]
        assert content["filename"].endswith(".html") and "error" not in content
        assert bytes(buffers[0]).decode().startswith("<!doctype html>")
    finally:
        w.close()
