"""Attacks on a running analytics server (issue 9, items 3, 6, 7 and 8), each refused.

- bodies: a stranger's upload is refused from its headers, before a byte of its body
  is read; gzip bombs while they arrive; stalled bodies are cut off; what parsing
  would cost is bounded, and parsing runs off the event loop;
- DNS rebinding: without tokens, a Host that is not this server's is refused;
- sessions and tokens: the login cookie is a signed session, login and logout refuse
  other sites' forms, failed authentication is logged and throttled, tokens expire and
  record their last use, and the HTTP reader keeps its token to the server's origin;
- a refused batch leaves nothing behind (not even its cluster id's claim).
Tests wait for conditions; none asserts how long anything took.
"""

from __future__ import annotations

import gzip
import http.server
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from tornado.web import create_signed_value

from dask_analytics_lab import cli
from dask_analytics_lab.http_reader import HttpReader
from dask_analytics_lab.remote import HttpSink
from dask_analytics_lab.server import body as body_module
from dask_analytics_lab.server import ingest as ingest_module
from dask_analytics_lab.store import open_store
from dask_analytics_lab.store.team import TeamStore
from dask_analytics_lab.store.team_schema import cluster_owners

from ..server_helpers import (
    Cluster,
    ServerProcess,
    ServerThread,
    browser,
    form_xsrf,
    free_port,
    full_cluster,
    log_in,
    request,
)

MiB = 2**20


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# --- a raw HTTP client: headers now, body later (or never) -----------------------------
def open_request(port: int, path: str, headers: dict, *, method: str = "POST") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    lines = "".join(f"{k}: {v}\r\n" for k, v in {"Host": f"127.0.0.1:{port}", **headers}.items())
    s.sendall(f"{method} {path} HTTP/1.1\r\n{lines}\r\n".encode())
    return s


def read_answer(s: socket.socket) -> tuple[int, dict, Any]:
    """The status, headers and (JSON) body of the response on s."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before an answer: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", 0))
    while len(rest) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    try:
        return status, headers, json.loads(rest[:length])
    except ValueError:
        return status, headers, rest[:length].decode(errors="replace")


def closed_by_server(s: socket.socket) -> bool:
    """True once the server has closed the connection (after whatever it answered)."""
    s.settimeout(0.5)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return True
    except TimeoutError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


def budgets_free(server: ServerThread) -> bool:
    return server.ctx.receiving.used == 0 and server.ctx.parsing.used == 0


@pytest.fixture
def server(sqlite_url):
    with ServerThread({"store_url": sqlite_url}) as s:
        yield s


# --- item 3: bodies ---------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/ingest", "/api/reports"])
@pytest.mark.parametrize("token", [None, "dal_000000000000_" + "x" * 43, "garbage"])
def test_a_strangers_upload_is_refused_from_its_headers(server, path, token):
    """64 MiB announced, `Expect: 100-continue`: 401 comes back at once, the server never
    says "continue", reserves nothing and closes the connection; not a byte was sent."""
    headers = {
        "Content-Type": "application/json",
        "Content-Length": 64 * MiB,
        "Expect": "100-continue",
    }
    if token:
        headers["Authorization"] = f"token {token}"
    s = open_request(server.port, path, headers)
    status, answer_headers, body = read_answer(s)
    assert status == 401 and "token" in body["error"]
    assert server.ctx.receiving.used == 0
    wait_for(lambda: closed_by_server(s), "the server to close the connection")
    s.close()


def test_a_stranger_cannot_trickle_a_body_either(server):
    """Chunked (no Content-Length), no token: refused before the first chunk."""
    s = open_request(
        server.port,
        "/api/ingest",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    status, _, body = read_answer(s)
    assert status == 401
    s.close()


def test_limits_are_checked_from_the_headers(server):
    token = server.token("A")
    auth = {"Authorization": f"token {token}"}
    for headers, want in [
        (
            {"Content-Type": "application/json", "Content-Length": 17 * MiB},
            413,
        ),  # over max_body_bytes
        ({"Content-Type": "text/plain", "Content-Length": 100}, 415),
        (
            {"Content-Type": "application/json", "Content-Encoding": "br", "Content-Length": 100},
            415,
        ),
    ]:
        s = open_request(server.port, "/api/ingest", {**auth, **headers})
        status, _, body = read_answer(s)  # no body sent at all
        assert status == want, (headers, body)
        s.close()
    assert server.ctx.receiving.used == 0


def test_a_gzip_bomb_is_refused_while_it_arrives(server):
    token = server.token("A")
    bomb = gzip.compress(b"[" + b" " * (512 * MiB) + b"]", 9)  # ~0.5 MiB inflating to 512 MiB
    s = open_request(
        server.port,
        "/api/ingest",
        {
            "Authorization": f"token {token}",
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
            "Content-Length": len(bomb),
        },
    )
    s.sendall(bomb[: 64 * 1024])  # an eighth of it: the answer comes before the rest is sent
    status, _, body = read_answer(s)
    assert status == 413 and "gzip bomb" in body["error"]
    wait_for(lambda: closed_by_server(s), "the server to close the connection")
    s.close()
    wait_for(lambda: budgets_free(server), "the body's memory to be given back")


def test_decompressed_size_is_capped(sqlite_url):
    with ServerThread({"store_url": sqlite_url, "max_json_bytes": MiB}) as server:
        c = Cluster(account="A")
        body = json.dumps([c.cluster(name=f"n{i}") for i in range(8000)]).encode()  # ~2.6 MiB, ~30x
        assert len(body) > 2 * MiB
        status, answer, _ = request(
            server.url + "/api/ingest",
            method="POST",
            token=server.token("A"),
            raw=gzip.compress(body),
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert status == 413 and "once decompressed" in answer["error"]
        assert server.ctx.store.list_clusters() == []


def test_a_stalled_body_is_cut_off(sqlite_url):
    with ServerThread({"store_url": sqlite_url, "body_idle_timeout": 1}) as server:
        token = server.token("A")
        s = open_request(
            server.port,
            "/api/ingest",
            {
                "Authorization": f"token {token}",
                "Content-Type": "application/json",
                "Content-Length": 100_000,
            },
        )
        s.sendall(b"[" + b" " * 1000)
        wait_for(lambda: closed_by_server(s), "the server to close the stalled connection")
        s.close()
        wait_for(lambda: budgets_free(server), "the body's memory to be given back")
        c, msgs = full_cluster("A")
        assert HttpSink(server.url, token=token).write(msgs) == len(msgs)  # the server is fine


def test_what_parsing_would_cost_is_bounded(sqlite_url, monkeypatch):
    """A body whose objects would take more memory than the server allows one request is
    refused before it is parsed (413); a smaller one is parsed and stored."""
    parsed = []
    real = body_module.parse_json
    monkeypatch.setattr(
        body_module, "parse_json", lambda raw, **kw: parsed.append(len(raw)) or real(raw, **kw)
    )
    one_pass = ingest_module.decode_messages  # ingest's own read: parse_json where it steps aside
    monkeypatch.setattr(
        ingest_module, "decode_messages", lambda raw: parsed.append(len(raw)) or one_pass(raw)
    )
    settings = {
        "store_url": sqlite_url,
        "body_memory": 20 * MiB,
        "max_json_bytes": 4 * MiB,
        "max_report_bytes": 4 * MiB,
    }
    with ServerThread(settings) as server:
        token = server.token("A")
        c = Cluster(account="A")
        dense = json.dumps(
            [c.cluster(), c.event(msg=[{}] * 300_000)]
        ).encode()  # 0.9 MiB of tiny objects
        status, answer, _ = request(
            server.url + "/api/ingest",
            method="POST",
            token=token,
            raw=dense,
            headers={"Content-Type": "application/json"},
        )
        assert status == 413 and "MiB of memory" in answer["error"], answer
        assert parsed == [] and server.ctx.store.list_clusters() == []
        c2, msgs = full_cluster("A")
        assert HttpSink(server.url, token=token).write(msgs) == len(msgs)
        assert len(parsed) == 1
        wait_for(lambda: budgets_free(server), "the bodies' memory to be given back")


def test_a_request_waits_for_memory_then_gets_503(sqlite_url):
    """Another body holds the memory for received bodies: the next waits, unread, then
    gets 503 with Retry-After (the plugin retries those)."""
    settings = {
        "store_url": sqlite_url,
        "body_memory": 5 * MiB,
        "max_json_bytes": MiB,
        "max_report_bytes": MiB,
        "body_queue_timeout": 0.5,
        "body_idle_timeout": 30,
    }
    with ServerThread(settings) as server:
        token = server.token("A")
        auth = {"Authorization": f"token {token}", "Content-Type": "application/json"}
        holder = open_request(server.port, "/api/ingest", {**auth, "Content-Length": MiB})
        holder.sendall(b"[")
        wait_for(lambda: server.ctx.receiving.used == MiB, "the first body to hold its memory")
        waiter = open_request(server.port, "/api/ingest", {**auth, "Content-Length": 1000})
        status, headers, body = read_answer(waiter)
        assert status == 503 and headers["retry-after"] and "busy" in body["error"]
        waiter.close()
        holder.close()
        wait_for(lambda: budgets_free(server), "the first body's memory to be given back")


def test_parsing_and_storing_run_off_the_event_loop(server, monkeypatch):
    threads = []
    real = body_module.parse_json
    monkeypatch.setattr(
        body_module,
        "parse_json",
        lambda raw, **kw: threads.append(threading.current_thread().name) or real(raw, **kw),
    )
    one_pass = ingest_module.decode_messages  # ingest's own read: parse_json where it steps aside
    monkeypatch.setattr(
        ingest_module,
        "decode_messages",
        lambda raw: threads.append(threading.current_thread().name) or one_pass(raw),
    )
    store_ingest = server.ctx.store.ingest
    monkeypatch.setattr(
        server.ctx.store,
        "ingest",
        lambda batch, **kw: (
            threads.append(threading.current_thread().name) or store_ingest(batch, **kw)
        ),
    )
    token = server.token("A")
    c, msgs = full_cluster("A")
    assert HttpSink(server.url, token=token).write(msgs) == len(msgs)
    assert len(threads) == 2 and all(name.startswith("dal-server-body") for name in threads), (
        threads
    )


# --- item 6: DNS rebinding ---------------------------------------------------------------
def test_without_tokens_another_host_name_is_refused(sqlite_url):
    with ServerThread({"store_url": sqlite_url, "token_required": False}) as server:
        c, msgs = full_cluster("A")
        assert HttpSink(server.url).write(msgs) == len(msgs)
        port = server.port
        for path in [
            "/api/clusters",
            "/api/export",
            f"/api/clusters/{c.id}",
            "/",
            "/login",
            "/nothing-here",
        ]:
            status, body, _ = request(
                server.url + path, headers={"Host": f"rebound.example:{port}"}
            )
            assert status == 403 and "does not answer to the host name" in str(body), (path, status)
            assert c.id not in str(body)
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "localhost"):
                assert request(server.url + path, headers={"Host": host})[0] in (200, 404), (
                    path,
                    host,
                )
        before = server.ctx.store.export()
        c2, msgs2 = full_cluster("B")
        status, _, _ = request(
            server.url + "/api/ingest",
            method="POST",
            body=msgs2,
            headers={"Host": "rebound.example"},
        )
        assert status == 403 and server.ctx.store.export() == before


def test_with_tokens_the_host_is_not_checked_unless_asked(sqlite_url):
    with ServerThread({"store_url": sqlite_url}) as server:
        token = server.token("A")
        assert (
            request(
                server.url + "/api/clusters", token=token, headers={"Host": "analytics.example"}
            )[0]
            == 200
        )
    with ServerThread({"store_url": sqlite_url, "allowed_hosts": ["analytics.example"]}) as server:
        token = server.token("A")
        assert (
            request(
                server.url + "/api/clusters", token=token, headers={"Host": "analytics.example"}
            )[0]
            == 200
        )
        assert (
            request(server.url + "/api/clusters", token=token, headers={"Host": "other.example"})[0]
            == 403
        )


def test_the_server_command_checks_hosts(tmp_path):
    port = free_port()
    db = f"sqlite:///{tmp_path}/a.db"
    with ServerProcess(db, port, ["--no-token", "--allowed-host", "analytics.test"]) as proc:
        url = proc.url + "/api/clusters"
        assert request(url)[0] == 200  # 127.0.0.1, the address it binds
        assert request(url, headers={"Host": f"localhost:{port}"})[0] == 200
        assert request(url, headers={"Host": f"analytics.test:{port}"})[0] == 200
        status, body, _ = request(url, headers={"Host": f"attacker.test:{port}"})
        assert status == 403 and "--allowed-host" in body["error"]


# --- item 7: sessions, CSRF, throttling, expiry, redirects ------------------------------
def whoami(opener: Any, url: str) -> int:
    try:
        with opener.open(url + "/api/whoami") as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_login_cookie_is_a_signed_session(server):
    token = server.token("A")
    opener, jar = browser()
    log_in(opener, server.url, token).close()
    (session,) = [c for c in jar if c.name == "dal_session"]
    # The secret is URL-safe base64: it may itself hold "_".
    _, token_id, secret = token.split("_", 2)
    assert secret not in session.value and token not in session.value
    assert whoami(opener, server.url) == 200

    def with_cookie(value: str, name: str = "dal_session") -> int:
        return request(server.url + "/api/whoami", headers={"Cookie": f"{name}={value}"})[0]

    assert with_cookie(session.value) == 200
    assert with_cookie(session.value[:-3] + "AAA") == 401  # tampered
    assert with_cookie(token_id) == 401  # unsigned
    forged = create_signed_value(
        b"another server's secret, 32 bytes", "dal_session", token_id
    ).decode()
    assert with_cookie(forged) == 401
    assert with_cookie(token, name="dal_token") == 401  # the old raw-token cookie means nothing now
    # Revoking the token ends its sessions (once the server's 30 s lookup cache lets go).
    server.ctx.team.revoke_token(token_id)
    server.ctx._tokens.clear()
    assert with_cookie(session.value) == 401


def test_a_session_ends_when_its_token_expires(server):
    token = server.token("A", expires=time.time() + 3600)
    opener, jar = browser()
    log_in(opener, server.url, token).close()
    (session,) = [c for c in jar if c.name == "dal_session"]
    assert (
        session.expires is not None and session.expires <= time.time() + 3600 + 5
    )  # not the usual 30 days
    with server.ctx.store.transaction() as conn:
        conn.execute(sa.text("UPDATE tokens SET expires = :t"), {"t": time.time() - 1})
    server.ctx._tokens.clear()
    assert whoami(opener, server.url) == 401


def test_login_and_logout_refuse_other_sites_forms(server):
    token = server.token("A")
    opener, jar = browser()
    xsrf = form_xsrf(opener, server.url + "/login")
    form = urllib.parse.urlencode({"token": token, "_xsrf": xsrf}).encode()

    def post(path: str, data: bytes, headers: dict) -> tuple[int, dict]:
        req = urllib.request.Request(server.url + path, data=data, headers=headers, method="POST")
        try:
            with opener.open(req) as r:
                return r.status, dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers)

    no_xsrf = urllib.parse.urlencode({"token": token}).encode()
    for data, headers in [
        (no_xsrf, {}),  # no form token
        (
            urllib.parse.urlencode({"token": token, "_xsrf": "2|00|11|22"}).encode(),
            {},
        ),  # a wrong one
        (form, {"Origin": "http://attacker.example"}),
        (form, {"Origin": "null"}),  # a sandboxed report page
        (form, {"Sec-Fetch-Site": "cross-site", "Origin": "http://attacker.example"}),
        (form, {"Sec-Fetch-Site": "same-site", "Origin": f"http://evil.localhost:{server.port}"}),
    ]:
        status, headers = post("/login", data, headers)
        assert status == 403, (data, headers)
        assert "dal_session" not in str(headers.get("Set-Cookie", ""))
    assert not [c for c in jar if c.name == "dal_session"]
    # This site's own form logs in ...
    status, _ = post("/login", form, {"Origin": server.url, "Sec-Fetch-Site": "same-origin"})
    assert status == 200 and whoami(opener, server.url) == 200
    # ... another site cannot log the browser out ...
    for headers in [{"Origin": "http://attacker.example"}, {"Sec-Fetch-Site": "cross-site"}]:
        assert post("/logout", b"", headers)[0] == 403
    assert whoami(opener, server.url) == 200
    # ... and this site's own logout does.
    assert (
        post("/logout", b"", {"Origin": server.url})[0] == 200
    )  # the login page, after the redirect
    assert whoami(opener, server.url) == 401


def test_failed_authentication_is_logged_and_throttled(server, caplog):
    good = server.token("A")
    fresh = server.token("A")
    assert request(server.url + "/api/whoami", token=good)[0] == 200
    bad = [f"dal_{i:012x}_" + "s3cret" * 7 + "x" for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="dask_analytics_lab.server"):
        for _ in range(10):
            assert request(server.url + "/api/clusters", token=bad[0])[0] == 401
        status, body, headers = request(server.url + "/api/clusters", token=bad[0])
        assert status == 429 and int(headers["Retry-After"]) > 0 and "too many" in body["error"]
        # The login form is throttled too, for the same credential.
        opener, _ = browser()
        xsrf = form_xsrf(opener, server.url + "/login")
        data = urllib.parse.urlencode({"token": bad[0], "_xsrf": xsrf}).encode()
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(server.url + "/login", data=data)
        assert e.value.code == 429
    failures = [r.getMessage() for r in caplog.records if "failed authentication" in r.getMessage()]
    assert len(failures) >= 10 and "from 127.0.0.1" in failures[0] and f"{0:012x}" in failures[0]
    assert not any("s3cret" in r.getMessage() for r in caplog.records)
    # Only that credential is refused: good tokens, old and new, and other bad ones (401,
    # not 429) are still looked at from the same address (a shared proxy's).
    assert request(server.url + "/api/clusters", token=good)[0] == 200
    assert request(server.url + "/api/clusters", token=fresh)[0] == 200
    assert request(server.url + "/api/clusters", token=bad[1])[0] == 401


def test_tokens_expire(server):
    expired = server.token("A", expires=time.time() - 1)
    status, body, _ = request(server.url + "/api/clusters", token=expired)
    assert (
        status == 401 and "expired on" in body["error"] and expired.split("_")[1] in body["error"]
    )
    assert (
        request(server.url + "/api/clusters", token=server.token("A", expires=time.time() + 60))[0]
        == 200
    )
    opener, _ = browser()
    with pytest.raises(urllib.error.HTTPError) as e:
        log_in(opener, server.url, expired)
    assert e.value.code == 401 and "expired on" in e.value.read().decode()


def test_token_create_expires_and_list_shows_use(sqlite_url, capsys):
    open_store(sqlite_url).close()  # made, as a server's start makes it, before its tokens
    assert (
        cli.main(
            [
                "token",
                "create",
                "--account",
                "A",
                "--user",
                "ann",
                "--expires",
                "30d",
                "--store",
                sqlite_url,
            ]
        )
        == 0
    )
    token = capsys.readouterr().out.strip()
    rows = TeamStore(open_store(sqlite_url)).list_tokens()
    assert len(rows) == 1 and abs(rows[0]["expires"] - (time.time() + 30 * 86400)) < 120
    assert rows[0]["last_used"] is None
    assert (
        cli.main(
            [
                "token",
                "create",
                "--account",
                "A",
                "--user",
                "ann",
                "--expires",
                "soon",
                "--db",
                sqlite_url,
            ]
        )
        == 2
    )
    assert "--expires takes a duration such as 30d" in capsys.readouterr().err
    assert (
        len(TeamStore(open_store(sqlite_url)).list_tokens()) == 1
    )  # refused before anything was made
    with ServerThread({"store_url": sqlite_url}) as server:
        assert request(server.url + "/api/clusters", token=token)[0] == 200
        wait_for(lambda: server.ctx.team.list_tokens()[0]["last_used"], "last_used to be written")
    capsys.readouterr()
    assert cli.main(["token", "list", "--db", sqlite_url]) == 0
    out = capsys.readouterr().out
    header, rule, row = out.splitlines()[:3]
    assert "expires" in header and "last used" in header and "state" in header
    expires = time.strftime("%Y-%m-%d", time.localtime(rows[0]["expires"]))
    assert (
        expires in row
        and row.count(time.strftime("%Y-%m-%d")) == 2
        and row.rstrip().endswith("active")
    )


def test_last_used_is_written_at_most_once_a_minute(server, monkeypatch):
    writes = []
    touch = server.ctx.team.touch_token
    monkeypatch.setattr(server.ctx.team, "touch_token", lambda *a: writes.append(a) or touch(*a))
    token = server.token("A")
    for _ in range(20):
        assert request(server.url + "/api/whoami", token=token)[0] == 200
    wait_for(lambda: writes, "the first last_used write")
    for _ in range(20):
        assert request(server.url + "/api/clusters", token=token)[0] == 200
    server.ctx.body_executor.submit(lambda: None).result()  # anything queued there has run
    assert len(writes) == 1


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET; redirects it first when the server was told to."""

    seen: list  # (port, path, Authorization header)
    redirect: dict  # path -> where

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append(
            (self.server.server_address[1], self.path, self.headers.get("Authorization"))
        )
        where = self.redirect.get(self.path.split("?")[0])
        if where:
            self.send_response(302)
            self.send_header("Location", where)
            self.end_headers()
            return
        body = json.dumps(
            {"clusters": [{"cluster_id": "from-" + str(self.server.server_address[1])}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_reader_keeps_its_token_to_the_servers_origin():
    seen: list = []
    servers = []
    for _ in range(2):
        handler = type("H", (Recorder,), {"seen": seen, "redirect": {}})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append((srv, handler))
    (first, h1), (other, _) = servers
    p1, p2 = first.server_address[1], other.server_address[1]
    try:
        reader = HttpReader(f"http://127.0.0.1:{p1}", token="dal_0123456789ab_" + "t" * 43)
        for target in (
            f"http://127.0.0.1:{p2}/api/final",
            f"http://localhost:{p2}/api/final",
            f"http://localhost:{p1}/api/final",
        ):  # another port, another name
            seen.clear()
            h1.redirect = {"/api/clusters": target}
            rows = reader.list_clusters()
            assert rows and rows[0]["cluster_id"].startswith("from-")
            assert (
                len(seen) == 2 and seen[0][2] and seen[1][1] == "/api/final" and seen[1][2] is None
            ), seen
        # A redirect within the same origin keeps it.
        seen.clear()
        h1.redirect = {"/api/clusters": f"http://127.0.0.1:{p1}/api/moved"}
        reader.list_clusters()
        assert [a for _, _, a in seen] == [
            reader.client.token and f"token {reader.client.token}"
        ] * 2
    finally:
        first.shutdown()
        other.shutdown()


def test_the_plugins_sink_follows_no_redirect_with_its_token():
    """The scheduler's HTTP sink POSTs batches with the token: a store URL that redirects
    (to another host or not) is an error to fix, and nothing reaches the other server."""
    seen: list = []

    class Redirects(Recorder):
        def do_POST(self) -> None:  # noqa: N802
            self.seen.append(
                (self.server.server_address[1], self.path, self.headers.get("Authorization"))
            )
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{other.server_address[1]}/api/ingest")
            self.send_header("Content-Length", "0")
            self.end_headers()

    other = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("O", (Recorder,), {"seen": seen, "redirect": {}})
    )
    first = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("F", (Redirects,), {"seen": seen, "redirect": {}})
    )
    for srv in (first, other):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        sink = HttpSink(
            f"http://127.0.0.1:{first.server_address[1]}", token="dal_0123456789ab_" + "t" * 43
        )
        with pytest.raises(ConnectionError, match="redirects.*analytics.store"):
            sink.write([{"kind": "event"}])
        assert [port for port, _, _ in seen] == [first.server_address[1]]
    finally:
        first.shutdown()
        other.shutdown()


# --- item 8: a refused batch leaves nothing behind ---------------------------------------
def owners(url: str) -> dict:
    store = open_store(url)
    try:
        with store.reading() as conn:
            return dict(
                conn.execute(sa.select(cluster_owners.c.cluster_id, cluster_owners.c.account)).all()
            )
    finally:
        store.close()


@pytest.mark.parametrize(
    "bad",
    [
        {"started": 1e300},
        {"started": -5.0},
        {"started": 8e9},
        {"price_per_core_hour": 1e300},
    ],
)
def test_out_of_range_values_are_refused_and_leave_nothing(store_url, bad):
    with ServerThread({"store_url": store_url}) as server:
        a, b = server.token("A"), server.token("B")
        c = Cluster(account="A")
        status, body, _ = request(
            server.url + "/api/ingest", method="POST", token=a, body=[c.cluster(**bad), c.sample()]
        )
        field = next(iter(bad))
        assert status == 422 and f"data.{field}" in body["error"], body
        assert c.id not in owners(store_url) and server.ctx.store.list_clusters() == []
        # Also a bad envelope time behind a good first message.
        c2 = Cluster(account="A")
        msgs = [c2.cluster(), c2.msg("cluster_sample", {}, time=1e300)]
        status, body, _ = request(server.url + "/api/ingest", method="POST", token=a, body=msgs)
        assert status == 422 and "1970 to 2200" in body["error"]
        assert c2.id not in owners(store_url) and server.ctx.store.list_clusters() == []
        # The id is still free: another account can write it and owns it.
        c.account = "B"
        assert HttpSink(server.url, token=b).write([c.cluster(), c.sample()]) == 2
        assert owners(store_url)[c.id] == "B"


# --- issue 20, item 7: logout, next=, and repeated batches for another account's id ------
def test_logout_ends_the_session_on_every_server(store_url):
    """A copy of the session cookie taken before logout (F14) reads nothing after it, on
    this server and on another process of the same database."""
    secret = b"one secret for both replicas, 32b"
    with (
        ServerThread({"store_url": store_url, "session_secret": secret}) as one,
        ServerThread({"store_url": store_url, "session_secret": secret}) as two,
    ):
        token = one.token("A")
        opener, jar = browser()
        log_in(opener, one.url, token).close()
        (cookie,) = [c for c in jar if c.name == "dal_session"]
        copied = {"Cookie": f"dal_session={cookie.value}"}
        for server in (one, two):
            assert request(server.url + "/api/whoami", headers=copied)[0] == 200
        req = urllib.request.Request(
            one.url + "/logout", data=b"", headers={"Origin": one.url}, method="POST"
        )
        opener.open(req).close()
        for server in (one, two):
            status, body, _ = request(server.url + "/api/whoami", headers=copied)
            assert status == 401, (server.url, body)
        # The token itself still works, and a new login makes a new session.
        assert request(two.url + "/api/whoami", token=token)[0] == 200
        log_in(opener, two.url, token).close()
        assert whoami(opener, one.url) == 200


@pytest.mark.parametrize(
    "target",
    [
        "/%0d%0aSet-Cookie:%20dal_session=x",
        "/%0aLocation:%20http://evil.example",
        "/x%00y",
        "/%1b[2J",
        "/%c2%85x",
    ],
)
def test_next_with_control_characters_is_a_bad_request(server, target):
    """F17: CR/LF (or any control character) in next= is 400, not 500, and logs no one in."""
    token = server.token("A")
    status, body, _ = request(server.url + "/login?next=" + target)
    assert status == 400 and "control characters" in body, body
    opener, jar = browser()
    xsrf = form_xsrf(opener, server.url + "/login")
    data = urllib.parse.urlencode({"token": token, "_xsrf": xsrf}).encode()
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(server.url + "/login?next=" + target, data=data)
    assert e.value.code == 400
    assert not [c for c in jar if c.name == "dal_session"]


def test_a_repeated_batch_for_another_accounts_id_answers_as_an_unknown_ids(store_url):
    """F9: the same batch sent twice for B's cluster with A's token answers exactly as
    the same batch sent twice for an id nobody has used ("stored": 0 the second time)."""
    with ServerThread({"store_url": store_url}) as server:
        a, b = server.token("A"), server.token("B")
        owned, msgs = full_cluster("B")
        assert HttpSink(server.url, token=b).write(msgs) == len(msgs)
        before = server.ctx.store.export()
        foreign, unknown = Cluster(account="A"), Cluster(account="A")
        foreign.id = owned.id
        answers = {}
        for name, c in (("foreign", foreign), ("unknown", unknown)):
            c._seq = iter(range(1000, 2000))
            batches = [[c.sample(), c.event()], [c.cluster(name="x"), c.sample(n_workers=3)]]
            answers[name] = [
                request(server.url + "/api/ingest", method="POST", token=a, body=batch)[:2]
                for batch in batches
                for _ in range(2)
            ]
        assert answers["foreign"] == answers["unknown"], answers
        assert [body["stored"] for _, body in answers["unknown"]] == [2, 0, 2, 0]
        export = server.ctx.store.export()
        assert [r for r in export["clusters"] if r["cluster_id"] == owned.id] == [
            r for r in before["clusters"] if r["cluster_id"] == owned.id
        ]
        assert export["events"] == [
            e for e in export["events"] if e["cluster_id"] != owned.id or e in before["events"]
        ]


# --- issue 20, item 4: the throttle never refuses a credential that works -------------------
def test_a_bad_token_flood_does_not_lock_out_good_credentials_from_the_same_address(store_url):
    """N2: a client behind the same reverse proxy floods a bad token; the working
    scheduler's ingest, a user's login and Prometheus' /metrics from that address go on,
    while the flooding token (and a wrong metrics token) get 429 before any lookup."""
    metrics_token = "m" * 32
    with ServerThread({"store_url": store_url, "metrics_token": metrics_token}) as server:
        ingest_token, user_token = server.token("A"), server.token("A", "ann")  # never used before
        flood = "dal_0123456789ab_" + "f" * 43
        for _ in range(12):
            request(server.url + "/api/ingest", method="POST", token=flood, body=[])
            request(
                server.url + "/metrics",
                headers={"Authorization": "Bearer wrong-metrics-token-0000"},
            )
        assert request(server.url + "/api/ingest", method="POST", token=flood, body=[])[0] == 429
        assert (
            request(
                server.url + "/metrics",
                headers={"Authorization": "Bearer wrong-metrics-token-0000"},
            )[0]
            == 429
        )
        c, msgs = full_cluster("A")
        assert HttpSink(server.url, token=ingest_token).write(msgs) == len(msgs)
        opener, jar = browser()
        log_in(opener, server.url, user_token).close()
        assert [c for c in jar if c.name == "dal_session"] and whoami(opener, server.url) == 200
        status, text, _ = request(
            server.url + "/metrics", headers={"Authorization": f"Bearer {metrics_token}"}
        )
        assert status == 200 and "dask_analytics" in text
        # The flooding token is still refused, on every route, before it is looked up.
        calls = []
        real = server.ctx.team.find_token
        server.ctx.team.find_token = lambda h: calls.append(h) or real(h)
        for path in ("/api/clusters", "/api/whoami"):
            assert request(server.url + path, token=flood)[0] == 429
        assert calls == []


def test_x_forwarded_for_counts_only_from_a_trusted_proxy(sqlite_url):
    bad = "dal_0123456789ab_" + "b" * 43

    def flood(server, headers, n=11):
        return [
            request(server.url + "/api/clusters", token=bad, headers=headers)[0] for _ in range(n)
        ]

    # 127.0.0.1 is not a trusted proxy here: the forged header is ignored, every request
    # counts for 127.0.0.1 whatever address it claims.
    with ServerThread({"store_url": sqlite_url, "forwarded_allow_ips": ["10.0.0.0/8"]}) as server:
        answers = [
            request(
                server.url + "/api/clusters",
                token=bad,
                headers={"X-Forwarded-For": f"203.0.113.{i}"},
            )[0]
            for i in range(11)
        ]
        assert answers == [401] * 10 + [429]
    # Behind a trusted proxy (this test's client plays it), the client's address is the
    # right-most entry that is not a trusted proxy; entries to its left are the client's word.
    with ServerThread(
        {"store_url": sqlite_url, "forwarded_allow_ips": "127.0.0.1, 10.0.0.0/8"}
    ) as server:
        assert flood(server, {"X-Forwarded-For": "198.51.100.7, 203.0.113.5, 10.1.2.3"}) == [
            401
        ] * 10 + [429]
        assert flood(server, {"X-Forwarded-For": "203.0.113.5"}, 1) == [429]  # the same client
        assert flood(server, {"X-Forwarded-For": "203.0.113.6"}, 1) == [401]  # another client
        assert flood(server, {"X-Forwarded-For": "203.0.113.5, 203.0.113.6"}, 1) == [
            401
        ]  # forged left part
        assert flood(server, {}, 1) == [401]  # the proxy's own address
