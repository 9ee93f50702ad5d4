"""Short ids, as git shortens commit ids: lists print the short form, and a unique
prefix of MIN_PREFIX characters or more is taken wherever an id is (store/queries.py
resolves it, so the Python API, the CLI and a team server's URLs all take one).

Computation ids are Dask's uuid4s; cluster ids are Dask's `Scheduler-<uuid4>`, whose
"Scheduler-" says nothing, so their short form keeps it and 8 characters after it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MIN_PREFIX = 8
MAX_CANDIDATES = 10  # an ambiguous prefix's error names at most these

# Leading words, each with a letter no hex digit is ("Scheduler-", "tcp-scheduler-"): a
# uuid's groups are never taken for one.
_WORD = re.compile(r"(?:[A-Za-z]*[g-zG-Z][A-Za-z]*-)+")


def short_id(ident: str, size: int = MIN_PREFIX) -> str:
    """`ident` cut to `size` characters after its leading words (such as "Scheduler-")."""
    word = _WORD.match(ident)
    keep = (word.end() if word else 0) + size
    return ident if len(ident) <= keep else ident[:keep]


def shorten(idents: Iterable[str]) -> dict[str, str]:
    """{id: its short form}, each made longer where two would read the same (as git does
    in a listing): a short form printed here names one id of these."""
    ids = sorted(set(idents))
    out: dict[str, str] = {}
    for i, ident in enumerate(ids):
        size = MIN_PREFIX
        neighbours = ids[max(0, i - 1) : i] + ids[i + 1 : i + 2]
        # Sorted, only the neighbours can share the longest prefix with it.
        while (
            any(short_id(n, size) == short_id(ident, size) for n in neighbours)
            and short_id(ident, size) != ident
        ):
            size += 1
        out[ident] = short_id(ident, size)
    return out
