"""What every handler shares: who is asking, running store calls off the loop, errors.

Every request first passes the host check: with `allowed_hosts` set (by default when
there are no tokens and no host app), a Host header naming another server is refused
(403) before anything else, so a web page whose name was rebound to this address
(DNS rebinding) reads nothing.

Authentication, in order:
1. `Authorization: token <token>` (the plugin, HttpReader, scripts);
2. the `dal_session` cookie the login page sets (browsers), for GET/HEAD only: a
   signed session id (never the token) of a session kept in the database, checked on
   every request, so it dies with a logout and with the token;
   a cookie is sent on cross-site requests too, so it never authorises a write;
3. nothing: refused (401) when tokens are required, else the trusted local caller,
   who reads every account (after `local_auth`, when the host app gave one).
A token that is unknown, revoked, expired or malformed is logged (address and token
id, never the token) and counted per (client address, keyed fingerprint of the
credential): past FAILURES a minute, that credential gets 429 from that address until
the minute is over, before it is looked up.  Other credentials from the same address
(a reverse proxy's) are not refused, so one that works always works.  The client
address is the peer's, or X-Forwarded-For's right-most untrusted entry when the peer
is in forwarded_allow_ips.

The scheme and host the client used (the login cookie's Secure flag, HSTS, the links
the server builds) are the connection's, or X-Forwarded-Proto's and X-Forwarded-Host's
from a trusted proxy (the same rule: Context.trusted_proxy), whose forwarded host must
pass the host check as well as its Host.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import logging
import re
import time
from collections.abc import Callable
from typing import Any, Literal, overload

from tornado.iostream import StreamClosedError
from tornado.web import HTTPError, RequestHandler, decode_signed_value

from ..display import dumps
from ..filters import printable
from ..messages import MessageError
from ..store import NotFound, StoreUnavailable
from ..store.budget import AnswerTooLarge
from ..store_errors import QueryTimeout
from .context import Context, Principal, TokenCheck
from .errors import ApiError
from .tokens import token_hash, token_id_of, well_formed

logger = logging.getLogger("dask_analytics_lab.server")
# How a refused caller gets a token: the store is the operator's to name (an answer never
# says which database the server serves).
MAKE_TOKEN = (
    "`dask-analytics token create --store DB --account A --user U`, DB being the store "
    "the server was started with"
)

SESSION_COOKIE = "dal_session"
OLD_COOKIE = "dal_token"  # before sessions the cookie held the raw token: cleared on login/logout
SESSION_DAYS = 30
MAX_ID = 200  # the longest id any path or query parameter may carry
# Longest a failed authentication's answer waits for the count all replicas share.
SHARED_COUNT_WAIT = 2.0
# Strict-Transport-Security on every https answer of the standalone server: one year
# (the usual value, and the least the browsers' preload lists take), for the server's
# own name only: names under it may be other teams' plain-http services.
HSTS = "max-age=31536000"
# An X-Forwarded-Host a link may be built on: a name or [IPv6], an optional port.
_HOST = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def check_text(name: str, value: str) -> str:
    """An id or filter value in a request: filters.printable, as a 400."""
    try:
        return printable(value, name, MAX_ID)
    except ValueError as e:
        raise ApiError(400, str(e)) from None


class BaseHandler(RequestHandler):
    ctx: Context

    def initialize(self, ctx: Context) -> None:
        self.ctx = ctx
        self.set_transport_headers()

    def set_default_headers(self) -> None:
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "same-origin")
        self.set_header("Cache-Control", "no-store")
        # Called again when an error clears the headers; the first call comes before
        # initialize() has the context.
        if getattr(self, "ctx", None) is not None:
            self.set_transport_headers()

    def set_transport_headers(self) -> None:
        """HSTS on https answers.  Not when a host app (Jupyter) serves the routes: a
        year of https-only for its whole host name is its operator's decision."""
        if self.ctx.local_auth is None and self.request_scheme() == "https":
            self.set_header("Strict-Transport-Security", HSTS)

    def request_scheme(self) -> str:
        """The scheme ("https" or "http") the client reached the server by: the
        connection's, or X-Forwarded-Proto's from a trusted proxy (which ends the
        client's TLS)."""
        said = self.ctx.forwarded(
            self.request.remote_ip or "?", self.request.headers.get_list("X-Forwarded-Proto")
        )
        if said is not None and said.lower() in ("http", "https"):
            return said.lower()
        return self.request.protocol

    def forwarded_host(self) -> str | None:
        """X-Forwarded-Host from a trusted proxy (one that rewrites Host), else None."""
        return self.ctx.forwarded(
            self.request.remote_ip or "?", self.request.headers.get_list("X-Forwarded-Host")
        )

    def request_host(self) -> str:
        """The host (and port) the client named: a trusted proxy's X-Forwarded-Host,
        else Host.  Links the server builds start with it."""
        forwarded = self.forwarded_host()
        if forwarded is not None and _HOST.fullmatch(forwarded):
            return forwarded
        return self.request.host

    def check_xsrf_cookie(self) -> None:
        """No XSRF token for the JSON API (a host app such as Jupyter may turn the check
        on): its writes need `Content-Type: application/json`, which a cross-site page
        cannot send without CORS, and a login cookie never authorises them anyway."""

    async def prepare(self) -> None:
        result = super().prepare()  # the host app's own (Jupyter's login), if any
        if result is not None:
            await result
        if self._finished:
            return
        self.ctx.loop_lag.start()
        self.check_allowed_host()
        if self.on_report_origin() and not self.serves_report_origin:
            # The report origin runs uploaded HTML: nothing of the server's own lives there.
            raise ApiError(404, "this name of the server serves uploaded report pages only")

    def on_finish(self) -> None:
        # Every answer counts, refusals too: a flood of 4xx is what an operator looks for.
        self.ctx.metrics.request_done(
            self.request.path, self.get_status(), self.request.request_time()
        )
        super().on_finish()

    # Only the uploaded HTML of a report (report_handlers.ReportView) is served on the
    # report origin (report_url); every other route answers 404 there.
    serves_report_origin = False

    def on_report_origin(self) -> bool:
        """Whether this request came for the report origin (report_url's Host)."""
        if self.ctx.report_host is None:
            return False
        # Either name: a proxy keeps Host (HAProxy) or says it in X-Forwarded-Host
        # (nginx), and what the report origin serves is the least of the two.
        names = [self.request.headers.get("Host", ""), self.forwarded_host() or ""]
        return any(h.strip().lower().rstrip(".") == self.ctx.report_host for h in names)

    def check_allowed_host(self) -> None:
        """Raises when Host is not allowed (DNS rebinding).  Not named check_host:
        Jupyter's handlers have one that returns a bool, and this class is mixed into them."""
        forwarded = self.forwarded_host()
        if forwarded is not None and not _HOST.fullmatch(forwarded):
            raise ApiError(400, "X-Forwarded-Host must be a host name, with a port or not")
        # Both names: a proxy passes on an X-Forwarded-Host the client wrote (a rebound
        # page's script may), and one that rewrites Host sends its own name there.
        for host in [self.request.headers.get("Host", ""), *([forwarded] if forwarded else [])]:
            self.refuse_host(host)

    def refuse_host(self, host: str) -> None:
        if not self.ctx.host_allowed(host):
            logger.info(
                "dask-analytics server: refused a request for Host %r from %s",
                host[:100],
                self.client_address(),
            )
            raise ApiError(
                403,
                f"this server does not answer to the host name {host[:100]!r} (a page on "
                "another site may have rebound its name to this address); if the name is this "
                "server's, start it with --allowed-host NAME",
            )

    # --- running store calls ------------------------------------------------
    async def call(self, fn: Callable, *args: Any, executor: Any = None, **kwargs: Any) -> Any:
        """Run a blocking store call on the server's threads; map store errors to answers."""
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        try:
            result = await loop.run_in_executor(
                executor or self.ctx.executor, functools.partial(fn, *args, **kwargs)
            )
            if executor is None:  # the read threads: API queries (and token look-ups)
                self.ctx.metrics.store_call("read", time.perf_counter() - t0)
            return result
        except (ApiError, NotFound, MessageError, StoreUnavailable, AnswerTooLarge) as e:
            # An answer, not a bug: drop the thread's frames (they hold the request's
            # parsed body, which would otherwise live until the cycle collector runs).
            _forget_frames(e)
            if isinstance(e, ApiError):
                raise e from None
            if isinstance(e, NotFound):
                raise ApiError(404, str(e)) from None
            if isinstance(e, MessageError):
                raise ApiError(422, str(e)) from None
            if isinstance(e, AnswerTooLarge):
                raise ApiError(
                    413,
                    f"{e} (max_answer_bytes); ask for less (a smaller limit=, a narrower "
                    "since=/until=), or raise it: `dask-analytics server --max-answer-bytes N`",
                ) from None
            # The store's own words name its URL (user, host, database; a SQLite path) and
            # the driver's: for the operator's log, never for whoever asked (an anonymous
            # reader of a public report, too).
            if isinstance(e, QueryTimeout):
                logger.warning("dask-analytics server: %s", e)
                limit = self.ctx.store.read_timeout
                raise ApiError(
                    503,
                    "a read of the analytics store ran past the query time limit"
                    + (f" of {limit:g} s" if limit else "")
                    + " and was cancelled; ask for less (a "
                    "smaller limit= or a narrower since=/until=), or raise the limit (server "
                    "setting query_timeout, `dask-analytics server --query-timeout SECONDS`)",
                    headers={"Retry-After": "30"},
                ) from None
            logger.warning("dask-analytics server: store unavailable: %s", e)
            raise ApiError(
                503,
                "the analytics store is unavailable; try again later (the server's log says why)",
                headers={"Retry-After": "30"},
            ) from None

    # --- who is asking --------------------------------------------------------
    def request_token(self) -> str | None:
        """The token of the Authorization header, if any."""
        header = self.request.headers.get("Authorization")
        if header is None:
            return None
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() not in ("token", "bearer") or not value.strip():
            if not self.ctx.token_required:
                return None  # some other scheme, for the host app
            self.refuse_if_throttled(header)
            self.auth_failure("an Authorization header that is not 'token <token>'", header)
            raise ApiError(401, "the Authorization header must be 'token <your token>'")
        return value.strip()

    def client_address(self) -> str:
        """The caller's address: the peer's, or X-Forwarded-For's when the peer is a
        trusted proxy (forwarded_allow_ips; Context.client_address)."""
        return self.ctx.client_address(
            self.request.remote_ip or "?", self.request.headers.get_list("X-Forwarded-For")
        )

    def auth_failure(self, reason: str, credential: str, *, shared: bool = True) -> Any:
        """Count and log a failure; a future of the count all replicas share, or None.
        shared=False: this process's count only (for what is never refused)."""
        return self.ctx.auth_failed(
            self.client_address(), self.ctx.fingerprint(credential), reason, shared=shared
        )

    async def refuse_if_counted_over(self, counted: Any, credential: str) -> None:
        """429 when the count all replicas share (throttle.py) put this failure past the
        limit: the answer one server alone would have given it."""
        if counted is None:
            return
        try:
            n = await asyncio.wait_for(asyncio.wrap_future(counted), SHARED_COUNT_WAIT)
        except Exception:  # slow or down: this answer goes by this process's count
            return
        if n is not None and n > self.ctx.auth_failures:
            self.refuse_if_throttled(credential)

    def refuse_if_throttled(self, credential: str) -> None:
        """429 for a credential that failed too often from this address; before any work."""
        wait = self.ctx.throttled(self.client_address(), self.ctx.fingerprint(credential))
        if wait > 0:
            raise ApiError(
                429,
                "too many failed authentications with this credential from your address; try again "
                f"in {wait:.0f} s",
                headers={"Retry-After": str(int(wait) + 1)},
            )

    async def check_token(self, token: str) -> Principal:
        """The principal of a token, or 401 (logged and counted) / 429."""
        if not well_formed(token):
            self.refuse_if_throttled(token)
            self.auth_failure("a malformed token", token)
            raise ApiError(
                401,
                "unknown, revoked or malformed token (tokens look like dal_<id>_<secret>; "
                f"make one with {MAKE_TOKEN})",
            )
        digest = token_hash(token)
        if self.ctx.throttled(self.client_address(), self.ctx.fingerprint(token)):
            # Only this token failed that often: if it works now (made since), it works.
            known = self.ctx.cached_principal(digest)
            if known is not None:
                return known
            self.refuse_if_throttled(token)
        found = self.ctx.fresh_token(digest)
        if found is None:
            found = await self.call(self.ctx.check_token, digest)
        if found.principal is not None:
            return found.principal
        tid = token_id_of(token)
        if found.problem == "expired":
            await self.refuse_if_counted_over(
                self.auth_failure(f"expired token {tid}", token), token
            )
            raise ApiError(
                401,
                f"token {tid} expired on {_utc(found.expires)}; make a new one with "
                f"{MAKE_TOKEN} (and --expires 30d for another 30 days)",
            )
        await self.refuse_if_counted_over(
            self.auth_failure(f"unknown or revoked token {tid}", token), token
        )
        raise ApiError(
            401,
            "unknown, revoked or malformed token (tokens look like dal_<id>_<secret>; "
            f"make one with {MAKE_TOKEN})",
        )

    def session_id(self) -> str | None:
        """The session id of a validly signed session cookie, else None (whether the
        session still lives is the database's to say: Context.check_session)."""
        raw = self.get_cookie(SESSION_COOKIE)
        if not raw:
            return None
        value = decode_signed_value(
            self.ctx.session_secret, SESSION_COOKIE, raw, max_age_days=SESSION_DAYS
        )
        if value is None:
            # Counted and logged, never refused: the browser sends it with every page,
            # public ones too, and it reads as anonymous.
            self.auth_failure("a session cookie with a bad or old signature", raw, shared=False)
            return None
        return value.decode("ascii", "replace")

    @overload
    async def principal(
        self, *, required: Literal[True] = True, allow_cookie: bool = True
    ) -> Principal: ...
    @overload
    async def principal(self, *, required: bool, allow_cookie: bool = True) -> Principal | None: ...
    async def principal(
        self, *, required: bool = True, allow_cookie: bool = True
    ) -> Principal | None:
        """Who is asking, or 401/403/429.  required=False: None for an anonymous caller
        (one with no token, or only a stale login session) instead of an error."""
        token = self.request_token()
        if token is not None and not well_formed(token) and not self.ctx.token_required:
            token = None  # not ours: e.g. a Jupyter token, for the host app to check
        if token is not None:
            return await self.check_token(token)
        if allow_cookie and self.request.method in ("GET", "HEAD"):
            session_id = self.session_id()
            if session_id is not None:
                found: TokenCheck = await self.call(self.ctx.check_session, session_id)
                if found.principal is not None:
                    return found.principal
                # logged out, or its token revoked or expired since login: anonymous
        if self.ctx.token_required:
            if not required:
                return None
            raise ApiError(
                401,
                "this server needs a token: send 'Authorization: token <token>' "
                f"(make one with {MAKE_TOKEN}), "
                f"or log in at {self.ctx.prefix}/login",
            )
        if self.ctx.local_auth is not None and not self.ctx.local_auth(self):
            if not required:
                return None
            raise ApiError(403, "not allowed: log in to the host application first")
        return Principal(None, None, "open")

    # --- answers ---------------------------------------------------------------
    def write_json(self, value: Any, status: int = 200) -> None:
        """A small answer, encoded on the loop; answers of any size: send_json."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(dumps(value))

    def accepts_gzip(self) -> bool:
        return "gzip" in self.request.headers.get("Accept-Encoding", "")

    async def send_json(self, value: Any, status: int = 200) -> None:
        """An answer of any size: encoded (and gzip'd) on a read thread, sent in chunks."""
        body, encoding = await self.call(encode_answer, value, self.accepts_gzip())
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        await self.send_body(body, encoding)

    async def send_body(self, body: bytes, encoding: str | None = None) -> None:
        """Send bytes made off the loop: a chunk at a time, each written out before the
        next, so a slow client holds one chunk of the socket's buffer, not a copy of the
        whole body.  encoding "gzip": the body is gzip'd already (tornado's own
        compression leaves a body with a Content-Encoding alone)."""
        if encoding:
            self.set_header("Content-Encoding", encoding)
        self.set_header("Vary", "Accept-Encoding")
        self.set_header("Content-Length", str(len(body)))
        try:
            for i in range(0, len(body), SEND_CHUNK):
                self.write(body[i : i + SEND_CHUNK])
                await self.flush()
            self.finish()
        except StreamClosedError:
            pass  # the client went away: nothing left to answer

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            message = exc.message
            for name, value in exc.headers.items():
                self.set_header(name, value)
        elif isinstance(exc, HTTPError):
            message = exc.log_message or self._reason
        else:
            message = "internal server error; the server log has the details"
        if status_code in (401,):
            self.set_header("WWW-Authenticate", 'Token realm="dask-analytics"')
        self.render_error(status_code, message)

    def render_error(self, status_code: int, message: str) -> None:
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(dumps({"error": message, "status": status_code}))


# Bytes written to a connection at a time (send_body); answers larger than GZIP_OVER are
# gzip'd on a read thread rather than by tornado on the loop.
SEND_CHUNK = 256 * 1024
GZIP_OVER = 64 * 1024


def encode_answer(value: Any, gzip_ok: bool, limit: int | None = None) -> tuple[bytes, str | None]:
    """(the JSON of `value`, its Content-Encoding): blocking, for a read thread.
    AnswerTooLarge when the JSON passes `limit` bytes."""
    body = dumps(value).encode()
    if limit is not None and len(body) > limit:
        raise AnswerTooLarge(limit)
    if gzip_ok and len(body) > GZIP_OVER:
        return gzip.compress(body, compresslevel=5), "gzip"
    return body, None


def _forget_frames(e: BaseException | None) -> None:
    """Clear the tracebacks of an exception and of those it was raised from."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__


def _utc(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t)) if t is not None else "?"
