"""Performance reports: upload, list, and the shared links.

POST {prefix}/api/reports          upload (token in the Authorization header), 201 {"report": {...}}
GET  {prefix}/api/reports          the caller's account's reports, newest first
GET  {prefix}/reports/{id}         the HTML; anyone with the link unless private
GET  {prefix}/reports/{id}.json    its machine-readable twin, same rules

A report id is 128 random bits: for a public report the link is the permission.
A private one opens only for members of its account (token or login cookie).  A
report is HTML its uploader wrote, served on this origin, so its Content-Security-
Policy (REPORT_CSP) sandboxes it (its scripts run in an opaque origin and cannot read
the viewer's cookie-authenticated API) and lets it reach nothing outside itself: its
own inline scripts, styles and data: images run, and every fetch, image, script,
frame, form or font from anywhere else is blocked, so a report cannot send what it
shows (or what a phishing form asks for) to another host.  distributed's report
therefore embeds BokehJS (reports.performance_report uses mode="inline"; a report
uploaded with BokehJS from its CDN is stored with the installed BokehJS inline:
reports/offline.py).

The rows themselves (made, encrypted at rest, shown, who may read them) are
dask_analytics_lab.reports.rows: the same for a report written straight into a store.
"""
from __future__ import annotations

import asyncio
import gzip
import json
import re
import weakref
from typing import Any, Awaitable, Callable

from ..codecrypt import CodeCipher, CodeDecryptError
from ..reports.rows import BadReport, check_report, make_row, may_read, opening_cipher, public_row
from .base import BaseHandler, check_text, encode_answer
from .body import read_json
from .context import Principal
from .errors import ApiError
from .query import QueryHandler, limit_param
from .shares import caller_key

_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
SANDBOX = "sandbox allow-scripts allow-downloads"
# Inline scripts and styles run ('unsafe-eval' for BokehJS); nothing loads from or
# connects to anywhere (data:/blob: are the page's own bytes).
REPORT_CSP = "; ".join([
    SANDBOX,
    "default-src 'none'",
    "script-src 'unsafe-inline' 'unsafe-eval'",
    "style-src 'unsafe-inline'",
    "img-src data: blob:",
    "font-src data:",
    "media-src data: blob:",
    "connect-src 'none'",
    "frame-src 'none'",
    "worker-src 'none'",
    "object-src 'none'",
    "manifest-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
])


class Body:
    """A report answer made off the loop: its bytes, their Content-Encoding, and the
    row's metadata (None: no such report), which each request checks for itself."""

    __slots__ = ("data", "encoding", "meta", "__weakref__")

    def __init__(self, data: bytes, encoding: str | None, meta: dict | None):
        self.data, self.encoding, self.meta = data, encoding, meta


def load_report(ctx: Any, report_id: str, as_json: bool, gzip_ok: bool) -> Body:
    """A report's HTML or twin as it will be sent (blocking: on a read thread).  The
    stored gzip is sent as stored to a client that takes gzip; the twin is re-encoded
    with the row's metadata."""
    row = ctx.team.get_report(report_id, content="twin" if as_json else "html")
    if row is None:
        return Body(b"", None, None)
    name = "twin_gz" if as_json else "html_gz"
    try:
        stored = opening_cipher(ctx.cipher).open_bytes(row.pop(name))
        if not as_json:
            return Body(stored, "gzip", row) if gzip_ok else Body(gzip.decompress(stored), None, row)
        twin = json.loads(gzip.decompress(stored))
    except CodeDecryptError as e:  # logged once by the cipher
        raise ApiError(500, f"this report is stored encrypted and cannot be shown: {e}") from None
    meta = {k: row.get(k) for k in ("id", "account", "user", "filename", "title", "private", "created", "cluster_id")}
    data, encoding = encode_answer({"report": meta, **{k: v for k, v in twin.items() if k != "report"}}, gzip_ok)
    return Body(data, encoding, row)


class SharedBodies:
    """Report answers in flight, by (id, form, encoding): a request for one already being
    made or sent gets the same bytes.  64 clients reading one report then cost one read
    and one copy in memory, not 64 (event loop only)."""

    def __init__(self) -> None:
        self._live: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._making: dict[Any, asyncio.Future] = {}

    async def get(self, key: Any, make: Callable[[], Awaitable[Body]]) -> Body:
        body = self._live.get(key)
        if body is not None:
            return body
        fut = self._making.get(key)
        if fut is None:
            fut = self._making[key] = asyncio.ensure_future(make())
            fut.add_done_callback(lambda f: self._made(key, f))
        return await asyncio.shield(fut)

    def _made(self, key: Any, fut: asyncio.Future) -> None:
        self._making.pop(key, None)
        if not fut.cancelled() and fut.exception() is None:
            self._live[key] = fut.result()  # kept while some request still holds it


def check_upload(body: Any, principal: Principal, cipher: CodeCipher | None = None) -> dict:
    """Check an upload's body (rows.check_report) and who sent it; return the row to store."""
    try:
        report = check_report(body)
    except BadReport as e:
        raise ApiError(422 if isinstance(body, dict) else 400, str(e)) from None
    if principal.account is not None:
        if report["account"] not in (None, principal.account):
            raise ApiError(403, f"your token belongs to account {principal.account!r}; "
                                f"it cannot upload to {report['account']!r}")
        report.update(account=principal.account, user=principal.user)
    else:
        report["account"] = report["account"] or "default"
    check_text("account", report["account"])
    return make_row(**report, cipher=cipher)


class ReportsApi(QueryHandler):
    """GET lists the caller's account's reports (a read like any other); POST uploads."""

    key = "reports"
    params = {"limit": limit_param(100, 10_000)}

    def base(self) -> str:
        return (self.ctx.public_url or f"{self.request.protocol}://{self.request.host}") + self.ctx.prefix

    def query(self, account: str | None, limit: int) -> list[dict]:
        base, cipher = self.base(), opening_cipher(self.ctx.cipher)
        return [public_row(r, base, cipher) for r in self.ctx.team.list_reports(account=account, limit=limit)]

    async def post(self) -> None:
        principal = await self.principal(allow_cookie=False)
        limit = self.ctx.max_report_bytes
        body = read_json(self.request, max_bytes=limit, max_decompressed=limit)
        # gzip and encryption of up to max_report_bytes of HTML: not on the event loop.
        row = await self.call(check_upload, body, principal, self.ctx.cipher, executor=self.ctx.body_executor)
        size = len(row["html_gz"]) + len(row["twin_gz"])
        await self.call(self.ctx.quota.charge, row["account"], "reports", size, executor=self.ctx.body_executor)
        await self.call(self.ctx.team.add_report, row)
        self.write_json({"report": public_row(row, self.base(), opening_cipher(self.ctx.cipher))}, status=201)


class ReportView(BaseHandler):
    """The HTML (as_json False) or the twin (as_json True) of one report."""

    def initialize(self, ctx: Any, as_json: bool = False) -> None:
        super().initialize(ctx)
        self.as_json = as_json

    async def get(self, report_id: str) -> None:
        if not _ID.match(report_id):
            raise ApiError(404, "no such report")
        principal = await self.principal(required=False)
        gzip_ok = self.accepts_gzip()
        # Reading, decrypting, decompressing and encoding: on a read thread, once for
        # all the clients reading the same report at the same time.
        body = await self.ctx.report_bodies.get((report_id, self.as_json, gzip_ok),
                                                lambda: self._load(principal, report_id, gzip_ok))
        if body.meta is None:
            raise ApiError(404, "no such report")
        if not may_read(body.meta, principal):
            if principal is None:
                raise ApiError(401, f"this report is private to its account: log in at {self.ctx.prefix}/login "
                                    "or send 'Authorization: token <token>'")
            raise ApiError(404, "no such report")  # a stranger learns nothing, not even that it exists
        if self.as_json:
            self.set_header("Content-Type", "application/json; charset=utf-8")
        else:
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.set_header("Content-Security-Policy", REPORT_CSP)
        await self.send_body(body.data, body.encoding)

    async def _load(self, principal: Principal | None, report_id: str, gzip_ok: bool) -> Body:
        async with self.ctx.read_shares.hold(caller_key(principal)):
            return await self.call(load_report, self.ctx, report_id, self.as_json, gzip_ok)

    def render_error(self, status_code: int, message: str) -> None:
        if self.as_json:
            return super().render_error(status_code, message)
        from .web import error_page

        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(error_page(self.ctx.prefix, status_code, message))
