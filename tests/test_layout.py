"""The package's imports flow one way (DESIGN.md, "Layout"): the import graph of
dask_analytics_lab, read from the source with `ast` (imports inside functions too), has
no cycle, and no arrow from store/ or collect/ up to the readers and front ends, from
server/ to widgets/, from the API to server/, or from reports/ to server/ handlers or
the API."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable

import pytest

import dask_analytics_lab

PACKAGE = Path(dask_analytics_lab.__file__).resolve().parent
ROOT = PACKAGE.name
# What store/ and collect/ may import besides themselves: the base modules.
BASE = {"messages", "config", "codecrypt", "remote"}


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
                    base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names)
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


def arrows(graph: dict[str, set[str]], source: tuple[str, ...], bad: Callable[[str], bool]) -> list[str]:
    """The arrows "a -> b" from modules under `source` to modules `bad` picks."""
    return sorted(f"{a} -> {b}" for a, targets in graph.items() if under(a, *source) for b in targets if bad(b))


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE)


def test_the_graph_reads_every_kind_of_import(graph):
    # A module-level relative import, one inside a function, and one of a subpackage's
    # module from outside it (which runs that subpackage's __init__ too).
    assert f"{ROOT}.store.schema" in graph[f"{ROOT}.store.team_schema"]
    assert f"{ROOT}.remote" in graph[f"{ROOT}.readers"]  # inside open_reader()
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
