"""deploy/ (issue 22, item 6): the server's container file, the compose file for
PostgreSQL + HAProxy + 3 replicas and HAProxy's configuration, checked against each
other and against the server's real command-line options.  No container runtime is
needed: the files are parsed, and haproxy (Debian's, as the replica tests use) checks
its own configuration."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import click
import pytest
import yaml

from dask_analytics_lab.server.cli import server as server_command

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
PORT = "8765"


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


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
    assert opts["--db"].startswith("postgresql://") and "@postgres:" in opts["--db"]
    assert ":" not in opts["--db"].split("://")[1].split("@")[0]  # no password in argv
    for s in servers.values():
        assert s["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert set(s["secrets"]) == {"session_secret", "code_key"} <= set(spec["secrets"])
    assert opts["--session-secret-file"] == "/run/secrets/session_secret"
    assert opts["--code-key-file"] == "/run/secrets/code_key"
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
