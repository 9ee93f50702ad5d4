"""A real load balancer for the tests: Debian's `haproxy` in front of server replicas.

    with Replicas(postgres_url, tmp_path, n=3) as r:   # 3 `dask-analytics server` processes
        request(r.url + "/api/whoami", token=r.token("A"))   # through HAProxy

HAProxy's configuration is written to a temporary directory; every port is a free one.
It checks each replica's /ready every CHECK_INTERVAL, balances requests round robin,
sends X-Forwarded-For (the replicas trust it from 127.0.0.1), and names the replica
that answered in an `X-Replica` response header (r0, r1, ...), so the tests can see
where each request landed.  A missing binary is an error, never a reason to skip: the
README's test command installs it.

HAProxy(backends, workdir, config=deploy_config) runs deploy/haproxy.cfg itself instead,
with only its addresses made local (tests/integration/test_deploy.py).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Protocol

from dask_analytics_lab.server.tokens import new_token, token_hash

from .server_helpers import ServerProcess, free_port
from .waiting import wait_for

HOW_TO_FIX = "run the README's test command, which installs Debian's haproxy package (apt-get install -y haproxy)"
CHECK_INTERVAL = "300ms"

CONFIG = """\
global
    maxconn 2000
    stats socket {sockets}/admin.sock mode 600 level admin

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout check 2s
    # A request whose connection to a replica fails is sent to another one.
    retries 2
    option redispatch

frontend api
    bind 127.0.0.1:{port}
    option forwardfor
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /ready ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    default-server check inter {check} fall 2 rise 1
    http-response set-header X-Replica %s
{servers}
"""


DEPLOY_CONFIG = Path(__file__).resolve().parent.parent / "deploy" / "haproxy.cfg"


def deploy_config(sockets: Path, port: int, servers: str) -> str:
    """deploy/haproxy.cfg as shipped, its addresses made local: the frontend's `bind :8765`
    lines on 127.0.0.1:port, the compose replicas' `server` lines replaced by `servers`,
    and an admin socket in `sockets` (for stats()).  Its timeouts, limits and checks stay."""
    text = DEPLOY_CONFIG.read_text()
    text, binds = re.subn(r"(?m)^(\s*bind\s+):8765\b", rf"\g<1>127.0.0.1:{port}", text)
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if re.match(r"\s*server\s", line)]
    assert binds and at, "deploy/haproxy.cfg: no `bind :8765` or `server` lines to adapt"
    lines[at[0] : at[-1] + 1] = servers.splitlines()
    g = lines.index("global")
    lines.insert(g + 1, f"    stats socket {sockets}/admin.sock mode 600 level admin")
    return "\n".join(lines) + "\n"


def own_config(sockets: Path, port: int, servers: str) -> str:
    """The tests' own configuration (CONFIG): round robin, fast checks, X-Replica."""
    return CONFIG.format(sockets=sockets, port=port, check=CHECK_INTERVAL, servers=servers)


class ConfigMaker(Protocol):
    def __call__(self, sockets: Path, port: int, servers: str) -> str: ...


class BalancerUnavailable(RuntimeError):
    """HAProxy could not be found or started; the text says why and what to do."""


class HAProxy:
    def __init__(
        self,
        backends: dict[str, int],
        workdir: Path,
        config: ConfigMaker = own_config,
        env: dict[str, str] | None = None,
    ):
        self.binary = shutil.which("haproxy") or (
            "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
        )
        if self.binary is None:
            raise BalancerUnavailable("haproxy not found; " + HOW_TO_FIX)
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        # deploy/haproxy.cfg serves HTTPS when TLS_CERT names a certificate; the tests'
        # own environment never sets it.
        self.env = {**os.environ, "TLS_CERT": "", **(env or {})}
        self._servers = "\n".join(
            f"    server {name} 127.0.0.1:{port}" for name, port in backends.items()
        )
        self._make_config = config
        self.config = self.dir / "haproxy.cfg"
        # A unix socket's path has at most ~100 bytes: a test's folder (deeper still under
        # pytest-xdist's per-worker folders) can be longer, so the admin socket gets a
        # short folder of its own.
        self.sockets = Path(tempfile.mkdtemp(prefix="dal-ha-"))
        self._on(free_port())
        self.proc: subprocess.Popen | None = None
        self.log = self.dir / "haproxy.log"

    def _on(self, port: int) -> None:
        self.port = port
        scheme = "https" if self.env["TLS_CERT"] else "http"
        self.url = f"{scheme}://127.0.0.1:{port}"
        self.config.write_text(self._make_config(self.sockets, port, self._servers))

    def start(self) -> HAProxy:
        check = subprocess.run(
            [self.binary, "-c", "-f", str(self.config)],
            capture_output=True,
            text=True,
            env=self.env,
        )
        if check.returncode:
            raise BalancerUnavailable(
                f"haproxy refused its configuration:\n{check.stdout}{check.stderr}"
            )
        for _ in range(3):
            with open(self.log, "w") as log:
                self.proc = subprocess.Popen(
                    [self.binary, "-db", "-f", str(self.config)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                )
            proc = self.proc

            def listening() -> bool | str:
                if proc.poll() is not None:
                    return "exited"
                # Its admin socket too: something else may answer on a port it lost.
                if not (self.sockets / "admin.sock").exists():
                    return False
                with socket.socket() as s:
                    return s.connect_ex(("127.0.0.1", self.port)) == 0

            if wait_for(listening, timeout=30, what="haproxy to listen") is True:
                return self
            said = self.log.read_text()
            if "cannot bind" not in said and "Address already in use" not in said:
                break
            # Another test process took the free port between its choice and the bind.
            self._on(free_port())
        raise BalancerUnavailable(f"haproxy exited with {proc.returncode}: {said[-2000:]}")

    def stats(self) -> dict[str, dict]:
        """HAProxy's `show stat` rows of the replicas' backend, by server name (and "BACKEND")."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(self.sockets / "admin.sock"))
            s.sendall(b"show stat\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        rows = csv.DictReader(io.StringIO(data.decode().lstrip("# ")))
        return {r["svname"]: r for r in rows if r["pxname"] == "replicas"}

    def states(self) -> dict[str, str]:
        """{server name: "UP", "DOWN", ...} as HAProxy's health checks see them."""
        return {name: r["status"] for name, r in self.stats().items() if name != "BACKEND"}

    def wait_up(self, names: list[str], timeout: float = 60) -> None:
        wait_for(
            lambda: all(self.states().get(n) == "UP" for n in names),
            timeout=timeout,
            what=f"haproxy to see {names} up",
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        shutil.rmtree(self.sockets, ignore_errors=True)


class Replicas:
    """n `dask-analytics server` processes on one database (started at once), sharing
    the code key and the login session secret as replicas must, behind HAProxy."""

    def __init__(self, db: str, workdir: Path, n: int = 3, extra: list[str] | None = None):
        """extra: more `dask-analytics server` options, the same for every replica."""
        self.db = db
        session = workdir / "session.secret"
        self.servers = {
            f"r{i}": ServerProcess(
                db,
                free_port(),
                ["--forwarded-allow-ips", "127.0.0.1", *(extra or [])],
                session_file=session,
            )
            for i in range(n)
        }
        self.workdir = workdir
        self.balancer = HAProxy(
            {name: s.port for name, s in self.servers.items()}, workdir / "haproxy"
        )
        self.url = self.balancer.url

    def start(self) -> Replicas:
        try:
            for s in self.servers.values():
                s.spawn()
            moved = False
            for s in self.servers.values():
                for attempt in range(3):
                    try:
                        s.wait_ready()
                        break
                    except RuntimeError as e:
                        # Another process took the free port between its probe and the bind.
                        if "Address already in use" not in str(e) or attempt == 2:
                            raise
                        s.move(free_port())
                        s.spawn()
                        moved = True
            if moved:
                self.balancer = HAProxy(
                    {name: s.port for name, s in self.servers.items()}, self.workdir / "haproxy"
                )
                self.url = self.balancer.url
            self.balancer.start()
            self.balancer.wait_up(list(self.servers))
        except BaseException:
            self.stop()
            raise
        return self

    def token(self, account: str, user: str = "ann") -> str:
        from dask_analytics_lab.store import open_store
        from dask_analytics_lab.store.team import TeamStore

        token_id, token = new_token()
        with open_store(self.db) as store:
            TeamStore(store).add_token(
                token_id=token_id, token_hash=token_hash(token), account=account, user=user
            )
        return token

    def stop(self) -> None:
        self.balancer.stop()
        for s in self.servers.values():
            if s.proc is not None and s.proc.poll() is None:
                s.proc.terminate()  # a clean stop, unlike kill(): its connections to PostgreSQL close
                try:
                    s.proc.wait(15)
                except subprocess.TimeoutExpired:
                    s.kill()
            s.proc = None

    def __enter__(self) -> Replicas:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
