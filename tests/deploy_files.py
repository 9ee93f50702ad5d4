"""deploy/'s files as the tests read them: the Dockerfile's instructions, compose.yaml (and
its `${VAR}` references, filled in from an `.env` as `docker compose` does), and the
shell commands of README.md's ```bash blocks.

tests/integration/test_deploy.py checks the files against each other;
tests/integration/test_compose_topology.py runs what they say.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def dockerfile(deploy: Path = DEPLOY) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (deploy / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage(deploy: Path = DEPLOY) -> dict[str, str]:
    """{INSTRUCTION: arguments} of the Dockerfile's last stage (the image that runs)."""
    steps = dockerfile(deploy)
    last = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return dict(steps[last:])


def healthcheck_command(arguments: str) -> list[str]:
    """The exec-form command of a Dockerfile HEALTHCHECK's arguments (`--interval=... CMD [...]`)."""
    _, _, command = arguments.partition(" CMD ")
    parsed = yaml.safe_load(command)  # a JSON list
    assert isinstance(parsed, list), f"HEALTHCHECK {arguments!r}: not an exec-form CMD [...]"
    return [str(a) for a in parsed]


def compose(deploy: Path = DEPLOY) -> dict:
    return yaml.safe_load((deploy / "compose.yaml").read_text())


def dotenv(path: Path) -> dict[str, str]:
    """NAME=value lines of an .env file (`docker compose` reads deploy/.env)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            out[name.strip()] = value.strip()
    return out


_REFERENCE = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """A compose value with its `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
    `${VAR:?error}`, `${VAR?error}`, `$VAR` and `$$` filled in from `env`, as `docker
    compose` does (in lists and mappings too); an unset required one is an AssertionError
    with compose's error text."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def fill(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3)
        have = env.get(name)
        unset = have is None or (op is not None and op.startswith(":") and have == "")
        if op in ("-", ":-"):
            return arg if unset else have
        if op in ("?", ":?"):
            assert not unset, f"compose: {name}: {arg}"
        return have or ""

    return _REFERENCE.sub(fill, value)


def readme_commands(deploy: Path = DEPLOY) -> list[str]:
    """The shell commands of README.md's ```bash blocks, in order, one per line (a line
    ending in a backslash joined with the next), comments and blank lines left out."""
    text = (deploy / "README.md").read_text()
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```$", text, re.M | re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(line.strip())
    return commands
