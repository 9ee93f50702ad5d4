"""The team web view: a few HTML shells that team.js (built from js/team/app.ts) fills
from the JSON API, and login.

Pages hold no data: each is the same shell naming its page, so they are cheap to serve
and the JSON API (with its account checks) stays the one way data leaves the server.
team.js builds the DOM with textContent only (never innerHTML), so stored strings such
as tracebacks cannot inject markup; the Content-Security-Policy allows only our script.
"""

from __future__ import annotations

import html
import time
import urllib.parse
from pathlib import Path
from typing import Any

from tornado.web import HTTPError, RequestHandler, create_signed_value

from ..filters import has_control
from .base import OLD_COOKIE, SESSION_COOKIE, SESSION_DAYS, BaseHandler, _utc
from .context import TokenCheck
from .errors import ApiError
from .tokens import token_hash, token_id_of, well_formed

# Built from js/ at install (pip install runs the npm build): the views, team.js and the
# one stylesheet, style.css.
WIDGETS = Path(__file__).parent.parent / "static"
# Scripts only from this server; the shared views set element styles (bar widths, colours),
# so inline styles are allowed (styles cannot run code).
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
)
NAV = (
    ("", "Clusters"),
    ("/exceptions", "Exceptions"),
    ("/costs", "Costs"),
    ("/reports", "Reports"),
)


def _shell(prefix: str, title: str, body: str, page: str = "", args: tuple[str, ...] = ()) -> str:
    p = html.escape(prefix, quote=True)
    nav = "".join(f'<a href="{p}{href or "/"}">{label}</a>' for href, label in NAV)
    data_args = " ".join(f'data-arg{i}="{html.escape(a, quote=True)}"' for i, a in enumerate(args))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · dask-analytics</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{p}/widgets/style.css">
</head><body class="dal dal-team" data-prefix="{p}" data-page="{html.escape(page, quote=True)}" {data_args}>
<header><a class="brand" href="{p}/">dask-analytics</a><nav>{nav}</nav>
<span id="whoami"></span></header>
<main id="app">{body}</main>
<script src="{p}/widgets/team.js"></script>
</body></html>"""


def error_page(prefix: str, status: int, message: str) -> str:
    login = (
        f' <a href="{html.escape(prefix, quote=True)}/login">Log in</a>' if status == 401 else ""
    )
    return _shell(
        prefix,
        f"Error {status}",
        f'<h1>Error {status}</h1><p class="error">{html.escape(message)}{login}</p>',
    )


class WebHandler(BaseHandler):
    check_xsrf_cookie = RequestHandler.check_xsrf_cookie  # forms: the host app's XSRF rule applies

    def set_default_headers(self) -> None:
        super().set_default_headers()
        self.set_header("Content-Security-Policy", PAGE_CSP)
        self.set_header("X-Frame-Options", "SAMEORIGIN")

    def render_error(self, status_code: int, message: str) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(error_page(self.ctx.prefix, status_code, message))


class PageHandler(WebHandler):
    """One page of the web view; team.js reads data-page and data-arg0 from <body>."""

    # Tornado hands each route's own keyword arguments to initialize.
    def initialize(self, ctx: Any, page: str, title: str) -> None:  # type: ignore[override]
        super().initialize(ctx)
        self.page, self.title = page, title

    def get(self, *args: str) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        loading = '<p class="muted">Loading…</p><noscript>This page needs JavaScript.</noscript>'
        self.finish(_shell(self.ctx.prefix, self.title, loading, self.page, args))


def _safe_next(prefix: str, target: str | None) -> str:
    # Only a path on this server: never //evil.example or https://evil.example.
    home = prefix + "/"
    if not target or not target.startswith(home) or target.startswith("//") or "\\" in target:
        return home
    return target


def cross_site(
    handler: RequestHandler, public_url: str | None = None, forwarded_host: str | None = None
) -> str | None:
    """Why a form post comes from another site, or None when it is this site's own (or
    no browser's: a non-browser client carries nobody's cookies).  Browsers send
    Sec-Fetch-Site, or at least Origin, with every form post; a sandboxed report page
    posts from the opaque origin "null", which is another site too.  forwarded_host:
    the name a trusted proxy says the browser used (X-Forwarded-Host)."""
    headers = handler.request.headers
    site = headers.get("Sec-Fetch-Site")
    origin = headers.get("Origin")
    if site in ("same-origin", "none"):
        return None
    if site is None:
        if origin is None:
            return None
        netloc = urllib.parse.urlsplit(origin).netloc.lower()
        ours = {headers.get("Host", "").lower()}
        if public_url:
            ours.add(urllib.parse.urlsplit(public_url).netloc.lower())
        if forwarded_host:
            ours.add(forwarded_host.lower())
        if netloc and netloc in ours:
            return None
        return f"a form of {origin[:100]} cannot post here"
    return f"a form of another site ({origin or site}) cannot post here"


class FormHandler(WebHandler):
    """Login and logout: form posts that change who the browser is, so each must come
    from this server's own pages (checked from the browser's Sec-Fetch-Site / Origin),
    and login also carries the form's XSRF token (tornado's _xsrf cookie and field)."""

    def check_same_site(self) -> None:
        # Not check_origin: tornado's and Jupyter's handlers have one returning a bool.
        why = cross_site(self, self.ctx.public_url, self.forwarded_host())
        if why is not None:
            raise ApiError(403, f"{why}: log in and out from this server's own pages")

    def check_form_xsrf(self) -> None:
        try:
            RequestHandler.check_xsrf_cookie(self)
        except HTTPError:
            raise ApiError(
                403,
                "this form has expired or did not come from this server: reload the login page "
                "and try again",
            ) from None

    def set_cookie(self, name: str, value: str | bytes, *args: Any, **kwargs: Any) -> None:
        # Every cookie these forms set (the session, tornado's _xsrf, and their clearing)
        # is Secure when the browser came over https, through a TLS-ending proxy too.
        if self.request_scheme() == "https":
            kwargs["secure"] = True
        super().set_cookie(name, value, *args, **kwargs)


class LoginHandler(FormHandler):
    def next_target(self) -> str:
        """Where to go after login: next= if it is a path on this server, else home.
        Control characters are a 400, said before the form or the token is looked at:
        CR/LF would split the Location header (tornado refused that with a 500), and
        the others tornado would silently strip from the argument."""
        for raw in self.request.query_arguments.get("next", []):
            if has_control(raw.decode("utf-8", "replace")):
                raise ApiError(
                    400, "next= must be a path on this server, without control characters"
                )
        return _safe_next(self.ctx.prefix, self.get_query_argument("next", None))

    def get(self) -> None:
        self.next_target()
        self._form()

    def _form(self, error: str = "", status: int = 200) -> None:
        p = html.escape(self.ctx.prefix, quote=True)
        nxt = html.escape(self.next_target(), quote=True)
        err = f'<p class="error">{html.escape(error)}</p>' if error else ""
        body = f"""<h1>Log in</h1>{err}
<form method="post" action="{p}/login?next={nxt}" class="login">{self.xsrf_form_html()}
<label>Token <input type="password" name="token" autocomplete="current-password" required></label>
<button type="submit">Log in</button></form>
<p class="muted">Make a token with <code>dask-analytics token create --store DB --account A --user U</code>, DB being the store the server was started with.</p>"""
        self.set_status(status)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(_shell(self.ctx.prefix, "Log in", body))

    async def post(self) -> None:
        self.check_same_site()
        self.check_form_xsrf()
        nxt = self.next_target()
        token = (self.get_body_argument("token", "") or "").strip()
        self.refuse_if_throttled(token)
        found = TokenCheck(None, "malformed")
        if well_formed(token):
            found = await self.call(self.ctx.check_token, token_hash(token))
        if found.principal is None:
            if found.problem == "expired":
                await self.refuse_if_counted_over(
                    self.auth_failure(f"login with expired token {token_id_of(token)}", token),
                    token,
                )
                self._form(
                    f"This token expired on {_utc(found.expires)}: make a new one.", status=401
                )
            else:
                what = (
                    f"unknown or revoked token {token_id_of(token)}"
                    if well_formed(token)
                    else "a malformed token"
                )
                await self.refuse_if_counted_over(
                    self.auth_failure(f"login with {what}", token), token
                )
                self._form("Unknown, revoked or malformed token.", status=401)
            return
        principal = found.principal
        days: float = SESSION_DAYS
        if found.expires is not None:
            days = max(0.0, min(days, (found.expires - time.time()) / 86400))
        # The cookie names a session kept in the database, signed with the server's
        # secret: the token itself never sits in the browser, and a logout or revoking
        # the token ends the session wherever a copy of the cookie is.
        session_id = await self.call(
            self.ctx.new_session,
            principal.token_id,
            time.time() + days * 86400,
            executor=self.ctx.body_executor,
        )
        session = create_signed_value(self.ctx.session_secret, SESSION_COOKIE, session_id)
        path = self.ctx.prefix + "/"
        self.clear_cookie(OLD_COOKIE, path=path)
        self.set_cookie(
            SESSION_COOKIE,
            session,
            path=path,
            httponly=True,
            samesite="Lax",
            secure=self.request_scheme() == "https",
            expires_days=days,
        )
        self.redirect(nxt)


class LogoutHandler(FormHandler):
    async def post(self) -> None:
        self.check_same_site()
        if self.get_body_argument("_xsrf", None) is not None:
            self.check_form_xsrf()  # a form that carries the token must carry the right one
        session_id = self.session_id()
        if (
            session_id is not None
        ):  # ended in the database: a copy of the cookie is worth nothing now
            await self.call(self.ctx.end_session, session_id, executor=self.ctx.body_executor)
        path = self.ctx.prefix + "/"
        self.clear_cookie(SESSION_COOKIE, path=path)
        self.clear_cookie(OLD_COOKIE, path=path)
        self.redirect(self.ctx.prefix + "/login")


class NotFoundHandler(WebHandler):
    """Anything under the prefix that no route takes: JSON under /api/, a page elsewhere."""

    async def prepare(self) -> None:
        await super().prepare()  # the host check first
        raise ApiError(404, f"nothing at {self.request.method} {self.request.path}")

    def render_error(self, status_code: int, message: str) -> None:
        if self.request.path.startswith(self.ctx.prefix + "/api/"):
            BaseHandler.render_error(self, status_code, message)
        else:
            super().render_error(status_code, message)
