"""The tests keep the README's promise, read from their source with `ast`: no test module
imports another (shared helpers live in the helper modules), Chromium is started only by
the shared fixture (conftest.py's `browser`, through browser_helpers.py), no assert
holds a test to a duration (speed lives in benchmarks/), and no test listens on a fixed
port or writes to a fixed path (the tiers after the unit tier run in parallel: every
fixture owns its ports, databases and folders)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
TIERS = ("unit", "integration", "browser")
# Where Chromium may be started: the shared fixture and the helper it calls.
LAUNCHERS = {"conftest.py", "browser_helpers.py"}
# A name, or a row's key, that holds a measured time.
TIMING = re.compile(r"^(elapsed|took|latency|wall)(_\w+)?$|_(elapsed|took|latency|ms)$")
CLOCKS = {"time", "perf_counter", "monotonic", "time_ns", "perf_counter_ns", "monotonic_ns"}
ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def sources() -> dict[str, ast.Module]:
    """Every module under tests/, the tiers' too, by its path there."""
    return {
        str(p.relative_to(TESTS)): ast.parse(p.read_text(), str(p))
        for p in sorted(TESTS.rglob("*.py"))
    }


def imports_of_test_modules(tree: ast.Module) -> list[str]:
    """`line: module` for each import (at any depth) of a test module, in a tier or not:
    `from .test_x import`, `from ..unit.test_x import`, `from tests.unit.test_x import`,
    `import tests.test_x`, `from . import test_x`, `from tests.unit import test_x`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if re.fullmatch(r"tests(\.\w+)*\.test_\w+", a.name)]
        elif isinstance(node, ast.ImportFrom) and (
            (node.level > 0 and node.module in (None, *TIERS))
            or (node.level == 0 and node.module in ("tests", *(f"tests.{t}" for t in TIERS)))
        ):
            names = [a.name for a in node.names if a.name.startswith("test_")]
        elif isinstance(node, ast.ImportFrom) and node.module:
            inside = node.level > 0 or node.module.startswith("tests.")
            last = node.module.rsplit(".", 1)[-1]
            names = [node.module] if inside and re.fullmatch(r"test_\w+", last) else []
        else:
            continue
        found += [f"{node.lineno}: {n}" for n in names]
    return found


def chromium_launches(tree: ast.Module) -> list[str]:
    """`line: how` for each start of a browser: `<x>.chromium.launch(...)`,
    `launch_persistent_context(...)`, a call with `executable_path=`, or browser_helpers'
    own `chromium()`."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("launch", "launch_persistent_context"):
            owner = func.value
            if isinstance(owner, ast.Attribute | ast.Name) and "chromium" in ast.unparse(owner):
                found.append(f"{node.lineno}: {ast.unparse(func)}(...)")
                continue
        if any(k.arg == "executable_path" for k in node.keywords):
            found.append(f"{node.lineno}: {ast.unparse(func)}(executable_path=...)")
        elif (isinstance(func, ast.Name) and func.id == "chromium") or (
            isinstance(func, ast.Attribute) and func.attr == "chromium" and not node.args
        ):
            found.append(f"{node.lineno}: {ast.unparse(func)}()")
    return found


def _timing(node: ast.expr) -> bool:
    """A measured time: a name, attribute or row key such as `elapsed`, `took`,
    `latency_ms`, or a clock reading minus a start (`time.perf_counter() - t0`)."""
    if isinstance(node, ast.Name):
        return bool(TIMING.search(node.id))
    if isinstance(node, ast.Attribute):
        return bool(TIMING.search(node.attr))
    if isinstance(node, ast.Subscript):
        key = node.slice
        return (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and bool(TIMING.search(key.value))
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        clock = node.left
        if isinstance(clock, ast.Call) and not clock.args:
            f = clock.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            return name in CLOCKS
    return False


def _number(node: ast.expr) -> bool:
    """A bound written in the test: constants and names, with arithmetic (not a bare 0:
    a measured time above 0 is a sanity check, not a deadline)."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float) and node.value != 0
    if isinstance(node, ast.UnaryOp):
        return _number(node.operand)
    if isinstance(node, ast.BinOp):
        return _number(node.left) and _number(node.right)
    return isinstance(node, ast.Name) and node.id.isupper()


def duration_asserts(tree: ast.Module) -> list[str]:
    """`line: assert` for each assert that orders a measured time against a number."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in ast.walk(node.test):
            if not isinstance(cmp, ast.Compare):
                continue
            sides = [cmp.left, *cmp.comparators]
            for op, left, right in zip(cmp.ops, sides, sides[1:]):
                if isinstance(op, ORDER) and (
                    (_timing(left) and _number(right)) or (_number(left) and _timing(right))
                ):
                    found.append(f"{node.lineno}: {ast.unparse(node.test)}")
    return found


def fixed_ports_and_paths(tree: ast.Module) -> list[str]:
    """`line: what` for a port to listen on written as a number (`port=8786`,
    `bind((host, 8786))`, `"--port", "8786"`) and a folder or file under /tmp or ~ written
    out: two tests running at once would share it (a home folder's path as recorded data,
    "/home/ann/job.py", is a value, not a file).  (Ports 1 and 9, which
    nothing listens on, name an address that refuses; 0 asks for a free port.)"""
    found = []
    free = (0, 1, 9)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for k in node.keywords:
                if (
                    k.arg == "port"
                    and isinstance(k.value, ast.Constant)
                    and isinstance(k.value.value, int)
                    and k.value.value not in free
                ):
                    found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "bind" and node.args:
                addr = node.args[0]
                if (
                    isinstance(addr, ast.Tuple)
                    and len(addr.elts) == 2
                    and isinstance(addr.elts[1], ast.Constant)
                    and addr.elts[1].value not in free
                ):
                    found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
        if isinstance(node, ast.List | ast.Tuple):
            items = node.elts
            for a, b in zip(items, items[1:]):
                if (
                    isinstance(a, ast.Constant)
                    and a.value == "--port"
                    and isinstance(b, ast.Constant)
                    and str(b.value).isdigit()
                    and int(b.value) not in free
                ):
                    found.append(f"{node.lineno}: --port {b.value}")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.match(r"(/tmp/|~/)\w", node.value)
        ):
            found.append(f"{node.lineno}: {node.value[:60]!r}")
    return found


# --- the checks, on the tests as they are -------------------------------------------------
def test_no_test_module_imports_another():
    found = {
        name: hits for name, tree in sources().items() if (hits := imports_of_test_modules(tree))
    }
    assert found == {}, f"move what they share into a helper module (factories.py ...): {found}"


def test_chromium_is_started_only_by_the_shared_fixture():
    found = {
        name: hits
        for name, tree in sources().items()
        if name not in LAUNCHERS and (hits := chromium_launches(tree))
    }
    assert found == {}, f"take conftest.py's `browser` fixture instead: {found}"


def test_no_test_takes_a_fixed_port_or_path():
    found = {
        name: hits
        for name, tree in sources().items()
        if name != "unit/test_test_hygiene.py" and (hits := fixed_ports_and_paths(tree))
    }
    assert found == {}, f"take a free port (port=0, free_port()) and tmp_path: {found}"


def test_no_assert_holds_a_test_to_a_duration():
    found = {name: hits for name, tree in sources().items() if (hits := duration_asserts(tree))}
    assert found == {}, f"wait for a condition (waiting.py), or time it in benchmarks/: {found}"


# --- the checks find what they look for, and only that ---------------------------------
def _hits(check, code: str) -> list[str]:
    return check(ast.parse(code))


def test_an_import_of_a_tiers_test_module_is_found_too():
    for code in (
        "from ..unit.test_store import x",
        "from tests.integration.test_cli import table",
        "import tests.browser.test_web",
        "from tests.unit import test_store",
        "from ..integration import test_cli",
    ):
        assert _hits(imports_of_test_modules, code), code


@pytest.mark.parametrize(
    ("code", "found"),
    [
        ("ServerThread(settings, port=8765)", True),
        ("s.bind(('127.0.0.1', 8786))", True),
        ("cmd = ['dask', 'scheduler', '--port', '8786']", True),
        ("open('/tmp/analytics.db', 'w')", True),
        ("ServerThread(settings, port=0)", False),
        ("s.bind(('127.0.0.1', 0))", False),
        ("url = 'http://127.0.0.1:9/hook'", False),
        ("path = tmp_path / 'analytics.db'", False),
    ],
)
def test_a_fixed_port_or_path_is_found(code, found):
    assert bool(_hits(fixed_ports_and_paths, code)) is found


@pytest.mark.parametrize(
    "code",
    [
        "from .test_cli import table",
        "from tests.test_cli import table",
        "import tests.test_cli",
        "from . import test_cli",
        "from tests import test_cli as c",
        "def f():\n    from .test_prune import full_cluster",
    ],
)
def test_an_import_of_a_test_module_is_found(code):
    assert _hits(imports_of_test_modules, code)


@pytest.mark.parametrize(
    "code",
    [
        "from .factories import Cluster",
        "from tests.server_helpers import ServerThread",
        "import test_helpers_elsewhere.x",
        "from dask_analytics_lab.test_utils import x",
        "from . import factories",
    ],
)
def test_other_imports_are_not(code):
    assert _hits(imports_of_test_modules, code) == []


@pytest.mark.parametrize(
    "code",
    [
        "p.chromium.launch(headless=True)",
        "pw.chromium.launch_persistent_context('/tmp/x')",
        "browser_type.launch(executable_path='/usr/bin/chromium')",
        "with chromium() as browser:\n    pass",
        "with browser_helpers.chromium() as b:\n    pass",
    ],
)
def test_a_chromium_start_is_found(code):
    assert _hits(chromium_launches, code)


@pytest.mark.parametrize(
    "code",
    [
        "page = browser.new_page()",
        "context = browser.new_context(viewport={'width': 800})",
        "if not shutil.which(CHROMIUM):\n    pass",
        "rocket.launch()",
    ],
)
def test_using_the_fixtures_browser_is_not(code):
    assert _hits(chromium_launches, code) == []


@pytest.mark.parametrize(
    "code",
    [
        "assert elapsed < 5",
        "assert took <= 0.5 * LIMIT",
        "assert time.perf_counter() - t < 5",
        "assert time.monotonic() - start < 2.0, 'slow'",
        "assert r['median_ms'] < 200, r",
        "assert 0 < self.elapsed < 10",
        "assert ok and latency_ms < 100",
    ],
)
def test_a_duration_assert_is_found(code):
    assert _hits(duration_asserts, code)


@pytest.mark.parametrize(
    "code",
    [
        "assert row['duration'] == row['stopped'] - row['started']",  # a recorded value
        "assert rows['hung']['took'] != '-'",
        "assert cost['seconds'] < cost['loop_cpu_seconds']",  # two recorded figures
        "assert time.time() < deadline",  # a deadline, in a wait
        "assert t0 <= comp['start'] <= comp['stop'] <= t1",
        "if time.time() - row['last_seen'] < HEARTBEAT:\n    pass",  # not an assert
        "elapsed = time.perf_counter() - t0",
        "assert took == seconds(0.5)",
        "assert cost['longest_call_ms'] > 0 and r['first_ms'] >= 0",  # measured at all
    ],
)
def test_other_asserts_are_not(code):
    assert _hits(duration_asserts, code) == []
