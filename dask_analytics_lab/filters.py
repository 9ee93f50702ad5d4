"""The values the list filters and the cost report take, checked in one place.

The public API, the CLI and the team server all pass what they were given through
these, so a bad value reads the same everywhere (a ValueError saying what was wrong
and what to pass; the server answers it as a 400 before any query runs).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
import time
from typing import Any

CLUSTER_STATES = ("live", "stopped", "lost")
COMPUTATION_STATES = ("running", "finished", "erred", "cancelled", "lost")
COST_BY = ("user", "day", "month")
# What findings/ finds (findings.KINDS, one rule each), in the order the rules run.
FINDING_KINDS = (
    "small-tasks",
    "straggler",
    "imbalance",
    "spilling",
    "memory-kill",
    "gil-contention",
    "cpu-starved",
    "transfer-bound",
    "serialization",
    "too-few-tasks",
    "failures",
    "slower-than-before",
    "idle-cluster",
    "gpu-underused",
)

MAX_TEXT = 200  # the longest filter text (the server's ids have the same bound)
MAX_CURSOR = 600

_TIME_HELP = (
    "seconds since the epoch, a datetime, an ISO date or time such as '2026-11-01' or "
    "'2026-11-01T12:00:00Z' (no offset: UTC), or an age such as '7d' or '12h' (that long ago)"
)


_EPOCH_FLOOR = 1e8  # 1973: nothing was recorded before; a smaller number is an age without its unit


def parse_time(value: Any, name: str, *, now: float | None = None) -> float | None:
    """Seconds since the epoch of a since=/until= value (see _TIME_HELP); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name} must be {_TIME_HELP}; got {value!r}")
    if isinstance(value, (int, float)):
        t = float(value)
    elif isinstance(value, dt.datetime):
        t = (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    elif isinstance(value, dt.date):
        t = dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp()
    elif isinstance(value, str):
        t = _parse_time_text(value.strip(), name, now)
    else:
        raise ValueError(f"{name} must be {_TIME_HELP}; got a {type(value).__name__}")
    if not math.isfinite(t):
        raise ValueError(f"{name} must be {_TIME_HELP}; got {value!r}")
    if 0 < t < _EPOCH_FLOOR:
        # "--since 30" meant 30 days, not 30 s after 1970 (which would match everything).
        raise ValueError(
            f"{name}={value!r} reads as seconds since the epoch (1970): for an age write it "
            f"with its unit, such as '{value}d' or '{value}h'"
        )
    return t


def _parse_time_text(text: str, name: str, now: float | None) -> float:
    bad = ValueError(f"{name} must be {_TIME_HELP}; got {text[:60]!r}")
    if not text or len(text) > 64:
        raise bad
    try:
        return float(text)
    except ValueError:
        pass
    try:
        # Python < 3.11 does not read a trailing Z
        when = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] in "zZ" else text)
    except ValueError:
        when = None
    if when is not None:
        return parse_time(when, name)  # type: ignore[return-value]
    if text[0].isdigit() and text[-1].isalpha():
        from .config import parse_age

        try:
            return (time.time() if now is None else now) - parse_age(text, what=name)
        except ValueError:
            pass
    raise bad


def parse_state(value: Any, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in allowed:
        shown = value[:40] if isinstance(value, str) else value
        raise ValueError(f"state must be one of {', '.join(allowed)}; got {shown!r}")
    return value


def parse_finding(value: Any) -> str:
    """A finding= filter: one of FINDING_KINDS."""
    if not isinstance(value, str) or value not in FINDING_KINDS:
        shown = value[:40] if isinstance(value, str) else value
        raise ValueError(f"finding must be one of {', '.join(FINDING_KINDS)}; got {shown!r}")
    return value


def parse_fields(value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A fields= choice: names of the row's fields, as a list or comma-separated text."""
    names = value.split(",") if isinstance(value, str) else value
    if (
        not isinstance(names, (list, tuple))
        or not names
        or not all(isinstance(n, str) for n in names)
    ):
        raise ValueError(
            f"fields must be a list of field names or comma-separated text; got {str(value)[:40]!r}"
        )
    unknown = [n[:40] for n in names if n not in allowed]
    if unknown:
        raise ValueError(f"unknown field(s) {unknown[:5]}; choose from {', '.join(allowed)}")
    return tuple(dict.fromkeys(names))


def has_control(text: str) -> bool:
    """Whether `text` holds a C0 or C1 control character, DEL or a lone surrogate: what
    would act on a terminal, split a header or make PostgreSQL refuse the text (NUL)."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or 0xD800 <= ord(c) <= 0xDFFF for c in text)


def printable(value: Any, name: str, most: int) -> str:
    """Text of 1 to `most` characters with no control character (has_control): the one
    check of every id and filter value."""
    if not isinstance(value, str) or not value or len(value) > most:
        raise ValueError(f"{name} must be text of 1 to {most} characters; got {str(value)[:40]!r}")
    if has_control(value):
        raise ValueError(f"{name} contains control characters")
    return value


def parse_text(value: Any, name: str) -> str | None:
    """A user=/text= filter: printable text of 1 to MAX_TEXT characters."""
    return None if value is None else printable(value, name, MAX_TEXT)


def parse_by(value: Any) -> str:
    if not isinstance(value, str) or value not in COST_BY:
        shown = value[:40] if isinstance(value, str) else value
        raise ValueError(f"by must be one of {', '.join(COST_BY)}; got {shown!r}")
    return value


def encode_cursor(start: float, ident: str) -> str:
    """The opaque `cursor` of a row: where the next (older) page starts."""
    raw = json.dumps([start, ident], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: Any) -> tuple[float, str] | None:
    """(start, id) of a cursor made by encode_cursor; None stays None."""
    if cursor is None:
        return None
    bad = ValueError(
        "before must be the `cursor` of the last row of the previous page, "
        f"as this store gave it; got {str(cursor)[:40]!r}"
    )
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR:
        raise bad
    try:
        start, ident = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError, binascii.Error):
        raise bad from None
    if (
        isinstance(start, bool)
        or not isinstance(start, (int, float))
        or not math.isfinite(start)
        or not isinstance(ident, str)
        or not ident
    ):
        raise bad
    return float(start), ident
