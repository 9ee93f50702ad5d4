"""Issue 41, item 4: deploy/ works as written.  deploy/README.md's commands, run as written
in a copy of deploy/, bring up compose.yaml's topology -- PostgreSQL, three replicas of
the image, HAProxy -- as the same processes on this machine, and then: the token the
README's command prints is accepted by every replica (through HAProxy and directly),
/metrics answers Prometheus' token on every replica and refuses a scrape without it,
retention is on, PostgreSQL keeps its durable settings, and every health check compose
and the Dockerfile name passes.

There is no Docker daemon here (nor an image registry), so the README's commands are
mapped onto local processes.  Only these transformations are made; every other command
is run as written, by `bash -e -o pipefail -c` in the copy of deploy/, with the
virtualenv's bin/ first on PATH (its `python3`, `dask-analytics`):

- `sudo chown OWNER ` becomes `chown <this test's uid> `: the files go to the user the
  local processes run as, as the README gives them to the images' users; the rest of the
  line (its paths, its chmod) runs as written.
- `docker compose up ...` starts compose.yaml's services here (below), each once what it
  `depends_on` is healthy, and waits for every health check to pass (`--wait`).
- `docker compose exec SERVICE CMD` runs CMD in SERVICE's environment (compose's
  `environment`, filled in from the .env the README made) with the addresses below.
- any other `docker` command, or a `sudo` left over, fails the test: it has no mapping.

compose.yaml's services, as local processes:

- postgres: tests/postgres_server.py's PostgreSQL with exactly the `-c` settings of the
  service's `command` (it has none: PostgreSQL's defaults), its POSTGRES_USER made as the
  image makes it (a superuser with POSTGRES_PASSWORD, which scram-sha-256 checks over
  TCP, as the image's pg_hba.conf does) and POSTGRES_DB.
- server-N: the Dockerfile's ENTRYPOINT followed by compose's `command`, with `--host`
  127.0.0.1 and `--port` a free port; environment: compose's (PGPASSWORD from .env), PATH,
  and a HOME of its own (the image's user's home).
- haproxy: deploy/haproxy.cfg through tests/balancer.py's deploy_config (its bind on
  127.0.0.1:<free port>, its `server` lines the replicas' local ports, an admin socket for
  the test to read HAProxy's per-replica counters), TLS_CERT from compose's environment.
- addresses, in commands and arguments alike: `postgres:5432` is the local PostgreSQL;
  `/run/secrets/NAME` the file compose's top-level `secrets: NAME: file:` names; a volume's
  path in a container the folder compose mounts there; HAProxy's compose address (the
  replicas' `--forwarded-allow-ips`) 127.0.0.1.
- health checks: each as written, with `127.0.0.1:<container port>` (or `/dev/tcp`'s
  `127.0.0.1/<port>`) the local port, `python` this interpreter, `pg_isready` PostgreSQL's
  own and PGPORT the local PostgreSQL's port (5432, its default, in the container).
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import shlex
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dask_analytics_lab.config import parse_age

from ..balancer import HAProxy, deploy_config
from ..deploy_files import (
    DEPLOY,
    compose,
    dotenv,
    final_stage,
    healthcheck_command,
    interpolate,
    readme_commands,
)
from ..postgres_server import PostgresServer
from ..server_helpers import Cluster, free_port
from ..waiting import wait_for

pytestmark = pytest.mark.postgres  # PostgreSQL and HAProxy, as the README's test command installs

BIN = Path(sys.executable).parent  # the virtualenv's: `python3`, `dask-analytics`
READY_LINE = "dask-analytics server at"
ACCOUNT_USER = re.compile(r"--account (\S+) --user (\S+)")


def run(command: str, *, cwd: Path, env: dict[str, str], what: str) -> str:
    """One shell command; its stdout, or a failure quoting what it said."""
    r = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"{what}: `{command}` exited {r.returncode}:\n{r.stdout}{r.stderr}"
    return r.stdout + ("\n" + r.stderr if r.stderr else "")


class Replica:
    """One `server-N`: its argv (a function of its port), environment and log."""

    def __init__(self, name: str, argv: Any, env: dict[str, str], home: Path, log: Path):
        self.name, self._argv, self.env, self.home, self.log = name, argv, env, home, log
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.tries = 0

    def spawn(self) -> None:
        self.port = free_port()
        self.tries += 1
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                self._argv(self.port),
                cwd=self.home,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def said(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def ready(self) -> bool:
        said = self.said()
        if READY_LINE in said:
            return True
        if self.proc is not None and self.proc.poll() is not None:
            # Another process took the free port between its choice and the bind.
            if "Address already in use" in said and self.tries < 3:
                self.spawn()
                return False
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{said[-3000:]}")
        return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Topology:
    """compose.yaml's services as local processes, from a copy of deploy/ (module docstring)."""

    def __init__(self, deploy: Path, work: Path):
        self.deploy, self.work = deploy, work
        self.spec = compose(deploy)
        self.services = self.spec["services"]
        self.pg: PostgresServer | None = None
        self.replicas: dict[str, Replica] = {}
        self.balancer: HAProxy | None = None
        self.host_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        self.haproxy_address = self.services["haproxy"]["networks"]["backend"]["ipv4_address"]

    # --- what compose reads ---------------------------------------------------------
    def dotenv(self) -> dict[str, str]:
        path = self.deploy / ".env"
        return dotenv(path) if path.exists() else {}

    def environment(self, service: str) -> dict[str, str]:
        env = self.services[service].get("environment") or {}
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        return {k: str(v) for k, v in interpolate(env, self.dotenv()).items()}

    def replica_names(self) -> list[str]:
        return [
            name
            for name, s in self.services.items()
            if s.get("build", {}).get("dockerfile") == "deploy/Dockerfile"
        ]

    def local(self, text: str) -> str:
        """compose's addresses in `text` made local (module docstring)."""
        assert self.pg is not None, "a command names a service before `docker compose up`"
        text = text.replace("postgres:5432", f"127.0.0.1:{self.pg.port}")
        for name, secret in self.spec.get("secrets", {}).items():
            text = text.replace(
                f"/run/secrets/{name}", str((self.deploy / secret["file"]).resolve())
            )
        return text.replace(self.haproxy_address, "127.0.0.1")

    def volume_path(self, service: str, path: str) -> str:
        """`path` in the service's container as the folder compose mounts there."""
        for volume in self.services[service].get("volumes", []):
            host, inside = volume.split(":")[:2]
            if host.startswith(".") and (path == inside or path.startswith(inside + "/")):
                return str((self.deploy / host).resolve()) + path[len(inside) :]
        return path

    # --- the README's commands -------------------------------------------------------
    def command(self, line: str) -> str:
        """Run one README command (mapped as the module docstring says); its output."""
        if line.startswith("docker compose up"):
            self.up()
            return ""
        m = re.match(r"docker compose exec (\S+) (.+)", line)
        if m:
            service, rest = m.groups()
            assert service in self.replicas, f"`{line}`: no running replica {service} to exec in"
            env = self.replicas[service].env
            return run(self.local(rest), cwd=self.work, env=env, what=f"exec {service}")
        line = re.sub(r"\bsudo chown \S+ ", f"chown {os.getuid()} ", line)
        assert not re.match(r"(sudo|docker)\b", line) and " sudo " not in line, (
            f"deploy/README.md: no local mapping for `{line}` (see this test's docstring)"
        )
        return run(line, cwd=self.deploy, env=self.host_env, what="deploy/README.md")

    # --- docker compose up --wait ----------------------------------------------------
    def up(self) -> None:
        self.start_postgres()
        wait_for(lambda: self.healthy("postgres"), timeout=60, what="postgres's health check")
        names = self.replica_names()
        for name in names:
            assert self.services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
            self.replicas[name] = self.replica(name)
            self.replicas[name].spawn()
        for r in self.replicas.values():
            wait_for(r.ready, timeout=120, what=f"{r.name} to listen")
        for name in names:
            wait_for(lambda: self.healthy(name), timeout=60, what=f"{name}'s HEALTHCHECK")
        self.start_haproxy()
        wait_for(lambda: self.healthy("haproxy"), timeout=60, what="haproxy's health check")

    def start_postgres(self) -> None:
        service = self.services["postgres"]
        command = service.get("command") or []
        if isinstance(command, str):
            command = shlex.split(command)
        if command[:1] == ["postgres"]:
            command = command[1:]
        settings = []
        while command:
            flag = command.pop(0)
            if flag == "-c":
                settings.append(command.pop(0))
            elif flag.startswith("-c"):
                settings.append(flag[2:])
            else:
                pytest.fail(f"compose.yaml's postgres command: {flag!r} has no local mapping")
        env = self.environment("postgres")
        user = env.get("POSTGRES_USER", "postgres")
        db = env.get("POSTGRES_DB", user)
        password = env["POSTGRES_PASSWORD"]
        self.pg = pg = PostgresServer(settings=settings).start()
        assert user != pg.user, "the test's superuser and POSTGRES_USER must differ"
        quoted = password.replace("'", "''")
        pg.admin(f"CREATE ROLE \"{user}\" LOGIN SUPERUSER PASSWORD '{quoted}'")
        pg.admin(f'CREATE DATABASE "{db}" OWNER "{user}"')
        # The image's pg_hba.conf: a password (scram-sha-256) over TCP.
        hba = pg.data / "pg_hba.conf"
        hba.write_text(f"host all {user} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        pg.admin("SELECT pg_reload_conf()")
        self.pg_login = {"user": user, "dbname": db, "password": password}

    def replica(self, name: str) -> Replica:
        stage = final_stage(self.deploy)
        entry = json.loads(stage["ENTRYPOINT"])
        command = [self.local(a) for a in self.services[name]["command"]]
        home = self.work / name
        home.mkdir()
        env = {"PATH": self.host_env["PATH"], "HOME": str(home), **self.environment(name)}

        def argv(port: int) -> list[str]:
            line = entry + command
            for flag, value in (("--host", "127.0.0.1"), ("--port", str(port))):
                line[line.index(flag) + 1] = value
            return [str(BIN / line[0]), *line[1:]]

        return Replica(name, argv, env, home, self.work / f"{name}.log")

    def start_haproxy(self) -> None:
        env = self.environment("haproxy")
        tls = {"TLS_CERT": self.volume_path("haproxy", env["TLS_CERT"])} if env["TLS_CERT"] else {}
        self.balancer = HAProxy(
            {name: r.port for name, r in self.replicas.items()},
            self.work / "haproxy",
            config=deploy_config,
            env=tls,
        )
        self.balancer.start()
        self.balancer.wait_up(list(self.replicas), timeout=60)

    # --- health checks, as written ----------------------------------------------------
    def health_command(self, service: str) -> tuple[list[str], dict[str, str], int]:
        """(argv, environment, local port) of the service's health check."""
        if service in self.replicas:
            argv = healthcheck_command(final_stage(self.deploy)["HEALTHCHECK"])
            return argv, self.replicas[service].env, self.replicas[service].port
        test = self.services[service]["healthcheck"]["test"]
        if isinstance(test, str):
            test = ["CMD-SHELL", test]
        kind, *argv = test
        if kind == "CMD-SHELL":
            argv = ["sh", "-c", *argv]
        else:
            assert kind == "CMD", test
        if service == "postgres":
            assert self.pg is not None
            return argv, {**self.host_env, "PGPORT": str(self.pg.port)}, self.pg.port
        assert service == "haproxy" and self.balancer is not None
        return argv, self.host_env, self.balancer.port

    def healthy(self, service: str) -> bool:
        argv, env, port = self.health_command(service)
        inside = "5432" if service == "postgres" else self.container_port(service)
        argv = [
            re.sub(rf"\b127\.0\.0\.1([:/]){inside}\b", rf"127.0.0.1\g<1>{port}", a) for a in argv
        ]
        if argv[0] == "python":
            argv[0] = sys.executable
        elif argv[0] == "pg_isready":
            assert self.pg is not None
            argv[0] = str(self.pg.bin_dir / "pg_isready")
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        return r.returncode == 0

    def container_port(self, service: str) -> str:
        if service in self.replicas:
            return final_stage(self.deploy)["EXPOSE"]
        return self.services[service]["ports"][0].split(":")[-1]

    def stop(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()
        for r in self.replicas.values():
            r.stop()
        if self.pg is not None:
            self.pg.stop()


# --- talking to HAProxy as a client of the README would -----------------------------
class _Named(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1, as to the certificate's host name (SNI, and its check)."""

    def __init__(self, name: str, port: int, context: ssl.SSLContext):
        super().__init__(name, port, context=context, timeout=30)
        self.tls = context

    def connect(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


def call(
    url: str,
    path: str,
    *,
    token: str | None = None,
    bearer: str | None = None,
    batch: list | None = None,
    tls: tuple[str, ssl.SSLContext] | None = None,
) -> tuple[int, str]:
    """(status, body) of a GET, or of a POST of `batch` (gzipped JSON, as the plugin sends)."""
    port = int(url.rsplit(":", 1)[1])
    conn: http.client.HTTPConnection = (
        _Named(tls[0], port, tls[1]) if tls else http.client.HTTPConnection("127.0.0.1", port, 30)
    )
    headers = {}
    if token:
        headers["Authorization"] = f"token {token}"
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    body = None
    if batch is not None:
        body = gzip.compress(json.dumps(batch).encode())
        headers |= {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    try:
        conn.request("POST" if batch is not None else "GET", path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def certificate_name(pem: Path) -> str:
    """The DNS name of the certificate's subjectAltName (the README's host name)."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(pem.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.DNSName)[0]


def test_the_deploy_readme_brings_up_compose_and_every_replica_serves_its_token(tmp_path):
    t0 = time.monotonic()
    deploy = tmp_path / "deploy"
    # What README.md makes, never what a developer may have made in the repository.
    shutil.copytree(DEPLOY, deploy, ignore=shutil.ignore_patterns("secrets", "certs", ".env"))
    work = tmp_path / "run"
    work.mkdir()
    commands = readme_commands(deploy)
    assert any(c.startswith("docker compose up") for c in commands), commands
    topology = Topology(deploy, work)
    outputs: dict[str, str] = {}
    try:
        for line in commands:
            outputs[line] = topology.command(line)
        assert topology.pg is not None and topology.balancer is not None
        replicas = topology.replicas
        assert sorted(replicas) == ["server-1", "server-2", "server-3"]

        # The secrets are the image's user's alone (the README's chmod).
        for f in (deploy / "secrets").iterdir():
            assert f.stat().st_mode & 0o077 == 0, f
        # PostgreSQL: the password of .env, over TCP; durable settings.
        login = {"host": "127.0.0.1", "port": topology.pg.port, **topology.pg_login}
        with psycopg.connect(**login) as conn:
            shown = {
                name: conn.execute(f"SHOW {name}").fetchone()[0]
                for name in ("fsync", "synchronous_commit", "full_page_writes")
            }
        assert shown == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(**{**login, "password": "not-" + login["password"]}).close()
        # Every health check passes, and HAProxy sees every replica ready (/ready).
        for service in ["postgres", *replicas, "haproxy"]:
            assert topology.healthy(service), service
        assert topology.balancer.states() == dict.fromkeys(replicas, "UP")

        # The README's token command: it wrote into the replicas' PostgreSQL database.
        token_line = next(c for c in commands if "dask-analytics token create" in c)
        said = outputs[token_line]
        token = said.split()[0]
        assert f"into postgresql://analytics@127.0.0.1:{topology.pg.port}/analytics" in said, said
        account, user = ACCOUNT_USER.search(token_line).groups()
        for r in replicas.values():
            status, body = call(r.url, "/api/whoami", token=token)
            assert status == 200, (r.name, status, body)
            assert json.loads(body)["whoami"]["account"] == account, body

        # Through HAProxy, as a cluster would reach it (HTTPS with the README's
        # certificate, its host name): a batch in, then reads until each replica answered.
        balancer = topology.balancer
        tls = None
        if balancer.url.startswith("https://"):
            crt = deploy / "certs" / "analytics.crt"
            tls = (certificate_name(crt), ssl.create_default_context(cafile=str(crt)))
        status, body = call(balancer.url, "/api/whoami", tls=tls)
        assert status == 401 and "dask-analytics token create --store" in body, (status, body)
        cluster = Cluster(account=account, t0=time.time())
        code = cluster.code(text="x.sum().compute()  # through the balancer\n")
        batch = [
            cluster.cluster(user=user),
            code,
            cluster.computation("comp-deploy", code=[code["data"]["hash"]]),
        ]
        status, body = call(balancer.url, "/api/ingest", token=token, batch=batch, tls=tls)
        assert status == 200, body

        def every_replica_answered() -> bool:
            status, body = call(balancer.url, "/api/whoami", token=token, tls=tls)
            assert status == 200, body
            stats = balancer.stats()
            return all(int(stats[name]["hrsp_2xx"] or 0) > 0 for name in replicas)

        wait_for(every_replica_answered, timeout=60, what="a 200 from each replica via HAProxy")
        # Every replica reads what one stored: one database, one code key.
        for r in replicas.values():
            status, body = call(r.url, "/api/computations/comp-deploy", token=token)
            assert status == 200, (r.name, body)
            assert "through the balancer" in json.loads(body)["computation"]["code"][0]["text"]

        # /metrics: Prometheus' token (secrets/metrics.token) on every replica, and
        # refused without it.
        metrics_token = (deploy / "secrets" / "metrics.token").read_text().strip()
        for r in replicas.values():
            status, body = call(r.url, "/metrics", bearer=metrics_token)
            assert status == 200 and "dask_analytics_ingest_batches" in body, (r.name, status)
            assert call(r.url, "/metrics")[0] in (401, 403), r.name
            assert call(r.url, "/metrics", bearer="x" + metrics_token)[0] in (401, 403)
            for path in ("/health", "/ready"):
                assert call(r.url, path)[0] == 200, (r.name, path)

        # Retention: compose's age, on every replica.
        argv = replicas["server-1"]._argv(0)
        assert "--retention" in argv, (
            f"compose.yaml: the replicas' command sets no --retention: {argv}"
        )
        age = parse_age(argv[argv.index("--retention") + 1], what="--retention")
        for r in replicas.values():
            assert (
                f"retention: clusters that ended over {age / 86400:.1f} days ago are deleted hourly"
                in r.said()
            ), r.said()[-2000:]
    finally:
        topology.stop()
    print(f"\nthe README's {len(commands)} commands and the checks: {time.monotonic() - t0:.1f} s")
