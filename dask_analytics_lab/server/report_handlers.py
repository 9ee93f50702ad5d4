"""Performance reports: upload, list, and the shared links.

POST {prefix}/api/reports          upload (token in the Authorization header), 201 {"report": {...}}
GET  {prefix}/api/reports          the caller's account's reports, newest first
GET  {prefix}/reports/{id}         the page (from the twin; on report_url: the uploaded HTML);
                                   anyone with the link unless private
GET  {prefix}/reports/{id}.json    its machine-readable twin, same rules
POST {prefix}/api/computations/{id}/share   {"private": bool} -> 201 {"report": {...}}: a
                                   report of a computation of the token's account, made
                                   from this server's own store (the Share buttons)
GET  {prefix}/api/computations/{id}/report  {"report": {"filename", "html"}}: the same page,
                                   stored nowhere (Download HTML)

A report id is 128 random bits: for a public report the link is the permission.  A
private one opens only for members of its account (token or login cookie).

A report's HTML is whatever its uploader sent (distributed's page, or anything), so
the server's own origin never serves it: a report link there shows the page rendered
from the report's JSON twin (reports/twin_page.py, the views' bundle, with recorded
strings as text; only its own nonce'd scripts run, sandboxed, reaching nothing).  The
uploaded HTML is served only on a separate origin, report_url (another name or port of
this server, which shares no cookies with it), and nowhere without one: there it runs
sandboxed (an opaque origin) under REPORT_CSP, which lets it reach nothing outside
itself (its own inline scripts, styles and data: images run; every fetch, image,
script, frame, form or font from anywhere else is blocked).  What no header stops, a
page moving itself elsewhere (a redirect, WebRTC), then takes only what that origin
holds: the one report.  distributed's report embeds BokehJS (reports.performance_report
uses mode="inline"; a report uploaded with BokehJS from its CDN is stored with the
installed BokehJS inline: reports/offline.py).

The rows themselves (made, encrypted at rest, shown, who may read them) are
dask_analytics_lab.reports.rows: the same for a report written straight into a store.
"""

from __future__ import annotations

import gzip
import json
import re
import urllib.parse
from typing import Any

from tornado.web import create_signed_value, decode_signed_value

from ..codecrypt import CodeCipher, CodeDecryptError
from ..reports.rows import BadReport, check_report, make_row, may_read, opening_cipher, public_row
from .base import BaseHandler, check_text, encode_answer
from .body import SMALL_BODY, read_json
from .context import Principal
from .errors import ApiError
from .query import QueryHandler, limit_param
from .report_bodies import Body
from .shares import caller_key

_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
# The signed link that opens a private report's uploaded HTML on the report origin.
REPORT_LINK = "dal_report_link"
REPORT_LINK_MINUTES = 10
SANDBOX = "sandbox allow-scripts allow-downloads"
# Inline scripts and styles run ('unsafe-eval' for BokehJS); nothing loads from or
# connects to anywhere (data:/blob: are the page's own bytes).
REPORT_CSP = "; ".join(
    [
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
    ]
)


def load_report(ctx: Any, meta: dict, kind: str, gzip_ok: bool) -> Body:
    """A report as it will be sent (blocking: on a read thread), for its row `meta`:
    "html", the uploaded HTML, stored gzip sent as stored to a client that takes gzip;
    "json", the twin re-encoded with the row's metadata; "page", the page rendered from
    the twin, kept once rendered (report_bodies.RenderedPages), gzip'd."""
    report_id = meta["id"]
    if kind == "page":
        page = ctx.report_bodies.pages.get_or_make(report_id, lambda: _render_page(ctx, meta))
        if page is None:
            return Body(b"", None, None)
        return Body(page, "gzip", meta) if gzip_ok else Body(gzip.decompress(page), None, meta)
    row = ctx.team.get_report(report_id, content="html" if kind == "html" else "twin")
    if row is None:
        return Body(b"", None, None)
    name = "html_gz" if kind == "html" else "twin_gz"
    try:
        stored = _open(ctx, row.pop(name))
        if kind == "html":
            return (
                Body(stored, "gzip", row) if gzip_ok else Body(gzip.decompress(stored), None, row)
            )
        twin = json.loads(gzip.decompress(stored))
    except CodeDecryptError:  # logged once by the cipher, with the key's source
        raise ApiError(500, UNOPENED) from None
    meta = {
        k: row.get(k)
        for k in ("id", "account", "user", "filename", "title", "private", "created", "cluster_id")
    }
    data, encoding = encode_answer(
        {"report": meta, **{k: v for k, v in twin.items() if k != "report"}}, gzip_ok
    )
    return Body(data, encoding, row)


# The cipher's own words name where its key comes from (a file's path): for the log only.
UNOPENED = (
    "this report is stored encrypted and this server cannot open it: its code key does not "
    "match the one the report was stored with, or is not set (the server's log says which)"
)


def _open(ctx: Any, blob: bytes) -> bytes:
    return opening_cipher(ctx.cipher).open_bytes(blob)


def _render_page(ctx: Any, meta: dict) -> bytes | None:
    """The page of a report from its stored twin, gzip'd (None: the report is gone)."""
    from ..reports.twin_page import twin_report_page

    row = ctx.team.get_report(meta["id"], content="twin")
    if row is None:
        return None
    try:
        twin = json.loads(gzip.decompress(_open(ctx, row.pop("twin_gz"))))
    except CodeDecryptError:  # logged once by the cipher, with the key's source
        raise ApiError(500, UNOPENED) from None
    # Links the same for every reader: the page is rendered once for all of them.
    base = f"{ctx.prefix}/reports/{row['id']}"
    links = [("Data (JSON)", f"{base}.json")]
    if ctx.report_url is not None:
        links.append(("Dask's own report, as uploaded", f"{base}/uploaded"))
    page = twin_report_page(twin if isinstance(twin, dict) else {}, row, links=links)
    return gzip.compress(page.encode(), 6)


def check_upload(body: Any, principal: Principal, cipher: CodeCipher | None = None) -> dict:
    """Check an upload's body (rows.check_report) and who sent it; return the row to store."""
    try:
        report = check_report(body)
    except BadReport as e:
        raise ApiError(422 if isinstance(body, dict) else 400, str(e)) from None
    if principal.account is not None:
        if report["account"] not in (None, principal.account):
            raise ApiError(
                403,
                f"your token belongs to account {principal.account!r}; "
                f"it cannot upload to {report['account']!r}",
            )
        report.update(account=principal.account, user=principal.user)
    else:
        report["account"] = report["account"] or "default"
    check_text("account", report["account"])
    try:
        return make_row(**report, cipher=cipher)
    except BadReport as e:  # a twin past its size
        raise ApiError(413, str(e)) from None


class ReportsApi(QueryHandler):
    """GET lists the caller's account's reports (a read like any other); POST uploads."""

    key = "reports"
    params = {"limit": limit_param(100, 10_000)}

    def base(self) -> str:
        return (
            self.ctx.public_url or f"{self.request_scheme()}://{self.request_host()}"
        ) + self.ctx.prefix

    # Each handler's query takes its route's ids and its own params, by name.
    def query(self, account: str | None, limit: int) -> list[dict]:  # type: ignore[override]
        base, cipher = self.base(), opening_cipher(self.ctx.cipher)
        return [
            public_row(r, base, cipher)
            for r in self.ctx.team.list_reports(account=account, limit=limit)
        ]

    async def post(self) -> None:
        principal = await self.principal(allow_cookie=False)
        limit = self.ctx.max_report_bytes
        body = read_json(self.request, max_bytes=limit, max_decompressed=limit)
        # gzip and encryption of up to max_report_bytes of HTML: not on the event loop.
        row = await self.call(
            check_upload, body, principal, self.ctx.cipher, executor=self.ctx.body_executor
        )
        # Charged in the transaction that stores it: 413/507, quota.py.
        await self.call(self.ctx.quota.add_report, row)
        self.write_json(
            {"report": public_row(row, self.base(), opening_cipher(self.ctx.cipher))}, status=201
        )


def twin_page_csp() -> str:
    """The policy of the page rendered from a report's twin: REPORT_CSP, but only the
    page's own two scripts (by their hashes) run, so no markup a recorded string could
    carry would, were it ever to reach the page unescaped."""
    from ..reports.shell import page_script_sources

    return REPORT_CSP.replace(
        "script-src 'unsafe-inline' 'unsafe-eval'", f"script-src {page_script_sources()}"
    )


class ReportView(BaseHandler):
    """The page (as_json False) or the twin (as_json True) of one report.

    On the server's own origin the page is rendered from the stored twin
    (reports/twin_page.py): the HTML an uploader sent never runs there.  That HTML is
    served only on the report origin (report_url), sandboxed, with REPORT_CSP; a
    private report's through a link signed for it (REPORT_LINK_MINUTES), handed to its
    account's readers on the rendered page, as no login cookie reaches that origin."""

    def initialize(self, ctx: Any, as_json: bool = False) -> None:
        super().initialize(ctx)
        self.as_json = as_json
        self.serves_report_origin = not as_json

    def uploaded_link(self, row: dict) -> str | None:
        """Where the uploaded HTML of `row` opens (None: no report origin)."""
        if self.ctx.report_url is None:
            return None
        url = f"{self.ctx.report_url}{self.ctx.prefix}/reports/{row['id']}"
        if row["private"]:
            signed = create_signed_value(self.ctx.session_secret, REPORT_LINK, row["id"]).decode()
            url += "?" + urllib.parse.urlencode({"access": signed})
        return url

    def link_grants(self, row: dict) -> bool:
        """A signed, unexpired link for this very report (the report origin's only key)."""
        given = self.get_query_argument("access", None)
        if not given:
            return False
        value = decode_signed_value(
            self.ctx.session_secret, REPORT_LINK, given, max_age_days=REPORT_LINK_MINUTES / 1440
        )
        return value is not None and value.decode("ascii", "replace") == row["id"]

    async def get(self, report_id: str) -> None:
        if not _ID.match(report_id):
            raise ApiError(404, "no such report")
        uploaded = self.on_report_origin()  # prepare() let only the page through there
        principal = None if uploaded else await self.principal(required=False)
        row = await self.readable(report_id, principal, uploaded)
        gzip_ok = self.accepts_gzip()
        # the twin (JSON), the page made from it, or the uploaded HTML (report origin only)
        kind = "json" if self.as_json else "html" if uploaded else "page"
        # Reading, decrypting, decompressing and encoding: on a read thread, once for
        # all the clients reading the same report at the same time.
        body = await self.ctx.report_bodies.get(
            (report_id, kind, gzip_ok), lambda: self._load(principal, row, kind, gzip_ok)
        )
        if body.meta is None:  # deleted since
            raise ApiError(404, "no such report")
        if kind == "json":
            self.set_header("Content-Type", "application/json; charset=utf-8")
        else:
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.set_header(
                "Content-Security-Policy", twin_page_csp() if kind == "page" else REPORT_CSP
            )
        await self.send_body(body.data, body.encoding)

    async def readable(self, report_id: str, principal: Principal | None, uploaded: bool) -> dict:
        """The report's row, once the caller may read it: checked before any of the report
        is read, decrypted or rendered (a lookup of its metadata, in the caller's share)."""
        async with self.ctx.read_shares.hold(caller_key(principal)):
            row = await self.call(self.ctx.team.get_report, report_id)
        if row is None:
            raise ApiError(404, "no such report")
        if uploaded:
            if row["private"] and not self.link_grants(row):
                # Opened from its page on the server's own origin, through /uploaded.
                raise ApiError(404, "no such report")
        elif not may_read(row, principal):
            if principal is None:
                raise ApiError(
                    401,
                    f"this report is private to its account: log in at {self.ctx.prefix}/login "
                    "or send 'Authorization: token <token>'",
                )
            # A stranger learns nothing, not even that it exists.
            raise ApiError(404, "no such report")
        return row

    async def _load(self, principal: Principal | None, row: dict, kind: str, gzip_ok: bool) -> Body:
        async with self.ctx.read_shares.hold(caller_key(principal)):
            return await self.call(load_report, self.ctx, row, kind, gzip_ok)

    def render_error(self, status_code: int, message: str) -> None:
        if self.as_json:
            return super().render_error(status_code, message)
        from .web import error_page

        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(error_page(self.ctx.prefix, status_code, message))


class UploadedReport(ReportView):
    """{prefix}/reports/{id}/uploaded: a link on the page, the same for every reader, to
    where the report's uploaded HTML opens (the report origin; a private report's through
    a link signed for it, made here for a reader who may read it)."""

    def initialize(self, ctx: Any, as_json: bool = False) -> None:
        super().initialize(ctx, as_json=True)  # errors as JSON; never on the report origin

    async def get(self, report_id: str) -> None:
        if not _ID.match(report_id):
            raise ApiError(404, "no such report")
        principal = await self.principal(required=False)
        row = await self.readable(report_id, principal, uploaded=False)
        link = self.uploaded_link(row)
        if link is None:
            raise ApiError(404, "this server serves no uploaded report HTML (no report_url)")
        self.set_header("Cache-Control", "no-store")  # a signed link lasts minutes
        self.redirect(link)


def _share_options(body: Any) -> bool:
    """The share request's one option, `private`; anything else is refused by name."""
    if not isinstance(body, dict):
        raise ApiError(400, 'the body must be a JSON object: {"private": true or false}')
    unknown = sorted(set(body) - {"private"})
    if unknown:
        raise ApiError(422, f'unknown field(s) {unknown}: the body takes only "private"')
    private = body.get("private", False)
    if not isinstance(private, bool):
        raise ApiError(422, "private must be true or false")
    return private


def _report_filename(label: str) -> str:
    safe = (
        "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:60].strip("-")
        or "computation"
    )
    return f"dask-report-{safe}.html"


def _twin_of(ctx: Any, computation_id: str, principal: Principal | None) -> dict:
    """A computation's twin from this server's store, in the caller's account only."""
    from ..reports.twin import build_twin
    from ..store import NotFound

    try:
        account = principal.account if principal is not None else None
        return build_twin(ctx.store, [computation_id], account=account)
    except NotFound:
        # The same words for an id of another account: it learns nothing of it.
        raise ApiError(
            404,
            f"no computation {computation_id!r} in your account's record: its id is not one "
            "this server holds (list them at /api/computations)",
        ) from None


def report_file(ctx: Any, computation_id: str, principal: Principal) -> dict:
    """{"filename", "html"}: a computation's report page, made here, stored nowhere."""
    from ..reports.twin_page import page_title, twin_report_page

    twin = _twin_of(ctx, computation_id, principal)
    label = twin["summary"].get("label") or computation_id
    return {
        "filename": _report_filename(label),
        "html": twin_report_page(twin, {"title": page_title(twin)}),
    }


def shared_row(ctx: Any, computation_id: str, principal: Principal, private: bool) -> dict:
    """The stored row of a report of one computation, made from this server's store in
    the caller's account (blocking: on a read thread).  The twin and the page come
    from the same builders every report page does (reports/twin.py, twin_page.py)."""
    from ..reports.twin_page import page_title, twin_report_page

    twin = _twin_of(ctx, computation_id, principal)
    title = page_title(twin)
    summary = twin["summary"]
    account = principal.account or (twin.get("cluster") or {}).get("account") or "default"
    try:
        return make_row(
            html=twin_report_page(twin, {"title": title}),
            twin=twin,
            filename=_report_filename(summary.get("label") or computation_id),
            private=private,
            title=title,
            cluster_id=summary.get("cluster_id"),
            account=account,
            user=principal.user,
            cipher=ctx.cipher,
        )
    except BadReport as e:  # a twin past its size
        raise ApiError(413, str(e)) from None


class ShareComputation(BaseHandler):
    """POST {prefix}/api/computations/{id}/share: the Share buttons' report, made here.

    The token is checked first (no login cookie: a write), then the body (a small JSON
    object), and only then is anything read: the computation in the token's account
    (another account's id is 404, as an unknown one), its twin and page made on a read
    thread within the caller's share, stored as an upload is (quota, encryption)."""

    def base(self) -> str:
        return ReportsApi.base(self)  # type: ignore[arg-type]

    async def post(self, computation_id: str) -> None:
        principal = await self.principal(allow_cookie=False)
        body = read_json(self.request, max_bytes=SMALL_BODY, max_decompressed=SMALL_BODY)
        private = _share_options(body)
        check_text("computation id", computation_id)
        async with self.ctx.read_shares.hold(caller_key(principal)):
            row = await self.call(shared_row, self.ctx, computation_id, principal, private)
        # Charged in the transaction that stores it: 413/507, quota.py.
        await self.call(self.ctx.quota.add_report, row)
        self.write_json(
            {"report": public_row(row, self.base(), opening_cipher(self.ctx.cipher))}, status=201
        )


class ComputationReportFile(BaseHandler):
    """GET {prefix}/api/computations/{id}/report: the Share report's page as a file to
    download, made here from this server's store, in the caller's account; a read (a
    token or a login)."""

    async def get(self, computation_id: str) -> None:
        principal = await self.principal()
        check_text("computation id", computation_id)
        async with self.ctx.read_shares.hold(caller_key(principal)):
            made = await self.call(report_file, self.ctx, computation_id, principal)
        self.set_header("Cache-Control", "no-store")
        await self.send_json({"report": made})
