"""CSV cells a spreadsheet reads as text, never as a formula (CSV injection).

Recorded strings (cluster and task-group names, labels, messages, tracebacks) come
from whatever ran on a cluster; a cell such as `=HYPERLINK("http://evil", "x")` opened
in a spreadsheet would run as a formula.  As OWASP advises, a text cell starting with
`=`, `+`, `-`, `@`, tab or CR gets a leading `'`, which spreadsheets take as "this is
text" and do not show.

What is a number is decided by its type, not by how its text reads: a value the store
holds as a number (an int or float, -3 or -0.5 included) is written as that number
and stays a number in the spreadsheet; a string is text even when it reads "-1" (a
name that looks like a number was a name when it was recorded), so it is quoted too.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """`value` as a CSV cell: a string that a spreadsheet would run is made text;
    numbers, booleans and None as they are; dicts and lists as JSON."""
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_rows(path: str | Path, columns: list[str], rows: Iterable[dict]) -> None:
    """One CSV file: a header of `columns`, then each row's cells (csv_cell)."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[csv_cell(c) for c in columns])
        writer.writeheader()
        for r in rows:
            writer.writerow({csv_cell(k): csv_cell(v) for k, v in r.items()})
