"""Write what comes from the read declarations (dask_analytics_lab/reads.py):

- dask_analytics_lab/reader.py      the Reader's typed methods (Store, Snapshot, HttpReader)
- dask_analytics_lab/api_reads.py   the public read functions api.py exports
- js/common/reads.gen.ts            the rows' TypeScript types and the reads' URL paths

    python scripts/gen_reads.py          write them
    python scripts/gen_reads.py --check  exit 1 if one differs from what it would write (CI)
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import types
import typing
from pathlib import Path

import msgspec
import msgspec.inspect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dask_analytics_lab import filters, read_rows, reads  # noqa: E402

HEADER = "# Written by scripts/gen_reads.py from reads.py: do not edit, run it instead.\n"


def _default(p: reads.Param) -> str:
    return repr(p.default)


def _params(read: reads.Read, *, store: bool) -> str:
    parts = ["self"] if not store else []
    for p in read.positional:
        parts.append(
            f"{p.name}: {reads.annotation(p)}"
            + ("" if p.annotation == "str" and p.default is None else f" = {_default(p)}")
        )
    parts.append("*")
    for p in (*read.keywords, reads.ACCOUNT):
        parts.append(f"{p.name}: {reads.annotation(p)} = {_default(p)}")
    if store:
        parts.append("store: str | None = None")
    if parts[-1] == "*":
        parts.pop()
    return ", ".join(parts)


def _doc(read: reads.Read, indent: str) -> str:
    text = textwrap.dedent(read.doc.split("\n", 1)[1]) if "\n" in read.doc else ""
    first = read.doc.split("\n", 1)[0]
    body = first + ("\n" + text.rstrip() if text.strip() else "")
    lines = body.split("\n")
    out = [f'{indent}"""{lines[0]}']
    out += [(indent + line) if line.strip() else "" for line in lines[1:]]
    if len(lines) > 1:
        out.append(f'{indent}"""')
    else:
        out[-1] += '"""'
    return "\n".join(out)


def _args(read: reads.Read) -> str:
    return "{" + ", ".join(f'"{p.name}": {p.name}' for p in read.params) + "}"


def reader_py() -> str:
    out = [
        HEADER,
        '"""Reader: every read of the record (reads.py), typed; the Store, its Snapshot and',
        "the HttpReader inherit these and answer each in `_answer`.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "from .reads import ReaderBase",
        "",
        "",
        "class Reader(ReaderBase):",
        '    """What readers.open_reader returns, whatever the store: the same methods, the',
        '    same arguments, the same rows."""',
    ]
    for read in reads.READS:
        out += [
            "",
            f"    def {read.name}({_params(read, store=False)}) -> {reads.returns(read)}:",
            _doc(read, " " * 8),
            f'        answer: {reads.returns(read)} = self._read("{read.name}", {_args(read)})',
            "        return answer",
        ]
    return "\n".join(out) + "\n"


def api_py() -> str:
    names = [r.name for r in reads.READS]
    out = [
        HEADER,
        '"""The public read functions (api.py exports them): each opens the reader of',
        "`store` (default `analytics.store`: readers.open_reader) and calls its method.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "from .readers import open_reader",
        "",
        f"__all__ = {names!r}",
    ]
    for read in reads.READS:
        call = ", ".join(f"{p.name}={p.name}" for p in read.params)
        out += [
            "",
            "",
            f"def {read.name}({_params(read, store=True)}) -> {reads.returns(read)}:",
            _doc(read, " " * 4),
            f"    return open_reader(store).{read.name}({call})",
        ]
    return "\n".join(out) + "\n"


def _ts_type(t: typing.Any) -> str:
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if t is typing.Any:
        return "unknown"
    if t is str:
        return "string"
    if t in (int, float):
        return "number"
    if t is bool:
        return "boolean"
    if t is type(None):
        return "null"
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not msgspec.UnsetType]
        return " | ".join(_ts_type(a) for a in kept)
    if origin is list:
        inner = _ts_type(args[0])
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    if origin is tuple:
        return "[" + ", ".join(_ts_type(a) for a in args) + "]"
    if origin is dict:
        return f"Record<string, {_ts_type(args[1])}>"
    if isinstance(t, type) and issubclass(t, read_rows.Row):
        return t.__name__
    raise TypeError(f"no TypeScript type for {t!r}")


def _ts_field(name: str, t: typing.Any, required: bool) -> str:
    return f"  {name}{'' if required else '?'}: {_ts_type(t)};"


def rows_ts() -> str:
    out = [
        "// Written by scripts/gen_reads.py from dask_analytics_lab/read_rows.py and reads.py:",
        "// do not edit, run it instead.  The store's rows as every reader answers them; a",
        "// field that may be null reads `| null`, one that may be absent `?`.",
    ]
    for name in read_rows.__all__:
        struct = getattr(read_rows, name)
        hints = typing.get_type_hints(struct)
        out += ["", f"/** {(struct.__doc__ or name).splitlines()[0]} */"]
        out.append(f"export interface {name} {{")
        for field in msgspec.inspect.type_info(struct).fields:
            out.append(_ts_field(field.name, hints[field.name], field.required))
        out.append("}")
    out += ["", "/** What a `finding=` filter takes: the kinds findings/ finds (filters.py). */"]
    kinds = ", ".join(f'"{k}"' for k in filters.FINDING_KINDS)
    out.append(f"export const FINDING_KINDS = [{kinds}] as const;")
    out += ["", "/** Each read's paths under the API (the first whose ids are given). */"]
    out.append("export const READ_PATHS = {")
    for read in reads.READS:
        paths = ", ".join(f'"{p.template}"' for p in read.paths)
        out.append(f"  {read.name}: [{paths}],")
    out.append("} as const;")
    return "\n".join(out) + "\n"


TARGETS = {
    ROOT / "dask_analytics_lab" / "reader.py": reader_py,
    ROOT / "dask_analytics_lab" / "api_reads.py": api_py,
    ROOT / "js" / "common" / "reads.gen.ts": rows_ts,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    check = ap.parse_args().check
    stale = []
    for path, make in TARGETS.items():
        text = make()
        text = _formatted(text, path)
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text)
    if stale:
        print(
            "these differ from the read declarations (dask_analytics_lab/reads.py): "
            + ", ".join(stale)
            + "; run `python scripts/gen_reads.py`",
            file=sys.stderr,
        )
        return 1
    return 0


def _formatted(text: str, path: Path) -> str:
    """As `ruff format` (Python) or prettier (TypeScript) leaves it, so the format checks
    and this one agree."""
    import subprocess

    if path.suffix == ".py":
        ruff = Path(sys.executable).with_name("ruff")
        cmd = [str(ruff if ruff.exists() else "ruff"), "format", "--stdin-filename", path.name, "-"]
    else:
        cmd = [str(ROOT / "node_modules" / ".bin" / "prettier"), "--stdin-filepath", str(path)]
    done = subprocess.run(
        cmd,
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


if __name__ == "__main__":
    sys.exit(main())
