"""The README's configuration table, generated from the schema (what is allowed, what it
means) and analytics.yaml (defaults): edit those, then run this.

python scripts/config_table.py           rewrite the table in README.md
python scripts/config_table.py --check   exit 1 when README.md's table is not the generated one
python scripts/config_table.py --print   print the table
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dask_analytics_lab import config
from dask_analytics_lab.config_schema import entries, expected

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN = (
    "<!-- config table: generated from dask_analytics_lab/analytics-schema.yaml by "
    "`python scripts/config_table.py`; edit the schema, not this table -->"
)
END = "<!-- end of config table -->"


def _default(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_default(v) for v in value) if value else "`[]`"
    if value is None or isinstance(value, bool):
        return "`" + {None: "null", True: "true", False: "false"}[value] + "`"
    return f"`{value}`"


def table() -> str:
    """The markdown table: one row per setting, in the schema's order."""
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for key, schema in entries().items():
        meaning = " ".join(schema["description"].split()).replace("|", "\\|")
        allowed = expected(schema).replace("|", "\\|")
        rows.append(f"| `{key}` | {_default(config._default(key))} | {allowed} | {meaning} |")
    return "\n".join(rows)


def readme_table(text: str) -> str:
    """The table between the markers in the README's text."""
    try:
        start = text.index(BEGIN) + len(BEGIN)
        return text[start : text.index(END, start)].strip("\n")
    except ValueError:
        raise SystemExit(f"README.md has no config table between {BEGIN!r} and {END!r}") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true", help="compare, change nothing")
    action.add_argument("--print", action="store_true", help="print the table")
    args = parser.parse_args()
    if args.print:
        print(table())
        return 0
    text = README.read_text()
    old = readme_table(text)
    if args.check:
        if old != table():
            print("README.md's config table differs: run python scripts/config_table.py")
            return 1
        return 0
    README.write_text(
        text.replace(BEGIN + "\n" + old + "\n" + END, BEGIN + "\n" + table() + "\n" + END)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
