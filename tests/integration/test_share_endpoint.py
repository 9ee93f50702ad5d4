"""Issue 36, items 2 and 3: the team server makes a shared computation's report from its
own store (POST /api/computations/{id}/share), and every report page comes from one
twin through one builder.

A real LocalCluster records into the SQLite file a real team server serves.  Share with
analytics.store = that server asks the server to make the report: the client reads no
row of the computation (its HTTP reads are counted), and the report's twin and page are
the ones the same builder makes here from the same rows.  The endpoint is attacked: no
token, another account's token, a login cookie alone, hostile bodies and an unknown id
all answer with what is wrong, and store nothing.
"""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request

import dask
import pytest
from dask import delayed

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.readers import open_reader
from dask_analytics_lab.reports.share import ShareError, report_file, share_computation
from dask_analytics_lab.reports.twin import build_twin
from dask_analytics_lab.reports.twin_page import twin_state

from ..cluster_helpers import recorded_cluster
from ..server_helpers import ServerThread, browser, log_in, request
from ..workloads import spin, total

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A team server on the SQLite file a real cluster recorded a straggler into; tokens:
    ann and bob of the cluster's account, eve of another."""
    url = "sqlite:///" + str(tmp_path_factory.mktemp("endpoint") / "analytics.db")
    with recorded_cluster(url) as (client, info):
        client.compute(
            delayed(total)([delayed(spin)(3.0 if i == 5 else 0.05, i) for i in range(10)])
        ).result()
        assert dal.flush(client)["flushed"]
        [comp] = dal.list_computations(info["cluster_id"], store=url)
    with ServerThread({"store_url": url}) as server:
        account = server.ctx.store.get_cluster(info["cluster_id"])["account"]
        server.store_url, server.cid, server.account = url, comp["computation_id"], account
        server.ann, server.bob = server.token(account, "ann"), server.token(account, "bob")
        server.eve = server.token("another-account", "eve")
        yield server
    close_readers()


def share_url(server, cid: str) -> str:
    return f"{server.url}/api/computations/{cid}/share"


def stored_reports(server) -> list[str]:
    return [r["id"] for r in server.ctx.team.list_reports(limit=1000)]


def test_the_server_makes_the_report_from_its_own_store(team):
    status, body, _ = request(
        share_url(team, team.cid), method="POST", token=team.ann, body={"private": True}
    )
    assert status == 201, body
    report = body["report"]
    assert report["url"] == f"{team.url}/reports/{report['id']}" and report["private"] is True
    assert report["account"] == team.account and report["user"] == "ann"
    # The twin is the one the builder makes from the same rows, findings included.
    status, twin, _ = request(report["json_url"], token=team.bob)
    assert status == 200 and twin["v"] == 2
    mine = build_twin(open_reader(team.store_url), [team.cid])
    assert twin["summary"]["computation_ids"] == [team.cid]
    assert [f["kind"] for f in twin["findings"]] == [f["kind"] for f in mine["findings"]]
    assert "straggler" in {f["kind"] for f in twin["findings"]}
    assert twin["task_groups"] == mine["task_groups"]
    # Its page holds the state the one builder makes of that twin: the findings are there.
    status, page, _ = request(report["url"], token=team.bob)
    assert status == 200
    state = twin_state(twin)
    assert state["findings"] == {"computation_id": team.cid, "findings": twin["findings"]}
    assert json.dumps(state["findings"]["findings"][0]["title"])[1:-1] in page
    # Private: another account learns nothing, nobody without a token either.
    assert request(report["url"], token=team.eve)[0] == 404
    assert request(report["url"])[0] == 401


def test_share_asks_the_server_and_reads_no_row_out(team):
    with dask.config.set({"analytics.store": team.url, "analytics.token": team.ann}):
        client = open_reader(team.url).client
        asked: list[tuple[str, str]] = []
        real = client.request

        def counting(method, path, *args, **kwargs):
            asked.append((method, path))
            return real(method, path, *args, **kwargs)

        client.request = counting
        try:
            row = share_computation(team.cid)
        finally:
            client.request = real
    assert asked == [("POST", f"/api/computations/{team.cid}/share")]
    assert row["server"] == team.url and row["local"] is False and row["private"] is False
    # Public by link: no token.
    status, twin, _ = request(row["json_url"])
    assert status == 200 and twin["summary"]["computation_ids"] == [team.cid]
    # An id the server does not hold: the words say so.
    with dask.config.set({"analytics.store": team.url, "analytics.token": team.ann}):
        with pytest.raises(ShareError, match="not in the store"):
            share_computation("no-such-computation")


def test_download_asks_the_server_for_the_page(team):
    """Download HTML against the team server: one request, the page the server makes from
    its store, the same page the same builder makes here; stored nowhere."""
    before = stored_reports(team)
    with dask.config.set({"analytics.store": team.url, "analytics.token": team.ann}):
        client = open_reader(team.url).client
        asked: list[tuple[str, str]] = []
        real = client.request

        def counting(method, path, *args, **kwargs):
            asked.append((method, path))
            return real(method, path, *args, **kwargs)

        client.request = counting
        try:
            filename, html = report_file(team.cid)
        finally:
            client.request = real
    assert asked == [("GET", f"/api/computations/{team.cid}/report")]
    assert filename.startswith("dask-report-") and html.startswith("<!doctype html>")
    mine = build_twin(open_reader(team.store_url), [team.cid])
    title = json.dumps(mine["findings"][0]["title"])[1:-1]
    assert title in html and "DaskAnalyticsReport.render" in html
    assert stored_reports(team) == before
    # A read like the others: a token (or a login) of the computation's account.
    url = f"{team.url}/api/computations/{team.cid}/report"
    assert request(url)[0] == 401
    status, body, _ = request(url, token=team.eve)
    assert status == 404 and "in your account's record" in body["error"]
    with dask.config.set({"analytics.store": team.url, "analytics.token": team.eve}):
        with pytest.raises(ShareError, match="not in the store"):
            report_file(team.cid)


def test_no_token_and_a_login_cookie_alone_are_refused_before_any_work(team):
    before = stored_reports(team)
    # No token: 401, and the body is not even read (a hostile one gets the same answer).
    for raw, headers in (
        (json.dumps({"private": False}).encode(), {"Content-Type": "application/json"}),
        (b"\xff" * 60_000, {"Content-Type": "text/plain"}),
    ):
        status, body, _ = request(
            share_url(team, team.cid), method="POST", raw=raw, headers=headers
        )
        assert status == 401 and "needs a token" in body["error"], body
    # A logged-in browser's cookie authorises reads only: a cross-site form cannot share.
    opener, _ = browser()
    log_in(opener, team.url, team.ann)
    req = urllib.request.Request(
        share_url(team, team.cid),
        data=b'{"private": false}',
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        opener.open(req)
        status = 201
    except urllib.error.HTTPError as e:
        status = e.code
    assert status == 401
    assert stored_reports(team) == before


def test_another_accounts_token_gets_the_unknown_ids_answer(team):
    before = stored_reports(team)
    theirs = request(share_url(team, team.cid), method="POST", token=team.eve, body={})
    unknown = request(
        share_url(team, "no-such-computation"), method="POST", token=team.ann, body={}
    )
    assert theirs[0] == unknown[0] == 404
    assert (
        "no computation" in unknown[1]["error"]
        and "in your account's record" in unknown[1]["error"]
    )
    # The same words, but for the id itself: eve learns nothing of ann's computation.
    assert theirs[1]["error"].replace(team.cid, "X") == unknown[1]["error"].replace(
        "no-such-computation", "X"
    )
    assert stored_reports(team) == before


@pytest.mark.parametrize(
    "case",
    [
        "not json",
        "wrong type",
        "not an object",
        "unknown field",
        "private not a bool",
        "too big",
        "gzip bomb",
        "control characters in the id",
    ],
)
def test_hostile_bodies_are_refused_with_what_is_wrong(team, case):
    before = stored_reports(team)
    url, headers, raw = share_url(team, team.cid), {"Content-Type": "application/json"}, None
    body: object = None
    if case == "not json":
        raw = b"{private: yes"
    elif case == "wrong type":
        raw, headers = b'{"private": true}', {"Content-Type": "text/plain"}
    elif case == "not an object":
        body = ["private"]
    elif case == "unknown field":
        body = {"private": False, "account": "another-account", "html": "<script>1</script>"}
    elif case == "private not a bool":
        body = {"private": "yes"}
    elif case == "too big":
        body = {"private": False, "pad": "x" * 200_000}
    elif case == "gzip bomb":
        raw = gzip.compress(b'{"private": false, "pad": "' + b"0" * 50_000_000 + b'"}')
        headers = {**headers, "Content-Encoding": "gzip"}
    elif case == "control characters in the id":
        url, body = share_url(team, "abc%0Adef"), {}
    if body is not None:
        raw = json.dumps(body).encode()
    try:
        status, answer, _ = request(url, method="POST", token=team.ann, raw=raw, headers=headers)
    except (ConnectionResetError, BrokenPipeError):
        # Past SMALL_BODY the server may close while the rest is still being sent.
        assert case == "too big"
        status, answer = 400, None
    expected: dict[str, tuple[int, str | None]] = {
        "not json": (400, "JSON"),
        "wrong type": (415, "Content-Type must be application/json"),
        "not an object": (400, "must be a JSON object"),
        "unknown field": (422, "unknown field(s) ['account', 'html']"),
        "private not a bool": (422, "private must be true or false"),
        # Past SMALL_BODY the HTTP server itself stops reading: 400, no words, no work.
        "too big": (400, None),
        "gzip bomb": (413, ""),
        "control characters in the id": (400, "computation id"),
    }
    status_expected, words = expected[case]
    assert status == status_expected, (status, answer)
    if words is not None:
        assert isinstance(answer, dict) and words in answer["error"], answer
    assert stored_reports(team) == before
