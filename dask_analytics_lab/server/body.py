"""Reading a request body safely: authenticated first, streamed, bounded in memory.

`BodyReader` (a handler base, tornado's stream_request_body) takes a body in this order:
1. prepare(), from the headers alone: the host check, the token (401/429), the
   Content-Type (415), Content-Encoding (415) and Content-Length (413).  Nothing of
   the body has been read yet: a stranger's upload costs the server nothing.
2. The handler's own word on the headers (`admit`: ingest refuses at once what it
   could not store before the client's deadline, deadlines.py), then a share of the
   server's memory for the decompressed bytes (`ctx.receiving`); when other bodies
   hold it, the request waits there, still unread (TCP pushes back on the sender),
   and gets 503 + Retry-After after `queue_timeout()` (`body_queue_timeout`, or less).
3. The body arrives chunk by chunk; gzip is inflated as it comes, in bounded steps,
   and refused (413) past `max_json_bytes` decompressed or past RATIO times what was
   received (a gzip bomb).  No data for `body_idle_timeout` seconds, or the whole body
   taking longer than `body_timeout`, closes the connection.
4. Before parsing, what the parsed body will cost is estimated from the bytes (their
   length and how many JSON values they hold, counted in C); past the whole parse
   budget that is 413, else the request waits for that much of `ctx.parsing`.
5. Parsing (and the handler's own work) runs on the body threads, never on the loop.
So the memory all bodies in flight take stays under `body_memory` (by the estimate).

Everything here turns bad input into an `ApiError` (4xx) with a message the client can
act on, before any of it reaches the store.  NaN and infinities (which Python's json
writes) are read as null.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import zlib
from typing import Any

from tornado.ioloop import IOLoop
from tornado.web import stream_request_body

from .base import BaseHandler
from .context import Principal
from .errors import ApiError

logger = logging.getLogger("dask_analytics_lab.server")

INT_LIMIT = 2**63  # BIGINT; SQLite and PostgreSQL both refuse larger integers
# gzip'd scheduler JSON expands 10 to 30 times; a body may expand RATIO times what was
# received (or to RATIO_FLOOR, whichever is more) and no further.
RATIO = 100
RATIO_FLOOR = 2**20
STEP = 2**20  # inflate at most this much per step, so the loop serves others between steps
SMALL_BODY = 64 * 2**10  # the most any request without a body of its own may carry
# What parsing and storing a body costs, per byte and per JSON value (measured on
# scheduler batches and on hostile shapes: lists of {}, of floats, of short strings, one
# huge string): the received bytes, their decoded text, the strings parsed out of it and
# the copies validation makes; then the objects, about 40 to 90 bytes per value.
COST_PER_BYTE = 3
COST_PER_VALUE = 80
# After a body this big, hand freed memory back to the system (glibc keeps it otherwise,
# and the process's RSS would stay at its high-water mark).
TRIM_AFTER = 16 * 2**20
# Bodies up to this size are costed on the event loop (parse_cost: well under a
# millisecond), not on a body thread: the hop there and back cost more than the count.
COST_ON_LOOP = 2**20


def _trim() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


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


def parse_json(raw: bytes | bytearray, *, what: str = "body") -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"{what} is not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        # Numbers go through _int/_float (a few percent slower than without: cheaper
        # than scanning the text for suspects first).
        value = json.loads(
            text, parse_int=_int, parse_float=_float, parse_constant=lambda name: None
        )
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


def parse_cost(raw: bytes | bytearray) -> int:
    """Bytes of memory that parsing `raw` and storing what it holds may take, at most.

    Python's objects dwarf their JSON text: `{},` (3 bytes) is a 64-byte dict and an
    8-byte list slot, validated and stored after.  Counting the characters that start
    or separate values bounds the number of objects; strings count with their text
    (4 bytes a character once one is outside ASCII).
    """
    values = raw.count(b",") + raw.count(b":") + raw.count(b"{") + raw.count(b"[") + 1
    text = len(raw) if raw.isascii() else 4 * len(raw)
    return COST_PER_BYTE * len(raw) + text + COST_PER_VALUE * values


def read_json(request: Any, *, max_bytes: int, max_decompressed: int) -> Any:
    """The request's JSON body (gzip'd or not), or ApiError saying what is wrong.

    A `BodyReader` handler has read and parsed it already (request.dal_json): its own
    limits applied then."""
    if hasattr(request, "dal_json"):
        return request.dal_json
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


def content_type_ok(headers: Any) -> str:
    """The body's Content-Encoding ("gzip" or "identity"), or ApiError 415."""
    ctype = headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        # Also keeps browsers' cross-site "simple" form posts out.
        raise ApiError(415, f"Content-Type must be application/json, got {ctype or 'none'!r}")
    encoding = headers.get("Content-Encoding", "identity").strip().lower() or "identity"
    if encoding not in ("gzip", "identity"):
        raise ApiError(415, f"Content-Encoding {encoding!r} is not supported; send gzip or none")
    return encoding


@stream_request_body
class BodyReader(BaseHandler):
    """A handler whose POST body is read as the module doc says; `await self.body_json()`
    in post() gives the parsed body.  `self.body_principal` is who sent it."""

    body_methods = ("POST",)

    def body_limits(self) -> tuple[int, int]:
        """(largest body as sent, largest once decompressed)."""
        return self.ctx.max_body_bytes, self.ctx.max_json_bytes

    def initialize(self, ctx: Any, **kwargs: Any) -> None:
        super().initialize(ctx, **kwargs)
        self.body_principal: Principal | None = None
        self._takes_body = False
        self._refused = False
        self._closed = False
        self._processing = False
        self._held_receive = 0
        self._held_parse = 0
        self._received = 0
        self._buf = bytearray()
        self._inflate: Any = None
        self._last_data = time.monotonic()
        self._watch: Any = None

    async def prepare(self) -> None:
        await super().prepare()
        if self._finished:
            return
        connection = getattr(self.request, "connection", None)
        if self.request.method not in self.body_methods:
            if connection is not None and hasattr(connection, "set_max_body_size"):
                connection.set_max_body_size(SMALL_BODY)
            return
        # Who is asking, from the headers alone: nothing of the body is read yet.
        self.body_principal = await self.principal(allow_cookie=False)
        encoding = content_type_ok(self.request.headers)
        max_bytes, max_out = self.body_limits()
        announced = self.request.headers.get("Content-Length")
        length: int | None = None
        if announced is not None:
            try:
                length = int(announced)
            except ValueError:
                raise ApiError(400, "Content-Length is not a number") from None
            if length > max_bytes:
                raise ApiError(413, f"request body is over {max_bytes} bytes ({length} announced)")
        if encoding == "gzip":
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            bound = max_out if length is None else min(max_out, max(RATIO_FLOOR, RATIO * length))
        else:
            bound = max_out if length is None else min(max_out, length)
        self._max_bytes, self._max_out = max_bytes, max_out
        self.admit()
        await self.ctx.receiving.acquire(bound, self.queue_timeout())
        self._held_receive = bound
        if self._closed:  # the client went away while waiting
            self._release()
            return
        self._takes_body = True
        if connection is not None and hasattr(connection, "set_max_body_size"):
            connection.set_max_body_size(max_bytes)
            connection.set_body_timeout(self.ctx.body_timeout)
        self._last_data = time.monotonic()
        self._watch = IOLoop.current().call_later(self.ctx.body_idle_timeout, self._check_idle)

    def admit(self) -> None:
        """From the headers, the body still unread: raise ApiError to refuse it (a
        handler's own checks; none here)."""

    def queue_timeout(self) -> float:
        """Seconds this request may wait for its share of the memory budgets."""
        return self.ctx.body_queue_timeout

    # --- receiving ---------------------------------------------------------------
    def _check_idle(self) -> None:
        self._watch = None
        if self._finished or self._closed or self._processing:
            return
        idle = time.monotonic() - self._last_data
        if idle >= self.ctx.body_idle_timeout:
            logger.info(
                "dask-analytics server: closed a request from %s whose body stalled (%.0f s without data, "
                "%d bytes received)",
                self.request.remote_ip,
                idle,
                self._received,
            )
            self._drop_connection()
            return
        self._watch = IOLoop.current().call_later(
            self.ctx.body_idle_timeout - idle, self._check_idle
        )

    def _drop_connection(self) -> None:
        connection = getattr(self.request, "connection", None)
        if connection is not None:
            connection.close()
        self.on_connection_close()

    def _refuse(self, status: int, message: str) -> None:
        """Answer now, mid-body: the rest is not read (tornado closes the connection)."""
        self._refused = True
        self._buf = bytearray()
        self._inflate = None
        if not self._finished:
            e = ApiError(status, message)
            self.send_error(status, exc_info=(ApiError, e, None))

    async def data_received(self, chunk: bytes) -> None:
        if not self._takes_body or self._refused:
            return  # a body where none belongs (bounded by SMALL_BODY), or one already refused
        self._last_data = time.monotonic()
        self._received += len(chunk)
        if self._received > self._max_bytes:
            return self._refuse(413, f"request body is over {self._max_bytes} bytes")
        if self._inflate is None:
            self._buf += chunk
            if len(self._buf) > self._max_out:
                self._refuse(413, f"request body is over {self._max_out} bytes")
            return
        data = chunk
        while data and not self._refused:
            allowed = min(self._max_out, max(RATIO_FLOOR, RATIO * self._received))
            room = allowed - len(self._buf)
            try:
                out = self._inflate.decompress(data, max(1, min(room + 1, STEP)))
            except zlib.error as e:
                return self._refuse(400, f"body is not valid gzip ({e})")
            self._buf += out
            if len(self._buf) > allowed:
                if allowed >= self._max_out:
                    return self._refuse(
                        413, f"request body is over {self._max_out} bytes once decompressed"
                    )
                return self._refuse(
                    413,
                    f"request body expands more than {RATIO} times when decompressed; "
                    "refused as a gzip bomb",
                )
            if self._inflate.eof:
                if self._inflate.unused_data or self._inflate.unconsumed_tail:
                    return self._refuse(
                        400, "body is not valid gzip (trailing data after the stream)"
                    )
                return
            data = self._inflate.unconsumed_tail
            if data:
                await asyncio.sleep(0)  # a big step done: let the loop answer others

    def on_connection_close(self) -> None:
        self._closed = True
        super().on_connection_close()
        if not self._processing:
            self._release()

    def on_finish(self) -> None:
        big = self._held_parse >= TRIM_AFTER
        self._release()
        if big:
            try:
                self.ctx.body_executor.submit(_trim)
            except RuntimeError:  # shutting down
                pass
        super().on_finish()

    def _release(self) -> None:
        if self._watch is not None:
            IOLoop.current().remove_timeout(self._watch)
            self._watch = None
        if self._held_receive:
            self.ctx.receiving.release(self._held_receive)
            self._held_receive = 0
        if self._held_parse:
            self.ctx.parsing.release(self._held_parse)
            self._held_parse = 0
        self._buf = bytearray()

    # --- parsing -------------------------------------------------------------------
    async def body_json(self) -> Any:
        """The parsed body (off the loop, within the parse budget), or ApiError."""
        raw = await self.body_raw()
        return await self.call(self.parse_body, raw, executor=self.ctx.body_executor)

    def parse_body(self, raw: bytearray) -> Any:
        """body_raw's bytes parsed (parse_json), on a body thread."""
        return parse_json(raw)

    async def body_raw(self) -> bytearray:
        """The body's bytes, within the parse budget, for the caller to parse_body on a
        body thread (with its own work after, in the same thread call), or ApiError."""
        self._processing = True
        if self._watch is not None:
            IOLoop.current().remove_timeout(self._watch)
            self._watch = None
        raw, self._buf = self._buf, bytearray()
        if self._inflate is not None and not self._inflate.eof:
            raise ApiError(400, "body is not valid gzip (truncated stream)")
        self._inflate = None
        if not raw.strip():
            raise ApiError(400, "request body is empty; send JSON")
        if len(raw) <= COST_ON_LOOP:
            cost = parse_cost(raw)
        else:
            cost = await self.call(parse_cost, raw, executor=self.ctx.body_executor)
        budget = self.ctx.parsing
        if cost > budget.total:
            raise ApiError(
                413,
                f"this body would take about {cost / 2**20:.0f} MiB of memory to read, more than "
                f"this server allows one request ({budget.total / 2**20:.0f} MiB); send smaller "
                "batches (the dask-analytics plugin sends at most 500 messages at once)",
            )
        self._held_parse = await budget.acquire(cost, self.queue_timeout())
        # The estimate covers the raw bytes too: their own share is no longer needed.
        self.ctx.receiving.release(self._held_receive)
        self._held_receive = 0
        return raw
