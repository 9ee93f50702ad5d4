"""deploy/ (issue 22, item 6): the server's container file, the compose file for
PostgreSQL + HAProxy + 3 replicas and HAProxy's configuration, checked against each
other and against the server's real command-line options.  No container runtime is
needed: the files are parsed, and haproxy (Debian's, as the replica tests use) checks
its own configuration.

Issue 37, R3: deploy/haproxy.cfg itself (its addresses made local, tests/balancer.py's
deploy_config) in front of a real server, under 4,000 slow connections from one address
while another address is served; and its TLS form, with a certificate made here."""

from __future__ import annotations

import http.client
import http.server
import inspect
import json
import re
import select
import shutil
import socket
import ssl
import statistics
import subprocess
import threading
import time
from pathlib import Path

import click
import pytest
import yaml

from dask_analytics_lab.remote import HttpSink
from dask_analytics_lab.server.cli import server as server_command

from ..balancer import HAProxy, deploy_config
from ..deploy_files import DEPLOY, compose, dockerfile
from ..server_helpers import ServerProcess, add_token, free_port, request, self_signed
from ..waiting import wait_for

PORT = "8765"


def replicas(services: dict) -> dict:
    return {
        name: s
        for name, s in services.items()
        if s.get("build", {}).get("dockerfile") == "deploy/Dockerfile"
    }


def options(argv: list[str]) -> dict[str, str]:
    """--flag value pairs of a server command line."""
    return {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}


def test_the_image_runs_the_server_as_a_user_on_the_exposed_port():
    steps = dockerfile()
    final = steps[max(i for i, (word, _) in enumerate(steps) if word == "FROM") :]
    words = dict(final)
    assert words["FROM"].startswith("python:3.11")
    # The server's role and the PostgreSQL driver, installed in the image that runs.
    assert any("[server,postgresql]" in args for word, args in final if word == "RUN")
    assert words["USER"] not in ("root", "0")
    assert words["EXPOSE"] == PORT
    entry = yaml.safe_load(words["ENTRYPOINT"])  # a JSON list
    assert entry[:2] == ["dask-analytics", "server"] and options(entry) == {
        "--host": "0.0.0.0",
        "--port": PORT,
    }
    assert "/health" in words["HEALTHCHECK"] and "/ready" not in words["HEALTHCHECK"]


def test_compose_runs_postgres_haproxy_and_three_replicas_sharing_their_secrets():
    spec = compose()
    services = spec["services"]
    servers = replicas(services)
    assert sorted(servers) == ["server-1", "server-2", "server-3"]
    assert (
        services["postgres"]["image"].startswith("postgres:")
        and "healthcheck" in services["postgres"]
    )
    commands = {name: s["command"] for name, s in servers.items()}
    assert len({tuple(c) for c in commands.values()}) == 1  # one configuration, three processes
    argv = next(iter(commands.values()))
    opts = options(argv)
    assert opts["--store"].startswith("postgresql://") and "@postgres:" in opts["--store"]
    assert ":" not in opts["--store"].split("://")[1].split("@")[0]  # no password in argv
    for s in servers.values():
        assert s["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert (
            set(s["secrets"])
            == {"session_secret", "code_key", "metrics_token"}
            <= set(spec["secrets"])
        )
    assert opts["--session-secret-file"] == "/run/secrets/session_secret"
    assert opts["--code-key-file"] == "/run/secrets/code_key"
    # /metrics answers Prometheus (403 without a token), and old clusters are deleted.
    assert opts["--metrics-token-file"] == "/run/secrets/metrics_token"
    assert opts["--retention"]
    # The replicas trust X-Forwarded-For from HAProxy's address only.
    assert (
        opts["--forwarded-allow-ips"] == services["haproxy"]["networks"]["backend"]["ipv4_address"]
    )
    # Every flag is one `dask-analytics server` really has.
    known = {opt for p in server_command.params if isinstance(p, click.Option) for opt in p.opts}
    entry = yaml.safe_load(dict(dockerfile())["ENTRYPOINT"])
    assert {a for a in entry + argv if a.startswith("--")} <= known
    assert any(
        v.endswith(":/usr/local/etc/haproxy/haproxy.cfg:ro") for v in services["haproxy"]["volumes"]
    )


def test_every_service_has_a_health_check_and_postgres_keeps_its_durable_defaults():
    """Issue 41, item 4: PostgreSQL's health check gates the replicas, the replicas' (the
    image's HEALTHCHECK on /health) gates HAProxy, and HAProxy has one of its own;
    nothing turns off fsync, synchronous_commit or full_page_writes.
    (tests/integration/test_compose_topology.py runs each check against real processes.)"""
    services = compose()["services"]
    servers = replicas(services)
    assert "HEALTHCHECK" in dict(dockerfile())
    assert all("healthcheck" not in s for s in servers.values())  # the image's, not disabled
    for name in ("postgres", "haproxy"):
        test = services[name]["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL") and not services[name]["healthcheck"].get("disable")
    assert services["haproxy"]["depends_on"] == dict.fromkeys(
        servers, {"condition": "service_healthy"}
    )
    durable = re.compile(r"\b(fsync|synchronous_commit|full_page_writes)\b", re.I)
    said = json.dumps(
        {k: services["postgres"].get(k) for k in ("command", "environment", "entrypoint")}
    )
    assert not durable.search(said), said


def test_haproxy_balances_the_compose_replicas_checking_ready():
    text = (DEPLOY / "haproxy.cfg").read_text()
    servers = re.findall(r"^\s*server\s+(\S+)\s+(\S+)", text, re.M)
    assert [(name, f"{name}:{PORT}") for name in sorted(replicas(compose()["services"]))] == servers
    assert re.search(r"http-check send meth GET uri /ready\b", text)
    assert re.search(r"http-check expect status 200", text)
    assert re.search(r"default-server check\b", text)
    assert "option forwardfor" in text and "option redispatch" in text
    bind = re.search(r"^\s*bind\s+:(\d+)", text, re.M).group(1)
    assert f"{bind}:{bind}" in compose()["services"]["haproxy"]["ports"]


@pytest.mark.postgres  # needs haproxy, installed with PostgreSQL by the README's test command
def test_haproxy_accepts_the_configuration():
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        pytest.fail(
            "haproxy not found: run the README's test command (apt-get install -y haproxy)",
            pytrace=False,
        )
    r = subprocess.run(
        [binary, "-c", "-f", str(DEPLOY / "haproxy.cfg")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


# --- issue 37, R3: the balancer's timeouts and per-address limits -----------------------
FLOOD = 4000  # the issue's: 4,000 slow connections from one client address
PER_ADDRESS = (
    1000  # deploy/haproxy.cfg: `tcp-request connection reject if { sc_conn_cur(0) gt 1000 }`
)
ATTACKER, GOOD = "127.0.0.1", "127.0.0.2"  # two client addresses, both loopback
GOOD_ROUNDS = 20  # of GET /health and an authenticated GET /api/whoami, each on a new connection
# The issue asks that the good client stay under 1 s.  A busy CI machine must not fail the
# test on that, so a request fails only after this long; the latencies are printed.
GOOD_TIMEOUT = 10.0
SLOW_HEAD = b"GET /health HTTP/1.1\r\nHost: analytics\r\n"  # never finished


def seconds(value: str) -> float:
    """An HAProxy time ("10s", "500ms", "2m") in seconds."""
    m = re.fullmatch(r"(\d+)(us|ms|s|m|h|d)?", value)
    assert m, value
    number, unit = m.groups()
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit or "ms"]
    return int(number) * scale


def test_haproxy_times_out_slow_requests_and_limits_each_client_address():
    text = (DEPLOY / "haproxy.cfg").read_text()
    timeouts = {k: seconds(v) for k, v in re.findall(r"^\s*timeout\s+(\S+)\s+(\S+)", text, re.M)}
    # Slow headers (slowloris) and idle kept connections are cut short; a large body still
    # has the server's 120 s (body_timeout) of inactivity.
    assert timeouts["http-request"] <= 10 and timeouts["http-keep-alive"] <= 10
    assert timeouts["client"] > 120 and timeouts["server"] > 120
    assert {"connect", "queue", "check", "client-fin"} <= set(timeouts)
    # Deadlines (issue 41, item 3): a request queued here leaves time to store it within
    # the plugin's own timeout, a client that gave up takes its queued request with it,
    # and an ingest waits for a replica about as long as its client does.
    plugin_timeout = inspect.signature(HttpSink).parameters["timeout"].default
    assert timeouts["queue"] <= plugin_timeout / 2 and "option abortonclose" in text
    ingest = re.search(r"set-timeout server (\S+) if \{ path_end /api/ingest \}", text)
    assert ingest and plugin_timeout < seconds(ingest.group(1)) <= 2 * plugin_timeout
    assert "set-header X-Request-Start t=%[date(0,us)]" in text
    assert "option http-buffer-request" in text
    # Per client address: a stick table of open connections and their rate, and limits.
    assert re.search(r"stick-table type ipv6 .*\bstore conn_cur,conn_rate\(10s\)", text)
    assert re.search(r"^\s*tcp-request connection track-sc0 src$", text, re.M)
    cur = re.search(r"tcp-request connection reject if \{ sc_conn_cur\(0\) gt (\d+) \}", text)
    rate = re.search(r"tcp-request connection reject if \{ sc_conn_rate\(0\) gt (\d+) \}", text)
    assert cur and rate and int(cur.group(1)) == PER_ADDRESS and int(rate.group(1)) >= PER_ADDRESS
    # One address holds at most an eighth of what HAProxy holds at all, and HAProxy has
    # the open files those take (it refuses to start without them).
    maxconn = [int(n) for n in re.findall(r"^\s*maxconn\s+(\d+)", text, re.M)]
    assert len(maxconn) == 2 and min(maxconn) >= 8 * PER_ADDRESS  # global, defaults
    assert compose()["services"]["haproxy"]["ulimits"]["nofile"] > 2 * max(maxconn) + 100
    assert re.search(r"^\s*default-server .*\bmaxconn \d+", text, re.M)  # per replica
    # The replicas learn the client's scheme (and address: option forwardfor).
    assert "http-request set-header X-Forwarded-Proto https if { ssl_fc }" in text
    assert "http-request set-header X-Forwarded-Proto http if !{ ssl_fc }" in text


def test_compose_publishes_haproxy_only_and_keeps_the_replicas_on_an_internal_network():
    spec = compose()
    services = spec["services"]
    assert [name for name, s in services.items() if "ports" in s] == ["haproxy"]
    assert spec["networks"]["backend"]["internal"] is True
    assert not (spec["networks"]["edge"] or {}).get("internal")
    for name, s in services.items():
        if name != "haproxy":
            assert s["networks"] == ["backend"], name
    assert set(services["haproxy"]["networks"]) == {"edge", "backend"}
    # HTTPS unless .env says TLS_CERT= : the certificate README.md makes, mounted.
    default = re.fullmatch(
        r"\$\{TLS_CERT-(/\S+)\}", services["haproxy"]["environment"]["TLS_CERT"]
    ).group(1)
    mounts = [v.split(":") for v in services["haproxy"]["volumes"]]
    assert ["./certs", str(Path(default).parent), "ro"] in mounts
    readme = (DEPLOY / "README.md").read_text()
    assert "openssl req -x509" in readme and f"certs/{Path(default).name}" in readme


def haproxy_or_fail() -> None:
    if not (shutil.which("haproxy") or Path("/usr/sbin/haproxy").exists()):
        pytest.fail(
            "haproxy not found: run the README's test command (apt-get install -y haproxy)",
            pytrace=False,
        )


class Echo(http.server.BaseHTTPRequestHandler):
    """A replica stand-in: 200 and the request's headers as JSON, for any GET."""

    def do_GET(self) -> None:
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except ConnectionError:
            pass  # a health check reads the status line and resets the connection

    def log_message(self, *args: object) -> None:
        pass


def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """(certificate, HAProxy's PEM of certificate and key) for 127.0.0.1, self-signed, as
    README.md's openssl command makes them for a host name."""
    certfile, keyfile = self_signed(tmp_path)
    crt, secret = Path(certfile).read_bytes(), Path(keyfile).read_bytes()
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "analytics.crt").write_bytes(crt)
    (certs / "analytics.pem").write_bytes(crt + secret)
    return certs / "analytics.crt", certs / "analytics.pem"


@pytest.mark.postgres  # needs haproxy (see test_haproxy_accepts_the_configuration)
@pytest.mark.parametrize("tls", [True, False], ids=["https", "http"])
def test_haproxy_serves_https_with_its_certificate_and_tells_the_replicas_the_scheme(tmp_path, tls):
    haproxy_or_fail()
    certfile, pem = certificate(tmp_path)
    echo = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Echo)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    balancer = HAProxy(
        {"r0": echo.server_address[1]},
        tmp_path / "haproxy",
        config=deploy_config,
        env={"TLS_CERT": str(pem)} if tls else None,
    )
    try:
        balancer.start()  # `haproxy -c` first: it accepts the TLS form with this certificate
        balancer.wait_up(["r0"])
        assert balancer.url.startswith("https://" if tls else "http://")
        context = ssl.create_default_context(cafile=certfile) if tls else None
        # A client's own X-Forwarded-Proto is replaced by what HAProxy saw, and its
        # X-Forwarded-Host dropped (the replicas trust HAProxy's forwarded headers).
        status, seen, _ = request(
            balancer.url + "/api/whoami",
            headers={
                "X-Forwarded-Proto": "http" if tls else "https",
                "X-Forwarded-Host": "evil.example",
            },
            context=context,
        )
        assert status == 200
        assert seen["x-forwarded-proto"] == ("https" if tls else "http")
        assert "x-forwarded-host" not in seen, seen
        assert seen["x-forwarded-for"] == "127.0.0.1"
        if tls:  # nothing in plain HTTP on the TLS port
            with pytest.raises(OSError):
                request(balancer.url.replace("https://", "http://") + "/health")
    finally:
        balancer.stop()
        echo.shutdown()
        echo.server_close()


def raise_fd_limit(need: int) -> tuple[int, int] | None:
    """Lift this process's soft open-files limit to `need` (HAProxy, its child, inherits
    it); the old limits to restore, or None when it was high enough."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return None
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.fail(f"the flood needs {need} open files; the hard limit is {hard} (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    return soft, hard


def get_from(address: str, port: int, path: str, token: str | None) -> tuple[int, bytes]:
    """One GET on a new connection from `address`, through the balancer."""
    conn = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=GOOD_TIMEOUT, source_address=(address, 0)
    )
    try:
        conn.request("GET", path, headers={"Authorization": f"token {token}"} if token else {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def still_open(sockets: list[socket.socket]) -> list[socket.socket]:
    """The sockets the balancer has neither closed nor answered (poll: select() stops at 1024)."""
    poller = select.poll()
    for s in sockets:
        poller.register(s, select.POLLIN | select.POLLHUP | select.POLLERR)
    done = {fd for fd, _ in poller.poll(0)}
    return [s for s in sockets if s.fileno() not in done]


@pytest.mark.postgres  # needs haproxy (see test_haproxy_accepts_the_configuration)
def test_a_slow_connection_flood_from_one_address_leaves_other_clients_served(sqlite_url, tmp_path):
    """Issue 37, R3: 4,000 connections from one address that send half a request head and
    then trickle a header line a second (slowloris).  deploy/haproxy.cfg keeps at most
    PER_ADDRESS of them, closes those after `timeout http-request`, and serves another
    address meanwhile.  Before it (no http-request timeout, maxconn 4000) the flood held
    every connection HAProxy had, and every other client's request timed out."""
    haproxy_or_fail()
    restore = raise_fd_limit(FLOOD + 1000)
    server = ServerProcess(sqlite_url, free_port(), ["--forwarded-allow-ips", "127.0.0.1"])
    balancer = HAProxy({"r0": server.port}, tmp_path / "haproxy", config=deploy_config)
    flood: list[socket.socket] = []
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(1.0):
            for s in list(flood):
                try:
                    s.send(b"X-Slow: 1\r\n")
                except OSError:
                    pass  # closed by the balancer: expected

    trickler = threading.Thread(target=trickle, daemon=True)
    try:
        server.start()
        token = add_token(sqlite_url, "A")
        balancer.start()
        balancer.wait_up(["r0"])
        # The flood, bounded in count and time.
        refused = 0
        opening = time.monotonic()
        while len(flood) + refused < FLOOD and time.monotonic() - opening < 30:
            s = socket.socket()
            s.settimeout(2)
            try:
                s.bind((ATTACKER, 0))
                s.connect(("127.0.0.1", balancer.port))
                s.sendall(SLOW_HEAD)
            except OSError:
                s.close()
                refused += 1
                continue
            flood.append(s)
        opened_in = time.monotonic() - opening
        trickler.start()
        # While it is open: another address, new connections, open and authenticated reads.
        took: list[float] = []
        for _ in range(GOOD_ROUNDS):
            for path, tok in (("/health", None), ("/api/whoami", token)):
                t0 = time.perf_counter()
                try:
                    status, body = get_from(GOOD, balancer.port, path, tok)
                except OSError as e:
                    pytest.fail(
                        f"GET {path} from {GOOD} failed during the flood from {ATTACKER} "
                        f"({len(flood)} slow connections open): {e!r}",
                        pytrace=False,
                    )
                took.append(time.perf_counter() - t0)
                assert status == 200, (path, status, body[:200])
                if tok:
                    assert json.loads(body)["whoami"]["account"] == "A"
        held = len(still_open(flood))
        ms = sorted(1000 * x for x in took)
        print(
            f"\nflood: {len(flood)} connected ({refused} refused) in {opened_in:.2f} s, "
            f"{held} held by the balancer during the good requests; good client: "
            f"{len(ms)} requests, p50 {statistics.median(ms):.1f} ms, "
            f"p99 {ms[min(len(ms) - 1, int(0.99 * len(ms)))]:.1f} ms, max {ms[-1]:.1f} ms"
        )
        # The balancer kept at most PER_ADDRESS of them ...
        wait_for(
            lambda: len(still_open(flood)) <= PER_ADDRESS,
            timeout=30,
            what=f"the balancer to hold at most {PER_ADDRESS} connections of one address",
        )
        # ... and closes those once `timeout http-request` has passed, trickle or not.
        wait_for(
            lambda: not still_open(flood),
            timeout=60,
            what="the balancer to close the slow connections (timeout http-request)",
        )
    finally:
        stop.set()
        if trickler.is_alive():
            trickler.join(10)
        for s in flood:
            s.close()
        balancer.stop()
        server.kill()
        if restore is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, restore)
