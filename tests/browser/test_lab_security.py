"""The Jupyter server extension's routes against a real `jupyter server` (issue 9, item 1).

Every route the extension mounts is taken from its own handler list (make_routes), so a
route added later is tried too.  Against a running server with a known token, a base
URL like JupyterHub's and a store holding recorded clusters, computations and a report:

- anonymous GET and POST (the latter with a made-up `_xsrf` cookie/header pair, as the
  outside tester sent) are refused on every route: 403, or a redirect to Jupyter's login
  page, and nothing is written to the store;
- a logged-in browser session (Jupyter's login cookie, got by logging in with the token)
  whose write carries no XSRF token, a mismatched pair, or a made-up pair sent from
  another site or from nowhere is refused, and nothing is written;
- refused means refused before any work: a POST is answered from its headers, before
  its body is sent;
- with the login (a real `_xsrf` from Jupyter) or the token, every route works as
  before, Share included;
- Jupyter's headers (its Content-Security-Policy, X-Content-Type-Options and a header
  configured in ServerApp.tornado_settings) are on every answer, refusals included.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import http.cookies
import json
import os
import re
import secrets
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dask_analytics_lab import config
from dask_analytics_lab.lab.serverext import AUTH_RESOURCE, make_routes
from dask_analytics_lab.messages import make
from tests.browser_helpers import free_port, wait_until_serving
from tests.views_data import build

pytestmark = pytest.mark.timeout(300)

BASE = "/jh/user/ann/"  # a base URL as JupyterHub gives a single-user server
PREFIX = BASE + "dask-analytics"
CUSTOM_HEADER = ("X-Dal-Jupyter-Header", "kept")  # ServerApp.tornado_settings["headers"]
FORGED = "2|deadbeef|0123456789abcdef0123456789abcdef|1700000000"  # a made-up _xsrf value
EVIL = "http://evil.example"
POST_BODY_ROUTES = (
    "/lab/share",
    "/api/reports",
    "/api/ingest",
)  # routes whose POST writes to the store


# --- a real Jupyter server --------------------------------------------------------------------
try:
    from jupyter_server.auth.authorizer import AllowAllAuthorizer
except ImportError:  # pragma: no cover
    AllowAllAuthorizer = object  # type: ignore[misc,assignment]

DENY_HEADER = "X-Test-Deny-Analytics"


class DenyAnalyticsOnHeader(AllowAllAuthorizer):  # type: ignore[misc,valid-type]
    """The test server's authorizer (as JupyterHub's scopes would): refuses the
    extension's resource to a request that carries DENY_HEADER, allows the rest."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        return not (resource == AUTH_RESOURCE and handler.request.headers.get(DENY_HEADER))


class Jupyter:
    def __init__(self, port: int, token: str, log: Path, db: Path):
        self.port, self.token, self.log, self.db = port, token, log, db
        self.origin = f"http://127.0.0.1:{port}"

    def request(
        self,
        method: str,
        path: str,
        headers: dict | None = None,
        body: bytes | None = None,
        timeout: float = 60,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.headers, r.read()
        finally:
            conn.close()


@contextlib.contextmanager
def jupyter_server(
    tmp: Path, store_url: str, db: Path, extra_env: dict | None = None
) -> Iterator[Jupyter]:
    for d in ("config", "runtime", "data", "root"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    name, value = CUSTOM_HEADER
    (tmp / "config" / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"tornado_settings": {"headers": {name: value}}}})
    )
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "DASK_ANALYTICS__STORE": store_url,
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
        # The server imports this module's authorizer.
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
        ),
    }
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "server",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={BASE}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={tmp / 'root'}",
        f"--ServerApp.authorizer_class={__name__}.DenyAnalyticsOnHeader",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
        cmd.append("--allow-root")
    log = tmp / "jupyter.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
    server = Jupyter(port, token, log, db)
    try:
        wait_until_serving(
            proc,
            lambda: server.request("GET", f"{BASE}api/status?token={token}", timeout=2)[0] == 200,
            log,
            timeout=90,
            what="jupyter server",
        )
        assert "dask-analytics: serving" in log.read_text(), log.read_text()[-3000:]
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


# --- what the store holds -----------------------------------------------------------------------
def fingerprint(db: Path) -> dict[str, int]:
    """Rows per table: a refused write must leave every count as it was."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        con.close()


def report_count(db: Path) -> int:
    return next(n for t, n in fingerprint(db).items() if "report" in t)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[tuple[Jupyter, Any, dict]]:
    from dask_analytics_lab.reports.share import share_computation

    tmp = tmp_path_factory.mktemp("labsec")
    db = tmp / "analytics.db"
    url = config.validate_store(f"sqlite:///{db}")
    scenario = build(url)  # recorded clusters (stopped, lost), computations, failures
    report = share_computation(scenario.stopped["groupby"], store=url)
    ids = {
        "cluster": scenario.stopped["cluster_id"],
        "computation": scenario.stopped["groupby"],
        "report": report["id"],
    }
    with jupyter_server(tmp, url, db) as server:
        yield server, url, ids


@pytest.fixture(scope="module")
def routes(world) -> list:
    """The extension's routes, as it mounts them (the same function load() calls)."""
    _, url, _ = world
    return make_routes(BASE, url)


# --- concrete requests for each mounted route ------------------------------------------------------
def request_path(spec: Any, specs: list, ids: dict) -> str:
    """A path that reaches `spec` (and no route before it) with ids that exist."""
    pattern = spec.regex.pattern
    assert pattern.startswith(PREFIX) and pattern.endswith("$"), pattern
    path = pattern[:-1].replace("\\.", ".")
    if "(" in path:
        if "/reports/" in path:
            sample = ids["report"]
        elif "/clusters/" in path:
            sample = ids["cluster"]
        elif "/computations/" in path:
            sample = ids["computation"]
        else:  # files
            folder = Path(spec.kwargs["path"])
            sample = sorted(p.name for p in folder.iterdir() if p.is_file())[0]
        path = path.replace("([^/]+)", urllib.parse.quote(sample, safe="")).replace("(.*)", sample)
    path = path.replace(".*", "no-such-page")
    assert not re.search(r"[\\()\[\]*+?^$|]", path), (
        f"a route pattern this test cannot fill in: {pattern}"
    )
    first = next(s for s in specs if s.regex.match(path))
    assert first is spec, f"{path} reaches {first.regex.pattern}, not {pattern}"
    if path == PREFIX + "/lab/computations":
        path += "?cluster_id=" + urllib.parse.quote(ids["cluster"], safe="")
    return path


def methods(spec: Any) -> list[str]:
    from tornado.web import RequestHandler

    cls = spec.handler_class
    return [
        m
        for m in cls.SUPPORTED_METHODS
        if getattr(cls, m.lower()) is not RequestHandler._unimplemented_method
    ]


def post_body(path: str, ids: dict) -> tuple[bytes, dict]:
    """A body that would write to the store if the request were let in."""
    if path.endswith("/lab/share"):
        return json.dumps({"computation_id": ids["computation"]}).encode(), {
            "Content-Type": "application/json"
        }
    if path.endswith("/api/reports"):
        body = {
            "html": "<p>from the test</p>",
            "twin": {"summary": {}},
            "filename": "t.html",
            "private": False,
        }
        return json.dumps(body).encode(), {"Content-Type": "application/json"}
    if path.endswith("/api/ingest"):
        cid = f"tcp://10.0.0.9:8786-{secrets.token_hex(4)}"
        msg = make(
            cid, 0, "event", time.time(), {"topic": "test", "time": time.time(), "msg": "written"}
        )
        return gzip.compress(json.dumps([msg]).encode()), {
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
        }
    return json.dumps({"x": 1}).encode(), {"Content-Type": "application/json"}


# --- Jupyter's headers ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jupyter_csp(world) -> set[str]:
    """The policies Jupyter itself sends: on an API answer and on a page."""
    server, _, _ = world
    _, api, _ = server.request(
        "GET", f"{BASE}api/status", {"Authorization": f"token {server.token}"}
    )
    _, page, _ = server.request("GET", f"{BASE}login")
    policies = {api["Content-Security-Policy"], page["Content-Security-Policy"]}
    assert all("report-uri " + BASE + "api/security/csp-report" in p for p in policies), policies
    return policies


def assert_jupyter_headers(
    headers: http.client.HTTPMessage, jupyter_csp: set[str], what: str
) -> None:
    csp = headers.get_all("Content-Security-Policy") or []
    assert set(csp) & jupyter_csp, f"{what}: Jupyter's Content-Security-Policy is missing: {csp}"
    name, value = CUSTOM_HEADER
    assert headers.get(name) == value, f"{what}: the header configured in Jupyter is missing"
    assert headers.get("X-Content-Type-Options") == "nosniff", what


# --- logging in as a browser does ------------------------------------------------------------------
def cookies_of(headers: http.client.HTTPMessage) -> dict[str, str]:
    jar = http.cookies.SimpleCookie()
    for line in headers.get_all("Set-Cookie") or []:
        jar.load(line)
    return {k: m.value for k, m in jar.items() if m.value}


@pytest.fixture(scope="module")
def browser(world) -> dict:
    """Jupyter's login cookie (from its login form, with the token) and a real _xsrf."""
    server, _, _ = world
    return log_in(server)


def log_in(server: Jupyter) -> dict:
    """Log in as a browser does: Jupyter's login cookie and the _xsrf it set."""
    status, headers, page = server.request("GET", f"{BASE}login")
    assert status == 200
    xsrf = cookies_of(headers)["_xsrf"]
    form = re.search(rb'name="_xsrf" value="([^"]+)"', page).group(1).decode()
    body = urllib.parse.urlencode({"password": server.token, "_xsrf": form}).encode()
    status, headers, _ = server.request(
        "POST",
        f"{BASE}login?next={BASE}lab",
        {"Cookie": f"_xsrf={xsrf}", "Content-Type": "application/x-www-form-urlencoded"},
        body,
    )
    assert status == 302, status
    login = {k: v for k, v in cookies_of(headers).items() if k.startswith("username-")}
    assert login, headers
    return {"login": "; ".join(f"{k}={v}" for k, v in login.items()), "xsrf": xsrf}


# --- the tests ---------------------------------------------------------------------------------
def test_every_route_is_mounted_behind_jupyters_rules(routes):
    from jupyter_server.base.handlers import JupyterHandler
    from jupyter_server.serverapp import ServerWebApplication

    paths = {s.regex.pattern for s in routes}
    for needed in (
        "/lab/share$",
        "/lab/computations$",
        "/lab-info$",
        "/api/clusters$",
        "/api/ingest$",
        "/api/reports$",
        "/reports/([^/]+)$",
    ):
        assert PREFIX + needed in paths, needed
    for spec in routes:
        assert issubclass(spec.handler_class, JupyterHandler), spec.regex.pattern
        # Jupyter's own audit (ServerApp.allow_unauthenticated_access = False) finds every
        # method decorated: none is left to "allow by default".
        assert (
            ServerWebApplication._check_handler_auth(None, spec.regex.pattern, spec.handler_class)
            == []
        )


def test_anonymous_requests_are_refused_on_every_route(world, routes, jupyter_csp):
    server, _, ids = world
    before = fingerprint(server.db)
    for spec in routes:
        path = request_path(spec, routes, ids)
        for method in sorted({"GET", "POST", *methods(spec)}):
            body, headers = (
                post_body(path, ids) if method in ("POST", "PUT", "PATCH") else (None, {})
            )
            if method == "POST":  # as the outside tester sent it: a made-up XSRF pair
                headers = {**headers, "Cookie": f"_xsrf={FORGED}", "X-XSRFToken": FORGED}
            status, answer, text = server.request(method, path, headers, body)
            what = f"anonymous {method} {path}"
            if status == 302:
                assert method in ("GET", "HEAD"), what
                assert answer["Location"].startswith(f"{BASE}login?next="), (
                    what,
                    answer["Location"],
                )
            else:
                assert status == 403, (what, status, text[:300])
            assert_jupyter_headers(answer, jupyter_csp, what)
            assert ids["computation"].encode() not in text and b"clusters" not in text, what
    assert fingerprint(server.db) == before, "an anonymous request wrote to the store"


def test_a_strangers_post_is_refused_from_its_headers(world, routes):
    """Refused before any work: the answer comes from the headers, before the body is
    sent (8 MiB announced, none sent), on every route."""
    server, _, ids = world
    writers = {s.regex.pattern for s in routes if "POST" in methods(s)}
    assert {PREFIX + p + "$" for p in POST_BODY_ROUTES} <= writers
    for spec in routes:
        assert spec.handler_class._stream_request_body, spec.regex.pattern
        path = request_path(spec, routes, ids)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(
                (
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {8 * 2**20}\r\n"
                    f"Cookie: _xsrf={FORGED}\r\nX-XSRFToken: {FORGED}\r\n\r\n"
                ).encode()
            )
            head = s.recv(200).decode("latin-1")
        assert head.startswith("HTTP/1.1 403"), (path, head)


def test_a_logged_in_browsers_write_needs_jupyters_xsrf(world, routes, browser, jupyter_csp):
    server, _, ids = world
    login = browser["login"]
    cases = {
        "no XSRF token": {"Cookie": login},
        "a mismatched pair": {"Cookie": f"{login}; _xsrf={browser['xsrf']}", "X-XSRFToken": FORGED},
        "a made-up pair from another site": {
            "Cookie": f"{login}; _xsrf={FORGED}",
            "X-XSRFToken": FORGED,
            "Origin": EVIL,
        },
        "a made-up pair from nowhere": {
            "Cookie": f"{login}; _xsrf={FORGED}",
            "X-XSRFToken": FORGED,
        },
        "a made-up pair as a form field": {
            "Cookie": f"{login}; _xsrf={FORGED}",
            "Referer": EVIL + "/page",
        },
    }
    before = fingerprint(server.db)
    for spec in routes:
        path = request_path(spec, routes, ids)
        for case, headers in cases.items():
            body, content = post_body(path, ids)
            if case.endswith("form field"):
                body = urllib.parse.urlencode(
                    {"_xsrf": FORGED, "computation_id": ids["computation"]}
                ).encode()
                content = {"Content-Type": "application/x-www-form-urlencoded"}
            status, answer, text = server.request("POST", path, {**content, **headers}, body)
            what = f"logged-in POST {path} with {case}"
            # 404: Jupyter's origin check ("Blocking Cross Origin API request") answers so.
            assert status in ((403, 404) if "Origin" in headers else (403,)), (
                what,
                status,
                text[:300],
            )
            assert_jupyter_headers(answer, jupyter_csp, what)
    assert fingerprint(server.db) == before, (
        "a write without Jupyter's XSRF token reached the store"
    )


def test_with_the_login_every_route_works_as_before(world, routes, browser, jupyter_csp):
    server, _, ids = world
    cookie = {"Cookie": browser["login"]}
    for spec in routes:
        if "GET" not in methods(spec):
            continue
        path = request_path(spec, routes, ids)
        status, answer, text = server.request("GET", path, cookie)
        what = f"logged-in GET {path}"
        if spec.regex.pattern.endswith("/.*$"):
            assert status == 404, (what, status)  # the catch-all: nothing there
        elif spec.regex.pattern == PREFIX + "$":
            assert status in (301, 302) and answer["Location"] == PREFIX + "/", what
        else:
            assert status == 200, (what, status, text[:300])
        assert_jupyter_headers(answer, jupyter_csp, what)
    # What the sidebar reads.
    q = urllib.parse.quote(ids["cluster"], safe="")
    status, _, text = server.request(
        "GET", f"{PREFIX}/lab/computations?cluster_id={q}&limit=50", cookie
    )
    sidebar = json.loads(text)["computations"]
    assert status == 200 and ids["computation"] in {c["computation_id"] for c in sidebar}
    # ... is the team server's computations query, labels and code lines as stored.
    status, _, text = server.request(
        "GET", f"{PREFIX}/api/computations?cluster_id={q}&limit=50", cookie
    )
    assert status == 200 and json.loads(text)["computations"] == sidebar
    assert {c["label"] for c in sidebar} >= {"read_parquet → groupby-agg"} and all(
        c["code_line"] for c in sidebar
    )
    status, _, text = server.request("GET", f"{PREFIX}/api/clusters", cookie)
    assert status == 200 and ids["cluster"] in {
        c["cluster_id"] for c in json.loads(text)["clusters"]
    }
    status, _, text = server.request("GET", f"{PREFIX}/lab-info", cookie)
    assert status == 200 and json.loads(text)["mounted"] is True
    # A report keeps its own sandboxing policy beside Jupyter's.
    status, answer, _ = server.request("GET", f"{PREFIX}/reports/{ids['report']}", cookie)
    policies = answer.get_all("Content-Security-Policy")
    assert (
        status == 200
        and any(p.startswith("sandbox") for p in policies)
        and set(policies) & jupyter_csp
    )


def test_with_the_login_and_jupyters_xsrf_writes_work(world, browser, jupyter_csp):
    """As the sidebar's Share button sends it: login cookie, the _xsrf Jupyter set, its Origin."""
    server, _, ids = world
    headers = {
        "Cookie": f"{browser['login']}; _xsrf={browser['xsrf']}",
        "X-XSRFToken": browser["xsrf"],
        "Origin": server.origin,
    }
    for route, expected in (("/lab/share", 201), ("/api/reports", 201), ("/api/ingest", 200)):
        before = fingerprint(server.db)
        body, content = post_body(PREFIX + route, ids)
        status, answer, text = server.request("POST", PREFIX + route, {**content, **headers}, body)
        assert status == expected, (route, status, text[:300])
        assert_jupyter_headers(answer, jupyter_csp, route)
        assert fingerprint(server.db) != before, f"{route} stored nothing"
    # The report Share makes opens in the same session.
    n = report_count(server.db)
    status, _, text = server.request(
        "POST",
        f"{PREFIX}/lab/share",
        {**headers, "Content-Type": "application/json"},
        json.dumps({"computation_id": ids["computation"]}).encode(),
    )
    link = json.loads(text)["report"]
    assert status == 201 and report_count(server.db) == n + 1 and link["local"] is True
    status, _, page = server.request(
        "GET", f"{PREFIX}/reports/{link['id']}", {"Cookie": browser["login"]}
    )
    assert status == 200 and b"Dask performance report" in page
    # ... and needs the Jupyter login like everything else.
    status, answer, _ = server.request("GET", f"{PREFIX}/reports/{link['id']}")
    assert status == 302 and answer["Location"].startswith(f"{BASE}login")


def test_with_the_token_in_the_request_routes_work_as_in_jupyter(world, jupyter_csp):
    """Jupyter's rule: a request that carries the token itself needs no XSRF token (no
    page of another site can attach it); it reads and shares like the sidebar."""
    server, _, ids = world
    auth = {"Authorization": f"token {server.token}"}
    status, answer, text = server.request(
        "GET", f"{PREFIX}/api/computations/{urllib.parse.quote(ids['computation'], safe='')}", auth
    )
    assert status == 200 and json.loads(text)["computation"]["computation_id"] == ids["computation"]
    assert_jupyter_headers(answer, jupyter_csp, "token GET")
    n = report_count(server.db)
    status, answer, text = server.request(
        "POST",
        f"{PREFIX}/lab/share",
        {**auth, "Content-Type": "application/json"},
        json.dumps({"computation_id": ids["computation"]}).encode(),
    )
    assert status == 201 and report_count(server.db) == n + 1, text[:300]
    # A wrong token is anonymous.
    status, _, _ = server.request("GET", f"{PREFIX}/api/clusters", {"Authorization": "token wrong"})
    assert status == 403


def test_each_method_is_wrapped_in_authenticated_and_authorized(routes):
    """@web.authenticated over Jupyter's @authorized (resource "dask_analytics"), on
    every method of every route; prepare() has already asked both before any work."""
    for spec in routes:
        for m in methods(spec):
            fn = getattr(spec.handler_class, m.lower())
            assert fn.__code__.co_qualname.startswith("authenticated"), (spec.regex.pattern, m)
            assert fn.__wrapped__.__code__.co_qualname.startswith("authorized"), (
                spec.regex.pattern,
                m,
            )
            assert getattr(fn, "__allow_unauthenticated", False) is False
    assert AUTH_RESOURCE == "dask_analytics"


def test_jupyters_authorizer_is_asked_before_any_work(world, routes, browser):
    """A logged-in user whom Jupyter's authorizer refuses the extension gets 403 on every
    route and method, and nothing is written (the test server's authorizer refuses
    requests that carry DENY_HEADER)."""
    server, _, ids = world
    before = fingerprint(server.db)
    headers = {
        "Cookie": f"{browser['login']}; _xsrf={browser['xsrf']}",
        "X-XSRFToken": browser["xsrf"],
        "Origin": server.origin,
        DENY_HEADER: "1",
    }
    for spec in routes:
        path = request_path(spec, routes, ids)
        for method in sorted({"GET", "POST", *methods(spec)}):
            body, content = post_body(path, ids) if method == "POST" else (None, {})
            status, _, text = server.request(method, path, {**content, **headers}, body)
            assert status == 403, (method, path, status, text[:300])
    assert fingerprint(server.db) == before
    # The same request without the marker is let in.
    status, _, _ = server.request("GET", f"{PREFIX}/api/clusters", {"Cookie": browser["login"]})
    assert status == 200


def test_another_host_name_is_refused_as_jupyter_refuses_it(world, routes, browser):
    """Jupyter's Host check (DNS rebinding) holds on the extension's routes, logged in or not."""
    server, _, ids = world
    for spec in routes:
        path = request_path(spec, routes, ids)
        for cookie in ({}, {"Cookie": browser["login"]}):
            status, _, text = server.request(
                "GET", path, {"Host": f"rebound.example:{server.port}", **cookie}
            )
            assert status == 403, (path, status, text[:200])


# --- with a team server: analytics.store is a `dask-analytics server` (issue 36, item 3) ---------
# The extension forwards only the Lab's reads (lab/team.py LAB_READS) to a real
# `dask-analytics server` process, with the token in the Jupyter server's config.  What
# reached that server is read from its own /metrics (requests answered, by route), so
# "refused before the team server is contacted" is the team server's word, not ours.
METRICS_TOKEN = "metrics-" + secrets.token_hex(16)


class TeamServer:
    def __init__(self, proc: Any, token: str, db: Path):
        self.proc, self.token, self.db, self.url = proc, token, db, proc.url

    def answered(self) -> dict[str, float]:
        """Requests the team server has answered, by route and status class (its
        /metrics, the scrapes themselves left out)."""
        from tests.server_helpers import request as http

        status, text, _ = http(
            self.url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
        assert status == 200, (status, str(text)[:300])
        counts: dict[str, float] = {}
        for line in text.splitlines():
            m = re.match(r"dask_analytics_request_seconds_count\{(.*)\} (\S+)$", line)
            if m and 'route="/metrics"' not in m.group(1):
                counts[m.group(1)] = float(m.group(2))
        return counts

    def reached_by(self, action: Any) -> dict[str, float]:
        """What `action()` made the team server answer (nothing: {})."""
        before = self.answered()
        action()
        after = self.answered()
        return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


@pytest.fixture(scope="module")
def team_world(tmp_path_factory) -> Iterator[tuple[Jupyter, TeamServer, dict]]:
    from dask_analytics_lab.remote import HttpSink
    from tests.server_helpers import ServerProcess, add_token, full_cluster

    tmp = tmp_path_factory.mktemp("labteam")
    db = tmp / "team.db"
    url = config.validate_store(f"sqlite:///{db}")
    token = add_token(url, "team", "ann")
    stranger = add_token(url, "elsewhere", "eve")
    (tmp / "metrics.token").write_text(METRICS_TOKEN)
    proc = ServerProcess(
        url, free_port(), extra=["--metrics-token-file", str(tmp / "metrics.token")]
    ).start()
    try:
        ours, messages = full_cluster("team", name="team-cluster")
        assert HttpSink(proc.url, token=token).write(messages) == len(messages)
        theirs, messages = full_cluster("elsewhere", name="their-cluster")
        assert HttpSink(proc.url, token=stranger).write(messages) == len(messages)
        ids = {
            "cluster": ours.id,
            "computation": f"comp-{ours.id}",
            "report": "no-reports-here",
            "theirs": theirs.id,
        }
        team = TeamServer(proc, token, db)
        with jupyter_server(
            tmp / "jupyter", proc.url, db, {"DASK_ANALYTICS__TOKEN": token}
        ) as server:
            yield server, team, ids
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def team_routes(team_world) -> list:
    _, team, _ = team_world
    return make_routes(BASE, config.validate_store(team.url))


@pytest.fixture(scope="module")
def team_browser(team_world) -> dict:
    server, _, _ = team_world
    return log_in(server)


def test_with_a_team_server_only_the_labs_reads_are_mounted(team_routes):
    from jupyter_server.base.handlers import APIHandler
    from jupyter_server.serverapp import ServerWebApplication

    from dask_analytics_lab.lab.serverext import JupyterRules
    from dask_analytics_lab.lab.team import LAB_READS
    from dask_analytics_lab.reads import BY_NAME

    paths = [s.regex.pattern for s in team_routes]
    reads = [f"{PREFIX}/api{path.pattern}$" for name in LAB_READS for path in BY_NAME[name].paths]
    own = [
        PREFIX + p + "$"
        for p in ("/lab/share", "/lab/report-file", "/lab-info", "/lab/computations")
    ]
    assert sorted(paths) == sorted([*own, *reads, PREFIX + "/.*$"])
    # Nothing the Lab does not read: no ingest, export, report upload, pages or metrics.
    for absent in ("/api/ingest$", "/api/export$", "/api/reports$", "/metrics$", "/api/whoami$"):
        assert PREFIX + absent not in paths
    for spec in team_routes:
        cls = spec.handler_class
        assert issubclass(cls, APIHandler) and cls.__mro__[1] is JupyterRules, spec.regex.pattern
        assert cls.check_xsrf_cookie is JupyterRules.check_xsrf_cookie
        assert ServerWebApplication._check_handler_auth(None, spec.regex.pattern, cls) == []


def test_with_a_team_server_anonymous_requests_never_reach_it(
    team_world, team_routes, jupyter_csp_team
):
    server, team, ids = team_world
    before = fingerprint(team.db)

    def attempts() -> None:
        for spec in team_routes:
            path = request_path(spec, team_routes, ids)
            for method in sorted({"GET", "POST", *methods(spec)}):
                body, headers = post_body(path, ids) if method == "POST" else (None, {})
                if method == "POST":
                    headers = {**headers, "Cookie": f"_xsrf={FORGED}", "X-XSRFToken": FORGED}
                status, answer, text = server.request(method, path, headers, body)
                what = f"anonymous {method} {path}"
                if status == 302:
                    assert method in ("GET", "HEAD"), what
                    assert answer["Location"].startswith(f"{BASE}login?next="), what
                else:
                    assert status == 403, (what, status, text[:300])
                assert_jupyter_headers(answer, jupyter_csp_team, what)
                # Not even where the team server is.
                assert team.url.encode() not in text and b"team-cluster" not in text, what

    assert team.reached_by(attempts) == {}, "an anonymous request reached the team server"
    assert fingerprint(team.db) == before


@pytest.fixture(scope="module")
def jupyter_csp_team(team_world) -> set[str]:
    server, _, _ = team_world
    _, api, _ = server.request(
        "GET", f"{BASE}api/status", {"Authorization": f"token {server.token}"}
    )
    _, page, _ = server.request("GET", f"{BASE}login")
    return {api["Content-Security-Policy"], page["Content-Security-Policy"]}


def test_with_a_team_server_a_strangers_post_is_refused_from_its_headers(team_world, team_routes):
    server, team, ids = team_world

    def attempts() -> None:
        for spec in team_routes:
            path = request_path(spec, team_routes, ids)
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(
                    (
                        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {8 * 2**20}\r\n"
                        f"Cookie: _xsrf={FORGED}\r\nX-XSRFToken: {FORGED}\r\n\r\n"
                    ).encode()
                )
                head = s.recv(200).decode("latin-1")
            assert head.startswith("HTTP/1.1 403"), (path, head)

    assert team.reached_by(attempts) == {}


def test_with_a_team_server_a_write_without_jupyters_xsrf_never_reaches_it(
    team_world, team_routes, team_browser
):
    """Share (which uploads a report to the team server) and every other route, with a
    logged-in browser's cookie but no, a mismatched or a made-up XSRF token."""
    server, team, ids = team_world
    login = team_browser["login"]
    cases = {
        "no XSRF token": {"Cookie": login},
        "a mismatched pair": {
            "Cookie": f"{login}; _xsrf={team_browser['xsrf']}",
            "X-XSRFToken": FORGED,
        },
        "a made-up pair from another site": {
            "Cookie": f"{login}; _xsrf={FORGED}",
            "X-XSRFToken": FORGED,
            "Origin": EVIL,
        },
        "a made-up pair from nowhere": {
            "Cookie": f"{login}; _xsrf={FORGED}",
            "X-XSRFToken": FORGED,
        },
    }
    before = fingerprint(team.db)

    def attempts() -> None:
        for spec in team_routes:
            path = request_path(spec, team_routes, ids)
            for case, headers in cases.items():
                body, content = post_body(path, ids)
                status, _, text = server.request("POST", path, {**content, **headers}, body)
                what = f"logged-in POST {path} with {case}"
                assert status in ((403, 404) if "Origin" in headers else (403,)), (
                    what,
                    status,
                    text[:300],
                )

    assert team.reached_by(attempts) == {}
    assert fingerprint(team.db) == before, "a forged write reached the team server's store"


def test_with_a_team_server_jupyters_authorizer_is_asked_first(
    team_world, team_routes, team_browser
):
    server, team, ids = team_world
    headers = {
        "Cookie": f"{team_browser['login']}; _xsrf={team_browser['xsrf']}",
        "X-XSRFToken": team_browser["xsrf"],
        "Origin": server.origin,
        DENY_HEADER: "1",
    }

    def attempts() -> None:
        for spec in team_routes:
            path = request_path(spec, team_routes, ids)
            for method in sorted({"GET", "POST", *methods(spec)}):
                body, content = post_body(path, ids) if method == "POST" else (None, {})
                status, _, text = server.request(method, path, {**content, **headers}, body)
                assert status == 403, (method, path, status, text[:300])

    assert team.reached_by(attempts) == {}


def test_with_a_team_server_hostile_paths_and_parameters_are_not_forwarded(
    team_world, team_browser
):
    """Logged in, with Jupyter's XSRF token: paths the Lab does not read, ids that would
    move along the team server's path, parameters the Lab does not send (another
    account, a second limit): each answered here (4xx, saying why), none sent on."""
    server, team, ids = team_world
    cookie = {"Cookie": team_browser["login"]}
    writer = {
        "Cookie": f"{team_browser['login']}; _xsrf={team_browser['xsrf']}",
        "X-XSRFToken": team_browser["xsrf"],
        "Origin": server.origin,
    }
    q = urllib.parse.quote(ids["cluster"], safe="")
    gets = [
        "/api/export",
        "/api/whoami",
        "/api/reports",
        "/api/costs",
        "/metrics",
        "/health",
        "/",
        "/login",
        f"/clusters/{q}",
        "/api/clusters/..",
        "/api/clusters/%2E%2E",
        "/api/computations/%2E%2E/tasks",
        "/api/clusters/%2e/samples",
        "/api/clusters/x/../../export",
        "/api/clusters%2Fx",
        "/api/clusters?account=elsewhere",
        "/api/clusters?limit=1&limit=2",
        f"/api/clusters?token={team.token}",
        f"/lab/computations?cluster_id={q}&account=elsewhere",
        f"/api/events?cluster_id={q}&topic=x&bogus=5",
        f"/api/computations/{urllib.parse.quote(ids['computation'], safe='')}?account=elsewhere",
        "/api/gpu?cluster_id=%FF",
    ]
    posts = ["/api/ingest", "/api/reports", "/api/clusters", "/lab/computations"]

    def attempts() -> None:
        for path in gets:
            status, _, text = server.request("GET", PREFIX + path, cookie)
            assert status in (400, 404, 405), (path, status, text[:300])
            if status != 405 and text.startswith(b"{"):
                assert json.loads(text)["error"], path
        for path in posts:
            body, content = post_body(PREFIX + path, ids)
            status, _, text = server.request("POST", PREFIX + path, {**content, **writer}, body)
            assert status in (404, 405), (path, status, text[:300])

    before = fingerprint(team.db)
    assert team.reached_by(attempts) == {}, (
        "a request the Lab does not make reached the team server"
    )
    assert fingerprint(team.db) == before
    # The measure itself: a read the Lab makes does reach the team server.
    reached = team.reached_by(
        lambda: server.request("GET", f"{PREFIX}/api/clusters?limit=5", cookie)
    )
    assert reached == {'route="/api/clusters",status="2xx"': 1}, reached
    # Said in words: a parameter the Lab does not send.
    status, _, text = server.request("GET", f"{PREFIX}/api/clusters?account=elsewhere", cookie)
    assert status == 400 and "account" in json.loads(text)["error"]
    # Another account's cluster is forwarded (an id is an id) and is unknown there.
    theirs = urllib.parse.quote(ids["theirs"], safe="")
    status, _, text = server.request("GET", f"{PREFIX}/api/clusters/{theirs}", cookie)
    answer = json.loads(text)
    assert status == 404 and answer["problem"] == "not-found", answer
    assert b"their-cluster" not in text and team.url in answer["error"]


def test_with_a_team_server_the_labs_reads_are_its_answers(team_world, team_browser):
    """Logged in, each read the Lab makes answers what the team server answers the
    token in Jupyter's config: its account's clusters only."""
    from dask_analytics_lab.lab.team import LAB_READS
    from dask_analytics_lab.reads import BY_NAME
    from tests.server_helpers import request as http

    server, team, ids = team_world
    cookie = {"Cookie": team_browser["login"]}
    cid = urllib.parse.quote(ids["cluster"], safe="")
    comp = urllib.parse.quote(ids["computation"], safe="")
    queries = {
        "/clusters": "?limit=30",
        "/computations": f"?cluster_id={cid}&limit=15",
        "/clusters/{cluster_id}/samples": "?limit=100",
        "/clusters/{cluster_id}/workers": "?limit=100&since=1000000000",
        "/computations/{computation_id}/tasks": "?limit=100",
        "/exceptions": f"?computation_id={comp}&limit=200",
        "/gpu": f"?cluster_id={cid}&limit=100",
        "/events": f"?cluster_id={cid}&topic=worker-joined&limit=100",
    }
    asked = [(BY_NAME[name], "api" + p.template) for name in LAB_READS for p in BY_NAME[name].paths]
    asked.append((BY_NAME["list_computations"], "lab/computations"))
    for read, template in asked:
        route = template.removeprefix("api").replace("lab/computations", "/computations")
        path = template.replace("{cluster_id}", cid).replace("{computation_id}", comp)
        path += queries.get(route, "")
        status, _, text = server.request("GET", f"{PREFIX}/{path}", cookie)
        assert status == 200, (path, status, text[:300])
        direct = path.replace("lab/computations", "api/computations")
        status, answer, _ = http(f"{team.url}/{direct}", token=team.token)
        assert status == 200, (direct, status)
        assert json.loads(text)[read.key] == answer[read.key], path
    status, _, text = server.request("GET", f"{PREFIX}/api/clusters", cookie)
    names = {c["name"] for c in json.loads(text)["clusters"]}
    assert names == {"team-cluster"}, names
    status, _, text = server.request("GET", f"{PREFIX}/lab-info", cookie)
    info = json.loads(text)
    assert status == 200 and info["mounted"] and info["team_server"] == team.url
    # A filter the team server's rules refuse is 400 with its words (the sidebar shows
    # them under its filters).
    status, _, text = server.request("GET", f"{PREFIX}/api/clusters?since=someday", cookie)
    answer = json.loads(text)
    assert status == 400 and answer["problem"] == "refused" and "since" in answer["error"], answer


def test_with_a_team_server_share_uploads_the_report_there(team_world, team_browser):
    """The panel's Share with Jupyter's XSRF token: the report lands on the team server
    (uploaded with the token) and its link is the team server's."""
    server, team, ids = team_world
    headers = {
        "Cookie": f"{team_browser['login']}; _xsrf={team_browser['xsrf']}",
        "X-XSRFToken": team_browser["xsrf"],
        "Origin": server.origin,
        "Content-Type": "application/json",
    }
    n = report_count(team.db)
    body = json.dumps({"computation_id": ids["computation"]}).encode()
    status, _, text = server.request("POST", f"{PREFIX}/lab/share", headers, body)
    assert status == 201, text[:500]
    report = json.loads(text)["report"]
    assert report["local"] is False and report["url"].startswith(team.url + "/reports/")
    assert report_count(team.db) == n + 1
    status, _, text = server.request("POST", f"{PREFIX}/lab/report-file", headers, body)
    assert status == 200 and "<html" in json.loads(text)["html"].lower()


def test_a_team_servers_refusals_are_answered_in_words(team_world, tmp_path):
    """A token the team server refuses, and a team server nobody answers at: the Lab's
    reads are 502 saying what to do, with the kind of problem for the sidebar."""
    _, team, _ = team_world
    nobody = f"http://127.0.0.1:{free_port()}"
    for name, store, token, problem, words in (
        ("bad-token", team.url, "dal_nope_" + "0" * 40, "token", "refused the token"),
        ("no-token", team.url, "", "token", "analytics.token is not set"),
        ("unreachable", nobody, team.token, "unreachable", "is not reachable"),
    ):
        env = {"DASK_ANALYTICS__TOKEN": token} if token else {}
        with jupyter_server(tmp_path / name, store, team.db, env) as server:
            cookie = {"Cookie": log_in(server)["login"]}
            status, _, text = server.request("GET", f"{PREFIX}/api/clusters?limit=5", cookie)
            answer = json.loads(text)
            assert status == 502 and answer["problem"] == problem, (name, answer)
            assert words in answer["error"] and store in answer["error"], (name, answer)
            if problem == "token":
                assert "analytics.token" in answer["error"] and "token create" in answer["error"]
            if token:
                assert token not in answer["error"], "the token itself must not be shown"
