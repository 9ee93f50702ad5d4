"""Kinds of failure as a user reads them: one kind per (exception type, raising line,
masked message), never hidden by a cap, and placed in the user's file or notebook cell
when the function was sent by value (`<dynamic-code>`).

Real LocalClusters (threads and processes), a real script run as a subprocess and a real
Jupyter kernel; the stored rows are checked against what the tasks raised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import dask
import pytest
from distributed import Event, wait

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.errors import OVERFLOW_TYPE, ErrorCounter, mask

from ..cluster_helpers import recorded_cluster

ROOT = Path(dal.__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("KeyError('k12')", "KeyError('k…')"),
        ("KeyError('k7')", "KeyError('k…')"),
        ("ValueError('user42 has no account')", "ValueError('user… has no account')"),
        ("RuntimeError('shard7 failed')", "RuntimeError('shard… failed')"),
        ("KeyError('missing column col_3')", "KeyError('missing column col_…')"),
        ("KeyError('key-a3f9c0d2e1b4')", "KeyError('key-…')"),
        ("ValueError('bad value 3.5 below 1e-05')", "ValueError('bad value … below …')"),
    ],
)
def test_identifiers_with_digits_mask_as_one(text, pattern):
    assert mask(text) == pattern


def _by_pattern(rows):
    return {r["pattern"]: r for r in rows}


def test_cap_is_per_type_and_line_and_the_overflow_says_what_it_holds():
    errors = ErrorCounter(kinds_per_place=3)
    line_a = '  File "/x/job.py", line 7, in load\n'
    line_b = '  File "/x/job.py", line 9, in load\n'
    words = ("alpha", "bravo", "charlie", "delta", "echo")
    for i in range(50):
        errors.record("c1", "load", f"load-{i}", f"KeyError('{words[i % 5]}')", line_a, 1.0 + i)
    errors.record("c1", "load", "load-t", "TypeError('bad operand')", line_a, 60.0)
    errors.record("c1", "load", "load-k", "KeyError('alpha')", line_b, 61.0)
    rows = errors.drain()
    assert sum(r["count"] for r in rows) == 52
    at_a = [
        r for r in rows if r["exc_type"] == "KeyError" and r["location"] == "/x/job.py:7 in load"
    ]
    kept = [r for r in at_a if not r["pattern"].startswith("(")]
    (overflow,) = [r for r in at_a if r["pattern"].startswith("(")]
    assert len(kept) == 3 and all(r["count"] == 10 for r in kept)
    assert overflow["pattern"] == "(2 other distinct messages, counted together)"
    assert overflow["count"] == 20
    assert sorted(overflow["examples"]) == ["KeyError('delta')", "KeyError('echo')"]
    assert overflow["exception_text"] in overflow["examples"] and overflow["key"] in (
        "load-3",
        "load-4",
    )
    # Another type on the same line and the same type on another line: rows of their own.
    (typeerror,) = [r for r in rows if r["exc_type"] == "TypeError"]
    assert typeerror["pattern"] == "TypeError('bad operand')" and typeerror["count"] == 1
    (other_line,) = [r for r in rows if r["location"] == "/x/job.py:9 in load"]
    assert other_line["pattern"] == "KeyError('alpha')" and other_line["count"] == 1
    assert not [r for r in rows if r["exc_type"] == OVERFLOW_TYPE]
    # The overflow row keeps its identity (store key) as its count of messages grows.
    errors.record("c1", "load", "load-f", "KeyError('foxtrot')", line_a, 70.0)
    (grown,) = errors.drain()
    assert grown["hash"] == overflow["hash"] and grown["count"] == 21
    assert grown["pattern"] == "(3 other distinct messages, counted together)"


def test_memory_bounds_never_hide_a_new_type_or_line():
    errors = ErrorCounter(kinds_per_place=20, max_rows=2, max_places=2, max_folded=1)
    tb = '  File "/x/job.py", line {}, in load\n'.format
    for word in ("a", "b", "c", "d"):  # two rows, then the overflow row of line 1
        errors.record("c1", "g", "k", f"KeyError('{word}')", tb(1), 1.0)
    errors.record(
        "c1", "g", "k", "KeyError('first at line 2')", tb(2), 2.0
    )  # past max_rows: still a row
    errors.record(
        "c1", "g", "k", "KeyError('second at line 2')", tb(2), 2.0
    )  # to line 2's overflow
    errors.record("c1", "g", "k", "ValueError('x')", tb(3), 3.0)  # a third place: the last resort
    rows = errors.drain()
    assert sum(r["count"] for r in rows) == 7
    line1 = [r for r in rows if r["location"] == "/x/job.py:1 in load"]
    assert sorted(r["pattern"] for r in line1) == [
        "(2+ other distinct messages, counted together)",
        "KeyError('a')",
        "KeyError('b')",
    ]
    line2 = _by_pattern(r for r in rows if r["location"] == "/x/job.py:2 in load")
    assert line2["KeyError('first at line …')"]["count"] == 1
    assert line2["(1+ other distinct message, counted together)"]["examples"] == [
        "KeyError('second at line 2')"
    ]
    (last,) = [r for r in rows if r["exc_type"] == OVERFLOW_TYPE]
    assert last["examples"] == ["ValueError('x')"] and last["count"] == 1
    errors.forget({"c1"})
    errors.record("c2", "g", "k", "KeyError('a')", tb(1), 4.0)
    assert [r["pattern"] for r in errors.drain()] == ["KeyError('a')"]


def raise_identifier(i):
    kind = i % 4
    if kind == 0:
        raise KeyError(f"k{i}")
    if kind == 1:
        raise ValueError(f"user{i} has no account")
    if kind == 2:
        raise RuntimeError(f"shard{i % 13} failed")
    raise KeyError(f"missing column col_{i}")


def test_failures_with_numbered_identifiers_are_one_kind_each(sqlite_url):
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        wait(client.map(raise_identifier, range(200)))
        dal.flush(client)
        cluster_id = info["cluster_id"]
    rows = dal.list_exceptions(cluster_id, limit=None, store=sqlite_url)
    by = {(r["exc_type"], r["pattern"]): r for r in rows}
    assert set(by) == {
        ("KeyError", "KeyError('k…')"),
        ("ValueError", "ValueError('user… has no account')"),
        ("RuntimeError", "RuntimeError('shard… failed')"),
        ("KeyError", "KeyError('missing column col_…')"),
    }
    assert all(r["count"] == 50 and len(r["examples"]) == 3 for r in rows)
    assert len({r["location"] for r in rows}) == 4
    assert all(r["location"].endswith("in raise_identifier") for r in rows)


WORDS = ["".join(chr(ord("g") + (i // 5**k) % 5) for k in range(3)) for i in range(30)]


def fail_many_ways(i):
    if i < 300:
        raise ValueError(f"cannot parse {WORDS[i % 30]}")
    if i % 2:
        raise TypeError("unsupported operand")
    raise KeyError("late key")


def hold_until(name):
    Event(name).wait(timeout=120)


def test_new_type_or_line_after_the_cap_has_its_own_row(sqlite_url):
    """30 kinds of ValueError on one line fill that line's 20 rows; a TypeError and a
    KeyError raised later by the same task group, each on its own line, still get rows.
    A held task keeps the scheduler busy, so all of it is one computation."""
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
        gate = Event("gate")
        held = client.submit(hold_until, "gate", pure=False)
        early = client.map(fail_many_ways, range(300))
        wait(early)
        late = client.map(fail_many_ways, range(300, 320))
        wait(late)
        gate.set()
        held.result(timeout=60)
        dal.flush(client)
        cluster_id = info["cluster_id"]
    rows = dal.list_exceptions(cluster_id, limit=None, store=sqlite_url)
    assert len({r["computation_id"] for r in rows}) == 1
    assert sum(r["count"] for r in rows) == 320
    values = [r for r in rows if r["exc_type"] == "ValueError"]
    assert len({r["location"] for r in values}) == 1
    kept = [r for r in values if r["pattern"].startswith("ValueError(")]
    (overflow,) = [r for r in values if not r["pattern"].startswith("ValueError(")]
    assert len(kept) == 20 and all(r["count"] == 10 for r in kept)
    assert overflow["count"] == 100
    assert overflow["pattern"] == "(10 other distinct messages, counted together)"
    kept_messages = {r["examples"][0] for r in kept}
    assert len(overflow["examples"]) == 3 and not kept_messages & set(overflow["examples"])
    assert all(e.startswith("ValueError('cannot parse ") for e in overflow["examples"])
    late_rows = {r["exc_type"]: r for r in rows if r["exc_type"] != "ValueError"}
    assert set(late_rows) == {"TypeError", "KeyError"}
    assert late_rows["TypeError"]["count"] == 10 and late_rows["KeyError"]["count"] == 10
    assert late_rows["TypeError"]["pattern"] == "TypeError('unsupported operand')"
    assert (
        len(
            {
                overflow["location"],
                late_rows["TypeError"]["location"],
                late_rows["KeyError"]["location"],
            }
        )
        == 3
    )


SCRIPT = """\
import sys

import dask_analytics_lab as dal
from distributed import Client, LocalCluster, wait


def helper(x):
    return {{}}[f"k{{x}}"]


def boom(x):
    if x % 2:
        raise ValueError(f"odd input {{x}}")
    return helper(x)


if __name__ == "__main__":
    with LocalCluster(n_workers=1, threads_per_worker=1, processes={processes},
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        info = dal.register(client, store=sys.argv[1])
        wait(client.map(boom, range(10)))
        dal.flush(client)
        print(info["cluster_id"])
"""


@pytest.fixture
def script_dir():
    # Not under pytest's tmp_path: the client sends no code from a file whose path
    # matches distributed's ignore-files (`.*py\.?test.*`).
    with tempfile.TemporaryDirectory(prefix="dal-job-") as d:
        yield Path(d)


def _line_of(text: str, needle: str) -> int:
    (n,) = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return n


def run_script(script: Path, store_url: str) -> str:
    """Run `script STORE` in its own interpreter, in its folder (as a user runs a script);
    the cluster id it printed last."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(script), store_url],
        capture_output=True,
        text=True,
        env=env,
        cwd=script.parent,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()[-1]


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_failure_in_a_script_function_shows_the_script_and_line(store_url, script_dir, processes):
    """boom and helper live in the script's __main__: cloudpickle sends them by value and
    the worker's traceback names `<dynamic-code>`; the record names the script."""
    text = SCRIPT.format(processes=processes)
    script = script_dir / "etl_job.py"
    script.write_text(text)
    cluster_id = run_script(script, store_url)
    rows = {r["exc_type"]: r for r in dal.list_exceptions(cluster_id, store=store_url)}
    assert set(rows) == {"KeyError", "ValueError"}
    raise_line, helper_line, call_line = (
        _line_of(text, "raise ValueError"),
        _line_of(text, 'return {}[f"k{x}"]'),
        _line_of(text, "return helper(x)"),
    )
    odd, missing = rows["ValueError"], rows["KeyError"]
    assert odd["location"] == f"{script}:{raise_line} in boom"
    assert odd["traceback_text"] == (
        f'  File "{script}", line {raise_line}, in boom\n    raise ValueError(f"odd input {{x}}")\n'
    )
    assert missing["location"] == f"{script}:{helper_line} in helper"
    assert missing["traceback_text"] == (
        f'  File "{script}", line {call_line}, in boom\n'
        f"    return helper(x)\n"
        f'  File "{script}", line {helper_line}, in helper\n'
        f'    return {{}}[f"k{{x}}"]\n'
    )
    # What Dask reported stays with the row.
    assert missing["recorded_location"] == f"<dynamic-code>:{helper_line} in helper"
    assert missing["recorded_traceback_text"].count('File "<dynamic-code>"') == 2
    assert (odd["count"], missing["count"]) == (5, 5)


LIBRARY = """\
def check(x):
    if x == 3:
        raise LookupError(f"no row {x}")
    return x
"""

# Compute two calls below the script's top level (as the README's demo does), helpers at
# module level, in run(), in an imported module of the user's, and lambdas in both places.
LAYOUTS = """\
import sys

import dask_analytics_lab as dal
from distributed import Client, LocalCluster, wait

import userlib


def at_module_level(x):
    raise ValueError(f"module-level helper {{x}}")


def calls_the_library(x):
    return userlib.check(x)


halve = lambda x: x / 0


def run(client):
    def in_run(x):
        raise KeyError(f"k{{x}}")

    wait(client.map(at_module_level, range(2)))
    wait(client.map(in_run, range(2)))
    wait(client.map(calls_the_library, [3]))
    wait(client.map(lambda x: [][x], range(2)))
    wait(client.map(halve, range(2)))


def main(store):
    with LocalCluster(n_workers=1, threads_per_worker=1, processes={processes},
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        info = dal.register(client, store=store)
        run(client)
        dal.flush(client)
        return info["cluster_id"]


if __name__ == "__main__":
    print(main(sys.argv[1]))
"""


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_every_layout_of_a_script_shows_the_file_line_and_source(store_url, script_dir, processes):
    """Compute called below the script's top level: a helper at module level is in no
    function's source, only in the file's; the record still names the file, the line and
    its source, for every frame of every kind of failure."""
    text = LAYOUTS.format(processes=processes)
    script, library = script_dir / "nightly.py", script_dir / "userlib.py"
    script.write_text(text)
    library.write_text(LIBRARY)
    cluster_id = run_script(script, store_url)
    rows = {r["exc_type"]: r for r in dal.list_exceptions(cluster_id, store=store_url)}
    assert set(rows) == {"ValueError", "KeyError", "LookupError", "IndexError", "ZeroDivisionError"}

    def frame(path: Path, needle: str, function: str) -> tuple[str, str]:
        line = _line_of(text if path == script else LIBRARY, needle)
        return (
            f"{path}:{line} in {function}",
            f'  File "{path}", line {line}, in {function}\n    {needle}\n',
        )

    calls = frame(script, "return userlib.check(x)", "calls_the_library")
    expected = {
        "ValueError": [
            frame(script, 'raise ValueError(f"module-level helper {x}")', "at_module_level")
        ],
        "KeyError": [frame(script, 'raise KeyError(f"k{x}")', "in_run")],
        # The imported module is a real file on the worker too: Dask's frame, with its line.
        "LookupError": [calls, frame(library, 'raise LookupError(f"no row {x}")', "check")],
        "IndexError": [frame(script, "wait(client.map(lambda x: [][x], range(2)))", "<lambda>")],
        "ZeroDivisionError": [frame(script, "halve = lambda x: x / 0", "<lambda>")],
    }
    for kind, frames in expected.items():
        assert rows[kind]["location"] == frames[-1][0], kind
        assert rows[kind]["traceback_text"] == "".join(f for _, f in frames), kind
    # The computation is still told by the line that made it, not by the call of run().
    comp = dal.get_computation(rows["ValueError"]["computation_id"], store=store_url)
    assert comp["code_line"] == "wait(client.map(at_module_level, range(2)))"
    (whole,) = [s for s in comp["code"] if s["text"] == text]
    other = dal.get_computation(rows["KeyError"]["computation_id"], store=store_url)
    assert whole["hash"] in [s["hash"] for s in other["code"]]


def _snippet(text: str, call_line: int, filename: str = "/home/ann/job.py", first: int = 1) -> dict:
    return {
        "text": text,
        "filename": filename,
        "lineno_frame": call_line,
        "lineno_relative": call_line - first,
    }


def test_a_frame_is_placed_only_where_the_snippet_leaves_no_doubt():
    from dask_analytics_lab.store.dynamic_code import Snippets

    cell = textwrap.dedent("""\
        @functools.cache
        def load(x):
            return x[0]
        fs = client.map(load, xs)
        ys = client.map(
            lambda y: 1 / y, xs)
        def later(x):
            raise ValueError(x)
        """)
    snippets = Snippets([_snippet(cell, 5)])  # the computation made on line 5
    assert snippets.find("load", 3) == ("/home/ann/job.py", "return x[0]")
    assert snippets.find("load", 4) is None  # not a line of load
    assert snippets.find("<lambda>", 6) == (
        "/home/ann/job.py",
        "lambda y: 1 / y, xs)",
    )  # in the call
    assert snippets.find("later", 8) is None  # written after the call: an older definition ran
    assert snippets.find("other", 3) is None
    # A method's source (indented), starting at line 40 of its file.
    method = "    def run(self):\n        def step(x):\n            return x.y\n        client.map(step, [1])\n"
    assert Snippets([_snippet(method, 43, first=40)]).find("step", 42) == (
        "/home/ann/job.py",
        "return x.y",
    )
    # Two files that both could hold it: no guess.
    assert (
        Snippets([_snippet(cell, 5), _snippet(cell, 5, filename="/other.py")]).find("load", 3)
        is None
    )
    # compute from main(): Dask sends the whole file (the <module> frame, at main()'s
    # call) and main's source; a helper at module level is only in the file.
    script = textwrap.dedent("""\
        def helper(x):
            raise KeyError(x)
        def main():
            client.map(helper, [1])
        if __name__ == "__main__":
            main()
        def after(x):
            raise KeyError(x)
        """)
    main_source = "def main():\n    client.map(helper, [1])\n"
    both = Snippets([_snippet(script, 6), _snippet(main_source, 4, first=3)])
    assert both.find("helper", 2) == ("/home/ann/job.py", "raise KeyError(x)")
    assert Snippets([_snippet(main_source, 4, first=3)]).find("helper", 2) is None
    assert both.find("after", 8) is None  # not yet defined when main() ran
    # Text the reader could not open (sealed, or None) places nothing.
    assert Snippets([{**_snippet(cell, 5), "text": None}]).find("load", 3) is None


def _run_cell(kc, code: str) -> list[str]:
    """Run one cell in the kernel; its error names (empty when it ran cleanly)."""
    msg_id = kc.execute(code)
    errors = []
    while True:
        msg = kc.get_iopub_msg(timeout=300)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            errors.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return errors


CELLS = [
    """\
from distributed import Client, LocalCluster, wait
import dask_analytics_lab as dal
cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
client = Client(cluster)
info = dal.register(client, store=STORE)
""",
    """\
def parse(x):
    # a comment line
    raise KeyError(f"col_{x}")

wait(client.map(parse, range(4)))
dal.flush(client)
""",
    """\
def elsewhere(x):
    raise ValueError("defined in a cell that made no computation")
""",
    """\
wait(client.map(elsewhere, range(2)))
dal.flush(client)
""",
    """\
def shard_of(x):
    return [][x]


def run_all():
    wait(client.map(shard_of, range(3)))
    wait(client.map(lambda x: x / 0, range(2)))


run_all()
dal.flush(client)
""",
    "client.close(); cluster.close()",
]


def test_failure_in_a_notebook_cell_shows_the_cell_and_line(sqlite_url):
    """A real Jupyter kernel: a function defined in the cell that computes is placed in
    that cell; one defined in a cell that sent no code stays as Dask reported it."""
    jupyter_client = pytest.importorskip("jupyter_client.manager")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    km, kc = jupyter_client.start_new_kernel(kernel_name="python3", env=env)
    try:
        assert _run_cell(kc, f"STORE = {sqlite_url!r}") == []
        for cell in CELLS:
            assert _run_cell(kc, cell) == [], cell
        assert _run_cell(kc, "print(info['cluster_id'])") == []
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    rows = {r["exc_type"]: r for r in dal.list_exceptions(limit=None, store=sqlite_url)}
    parse, elsewhere = rows["KeyError"], rows["ValueError"]
    comp = dal.get_computation(parse["computation_id"], store=sqlite_url)
    (snippet,) = comp["code"]
    cell_file = snippet["filename"]
    assert "ipykernel_" in cell_file and snippet["text"] == CELLS[1]
    assert parse["location"] == f"{cell_file}:3 in parse"
    assert (
        parse["traceback_text"]
        == f'  File "{cell_file}", line 3, in parse\n    raise KeyError(f"col_{{x}}")\n'
    )
    assert parse["pattern"] == "KeyError('col_…')" and parse["count"] == 4
    assert (
        elsewhere["location"] == "<dynamic-code>:2 in elsewhere"
        and "recorded_location" not in elsewhere
    )
    # Compute called in a function of the cell: the helper at the cell's top level is in
    # the cell, not in that function's source; the cell is sent too.
    shard, inline = rows["IndexError"], rows["ZeroDivisionError"]
    comp = dal.get_computation(shard["computation_id"], store=sqlite_url)
    assert comp["code_line"] == "wait(client.map(shard_of, range(3)))"
    (cell_file,) = {s["filename"] for s in comp["code"] if s["text"] == CELLS[4]}
    assert shard["location"] == f"{cell_file}:2 in shard_of"
    assert (
        shard["traceback_text"] == f'  File "{cell_file}", line 2, in shard_of\n    return [][x]\n'
    )
    assert inline["location"] == f"{cell_file}:7 in <lambda>"
    assert inline["traceback_text"] == (
        f'  File "{cell_file}", line 7, in <lambda>\n'
        "    wait(client.map(lambda x: x / 0, range(2)))\n"
    )


def test_a_report_that_may_not_hold_code_shows_frames_as_dask_reported(sqlite_url):
    """A frame placed from a snippet carries a source line: a report made with the code
    switch off shows the frame as Dask reported it."""
    from dask_analytics_lab.reports.render import computation_report

    with recorded_cluster(sqlite_url) as (client, info):

        def sent_by_value(x):  # a local function: cloudpickle sends it by value
            raise KeyError(f"k{x}")  # placed-source-marker

        wait(client.map(sent_by_value, range(2)))
        dal.flush(client)
        cluster_id = info["cluster_id"]
    (row,) = dal.list_exceptions(cluster_id, store=sqlite_url)
    assert row["location"].startswith(__file__) and "placed-source-marker" in row["traceback_text"]
    on = computation_report(row["computation_id"], store=sqlite_url)
    with dask.config.set({"analytics.computation.code.transmit": False}):
        off = computation_report(row["computation_id"], store=sqlite_url)
    assert [e["location"] for e in on[1]["exceptions"]] == [row["location"]]
    (dask_said,) = off[1]["exceptions"]
    assert dask_said["location"] == row["recorded_location"] and dask_said["location"].startswith(
        "<dynamic-code>:"
    )
    assert "placed-source-marker" not in off[0] + json.dumps(off[1])
