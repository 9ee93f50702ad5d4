"""What every handler shares: who is asking, running store calls off the loop, errors.

Authentication, in order:
1. `Authorization: token <token>` (the plugin, HttpReader, scripts);
2. the `dal_token` cookie the login page sets (browsers), for GET/HEAD only: a
   cookie is sent on cross-site requests too, so it never authorises a write;
3. nothing: refused (401) when tokens are required, else the trusted local caller,
   who reads every account (after `local_auth`, when the host app gave one).
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
from typing import Any, Callable

from tornado.web import HTTPError, RequestHandler

from ..messages import MessageError
from ..store import NotFound, StoreUnavailable
from .context import Context, Principal
from .errors import ApiError
from .tokens import token_hash, well_formed

logger = logging.getLogger("dask_analytics_lab.server")

COOKIE = "dal_token"
MAX_ID = 200  # the longest id any path or query parameter may carry


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """JSON browsers can parse: NaN/inf (only a direct writer can store them) become null."""
    try:
        return json.dumps(value, allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_finite(value), default=str)


def check_text(name: str, value: str) -> str:
    """An id or filter value: bounded, printable (PostgreSQL refuses NUL in text)."""
    if not value or len(value) > MAX_ID:
        raise ApiError(400, f"{name} must be 1 to {MAX_ID} characters")
    if any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise ApiError(400, f"{name} contains control characters")
    return value


class BaseHandler(RequestHandler):
    ctx: Context

    def initialize(self, ctx: Context) -> None:
        self.ctx = ctx

    def set_default_headers(self) -> None:
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "same-origin")
        self.set_header("Cache-Control", "no-store")

    def check_xsrf_cookie(self) -> None:
        """No XSRF token for the JSON API (a host app such as Jupyter may turn the check
        on): its writes need `Content-Type: application/json`, which a cross-site page
        cannot send without CORS, and a login cookie never authorises them anyway."""

    # --- running store calls ------------------------------------------------
    async def call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking store call on the server's threads; map store errors to answers."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.ctx.executor, functools.partial(fn, *args, **kwargs))
        except NotFound as e:
            raise ApiError(404, str(e)) from None
        except MessageError as e:
            raise ApiError(422, str(e)) from None
        except StoreUnavailable as e:
            logger.warning("dask-analytics server: store unavailable: %s", e)
            raise ApiError(503, f"the analytics store is unavailable; try again later ({e})") from None

    # --- who is asking --------------------------------------------------------
    def request_token(self, *, allow_cookie: bool = True) -> tuple[str | None, bool]:
        """(token, came from the cookie)."""
        header = self.request.headers.get("Authorization")
        if header is not None:
            scheme, _, value = header.strip().partition(" ")
            if scheme.lower() not in ("token", "bearer") or not value.strip():
                if not self.ctx.token_required:
                    return None, False  # some other scheme, for the host app
                raise ApiError(401, "the Authorization header must be 'token <your token>'")
            return value.strip(), False
        if allow_cookie and self.request.method in ("GET", "HEAD"):
            return self.get_cookie(COOKIE) or None, True
        return None, False

    async def principal(self, *, required: bool = True, allow_cookie: bool = True) -> Principal | None:
        """Who is asking, or 401/403.  required=False: None for an anonymous caller
        (one with no token, or only a stale login cookie) instead of an error."""
        token, from_cookie = self.request_token(allow_cookie=allow_cookie)
        if token is not None and not well_formed(token) and not self.ctx.token_required:
            token = None  # not ours: e.g. a Jupyter token, for the host app to check
        if token is not None:
            found = None
            if well_formed(token):
                found = await self.call(self.ctx.lookup_token, token_hash(token))
            if found is not None:
                return found
            if not (from_cookie and not required):
                raise ApiError(401, "unknown, revoked or malformed token (tokens look like dal_<id>_<secret>; "
                                    "make one with `dask-analytics token create --account A --user U`)")
        if self.ctx.token_required:
            if not required:
                return None
            raise ApiError(401, "this server needs a token: send 'Authorization: token <token>' "
                                "(make one with `dask-analytics token create --account A --user U`), "
                                f"or log in at {self.ctx.prefix}/login")
        if self.ctx.local_auth is not None and not self.ctx.local_auth(self):
            if not required:
                return None
            raise ApiError(403, "not allowed: log in to the host application first")
        return Principal(None, None, "open")

    # --- answers ---------------------------------------------------------------
    def write_json(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(dumps(value))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            message = exc.message
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
