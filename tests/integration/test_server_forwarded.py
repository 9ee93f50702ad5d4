"""Behind a TLS-ending balancer (issue 37, R4): the scheme and host the browser used.

X-Forwarded-Proto and X-Forwarded-Host count only from a trusted proxy
(forwarded_allow_ips, the rule X-Forwarded-For follows); then an https client gets a
Secure login cookie, Strict-Transport-Security and https:// links on the forwarded host,
which must pass the allowed-host check as Host does.  From anyone else they change
nothing.  With TLS on the server itself (--certfile) the same.  Real servers, real
requests, and a real HAProxy ending TLS in front of a `dask-analytics server` process.
"""

from __future__ import annotations

import http.client
import http.cookiejar
import http.cookies
import re
import socket
import ssl
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ..balancer import HAProxy, deploy_config
from ..server_helpers import (
    ServerProcess,
    ServerThread,
    add_token,
    free_port,
    log_in,
    report_server,
    request,
    self_signed,
)
from ..waiting import wait_for

HSTS = "max-age=31536000"
TWIN = {"summary": {"n_tasks": 1}, "task_groups": [], "task_stream": [], "profile": {}}
REPORT = {"html": "<html><body>r</body></html>", "twin": TWIN, "filename": "r.html"}


def call(
    url: str,
    path: str,
    *,
    method: str = "GET",
    headers: dict | None = None,
    body: bytes | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, http.client.HTTPMessage, str]:
    """(status, headers, text) of one request, redirects not followed."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection(host, parts.port, context=context, timeout=30)
        if parts.scheme == "https"
        else http.client.HTTPConnection(host, parts.port, timeout=30)
    )
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.headers, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def login_cookies(
    url: str, token: str, headers: dict, context: ssl.SSLContext | None = None
) -> dict[str, http.cookies.Morsel]:
    """The cookies the login form and a successful login set, by name, as sent."""
    status, h, page = call(url, "/login", headers=headers, context=context)
    assert status == 200, page
    cookies = cookies_of(h)
    found = re.search(r'name="_xsrf" value="([^"]+)"', page)
    assert found, page
    xsrf = found.group(1)
    form = urllib.parse.urlencode({"token": token, "_xsrf": xsrf}).encode()
    status, h, text = call(
        url,
        "/login",
        method="POST",
        body=form,
        headers={
            **headers,
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"_xsrf={cookies['_xsrf'].value}",
            "Sec-Fetch-Site": "same-origin",
        },
        context=context,
    )
    assert status == 302, text
    cookies.update(cookies_of(h))
    assert "dal_session" in cookies
    return cookies


def form_post_refusal(url: str, headers: dict) -> str:
    """Why a login post without a form (so never a login) from a browser that sends
    Origin but no Sec-Fetch-Site is refused."""
    status, _, text = call(
        url,
        "/login",
        method="POST",
        body=b"",
        headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 403, text
    return text


def cookies_of(headers: http.client.HTTPMessage) -> dict[str, http.cookies.Morsel]:
    jar: http.cookies.SimpleCookie = http.cookies.SimpleCookie()
    for line in headers.get_all("Set-Cookie") or []:
        jar.load(line)
    return dict(jar)


def report_links(url: str, token: str, headers: dict, context: Any = None) -> list[str]:
    """The links the server builds: an upload's answer, and the list of reports."""
    status, body, _ = request(
        url + "/api/reports",
        method="POST",
        token=token,
        body=REPORT,
        headers=headers,
        context=context,
    )
    assert status == 201, body
    status, listed, _ = request(url + "/api/reports", token=token, headers=headers, context=context)
    assert status == 200, listed
    return [body["report"]["url"], *(r["url"] for r in listed["reports"])]


FORGED = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"}


def test_forwarded_headers_from_an_untrusted_client_change_nothing(sqlite_url):
    """The attack: a client that is no trusted proxy claims https and another host.  No
    Secure flag, no HSTS, no link naming evil.example, and no host check passed by it."""
    for settings in ({}, {"forwarded_allow_ips": "10.0.0.0/8"}):
        with ServerThread({"store_url": sqlite_url, **settings}) as server:
            token = server.token("A")
            cookies = login_cookies(server.url, token, FORGED)
            assert not cookies["dal_session"]["secure"] and not cookies["_xsrf"]["secure"]
            for link in report_links(server.url, token, FORGED):
                assert link.startswith(server.url + "/reports/"), link
            for path, auth in (("/login", None), ("/api/reports", token), ("/api/reports", None)):
                status, _, answer = request(server.url + path, token=auth, headers=FORGED)
                assert status in (200, 401)
                assert "Strict-Transport-Security" not in answer, (path, answer)
            # Nor does it make another site's form this server's own.
            origin = {**FORGED, "Origin": "http://evil.example"}
            assert "cannot post here" in form_post_refusal(server.url, origin)
    # With allowed hosts, a forged X-Forwarded-Host neither refuses the real Host nor
    # lets another Host in.
    settings = {"store_url": sqlite_url, "allowed_hosts": ["127.0.0.1"]}
    with ServerThread({**settings, "forwarded_allow_ips": "10.0.0.0/8"}) as server:
        token = server.token("A")
        assert request(server.url + "/api/whoami", token=token, headers=FORGED)[0] == 200
        rebound = {"Host": "evil.example", "X-Forwarded-Host": "127.0.0.1"}
        assert request(server.url + "/api/whoami", token=token, headers=rebound)[0] == 403


def test_behind_a_trusted_proxy_https_gives_secure_cookies_hsts_and_https_links(sqlite_url):
    proxied = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "analytics.example"}
    with ServerThread({"store_url": sqlite_url, "forwarded_allow_ips": "127.0.0.1"}) as server:
        token, other = server.token("A"), server.token("B")
        cookies = login_cookies(server.url, token, proxied)
        assert cookies["dal_session"]["secure"] and cookies["dal_session"]["httponly"]
        assert cookies["_xsrf"]["secure"]
        for link in report_links(server.url, token, proxied):
            assert link.startswith("https://analytics.example/reports/"), link
        # Every answer carries HSTS: pages, the API, refusals (no login, another
        # account's report, a wrong token).
        private = request(
            server.url + "/api/reports",
            method="POST",
            token=token,
            body={**REPORT, "private": True},
            headers=proxied,
        )[1]["report"]["id"]
        for path, auth, expected in (
            ("/login", None, 200),
            ("/api/reports", token, 200),
            ("/api/reports", None, 401),
            (f"/reports/{private}.json", other, 404),
            ("/api/whoami", "dal_0123456789ab_" + "b" * 43, 401),
        ):
            status, _, answer = request(server.url + path, token=auth, headers=proxied)
            assert status == expected, (path, status)
            assert answer.get("Strict-Transport-Security") == HSTS, (path, answer)
        # A browser that sends only Origin: the forwarded host is this server's name.
        origin = {**proxied, "Origin": "https://analytics.example"}
        assert "cannot post here" not in form_post_refusal(server.url, origin)
        origin = {**proxied, "Origin": "https://evil.example"}
        assert "cannot post here" in form_post_refusal(server.url, origin)
        # The proxy's own word decides: plain http through it is plain http.
        plain = {"X-Forwarded-Proto": "http"}
        assert not login_cookies(server.url, token, plain)["dal_session"]["secure"]
        assert "Strict-Transport-Security" not in request(server.url + "/login", headers=plain)[2]
        assert report_links(server.url, token, plain)[0].startswith(server.url + "/reports/")
        # A chain of proxies: the right-most entry is what the one next to us wrote.
        chain = {"X-Forwarded-Proto": "http, https", "X-Forwarded-Host": "evil.example, a.example"}
        assert report_links(server.url, token, chain)[0].startswith("https://a.example/reports/")
        # Not a host: refused, never put into a link.
        bad = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example/x?"}
        assert request(server.url + "/api/reports", token=token, headers=bad)[0] == 400


def test_a_forwarded_host_must_pass_the_allowed_host_check(sqlite_url):
    settings = {
        "store_url": sqlite_url,
        "forwarded_allow_ips": "127.0.0.1",
        "allowed_hosts": ["127.0.0.1", "analytics.example"],
    }
    with ServerThread(settings) as server:
        token = server.token("A")

        def status(**headers: str) -> int:
            return request(server.url + "/api/whoami", token=token, headers=headers)[0]

        assert status(**{"X-Forwarded-Host": "analytics.example"}) == 200
        assert status(**{"X-Forwarded-Host": "evil.example"}) == 403
        # A rebound page's script, through the proxy, naming the right host in the header.
        assert status(Host="evil.example", **{"X-Forwarded-Host": "analytics.example"}) == 403
        assert status(Host="analytics.example:443") == 200
    # The report origin is another name of the server: named by a trusted proxy's
    # X-Forwarded-Host, only report pages answer there.
    with report_server(sqlite_url, forwarded_allow_ips="127.0.0.1") as server:
        token = server.token("A")
        origin = {"X-Forwarded-Host": f"localhost:{server.port}"}
        assert request(server.url + "/api/whoami", token=token)[0] == 200
        assert request(server.url + "/api/whoami", token=token, headers=origin)[0] == 404
    with report_server(sqlite_url, forwarded_allow_ips="10.0.0.0/8") as server:
        token = server.token("A")
        origin = {"X-Forwarded-Host": f"localhost:{server.port}"}
        assert request(server.url + "/api/whoami", token=token, headers=origin)[0] == 200


def test_tls_on_the_server_itself_gives_the_same(sqlite_url, tmp_path):
    certfile, keyfile = self_signed(tmp_path)
    tls = ssl.create_default_context(cafile=certfile)
    with ServerThread({"store_url": sqlite_url}, certfile=certfile, keyfile=keyfile) as server:
        token = server.token("A")
        cookies = login_cookies(server.url, token, {}, context=tls)
        assert cookies["dal_session"]["secure"] and cookies["_xsrf"]["secure"]
        for link in report_links(server.url, token, {}, context=tls):
            assert link.startswith(server.url + "/reports/") and link.startswith("https://")
        for path, auth in (("/login", None), ("/api/reports", token), ("/api/reports", None)):
            answer = request(server.url + path, token=auth, context=tls)[2]
            assert answer.get("Strict-Transport-Security") == HSTS, (path, answer)
    # Mounted in a host app (Jupyter): HSTS for its host name is the host's to set.
    hosted = {"store_url": sqlite_url, "token_required": False, "local_auth": lambda h: True}
    with ServerThread(hosted, certfile=certfile, keyfile=keyfile) as server:
        answer = request(server.url + "/api/whoami", context=tls)[2]
        assert "Strict-Transport-Security" not in answer


class Eavesdropper:
    """A plain-http listener on the balancer's name (a network attacker's stand-in, one
    that a link or a redirect sends the browser to): keeps the headers it was sent."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.heard: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                self.heard.append(data.decode("latin-1"))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def close(self) -> None:
        self.sock.close()


def test_through_haproxy_ending_tls_the_login_cookie_never_goes_over_plain_http(tmp_path):
    """The finding as it happens, through deploy/haproxy.cfg ending TLS: a browser logs
    in over https; then anything sends it to http:// on the same name (another port:
    cookies do not care).  Without Secure the session cookie goes along in clear text."""
    db = str(tmp_path / "a.store")
    certfile, keyfile = self_signed(tmp_path)
    pem = tmp_path / "haproxy.pem"
    pem.write_text(Path(certfile).read_text() + Path(keyfile).read_text())
    server = ServerProcess(db, free_port(), ["--forwarded-allow-ips", "127.0.0.1"])
    balancer = HAProxy(
        {"r0": server.port}, tmp_path / "haproxy", config=deploy_config, env={"TLS_CERT": str(pem)}
    )
    url = balancer.url
    assert url.startswith("https://")
    eavesdropper = Eavesdropper()
    with server:
        try:
            balancer.start()
            balancer.wait_up(["r0"])
            token = add_token(db, "A")
            tls = ssl.create_default_context(cafile=certfile)
            jar = http.cookiejar.CookieJar()
            opener = urllib.request.build_opener(
                urllib.request.HTTPCookieProcessor(jar), urllib.request.HTTPSHandler(context=tls)
            )
            # A client's own X-Forwarded-Proto is replaced by the balancer's, its
            # X-Forwarded-Host dropped.
            opener.addheaders = [("X-Forwarded-Proto", "http")]
            log_in(opener, url, token).close()
            session = [c for c in jar if c.name == "dal_session"]
            assert session
            opener.open(f"http://127.0.0.1:{eavesdropper.port}/").close()
            wait_for(lambda: eavesdropper.heard, timeout=10, what="the plain-http request")
            assert "dal_session" not in eavesdropper.heard[0], eavesdropper.heard[0]
            assert session[0].secure
            # The browser is told to use https only, and links lead there.
            with opener.open(url + "/api/whoami") as r:
                assert r.headers["Strict-Transport-Security"] == HSTS
            links = report_links(url, token, FORGED, context=tls)
            assert all(link.startswith(url + "/reports/") for link in links), links
        finally:
            balancer.stop()
            eavesdropper.close()
