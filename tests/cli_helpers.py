"""Reading what the command line prints."""

from __future__ import annotations


def table(out: str) -> list[dict]:
    """The rows of a printed table, by header (columns cut where the header's start)."""
    lines = out.splitlines()
    header, rule = lines[0], lines[1]
    starts = [i for i, ch in enumerate(rule) if ch == "-" and (i == 0 or rule[i - 1] == " ")]
    names = [header[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
    rows = []
    for line in lines[2:]:
        if not line.strip() or line.startswith("("):
            continue
        rows.append({n: line[a:b].strip() for n, a, b in zip(names, starts, starts[1:] + [None])})
    return rows
