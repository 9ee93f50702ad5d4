"""The package's imports flow one way (README, "Architecture"): the import graph of
dask_analytics_lab, read from the source with `ast` (imports inside functions too), has
no cycle, and no arrow from store/ or collect/ up to the readers and front ends, from
server/ to widgets/, from the API to server/, or from reports/ to server/ handlers or
the API.

And what a scheduler or worker loads, in a fresh interpreter: the package's modules
that importing the plugin, unpickling it, the `--preload` and the GPU sampler load are
exactly those allowed, and no front end, migration or notebook library comes with them."""

from __future__ import annotations

import ast
import json
import os
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import dask_analytics_lab

from ..waiting import wait_for

PACKAGE = Path(dask_analytics_lab.__file__).resolve().parent
ROOT = PACKAGE.name
# What store/ and collect/ may import besides themselves: the base modules.
BASE = {
    "messages",
    "config",
    "config_schema",
    "codecrypt",
    "remote",
    "store_errors",
    "urls",
    "ids",
    "figures",
    "filters",
    "reads",
    "reader",
    "read_rows",
}


def modules(package: Path) -> dict[str, Path]:
    """{dotted name: file} of every module of the package (a package is its __init__)."""
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """{module: modules of the package it imports}, at any depth of its code.

    `from .x import y` is an arrow to module x.y when that is a module, else to x.
    Importing a module runs its packages' __init__ first: an arrow into a subpackage
    from outside it is also an arrow to that subpackage (never to the root package,
    whose __init__ gathers the public API on purpose).
    """
    mods = modules(package)
    root = package.name
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(
                        here[: len(here) - node.level + 1] + ([node.module] if node.module else [])
                    )
                else:
                    base = node.module or ""
                targets.update(
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                )
        arrows = set()
        for target in targets:
            if target not in mods or target == name:
                continue
            arrows.add(target)
            parts = target.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if not (name + ".").startswith(parent + "."):
                    arrows.add(parent)
        graph[name] = arrows - {name}
    assert root in graph
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def under(name: str, *parts: str) -> bool:
    """Whether module `name` is ROOT.<part> or inside it, for any of `parts`."""
    return any(name == f"{ROOT}.{p}" or name.startswith(f"{ROOT}.{p}.") for p in parts)


def arrows(
    graph: dict[str, set[str]], source: tuple[str, ...], bad: Callable[[str], bool]
) -> list[str]:
    """The arrows "a -> b" from modules under `source` to modules `bad` picks."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if under(a, *source)
        for b in targets
        if bad(b)
    )


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE)


def test_the_graph_reads_every_kind_of_import(graph):
    # A module-level relative import, one inside a function, and one of a subpackage's
    # module from outside it (which runs that subpackage's __init__ too).
    assert f"{ROOT}.store.schema" in graph[f"{ROOT}.store.team_schema"]
    assert f"{ROOT}.http_reader" in graph[f"{ROOT}.readers"]  # inside open_reader()
    assert {f"{ROOT}.reports.rows", f"{ROOT}.reports"} <= graph[f"{ROOT}.server.report_handlers"]
    assert len(graph) > 50


def test_the_checks_find_what_they_look_for(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "store").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("")
    (pkg / "store" / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "store" / "b.py").write_text("from .a import f\nfrom .. import api\n")
    (pkg / "api.py").write_text("import pkg.store.a\n")
    g = import_graph(pkg)
    assert g["pkg.store.a"] == {"pkg.store.b"} and g["pkg.api"] == {"pkg.store.a", "pkg.store"}
    assert g["pkg.store.b"] == {"pkg.store.a", "pkg.api"}
    assert cycles(g) == [["pkg.api", "pkg.store.a", "pkg.store.b"]]
    (pkg / "store" / "b.py").write_text("")
    assert cycles(import_graph(pkg)) == []


def test_no_module_cycle(graph):
    assert cycles(graph) == [], "import cycles (each list imports itself round the loop)"


def test_store_and_collect_import_only_themselves_and_the_base_modules(graph):
    allowed = ("store", "collect", *BASE)
    assert arrows(graph, ("store", "collect"), lambda b: not under(b, *allowed)) == []


def test_server_never_imports_widgets(graph):
    assert arrows(graph, ("server",), lambda b: under(b, "widgets")) == []


def test_the_jupyter_extension_never_imports_the_kernel_side_widgets(graph):
    assert arrows(graph, ("lab.serverext",), lambda b: under(b, "widgets")) == []


def test_the_api_never_imports_server(graph):
    assert arrows(graph, ("api",), lambda b: under(b, "server")) == []


def test_reports_import_neither_server_handlers_nor_the_api(graph):
    assert arrows(graph, ("reports",), lambda b: under(b, "api", "widgets", "lab", "server")) == []
    # ... nor through a helper they import: what reports reach, at any depth.
    reached, todo = set(), [m for m in graph if under(m, "reports")]
    while todo:
        for b in graph[todo.pop()] - reached:
            reached.add(b)
            todo.append(b)
    assert sorted(b for b in reached if under(b, "api", "widgets", "lab", "server")) == []


# --- what a scheduler and a worker load --------------------------------------------
# Each list is every module of the package that path loads (ROOT's own __init__ is ""):
# a module that a change makes load eagerly fails the test, named with its importer.
COLLECTOR = {
    "",
    "collect",
    "collect.accounting",
    "collect.buffer",
    "collect.claim_queue",
    "collect.claims",
    "collect.cluster",
    "collect.computation_message",
    "collect.computation_record",
    "collect.computations",
    "collect.drops",
    "collect.endings",
    "collect.errors",
    "collect.events",
    "collect.failures",
    "collect.gpu_jobs",
    "collect.group_figures",
    "collect.hook",
    "collect.host_cpu",
    "collect.labels",
    "collect.lost",
    "collect.metrics",
    "collect.offloop",
    "collect.plugin",
    "collect.profile_window",
    "collect.profiles",
    "collect.recording_end",
    "collect.retries",
    "collect.run_spans",
    "collect.shipper",
    "collect.sinks",
    "collect.sources",
    "collect.status",
    "collect.task_stream",
    "collect.ticks",
    "collect.workers",
    "collect.writer",
    "messages",
    "remote",
    "store_errors",
    "urls",
}
GPU_SAMPLER = {"", "collect", "collect.gpu_nvml", "collect.gpu_sample", "collect.gpu_sampler"}
# register() and dask_setup add the recorder alone (the readers' plugin only for alerts,
# otel or analytics.findings.keep, all off by default); the first Monitor sends the GPU
# monitor's scheduler side (a scheduler plugin is a call on every transition).
REGISTERED = COLLECTOR
GPU_MONITOR = GPU_SAMPLER | {
    "collect.sources",
    "collect.gpu_jobs",
    "collect.gpu_monitor",
    "collect.gpu_run",
    "collect.gpu_workers",
}
# dask_setup lives in api and reads the config, which the schema validates.
PRELOAD = REGISTERED | {"api", "api_reads", "config", "config_schema", "readers"}
ALLOWED = {
    "root": {""},
    "plugin": COLLECTOR,
    "unpickled": REGISTERED,
    "gpu_monitor": GPU_MONITOR,
    "preload": PRELOAD,
    "gpu_sampler": GPU_SAMPLER,
}
# Never loaded by any of these paths: migrations (Alembic, Mako), highlighting, SQL (the
# embedded store loads it when the plugin opens one, not at import), our HTTP server's
# handlers, the widgets and notebook libraries, Bokeh.
FORBIDDEN = (
    "alembic",
    "mako",
    "pygments",
    "sqlalchemy",
    f"{ROOT}.server",
    f"{ROOT}.widgets",
    "anywidget",
    "ipywidgets",
    "IPython",
    "jupyter",
    "bokeh",
)

# Runs in a fresh interpreter that has what the process has before our code runs
# (distributed; for the preload, a Scheduler too).  An import hook notes each module's
# importer: the first frame that is not the import machinery's.
SCRIPT = textwrap.dedent("""
    import asyncio, gc, importlib.abc, json, pickle, sys

    importers = {}

    class Witness(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            frame = sys._getframe(1)
            while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "importlib":
                frame = frame.f_back
            importers.setdefault(name, frame.f_globals.get("__name__", "?") if frame is not None else "?")
            return None

    import distributed
    from distributed.protocol.pickle import loads

    path, blobs = sys.argv[1], sys.argv[2]

    def baseline():
        gc.collect()
        sys.meta_path.insert(0, Witness())
        return set(sys.modules), len(gc.get_objects())

    async def load():
        if path == "preload":
            from distributed import Scheduler
            from distributed.preloading import process_preloads

            scheduler = Scheduler(dashboard_address=None)
            before = baseline()
            # What `dask scheduler --preload ROOT` does: import it, then run its dask_setup.
            await process_preloads(scheduler, ["ROOT"], []).start()
            assert "dask-analytics-lab" in scheduler.plugins, list(scheduler.plugins)
            return before
        before = baseline()
        if path == "root":
            import ROOT
        elif path == "plugin":
            import ROOT.collect.plugin
        elif path == "unpickled":  # the scheduler's register_scheduler_plugin handler
            with open(blobs, "rb") as f:
                recorder = loads(pickle.load(f)[0])
        elif path == "gpu_monitor":  # the same, when a Monitor registers it
            with open(blobs, "rb") as f:
                monitor = loads(pickle.load(f)[1])
        elif path == "gpu_sampler":  # the worker's plugin_add handler
            with open(blobs, "rb") as f:
                sampler = loads(pickle.load(f)[-1])
        return before

    before, objects = asyncio.run(load())
    gc.collect()
    added = len(gc.get_objects()) - objects
    new = sorted(set(sys.modules) - before)
    print(json.dumps({"loaded": {m: importers.get(m, "?") for m in new}, "gc_objects": added}))
""").replace("ROOT", ROOT)


@pytest.fixture(scope="module")
def pickled_plugins(tmp_path_factory) -> Path:
    """The plugins as the client pickles them: what register() sends to the scheduler
    (the recorder), what a Monitor sends it, then the sampler the monitor sends to workers."""
    from distributed.protocol.pickle import dumps

    from dask_analytics_lab import config
    from dask_analytics_lab.collect.gpu_monitor import GPUMonitorPlugin
    from dask_analytics_lab.collect.gpu_sampler import GPUSamplerPlugin
    from dask_analytics_lab.collect.plugin import AnalyticsPlugin

    path = tmp_path_factory.mktemp("plugins") / "plugins.pickle"
    path.write_bytes(
        pickle.dumps(
            [
                dumps(AnalyticsPlugin(config.resolve())),
                dumps(GPUMonitorPlugin()),
                dumps(GPUSamplerPlugin({"interval": 0.1})),
            ]
        )
    )
    return path


def loads_in_a_fresh_process(path: str, blobs: Path, tmp_path: Path) -> dict:
    env = {
        **os.environ,
        "DASK_TEMPORARY_DIRECTORY": str(tmp_path),
        "DASK_ANALYTICS__STORE": "sqlite:///" + str(tmp_path / "analytics.db"),
    }
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, path, str(blobs)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def local(name: str) -> str:
    return "" if name == ROOT else name[len(ROOT) + 1 :]


@pytest.mark.parametrize("path", sorted(ALLOWED))
def test_a_scheduler_and_a_worker_load_only_what_the_collector_needs(
    path, pickled_plugins, tmp_path, capsys
):
    result = loads_in_a_fresh_process(path, pickled_plugins, tmp_path)
    loaded = result["loaded"]
    ours = {local(m): by for m, by in loaded.items() if m == ROOT or m.startswith(ROOT + ".")}
    with capsys.disabled():
        print(
            f"\n{path}: {len(ours)} of the package's modules, {len(loaded)} modules in all, "
            f"{result['gc_objects']:,} GC-tracked objects added"
        )
    unexpected = [
        f"{ROOT}.{m}".rstrip(".") + f" (imported by {ours[m]})"
        for m in sorted(ours)
        if m not in ALLOWED[path]
    ]
    assert not unexpected, f"{path} now loads modules off its allow-list: " + ", ".join(unexpected)
    stale = sorted(f"{ROOT}.{m}".rstrip(".") for m in ALLOWED[path] - set(ours))
    assert not stale, f"{path} no longer loads these: take them off its allow-list: {stale}"
    forbidden = [
        f"{m} (imported by {by})"
        for m, by in sorted(loaded.items())
        if m.split(".")[0].startswith("jupyter")
        or any(m == f or m.startswith(f + ".") for f in FORBIDDEN)
    ]
    assert not forbidden, f"{path} loads what a scheduler must not: " + ", ".join(forbidden)


def test_the_lazy_root_gives_every_public_name_and_only_those():
    import importlib

    import dask_analytics

    star: dict = {}
    exec(f"from {ROOT} import *", star)
    assert set(star) - {"__builtins__"} == set(dask_analytics_lab.__all__)
    for name in dask_analytics_lab.__all__:
        assert star[name] is getattr(dask_analytics, name)
    assert dask_analytics_lab.register is importlib.import_module(f"{ROOT}.api").register
    assert dask_analytics_lab.load_ipython_extension is dask_analytics.load_ipython_extension
    assert dask_analytics_lab.config is importlib.import_module(
        f"{ROOT}.config"
    )  # a module, as before
    # dir() lists the public names (and dunders), not helpers nor whichever submodules loaded.
    hooks = {"load_ipython_extension", "unload_ipython_extension"}
    assert {n for n in dir(dask_analytics_lab) if not n.startswith("__")} == {
        *dask_analytics_lab.__all__,
        *hooks,
    }
    assert {n for n in dir(dask_analytics) if not n.startswith("__")} == {
        *dask_analytics_lab.__all__,
        *hooks,
        "_jupyter_server_extension_points",
    }
    for module in (dask_analytics_lab, dask_analytics):
        with pytest.raises(AttributeError, match="no_such_name"):
            module.no_such_name  # noqa: B018
        assert not hasattr(module, "dask_teardown")  # the preload looks for it


# A preload of the test's own (no analytics): what the process had loaded by the time
# Dask ran its preloads, which is after the `dask` command imported its entry points.
MODULES_SEEN = textwrap.dedent("""
    import json, os, sys

    def dask_setup(server):
        with open(os.environ["MODULES_SEEN"] + "." + type(server).__name__, "w") as f:
            json.dump(sorted(sys.modules), f)
""")


def test_dask_scheduler_and_worker_load_only_the_entry_points_shim(tmp_path):
    """Dask's CLI imports every `dask_cli` entry point at each start: a `dask scheduler`
    and a `dask worker` that do not use analytics load the shim and nothing else of ours."""
    (tmp_path / "seen.py").write_text(MODULES_SEEN)
    seen = tmp_path / "modules"
    scheduler_file = tmp_path / "scheduler.json"
    env = {
        **os.environ,
        "MODULES_SEEN": str(seen),
        "DASK_CONFIG": str(tmp_path / "no-config"),  # nobody's preloads but ours
        "DASK_TEMPORARY_DIRECTORY": str(tmp_path),
    }
    dask = [sys.executable, "-m", "dask"]
    procs = [
        subprocess.Popen(
            [*dask, "scheduler", "--port", "0", "--no-dashboard"]
            + ["--scheduler-file", str(scheduler_file), "--preload", str(tmp_path / "seen.py")],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        wait_for(scheduler_file.exists, timeout=120, what="the scheduler's address file")
        procs.append(
            subprocess.Popen(
                [*dask, "worker", "--scheduler-file", str(scheduler_file), "--no-dashboard"]
                + ["--nthreads", "1", "--preload-nanny", str(tmp_path / "seen.py")],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        files = [Path(f"{seen}.Scheduler"), Path(f"{seen}.Nanny")]
        wait_for(
            lambda: all(f.exists() and f.stat().st_size for f in files),
            timeout=120,
            what="both processes' module lists",
        )
    finally:
        # The worker first: a nanny whose scheduler went away first waits to reconnect.
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    for f in files:
        loaded = json.loads(f.read_text())
        ours = sorted(m for m in loaded if m.split(".")[0] in (ROOT, "dask_analytics"))
        # The shim is there: Dask did load the entry point, so the test sees what it pays.
        assert ours == [ROOT, f"{ROOT}.cli_entry"], (f.name, ours)
        assert not [m for m in loaded if m.split(".")[0] in ("sqlalchemy", "alembic")], f.name


def test_the_entry_points_stand_in_is_the_whole_cli_by_its_help_and_commands():
    import click

    from dask_analytics_lab import cli, cli_entry

    assert cli_entry.analytics.help == cli.analytics.help
    ctx = click.Context(cli.analytics)
    assert cli_entry.analytics.list_commands(ctx) == cli.analytics.list_commands(ctx)


# --- the collector stays small enough to change ------------------------------------
def test_no_class_in_collect_is_over_250_lines_nor_a_function_over_60():
    """Issue 45: each class and function of the collector has one job a reader can hold
    in mind (docstrings and comments count: they are read too)."""
    too_long = []
    for path in sorted((PACKAGE / "collect").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            limit = (
                250
                if isinstance(node, ast.ClassDef)
                else 60
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else None
            )
            if limit is not None and node.end_lineno - node.lineno + 1 > limit:
                too_long.append(f"{path.name}: {node.name} ({node.end_lineno - node.lineno + 1})")
    assert too_long == []
