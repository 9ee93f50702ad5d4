"""The read-only JSON API: one small handler per route, all scoped to the caller's account.

Every answer wraps its rows under a name ({"clusters": [...]}, {"cluster": {...}});
errors are {"error": message, "status": code}.  Query parameters are checked (unknown
ones, bad limits, ids and filter values give 400, before any query runs); `account=` narrows a trusted local caller to one
account and must equal a token's own account.
"""

from __future__ import annotations

import functools
import json
import urllib.parse
import zlib
from collections.abc import Callable
from typing import Any

from tornado.iostream import StreamClosedError

from .. import reads
from ..display import dumps
from ..store import schema as _schema
from ..store.budget import AnswerTooLarge, answer_budget
from .base import BaseHandler, check_text, encode_answer
from .context import Principal
from .errors import ApiError
from .shares import caller_key


def limit_param(default: int, most: int) -> Callable[[str], int]:
    """A limit= of a route that is no declared read (the reports list)."""
    param = reads.Param("limit", reads.LIMIT, default, most=most)

    def parse(value: str) -> int:
        try:
            n: int = reads.from_query(param, value)
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        return n

    parse.default = default  # type: ignore[attr-defined]
    return parse


# Rows per page of a streamed export, and its tables in export order.
EXPORT_PAGE = 1000
EXPORT_TABLES = [t.name for t in _schema.DATA_TABLES]


class QueryHandler(BaseHandler):
    """Subclasses name their parameters and implement `query`."""

    params: dict[str, Callable[[str], Any]] = {}
    key: str = ""

    def parse_params(self) -> dict[str, Any]:
        args = self.request.query_arguments
        allowed = set(self.params) | {"account"}
        unknown = set(args) - allowed
        if unknown:
            raise ApiError(
                400,
                f"unknown query parameter(s) {sorted(unknown)}; this endpoint takes {sorted(allowed)}",
            )
        out: dict[str, Any] = {}
        for name, parse in self.params.items():
            if name in args:
                out[name] = parse(self._one(name))
            elif hasattr(parse, "default"):
                out[name] = parse.default
        return out

    def _one(self, name: str) -> str:
        values = self.request.query_arguments[name]
        if len(values) != 1:
            raise ApiError(400, f"give {name} once")
        try:
            return values[0].decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, f"{name} is not UTF-8") from None

    def scope(self, principal: Principal) -> str | None:
        """The account the caller may read: their own, or any one a local caller names."""
        if "account" not in self.request.query_arguments:
            return principal.account
        asked = check_text("account", self._one("account"))
        if principal.account is not None and asked != principal.account:
            raise ApiError(
                403,
                f"your token belongs to account {principal.account!r}; it cannot read account {asked!r}",
            )
        return asked

    async def get(self, *path: str) -> None:
        principal = await self.principal()
        params = self.parse_params()
        account = self.scope(principal)
        ids = [check_text("id", p) for p in path]
        params = self.checked(params, account, ids)
        async with self.ctx.read_shares.hold(caller_key(principal)):
            body, encoding = await self.call(self.answer, account, ids, params, self.accepts_gzip())
        self.set_header("Content-Type", "application/json; charset=utf-8")
        await self.send_body(body, encoding)

    def answer(
        self, account: str | None, ids: list[str], params: dict[str, Any], gzip_ok: bool
    ) -> tuple[bytes, str | None]:
        """The encoded answer (blocking: on a read thread).  Its rows are read within
        max_answer_bytes (store/budget.py): a list cut short says how to get the rest."""
        limit = self.ctx.max_answer_bytes
        # Rows are counted by an estimate (escapes not counted): leave them a margin.
        with answer_budget(limit * 3 // 4) as budget:
            result = self.query(account, *ids, **params)
        value = {self.key: result}
        if budget.truncated is not None:
            value["next"] = self.next_page(result, params, budget.truncated)
        return encode_answer(value, gzip_ok, limit=limit)

    def next_page(
        self, rows: list[dict[str, Any]], params: dict[str, Any], n: int
    ) -> dict[str, Any]:
        """What to ask for the rest of a list cut at `n` rows by max_answer_bytes."""
        args = {k: v[0].decode("utf-8", "replace") for k, v in self.request.query_arguments.items()}
        if "before" in self.params:
            args["before"] = rows[-1]["cursor"]
        else:
            args["offset"] = str(params.get("offset", 0) + n)
        url = self.request.path + "?" + urllib.parse.urlencode(args)
        return {
            "url": url,
            "params": args,
            "rows": n,
            "why": f"this answer holds the first {n} rows: the rest would pass the server's maximum answer "
            f"size of {self.ctx.max_answer_bytes:,} bytes (max_answer_bytes); GET next.url for the "
            "next page",
        }

    def checked(
        self, params: dict[str, Any], account: str | None, ids: list[str]
    ) -> dict[str, Any]:
        """The parameters once checked together (still on the loop: a bad value is
        refused before any work is queued)."""
        return params

    def query(self, account: str | None, *ids: str, **params: Any) -> Any:
        raise NotImplementedError


def open_code_lines(cipher: Any, rows: Any) -> Any:
    """Computation rows with their code line readable again; one no key here opens reads
    None, with `code_error` saying why."""
    for row in rows or ():
        if isinstance(row, dict) and row.get("code_line") is not None:
            row["code_line"], error = cipher.open(row["code_line"])
            if error:
                row["code_error"] = error
    return rows


def _open_computation(cipher: Any, comp: Any) -> Any:
    cipher.open_rows(comp.get("code"))
    open_code_lines(cipher, [comp])
    return comp


# What the server does to a read's answer before it leaves: code is stored encrypted
# under the server's key, and only the server opens it.
OPENED = {"list_computations": open_code_lines, "get_computation": _open_computation}
# Reads that bound their own reads (findings/record.py): findings from a page of a task
# stream would be wrong, not short, so no answer budget cuts them.
UNBUDGETED = {"explain"}


class ReadHandler(QueryHandler):
    """One declared read (reads.py) at one of its paths: the query string parsed by the
    read's parameters, the path's ids named by its template, the answer the store's."""

    def initialize(self, ctx: Any, read: reads.Read, path: reads.Path) -> None:  # type: ignore[override]
        super().initialize(ctx)
        self.read, self.path = read, path
        self.key = read.key
        # No defaults here: reads.check gives every parameter not sent its declared one.
        self.params = {
            p.name: functools.partial(_parsed, p)
            for p in read.params
            if p.name != "account" and p.name not in path.names
        }

    def checked(
        self, params: dict[str, Any], account: str | None, ids: list[str]
    ) -> dict[str, Any]:
        given = {**params, **dict(zip(self.path.names, ids, strict=True)), "account": account}
        try:
            args = reads.check(self.read, given)
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        del args["account"]  # query() is given it apart
        return args

    def query(self, account: str | None, *ids: str, **args: Any) -> Any:
        if self.path.exists is not None:
            # The path names one thing: an unknown (or another account's) is 404, not [].
            getattr(self.ctx.store, self.path.exists)(ids[0], account=account)
        answer = self.ctx.store.answer_checked(self.read, {**args, "account": account})
        opened = OPENED.get(self.read.name)
        return opened(self.ctx.cipher, answer) if opened is not None else answer

    def answer(
        self, account: str | None, ids: list[str], params: dict[str, Any], gzip_ok: bool
    ) -> tuple[bytes, str | None]:
        if self.read.name not in UNBUDGETED:
            return super().answer(account, ids, params, gzip_ok)
        return encode_answer(
            {self.key: self.query(account, *ids, **params)},
            gzip_ok,
            limit=self.ctx.max_answer_bytes,
        )


def _parsed(param: reads.Param, text: str) -> Any:
    try:
        return reads.from_query(param, text)
    except ValueError as e:
        raise ApiError(400, str(e)) from None


class Export(QueryHandler):
    """Every row of the account, streamed: {"export": {table: [rows]}} written a page of
    EXPORT_PAGE rows at a time (read, opened and encoded on a read thread, each page its
    own short read), so memory holds one page whatever the account's size.  Pages are
    separate reads: rows written while an export runs may or may not be in it."""

    key = "export"

    async def get(self, *path: str) -> None:  # its route has no path arguments
        principal = await self.principal()
        self.parse_params()
        account = self.scope(principal)
        # gzip'd on the read thread too, one stream for the whole answer.
        z = zlib.compressobj(5, zlib.DEFLATED, 31) if self.accepts_gzip() else None
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Vary", "Accept-Encoding")
        if z is not None:
            self.set_header("Content-Encoding", "gzip")
        try:
            await self._send(b'{"export": {', z)
            for i, table in enumerate(EXPORT_TABLES):
                await self._send(f"{', ' if i else ''}{json.dumps(table)}: [".encode(), z)
                after, first = None, True
                while True:
                    async with self.ctx.read_shares.hold(caller_key(principal)):
                        chunk, after = await self.call(self._page, table, account, after, first, z)
                    await self.write_flushed(chunk)
                    first = False
                    if after is None:
                        break
                await self._send(b"]", z)
            await self._send(b"}}", z, last=True)
            self.finish()
        except StreamClosedError:
            pass  # the client went away

    async def _send(self, data: bytes, z: Any, last: bool = False) -> None:
        if z is not None:  # a few bytes of framing: cheap on the loop
            data = z.compress(data) + (z.flush() if last else b"")
        await self.write_flushed(data)

    async def write_flushed(self, data: bytes) -> None:
        if data:
            self.write(data)
            await self.flush()

    def _page(
        self, table: str, account: str | None, after: Any, first: bool, z: Any
    ) -> tuple[bytes, Any]:
        try:
            with answer_budget(self.ctx.max_answer_bytes):
                rows, last = self.ctx.store.export_page(
                    table, account=account, after=after, limit=EXPORT_PAGE
                )
        except AnswerTooLarge:
            # The next row alone passes the budget: it goes as a page of its own (a row
            # is bounded by what ingest accepts), so the export still holds every row.
            rows, last = self.ctx.store.export_page(table, account=account, after=after, limit=1)
        if table == "code_snippets":
            self.ctx.cipher.open_rows(rows)
        elif table == "computations":
            open_code_lines(self.ctx.cipher, rows)
        text = ", ".join(dumps(r) for r in rows)
        data = ((", " if rows and not first else "") + text).encode()
        return (z.compress(data) if z is not None else data), last


class WhoAmI(QueryHandler):
    key = "whoami"

    async def get(self, *path: str) -> None:  # its route has no path arguments
        principal = await self.principal()
        self.parse_params()
        self.write_json(
            {
                self.key: {
                    "account": principal.account,
                    "user": principal.user,
                    "via": principal.via,
                    "token_required": self.ctx.token_required,
                }
            }
        )


def query_routes() -> list[tuple[str, type, dict[str, Any]]]:
    """(path under {prefix}/api, handler, its extra kwargs): every declared read at each
    of its paths (ids are one path segment), and who is asking."""
    out: list[tuple[str, type, dict[str, Any]]] = [("/whoami", WhoAmI, {})]
    for read in reads.READS:
        for path in read.paths:
            handler = Export if read.streamed else ReadHandler
            kwargs = {} if read.streamed else {"read": read, "path": path}
            out.append((path.pattern, handler, kwargs))
    return out
