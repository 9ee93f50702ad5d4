"""What the README promises about installing, Binder, a preloaded scheduler and the demo,
checked against what the project does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import dask
from distributed import Client

import dask_analytics_lab as dal
import dask_analytics_lab.demo as demo_module
from dask_analytics_lab.api import close_readers

from ..cluster_helpers import preloaded_scheduler
from ..waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def section(title: str) -> str:
    """A `## title` section of the README, its lines joined with spaces."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return " ".join(README[start : end if end > 0 else None].split())


# A log record at WARNING or above (Dask's format), a Python warning, or one of our hints.
NOISE = re.compile(
    r"^\S+ \S+ - [\w.]+ - (WARNING|ERROR|CRITICAL) - |\w+Warning: |^dask-analytics: "
)


def test_the_demo_says_no_warning(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "dask_analytics_lab.demo", "--store", str(tmp_path / "demo.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "DASK_TEMPORARY_DIRECTORY": str(tmp_path)},
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Recording cluster "), lines[:10]
    assert [line for line in lines if NOISE.search(line)] == []
    assert "10 tasks failed on purpose" in lines
    # Its failing helper is at module level, compute two calls down (run() from main()):
    # the row names the demo's file, the line and its source, not `<dynamic-code>`.
    demo = Path(demo_module.__file__)
    try:
        (row,) = dal.list_exceptions(limit=None, store=str(tmp_path / "demo.db"))
    finally:
        close_readers()
    line = 1 + demo.read_text().splitlines().index("        raise ValueError(FAILURE)")
    assert row["location"] == f"{demo}:{line} in _fails"
    assert f"demo.py:{line} in _fails" in out.stdout  # its table keeps the file and line
    assert row["traceback_text"].endswith(
        f'File "{demo}", line {line}, in _fails\n    raise ValueError(FAILURE)\n'
    )


def test_the_jupyter_section_gives_its_install_command():
    assert 'pip install "dask-analytics-lab[jupyter]"' in section("In Jupyter")
    assert "jupyter" in PYPROJECT["project"]["optional-dependencies"]


def test_the_readme_says_which_install_needs_node():
    text = section("In Jupyter")
    assert "The wheel and the sdist carry the built JavaScript: installing them needs no Node" in (
        text
    )
    assert (
        "Installing from a git clone" in text and "Node 20 and npm must be on the machine" in text
    )
    # What makes it so: the built assets are packed into both, and a clone builds them.
    build = PYPROJECT["tool"]["hatch"]["build"]
    for target in ("wheel", "sdist"):
        assert "dask_analytics_lab/labextension/" in build["targets"][target]["artifacts"]
    assert (
        build["hooks"]["jupyter-builder"]["build-function"] == "hatch_jupyter_builder.npm_builder"
    )


def test_the_lock_is_what_npm_install_resolves(tmp_path):
    """A clone's build runs `npm install` (hatch-jupyter-builder): with a lock that is not
    what npm resolves from package.json, that rewrites the lock and the clone is dirty."""
    npm = shutil.which("npm")
    assert npm, "npm not found: install Node 20 and npm (README: Set-up on a fresh machine)"
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / name, tmp_path / name)
    done = subprocess.run(
        [npm, "install", "--package-lock-only", "--ignore-scripts", "--prefer-offline"]
        + ["--no-audit", "--no-fund"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "package-lock.json").read_text() == (
        ROOT / "package-lock.json"
    ).read_text(), "package-lock.json is not what npm install resolves: run npm install, commit it"


def test_the_binder_link():
    (owner_repo, path) = re.search(
        r"`https://mybinder\.org/v2/gh/(\S+?)/HEAD\?urlpath=lab/tree/(\S+?)`", README
    ).groups()
    assert (ROOT / path).is_file()
    assert "nodejs" in (ROOT / "binder" / "environment.yml").read_text()
    assert (
        'pip install --no-cache-dir ".[jupyter,dataframe]"'
        in (ROOT / "binder" / "postBuild").read_text()
    )
    urls = PYPROJECT["project"].get("urls", {}).values()
    github = [u.split("github.com/", 1)[1] for u in urls if "github.com/" in u]
    # With the repository named in pyproject.toml, the link is that repository's.
    expected = github[0].removesuffix(".git").strip("/") if github else "<owner>/<repo>"
    assert owner_repo == expected


def test_a_preloaded_scheduler_records_code_only_from_a_client_that_registers(tmp_path, sqlite_url):
    assert "A client that neither registers nor sets it records no code" in section("Quick start")
    # register() sets nframes in this process's config: restored when the block ends.
    with dask.config.set({"distributed.diagnostics.computations.nframes": 0}):
        with preloaded_scheduler(tmp_path, sqlite_url) as (_, scheduler_file):
            with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
                client.wait_for_workers(1, timeout=60)
                assert client.submit(sum, [1, 2], pure=False).result() == 3
                cluster_id = dal.flush(client)["cluster_id"]
                dal.register(client, store=sqlite_url)
                assert client.submit(sum, [3, 4], pure=False).result() == 7
                dal.flush(client)
    try:
        computations = wait_for(
            lambda: len(c := dal.list_computations(cluster_id, store=sqlite_url)) == 2 and c,
            what="both computations in the store",
        )
        code = [
            dal.get_computation(c["computation_id"], store=sqlite_url)["code"]
            for c in reversed(computations)  # oldest first
        ]
        assert code[0] == [] and "client.submit(sum, [3, 4]" in code[1][0]["text"]
    finally:
        close_readers()
