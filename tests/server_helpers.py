"""Helpers for the server tests: a real server on a free port, tokens, messages."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from dask_analytics_lab.messages import code_hash
from dask_analytics_lab.server.app import make_app, make_server, ssl_context
from dask_analytics_lab.server.tokens import new_token, token_hash
from dask_analytics_lab.store import open_store
from dask_analytics_lab.store.team import TeamStore

from .factories import Cluster as _StoreCluster
from .factories import group, tree  # noqa: F401  (re-exported for the server tests)

CODE_KEY = "p2Yq8P0bYH2xq5Qy0eKQ0jv3wqvN0mDq2v6e7Y2c0mE="  # a Fernet key for the tests
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerThread:
    """The real tornado app on 127.0.0.1:<free port>, on its own loop in a thread."""

    def __init__(
        self,
        settings: dict,
        *,
        certfile: str | None = None,
        keyfile: str | None = None,
        port: int | None = None,
    ):
        self.app = make_app({"code_key": CODE_KEY, **settings})
        self.ctx = self.app.dal_context
        self.port = port or free_port()
        self._tls = ssl_context(certfile, keyfile)
        scheme = "https" if self._tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            server = make_server(self.app, self._tls)  # the limits `dask-analytics server` has
            server.listen(self.port, "127.0.0.1")
            self._ready.set()
            await self._stop.wait()
            server.stop()
            await server.close_all_connections()

        asyncio.run(main())

    def start(self) -> ServerThread:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self.ctx.close()

    def token(self, account: str, user: str = "ann", expires: float | None = None) -> str:
        token_id, token = new_token()
        self.ctx.team.add_token(
            token_id=token_id,
            token_hash=token_hash(token),
            account=account,
            user=user,
            expires=expires,
        )
        return token

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def report_server(store_url: str, **settings: Any) -> ServerThread:
    """A server whose report origin (report_url, where uploaded report HTML is served) is
    another name of it: ServerThread listens on 127.0.0.1, the report origin is
    localhost on the same port."""
    port = free_port()
    return ServerThread(
        {"store_url": store_url, "report_url": f"http://localhost:{port}", **settings}, port=port
    )


def on_report_origin(server: ServerThread, url: str) -> str:
    """A report link of the server, on its report origin."""
    return url.replace(server.url, f"http://localhost:{server.port}", 1)


def request(
    url: str,
    *,
    method: str = "GET",
    token: str | None = None,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict | None = None,
    gzipped: bool = True,
    context: Any = None,
) -> tuple[int, Any, dict]:
    """(status, parsed JSON or text, headers) of one HTTP call; never raises on 4xx/5xx."""
    hdrs = dict(headers or {})
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        if gzipped:
            data = gzip.compress(data)
            hdrs.setdefault("Content-Encoding", "gzip")
        hdrs.setdefault("Content-Type", "application/json")
    if token:
        hdrs["Authorization"] = f"token {token}"
    req = urllib.request.Request(url, data=data, headers=hdrs, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as r:
            status, payload, rh = r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        status, payload, rh = e.code, e.read(), dict(e.headers)
    text = payload.decode("utf-8", "replace")
    try:
        return status, json.loads(text), rh
    except ValueError:
        return status, text, rh


class Cluster(_StoreCluster):
    """The store tests' message maker, with code hashes the server accepts."""

    def code(self, h: str | None = None, text: str = "x.sum().compute()") -> dict:  # type: ignore[override]
        filename = "/home/ann/nb.py"
        return self.msg(
            "code",
            {
                "hash": code_hash(filename, text),
                "text": text,
                "filename": filename,
                "lineno_frame": 12,
                "lineno_relative": 3,
            },
        )


def full_cluster(
    account: str, *, name: str = "LocalCluster-1", user: str = "ann"
) -> tuple[Cluster, list[dict]]:
    """One cluster's messages of every kind: (maker, messages)."""
    c = Cluster(account=account)
    code = c.code(text=f"# {account}'s secret code\nx.sum().compute()\n")
    comp = f"comp-{c.id}"
    msgs = [
        c.cluster(name=name, user=user),
        c.sample(),
        code,
        c.computation(comp, code=[code["data"]["hash"]]),
        c.exception(comp, "sum-aggregate"),
        c.event(),
        c.profile(comp, tree("main", "work")),
        c.profile(None, tree("main")),
        c.gpu(n=1),
    ]
    return c, msgs


def add_token(url: str, account: str, user: str = "ann") -> str:
    """A new token of `account`, made in the store at `url`."""
    store = open_store(url)
    try:
        token_id, token = new_token()
        TeamStore(store).add_token(
            token_id=token_id, token_hash=token_hash(token), account=account, user=user
        )
        return token
    finally:
        store.close()


def make_tokens(store_url: str, n: int) -> list[str]:
    """n tokens of account "load" (users user0, user1 ...), made in the store."""
    store = open_store(store_url)
    team = TeamStore(store)
    tokens = []
    for i in range(n):
        token_id, token = new_token()
        team.add_token(
            token_id=token_id, token_hash=token_hash(token), account="load", user=f"user{i}"
        )
        tokens.append(token)
    store.close()
    return tokens


# --- a server in its own process, for the load and fault tests ---------------------
class ServerProcess:
    """`python -m dask_analytics_lab.server server` on a port; start() and kill() as often as needed.

    session_file: the login session secret; replicas of one database share one."""

    def __init__(
        self, db: str, port: int, extra: list[str] | None = None, session_file: Path | None = None
    ):
        # The code key in the environment, not argv (where `ps` shows it).
        import tempfile

        self.session_file = (
            session_file or Path(tempfile.mkdtemp(prefix="dal-session-")) / "session.secret"
        )
        self.cmd = [
            sys.executable,
            "-m",
            "dask_analytics_lab.server",
            "server",
            "--db",
            db,
            "--port",
            str(port),
            "--session-secret-file",
            str(self.session_file),
            *(extra or []),
        ]
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []  # what it printed, its log included

    def move(self, port: int) -> None:
        """Listen on `port` from the next spawn() (another process took the first)."""
        self.cmd[self.cmd.index("--port") + 1] = str(port)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def spawn(self) -> ServerProcess:
        """Start the process without waiting for it (several at once: then wait_ready())."""
        self.output = []
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "DASK_ANALYTICS_CODE_KEY": CODE_KEY},
        )
        return self

    def wait_ready(self, timeout: float = 60) -> ServerProcess:
        proc = self.proc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            self.output.append(line)
            if not line and proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {proc.returncode}: {''.join(self.output)[-2000:]}"
                )
            if "dask-analytics server at" in line:
                break
        else:
            raise RuntimeError(
                f"server not listening after {timeout} s: {''.join(self.output)[-2000:]}"
            )
        # Keep draining its output so the pipe never fills and blocks it.
        threading.Thread(target=lambda: self.output.extend(proc.stdout), daemon=True).start()
        return self

    def start(self) -> ServerProcess:
        return self.spawn().wait_ready()

    def kill(self) -> None:
        """SIGKILL: no goodbye, possibly in the middle of a request."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill()


# --- the login form, as a browser fills it in ------------------------------------------
def browser() -> tuple[Any, Any]:
    """(opener keeping cookies, its cookie jar)."""
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar)), jar


def form_xsrf(opener: Any, url: str) -> str:
    """The _xsrf field of the login form at url (its cookie lands in the opener's jar)."""
    import re

    with opener.open(url) as r:
        page = r.read().decode()
    return re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)


def log_in(opener: Any, server_url: str, token: str, next_path: str = "/") -> Any:
    """Fill in and send the login form; the response (after its redirect)."""
    import urllib.parse

    xsrf = form_xsrf(opener, server_url + "/login")
    data = urllib.parse.urlencode({"token": token, "_xsrf": xsrf}).encode()
    return opener.open(server_url + "/login?next=" + urllib.parse.quote(next_path), data=data)


def self_signed(tmp_path: Path) -> tuple[str, str]:
    """(certificate file, key file) of a self-signed certificate for 127.0.0.1."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(certfile), str(keyfile)
