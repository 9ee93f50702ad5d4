"""Account isolation: account A never reads or writes B's clusters or private reports,
through every endpoint, with a token, with a login cookie, and with no token at all."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import pytest

from dask_analytics_lab.remote import HttpSink

from ..server_helpers import ServerThread, browser, form_xsrf, full_cluster, log_in, request

REPORT = {
    "html": "<html><body>report</body></html>",
    "filename": "r.html",
    "twin": {"summary": {"n_tasks": 1}, "task_groups": [], "task_stream": [], "profile": {}},
}


def _reads(cid: str, comp: str) -> list[str]:
    """Every GET of the API that names a cluster or computation of someone else."""
    q = urllib.parse.quote
    return [
        f"/api/clusters/{q(cid)}",
        f"/api/clusters/{q(cid)}/computations",
        f"/api/clusters/{q(cid)}/samples",
        f"/api/clusters/{q(cid)}/profile",
        f"/api/computations/{q(comp)}",
        f"/api/computations/{q(comp)}/groups",
        f"/api/computations/{q(comp)}/profile",
        f"/api/computations?cluster_id={q(cid)}",
        f"/api/exceptions?cluster_id={q(cid)}",
        f"/api/exceptions?computation_id={q(comp)}",
        f"/api/events?cluster_id={q(cid)}",
        f"/api/gpu?cluster_id={q(cid)}",
    ]


LISTS = [
    "/api/clusters",
    "/api/computations",
    "/api/exceptions",
    "/api/events",
    "/api/gpu",
    "/api/export",
    "/api/reports",
]


@pytest.fixture
def two_accounts(store_url):
    # These tests make many failed calls on purpose: throttling has its own test.
    with ServerThread({"store_url": store_url, "auth_failures": 10_000}) as server:
        tokens = {"A": server.token("A", "ann"), "B": server.token("B", "bob")}
        clusters = {}
        for account in "AB":
            c, msgs = full_cluster(account, name=f"cluster-of-{account}")
            assert HttpSink(server.url, token=tokens[account]).write(msgs) == len(msgs)
            clusters[account] = c.id
        reports = {}
        for account in "AB":
            for private in (False, True):
                status, body, _ = request(
                    server.url + "/api/reports",
                    method="POST",
                    token=tokens[account],
                    body={**REPORT, "private": private, "title": f"{account}-{private}"},
                )
                assert status == 201, body
                reports[account, private] = body["report"]["id"]
        yield server, tokens, clusters, reports


def _owned_ids(body) -> set:
    """Every cluster id mentioned anywhere in an answer."""
    found = set()

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "cluster_id" and isinstance(x, str):
                    found.add(x)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(body)
    return found


def test_a_token_reads_its_own_account_only(two_accounts):
    server, tokens, clusters, reports = two_accounts
    a, b = clusters["A"], clusters["B"]
    for path in _reads(b, f"comp-{b}"):
        status, body, _ = request(server.url + path, token=tokens["A"])
        assert status == 404, (path, status, body)
        assert "cluster-of-B" not in str(body) and b not in _owned_ids(body)
        # ... and the owner reads it.
        assert request(server.url + path, token=tokens["B"])[0] == 200, path
    for path in LISTS:
        status, body, _ = request(server.url + path, token=tokens["A"])
        assert status == 200, (path, body)
        assert b not in _owned_ids(body) and "B's secret code" not in str(body), path
        assert "B-" not in str([r.get("title") for r in body.get("reports", [])])
    assert a in _owned_ids(request(server.url + "/api/export", token=tokens["A"])[1])
    # Asking for B's account with A's token is refused, not silently narrowed.
    for path in LISTS:
        status, body, _ = request(server.url + path + "?account=B", token=tokens["A"])
        assert status == 403 and "cannot read account 'B'" in body["error"], path


def test_no_token_or_a_bad_one_reads_nothing(two_accounts):
    server, tokens, clusters, reports = two_accounts
    b = clusters["B"]
    bad = "dal_000000000000_" + "x" * 43
    for path in _reads(b, f"comp-{b}") + LISTS + ["/api/whoami"]:
        for token in (None, bad, "garbage"):
            status, body, headers = request(server.url + path, token=token)
            assert status == 401, (path, token, status)
            assert "token" in body["error"] and b not in str(body)
    # No writes either.
    c, msgs = full_cluster("B")
    for token in (None, bad):
        status, body, _ = request(server.url + "/api/ingest", method="POST", token=token, body=msgs)
        assert status == 401
        assert (
            request(server.url + "/api/reports", method="POST", token=token, body=REPORT)[0] == 401
        )
    assert c.id not in _owned_ids(server.ctx.store.export())


def test_a_token_cannot_write_into_another_accounts_cluster_or_account(two_accounts):
    """A's messages for B's cluster are not stored, and ingest answers exactly as it does
    for an id nobody has used (status and body): it is no oracle of other accounts' ids."""
    server, tokens, clusters, reports = two_accounts
    b = clusters["B"]
    before = server.ctx.store.export()
    c, _ = full_cluster("B")
    c.id = b  # messages for B's cluster, sent with A's token
    fresh, _ = full_cluster("A")  # the same batches for an id nobody has used
    fresh._seq, c._seq = iter(range(100)), iter(range(100))
    foreign = request(
        server.url + "/api/ingest",
        method="POST",
        token=tokens["A"],
        body=[c.cluster(name="hijacked"), c.sample(n_workers=99)],
    )
    assert server.ctx.store.export() == before
    unknown = request(
        server.url + "/api/ingest",
        method="POST",
        token=tokens["A"],
        body=[fresh.cluster(name="hijacked"), fresh.sample(n_workers=99)],
    )
    assert foreign[:2] == unknown[:2] == (200, {"stored": 2, "received": 2})
    # A bad message is refused with the same words wherever it points.
    bad = {"n_workers": "many"}
    answers = [
        request(
            server.url + "/api/ingest",
            method="POST",
            token=tokens["A"],
            body=[m.cluster(name="x"), m.sample(**bad)],
        )[:2]
        for m in (c, fresh)
    ]
    assert answers[0][0] == answers[1][0] == 422
    assert answers[0][1]["error"].replace(b, "ID") == answers[1][1]["error"].replace(
        fresh.id, "ID"
    ), answers
    assert server.ctx.store.get_cluster(b)["name"] == "cluster-of-B"
    status, body, _ = request(
        server.url + "/api/reports",
        method="POST",
        token=tokens["A"],
        body={**REPORT, "account": "B"},
    )
    assert status == 403
    assert len(server.ctx.team.list_reports(account="B")) == 2


def test_private_reports_open_to_their_account_only(two_accounts):
    server, tokens, clusters, reports = two_accounts
    for suffix in ("", ".json"):
        private_b = f"{server.url}/reports/{reports['B', True]}{suffix}"
        public_b = f"{server.url}/reports/{reports['B', False]}{suffix}"
        assert request(private_b)[0] == 401  # log in first
        assert request(private_b, token=tokens["A"])[0] == 404  # a stranger learns nothing
        status, body, headers = request(private_b, token=tokens["B"])
        assert status == 200
        assert request(public_b)[0] == 200  # public by link, no token needed
        assert request(public_b, token=tokens["A"])[0] == 200
    status, html, headers = request(f"{server.url}/reports/{reports['A', False]}")
    assert "report" in html and headers["Content-Security-Policy"].startswith("sandbox")
    listed = request(server.url + "/api/reports", token=tokens["A"])[1]["reports"]
    assert {r["id"] for r in listed} == {reports["A", False], reports["A", True]}
    assert request(f"{server.url}/reports/not-a-report-id-at-all")[0] == 404


def test_login_cookie_reads_but_never_writes(two_accounts):
    server, tokens, clusters, reports = two_accounts
    opener, jar = browser()
    with log_in(opener, server.url, tokens["A"], "/reports") as r:
        assert r.geturl().endswith("/reports")
    cookies = {c.name: c.value for c in jar}
    assert set(cookies) == {"_xsrf", "dal_session"}
    assert tokens["A"] not in str(cookies) and tokens["A"].split("_", 2)[2] not in str(cookies)
    with opener.open(server.url + "/api/clusters") as r:
        assert clusters["A"] in r.read().decode()
    with opener.open(f"{server.url}/reports/{reports['A', True]}") as r:
        assert r.status == 200
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(f"{server.url}/reports/{reports['B', True]}")
    assert e.value.code == 404
    c, msgs = full_cluster("A")
    req = urllib.request.Request(
        server.url + "/api/reports",
        method="POST",
        data=b"{}",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(req)
    assert e.value.code == 401
    bad = urllib.parse.urlencode(
        {"token": "dal_nope", "_xsrf": form_xsrf(opener, server.url + "/login")}
    ).encode()
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(server.url + "/login", data=bad)
    assert e.value.code == 401


def test_without_required_tokens_a_token_still_confines(store_url):
    """token_required=False (a trusted host such as Jupyter): no token reads all accounts,
    but a token still sees only its own, and local_auth can refuse."""
    allowed = {"yes": True}
    settings = {
        "store_url": store_url,
        "token_required": False,
        "local_auth": lambda handler: allowed["yes"],
    }
    with ServerThread(settings) as server:
        token_a = server.token("A")
        ids = {}
        for account in "AB":
            c, msgs = full_cluster(account)
            assert HttpSink(server.url, token=server.token(account)).write(msgs) == len(msgs)
            ids[account] = c.id
        everything = request(server.url + "/api/clusters")[1]["clusters"]
        assert {c["cluster_id"] for c in everything} == set(ids.values())
        only_b = request(server.url + "/api/clusters?account=B")[1]["clusters"]
        assert [c["cluster_id"] for c in only_b] == [ids["B"]]
        mine = request(server.url + "/api/clusters", token=token_a)[1]["clusters"]
        assert [c["cluster_id"] for c in mine] == [ids["A"]]
        assert request(server.url + f"/api/clusters/{ids['B']}", token=token_a)[0] == 404
        # The host's own token (say Jupyter's) is not ours: local_auth judges that call.
        status, body, _ = request(server.url + "/api/clusters", token="0123456789abcdef")
        assert status == 200 and len(body["clusters"]) == 2
        # ... but one of ours that is unknown is refused.
        assert request(server.url + "/api/clusters", token="dal_000000000000_" + "x" * 43)[0] == 401
        allowed["yes"] = False
        assert request(server.url + "/api/clusters")[0] == 403
        assert request(server.url + "/api/clusters", token="0123456789abcdef")[0] == 403
