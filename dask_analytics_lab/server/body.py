"""Reading a request body safely: size limits, gzip bombs, JSON that no database takes.

Everything here turns bad input into an `ApiError` (4xx) with a message the client can act
on, before any of it reaches the store.  NaN and infinities (which Python's json writes)
are read as null.
"""
from __future__ import annotations

import json
import math
import zlib
from typing import Any

from .errors import ApiError

INT_LIMIT = 2**63  # BIGINT; SQLite and PostgreSQL both refuse larger integers


def _gunzip(data: bytes, limit: int) -> bytes:
    # Decompress in bounded steps: a few KB of gzip can expand to gigabytes.
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, limit + 1)
        if len(out) > limit or d.unconsumed_tail:
            raise ApiError(413, f"request body is over {limit} bytes once decompressed")
        out += d.flush()
    except zlib.error as e:
        raise ApiError(400, f"body is not valid gzip ({e})") from None
    if not d.eof:
        raise ApiError(400, "body is not valid gzip (truncated stream)")
    if d.unused_data:
        raise ApiError(400, "body is not valid gzip (trailing data after the stream)")
    return out


class _OutOfRange(ValueError):
    pass


def _int(text: str) -> int:
    value = int(text)
    if not -INT_LIMIT <= value < INT_LIMIT:
        raise _OutOfRange(f"integer {text[:30]}... is out of range (at most 2**63-1)")
    return value


def _float(text: str) -> float | None:
    # Python's json.dumps writes NaN/Infinity by default, and 1e999 reads as infinity:
    # one such GPU reading must not cost a whole batch, so they become null.
    value = float(text)
    return value if math.isfinite(value) else None


def _clean_str(s: str) -> str:
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> '?'
    return s


def _clean_strings(value: Any) -> Any:
    """Replace NUL and lone surrogates (no database stores them) in every string."""
    root = [value]
    stack: list[Any] = [root]
    while stack:  # iterative: a deeply nested document must not overflow our stack
        node = stack.pop()
        items = enumerate(node) if isinstance(node, list) else list(node.items())
        for k, v in items:
            if isinstance(v, (list, dict)):
                stack.append(v)
            elif isinstance(v, str):
                node[k] = _clean_str(v)
            if isinstance(k, str):
                ck = _clean_str(k)
                if ck != k:
                    node[ck] = node.pop(k)
    return root[0]


def parse_json(raw: bytes, *, what: str = "body") -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"{what} is not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        # Numbers go through _int/_float (a few percent slower than without: cheaper
        # than scanning the text for suspects first).
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=lambda name: None)
    except _OutOfRange as e:
        raise ApiError(422, str(e)) from None
    except RecursionError:
        raise ApiError(400, f"{what} is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, the int digit limit
        raise ApiError(400, f"{what} is not valid JSON: {str(e)[:200]}") from None
    # Only an escape can put NUL or a lone surrogate into a string (raw control
    # characters and invalid UTF-8 were refused above): look before walking.
    if b"\\u0000" in raw or b"\\ud" in raw or b"\\uD" in raw:
        value = _clean_strings(value)
    return value


def read_json(request: Any, *, max_bytes: int, max_decompressed: int) -> Any:
    """The request's JSON body (gzip'd or not), or ApiError saying what is wrong."""
    ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        # Also keeps browsers' cross-site "simple" form posts out.
        raise ApiError(415, f"Content-Type must be application/json, got {ctype or 'none'!r}")
    body = request.body or b""
    if len(body) > max_bytes:
        raise ApiError(413, f"request body is over {max_bytes} bytes")
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding == "gzip":
        body = _gunzip(body, max_decompressed)
    elif encoding not in ("", "identity"):
        raise ApiError(415, f"Content-Encoding {encoding!r} is not supported; send gzip or none")
    if not body.strip():
        raise ApiError(400, "request body is empty; send JSON")
    return parse_json(body)
