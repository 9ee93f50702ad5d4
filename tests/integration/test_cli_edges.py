"""The rough edges a new user meets in `dask analytics ...` (issue 23, item 5): --store
on either side of the subcommand, short ids, no store made by a read, one line and exit
status 2 for every expected error, durations as the views print them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dask.config
import pytest

from dask_analytics_lab import cli
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.figures import duration, short_location
from dask_analytics_lab.store import open_store

from ..factories import Cluster, group
from ..server_helpers import ServerThread, free_port

ROOT = Path(__file__).resolve().parents[2]

# Dask's ids: Scheduler-<uuid4> for a cluster, a uuid4 for a computation.  Two computations
# share their first 8 characters, as git's short ids sometimes do.
CLUSTER = "Scheduler-5c0ffee1-7d2a-4b8e-9f00-3a1b2c3d4e5f"
OTHER_CLUSTER = "Scheduler-5c0ffee2-0000-4b8e-9f00-3a1b2c3d4e5f"
FIRST = "0b5e1c7a-1111-4a2b-8c3d-000000000001"
TWIN = "0b5e1c7a-2222-4a2b-8c3d-000000000002"
LONE = "9d3f2e10-3333-4a2b-8c3d-000000000003"


@pytest.fixture
def store_file(tmp_path):
    """A SQLite store with two clusters and three runs of one code (two of them share a
    short id): its URL."""
    url = "sqlite:///" + str(tmp_path / "edges.db")
    with open_store(url) as store:
        c, other = Cluster(CLUSTER), Cluster(OTHER_CLUSTER)
        groups = [group("load", n_tasks=10), group("sum", n_tasks=2)]
        store.ingest(
            [
                c.cluster(),
                other.cluster(name="other"),
                c.computation(FIRST, groups=groups, fingerprint="fp", stop=c.t + 75),
                c.computation(TWIN, groups=groups, fingerprint="fp", stop=c.t + 239.6),
                c.computation(LONE, state="erred", groups=groups, fingerprint="fp"),
                c.exception(LONE, "load"),
                other.computation("0123456789-other"),
            ]
        )
    yield url
    close_readers()


def main(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, out: str, err: str) -> str:
    """An expected error: exit status 2, one line on stderr, no traceback."""
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_store_before_or_after_the_subcommand(store_file, capsys):
    before = main(capsys, "--store", store_file, "computations")
    after = main(capsys, "computations", "--store", store_file)
    assert before[0] == after[0] == 0 and before[1] == after[1] and LONE[:8] in after[1]
    assert main(capsys, "where", "--store", store_file)[1].strip() == store_file
    before = main(capsys, "--store", store_file, "explain", LONE[:8], "--json")
    after = main(capsys, "explain", LONE[:8], "--json", "--store", store_file)
    assert before[0] == after[0] == 0 and before[1] == after[1]


def test_lists_print_short_ids_that_name_one_computation(store_file, capsys):
    code, out, _ = main(capsys, "--store", store_file, "computations")
    ids = {line.split()[0] for line in out.splitlines()[2:]}
    # 8 characters, longer where two would read the same (git's rule).
    assert {LONE[:8], FIRST[:10], TWIN[:10], "01234567"} == ids, out
    code, out, _ = main(capsys, "--store", store_file, "clusters")
    assert CLUSTER[:18] in out and CLUSTER not in out


def test_a_unique_prefix_is_taken_wherever_an_id_is(store_file, capsys):
    code, out, _ = main(capsys, "--store", store_file, "computations", "--cluster", CLUSTER[:18])
    assert code == 0 and "01234567" not in out and LONE[:8] in out
    code, out, _ = main(capsys, "--store", store_file, "exceptions", "--computation", LONE[:8])
    assert code == 0 and "ValueError" in out
    code, out, _ = main(capsys, "--store", store_file, "runs", FIRST[:10])
    assert code == 0 and len(out.splitlines()) == 2 + 3
    code, out, _ = main(
        capsys, "--store", store_file, "compare", TWIN[:10], "--baseline", FIRST[:12], "--json"
    )
    result = json.loads(out)
    assert (result["computation_id"], result["baseline_id"]) == (TWIN, FIRST)


def test_an_ambiguous_or_too_short_prefix_is_a_clear_error(store_file, capsys):
    err = one_line_error(*main(capsys, "--store", store_file, "runs", FIRST[:8]))
    assert "ambiguous" in err and FIRST in err and TWIN in err and LONE not in err
    err = one_line_error(*main(capsys, "--store", store_file, "runs", LONE[:7]))
    assert f"unknown computation id {LONE[:7]!r}" in err


def test_reading_commands_never_create_a_store(tmp_path, capsys):
    missing = tmp_path / "typo" / "analytics.db"
    for args in (
        ["clusters"],
        ["computations"],
        ["exceptions"],
        ["events"],
        ["costs"],
        ["runs", LONE],
        ["compare", LONE],
        ["explain", LONE],
        ["export"],
    ):
        err = one_line_error(*main(capsys, "--store", str(missing), *args))
        assert str(missing) in err and "dask analytics where" in err, (args, err)
    assert not missing.parent.exists()


def test_durations_read_as_in_the_views(store_file, capsys):
    code, out, _ = main(capsys, "--store", store_file, "computations")
    took = {
        ident: line
        for line in out.splitlines()[2:]
        for ident in (FIRST, TWIN)
        if ident.startswith(line.split()[0])
    }
    assert "1m 15s" in took[FIRST] and "4m 00s" in took[TWIN], out


def in_the_views(tmp_path, module: str, function: str, values: list) -> list:
    """`function` of js/common/`module`.ts (the views' own) applied to each value."""
    bundle = tmp_path / f"{module}.mjs"
    subprocess.run(
        [
            str(ROOT / "node_modules" / ".bin" / "esbuild"),
            str(ROOT / "js" / "common" / f"{module}.ts"),
            "--bundle",
            "--format=esm",
            f"--outfile={bundle}",
            "--log-level=error",
        ],
        check=True,
        timeout=120,
    )
    script = (
        f"import {{ {function} }} from {json.dumps(bundle.as_uri())};"
        f"console.log(JSON.stringify({json.dumps(values)}.map((v) => {function}(v))))"
    )
    out = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)


def test_the_findings_and_the_views_place_a_failure_alike(tmp_path):
    """figures.short_location (the failures finding's evidence) against
    js/common/failures.ts `shortLocation` (the failures tables)."""
    values = [
        "/var/folders/x7/T/ipykernel_4242/3141592653.py:2 in load",
        "C:\\Users\\ann\\AppData\\Local\\Temp\\ipykernel_77\\12.py:9 in f",
        "/home/ann/project/etl.py:42 in parse",
        "etl.py:3 in clean",
        "a/b.py:1 in <lambda>",
        "/srv/x.py",
        "",
        None,
    ]
    assert [short_location(v) for v in values] == in_the_views(
        tmp_path, "failures", "shortLocation", values
    )


def test_the_cli_and_the_views_format_a_duration_alike(tmp_path):
    """figures.duration against js/common/format.ts `duration`, the one the views use."""
    values = [
        0,
        4e-7,
        0.0004,
        0.0125,
        0.5,
        0.9996,
        1,
        1.234,
        9.999,
        12.34,
        59.94,
        59.96,
        75,
        239.6,
        599.5,
        3599.4,
        3600,
        5400,
        86399,
        172799,
        172800,
        3 * 86400 + 4 * 3600 + 59,
        -1,
        1e7,
    ]
    assert [duration(v) for v in values] == in_the_views(tmp_path, "format", "duration", values)


def test_no_traceback_for_a_missing_driver(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where psycopg is not installed
    err = one_line_error(
        *main(capsys, "--store", "postgresql://ann@127.0.0.1:1/analytics", "clusters")
    )
    assert "pip install 'dask-analytics-lab[postgresql]'" in err


def test_no_traceback_for_an_unreachable_server(capsys):
    err = one_line_error(*main(capsys, "--store", f"http://127.0.0.1:{free_port()}", "clusters"))
    assert "cannot reach the analytics server" in err


@pytest.fixture
def team_server(store_file):
    with ServerThread({"store_url": store_file, "auth_failures": 10_000}) as server:
        yield server
    close_readers()


@pytest.mark.parametrize("token", [None, "dal_nosuchid_nosuchsecret"])
def test_no_traceback_for_a_missing_or_refused_token(team_server, token):
    env = {**os.environ, "DASK_ANALYTICS__TOKEN": token or ""}
    if token is None:
        env.pop("DASK_ANALYTICS__TOKEN")
    out = subprocess.run(
        [sys.executable, "-m", "dask_analytics_lab.cli", "--store", team_server.url, "clusters"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    err = one_line_error(out.returncode, out.stdout, out.stderr)
    assert "analytics.token" in err and "dask analytics token create" in err


def test_a_team_server_takes_short_ids_of_its_callers_account_only(team_server, capsys):
    with dask.config.set({"analytics.token": team_server.token("default")}):
        code, out, _ = main(capsys, "--store", team_server.url, "runs", LONE[:8])
        assert code == 0 and len(out.splitlines()) == 2 + 3
        err = one_line_error(*main(capsys, "--store", team_server.url, "runs", FIRST[:8]))
        assert FIRST in err and TWIN in err
    close_readers()
    with dask.config.set({"analytics.token": team_server.token("someone-else")}):
        err = one_line_error(*main(capsys, "--store", team_server.url, "runs", FIRST[:8]))
        assert "unknown computation id" in err and FIRST not in err
