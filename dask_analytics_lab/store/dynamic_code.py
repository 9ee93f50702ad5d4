"""Where a `<dynamic-code>` frame of a failure was written, from the computation's own
code snippets.

cloudpickle sends a function defined in a script's `__main__` or in a notebook cell by
value and names its code `<dynamic-code>` (keeping its name and line numbers), so the
worker's traceback reads `File "<dynamic-code>", line 9, in boom` with no source line.
The client sends a snippet per frame that led to compute, up to
`analytics.computation.code.nframes`: the function that called compute, its callers and,
at the top, the whole script or cell (where a helper at module level is).  When one holds
the function, the frame gets the snippet's file name and its source line.  A frame is
placed only where the snippets leave no doubt: one file defines a function of that name,
before the line that made the computation, whose lines hold the frame's line.  Anything
else stays as Dask reported it (a function from another cell, which sent no snippet).

Done when read, not in the scheduler: the scheduler would have to parse code in its
event loop, and the rows it writes would hold source lines outside the privacy switch
and the encryption that cover code snippets.  Read here, only a reader that may open a
snippet's text places a frame with it.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Sequence
from typing import Any

from ..codecrypt import is_sealed

DYNAMIC = "<dynamic-code>"
_FRAME_LINE = re.compile(r'^(\s*)File "<dynamic-code>", line (\d+), in (.+)$')
_LOCATION = re.compile(r"^<dynamic-code>:(\d+) in (.+)$")
# Code objects that are not `def`s, by the name Python gives their frames.
_ANONYMOUS = {
    "<lambda>": ast.Lambda,
    "<genexpr>": ast.GeneratorExp,
    "<listcomp>": ast.ListComp,
    "<setcomp>": ast.SetComp,
    "<dictcomp>": ast.DictComp,
}


def has_dynamic_code(row: dict[str, Any]) -> bool:
    return DYNAMIC in (row.get("location") or "") or DYNAMIC in (row.get("traceback_text") or "")


class Snippets:
    """The code snippets of one computation (as get_computation gives them), asked where
    a function of some name holding some line was written."""

    def __init__(self, code: list[dict[str, Any]]):
        self._code = [c for c in code if _usable(c)]

    def find(self, name: str, line: int) -> tuple[str, str] | None:
        """(file name, source line) of line `line` of the function `name`, or None when
        no snippet, or more than one file, has it."""
        found: set[tuple[str, str]] = set()
        for snippet in self._code:
            first = snippet["lineno_frame"] - snippet["lineno_relative"]
            functions, made_by = _outline(snippet["text"], snippet["lineno_relative"] + 1)
            lines = snippet["text"].splitlines()
            for fname, start, end in functions:
                # Written no later than the statement that made the computation: the
                # definition that ran (a later one in the snippet had not run yet).
                if (
                    fname == name
                    and start <= line - first + 1 <= end
                    and start <= made_by
                    and 0 <= line - first < len(lines)
                ):
                    found.add((snippet["filename"], lines[line - first].strip()))
                    break
        return found.pop() if len(found) == 1 else None


@functools.lru_cache(maxsize=128)
def _outline(text: str, call: int) -> tuple[tuple[tuple[str, int, int], ...], int]:
    """A snippet's functions (name, first line, last line) and the last line of the
    statement on line `call` (the one that made the computation), in lines of the
    snippet from 1.  Cached: a live view reads the same failures every few seconds."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # e.g. a cell with IPython magics, sent as typed: no frame is placed from it
        return (), 0
    # Every node a frame can name, or a call stand in, is a statement or an expression.
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.stmt, ast.expr))]
    functions = tuple(
        (n, _start(node), node.end_lineno or node.lineno) for node in nodes if (n := _name(node))
    )
    around = [
        node
        for node in nodes
        if isinstance(node, ast.stmt) and node.lineno <= call <= (node.end_lineno or node.lineno)
    ]
    inner = min(
        around, key=lambda node: (node.end_lineno or node.lineno) - node.lineno, default=None
    )
    return functions, (inner.end_lineno or inner.lineno) if inner else call


def place(row: dict[str, Any], snippets: Snippets) -> dict[str, Any]:
    """The exception row with its `<dynamic-code>` frames placed in their file (or cell)
    and line, with their source lines; what Dask reported is kept in
    `recorded_location` / `recorded_traceback_text` when anything changed."""
    location, traceback_text = row.get("location") or "", row.get("traceback_text") or ""
    m = _LOCATION.match(location)
    hit = snippets.find(m.group(2).strip(), int(m.group(1))) if m else None
    new_location = f"{hit[0]}:{m.group(1)} in {m.group(2)}" if m and hit else location
    out, changed = [], False
    for text in traceback_text.splitlines(keepends=True):
        f = _FRAME_LINE.match(text.rstrip("\n"))
        spot = snippets.find(f.group(3).strip(), int(f.group(2))) if f else None
        if f is None or not spot:
            out.append(text)
            continue
        indent = f.group(1)
        out.append(f'{indent}File "{spot[0]}", line {f.group(2)}, in {f.group(3)}\n')
        if spot[1]:
            out.append(f"{indent}  {spot[1]}\n")
        changed = True
    if not hit and not changed:
        return row
    return {
        **row,
        "location": new_location,
        "traceback_text": "".join(out) if changed else traceback_text,
        "recorded_location": location,
        "recorded_traceback_text": traceback_text,
    }


def as_recorded(row: dict[str, Any]) -> dict[str, Any]:
    """The row as Dask reported it: for a report that may not hold code."""
    if "recorded_location" not in row:
        return row
    out = {
        **row,
        "location": row["recorded_location"],
        "traceback_text": row["recorded_traceback_text"],
    }
    del out["recorded_location"], out["recorded_traceback_text"]
    return out


def _usable(snippet: dict[str, Any]) -> bool:
    text = snippet.get("text")
    return (
        isinstance(text, str)
        and not is_sealed(text)
        and bool(snippet.get("filename"))
        and isinstance(snippet.get("lineno_frame"), int)
        and isinstance(snippet.get("lineno_relative"), int)
    )


def _name(node: Any) -> str | None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name
    for name, kind in _ANONYMOUS.items():
        if isinstance(node, kind):
            return name
    return None


def _start(node: ast.stmt | ast.expr) -> int:
    # A decorated function's code starts at its first decorator.
    decorators: Sequence[ast.expr] = getattr(node, "decorator_list", ())
    return min([node.lineno, *(d.lineno for d in decorators)])
