"""The Jupyter server extension: the analytics server's handlers, mounted under
{base_url}dask-analytics/ and guarded by Jupyter's own login.

It serves the store in `analytics.store` (the one the kernels record into by default)
to the JupyterLab sidebar and panels, and opens shared report links
({base_url}dask-analytics/reports/<id>) in the same server.  When that store is a team
server (`dask-analytics server`), it mounts only the Lab's own reads and forwards them
to it with `analytics.token` (team.py); reports then live, and open, on that server.
A configuration it cannot serve still mounts lab-info, saying why.

Every route it mounts (`make_routes`) runs behind Jupyter's rules, applied by
`JupyterRules`, first in each handler's MRO, before the handler does anything:

- Jupyter's prepare(): its Host check, its login (token, cookie or whatever identity
  provider the server uses), its CORS headers and, for writes, its XSRF check
  (`JupyterHandler.check_xsrf_cookie`: the `_xsrf` cookie against the X-XSRFToken
  header, and the Origin; requests that carry the Jupyter token itself are exempt,
  as everywhere in Jupyter);
- then nobody anonymous gets further (pages redirect to Jupyter's login, everything
  else is 403), and Jupyter's authorizer must allow the action on "dask_analytics";
- a write authenticated by a browser's login cookie must also name its origin: an
  Origin header (checked by Jupyter's XSRF check) or, without one, a Referer on this
  host (Jupyter's check_referer);
- every method is also wrapped in @web.authenticated and @authorized, so Jupyter's own
  audit (`allow_unauthenticated_access = False`) sees each one as protected;
- Jupyter's default headers (its Content-Security-Policy, X-Content-Type-Options and
  the headers configured in `ServerApp.tornado_settings["headers"]`) are on every
  answer; a handler's own, stricter policy (a page's, a report's sandbox) is sent as a
  second Content-Security-Policy header, and browsers enforce both.

Anonymous readers of a shared report need the Jupyter login too: a link into a
Jupyter server is for the people who can log in to it (a team shares reports through
`dask-analytics server`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from tornado import web
from tornado.httputil import parse_body_arguments
from tornado.web import HTTPError, RequestHandler, URLSpec, stream_request_body

from ..urls import mask_url

logger = logging.getLogger("dask_analytics_lab")

PATH = "dask-analytics"
# What Jupyter's authorizer is asked about (an Authorizer may refuse it, e.g. a
# JupyterHub scope); the action is Jupyter's for the HTTP method (read, write, ...).
AUTH_RESOURCE = "dask_analytics"
CSP = "Content-Security-Policy"
WRITES = ("POST", "PUT", "PATCH", "DELETE")

if TYPE_CHECKING:
    # What the mixin always stands in front of (jupyter_server is imported only when
    # the extension loads).
    from jupyter_server.base.handlers import JupyterHandler as _Mixed
else:
    _Mixed = object


class JupyterRules(_Mixed):
    """Jupyter's authentication, XSRF check and headers over a handler (module doc).

    Mixed in first: `JupyterRules, Handler, _HandlerEnd, JupyterHandler or APIHandler`.
    """

    auth_resource = AUTH_RESOURCE
    _jupyter_base: type[_Mixed]  # JupyterHandler (pages, files) or APIHandler (JSON)

    # As tornado calls it, without Jupyter's own keyword.
    async def prepare(self) -> None:  # type: ignore[override]
        # Jupyter's own: Host, who is asking, CORS, the XSRF check of writes.
        await self._jupyter_base.prepare(self)
        if self._finished:
            return
        # Nobody anonymous goes further (pages: to Jupyter's login; else 403), exactly
        # as @web.authenticated decides, and nothing of the handler has run yet.
        web.authenticated(lambda handler: None)(self)
        if self._finished:
            return
        await self._authorize()
        # The handler's own prepare (the analytics server's host check and body limits).
        result = super().prepare()
        if result is not None:
            await result
        if isinstance(self, BodyAfterLogin) and not self._finished:
            self.accept_body()

    async def _authorize(self) -> None:
        from jupyter_core.utils import ensure_async
        from jupyter_server.auth.utils import HTTP_METHOD_TO_AUTH_ACTION

        action = HTTP_METHOD_TO_AUTH_ACTION.get((self.request.method or "").upper())
        if action is None or not await ensure_async(
            self.authorizer.is_authorized(self, self.current_user, action, self.auth_resource)
        ):
            raise HTTPError(
                403, f"not authorized to {action or self.request.method} {self.auth_resource}"
            )

    def check_xsrf_cookie(self) -> None:
        from jupyter_server.base.handlers import JupyterHandler

        JupyterHandler.check_xsrf_cookie(self)
        if not hasattr(self, "_jupyter_current_user"):
            return  # tornado's early call, before the login is known: prepare() checks again
        if self.request.method not in WRITES or self.settings.get("disable_check_xsrf", False):
            return
        if self.current_user is None or self.token_authenticated:
            # Anonymous: refused next, by prepare().  The Jupyter token in the request
            # itself: no page of another site has it (Jupyter's rule).
            return
        # A browser's write (its login cookie) says where it comes from: Jupyter's XSRF
        # check judged the Origin; without one, the Referer must be this host.
        if self.request.headers.get("Origin") is None and not self.check_referer():
            raise HTTPError(
                403,
                "a write from a logged-in browser must come from this server's own pages "
                "(no Origin, and no Referer on this host)",
            )

    def set_default_headers(self) -> None:
        super().set_default_headers()  # the handler's own
        own = [v for v in self._headers.get_list(CSP)]
        self._jupyter_base.set_default_headers(self)  # Jupyter's, over them
        for value in own:
            if value not in self._headers.get_list(CSP):
                self.add_header(CSP, value)

    def flush(self, include_footers: bool = False) -> Any:
        if not self._headers_written:
            # A handler that set its own policy (a report's sandbox) replaced Jupyter's:
            # send both.
            jupyter_csp = self.content_security_policy
            if jupyter_csp not in self._headers.get_list(CSP):
                self.add_header(CSP, jupyter_csp)
        return super().flush(include_footers)


class _HandlerEnd(RequestHandler):
    """Ends the handler's own prepare() chain: JupyterRules already ran Jupyter's."""

    def prepare(self) -> None:
        return None


class BodyAfterLogin(RequestHandler):
    """For a handler that tornado would give its whole body: the body is read only once
    Jupyter's rules let the request in (JupyterRules.prepare calls accept_body), up to
    `max_buffered_body` bytes, then set as `request.body` before the method runs.  (A
    stranger's upload is answered from its headers; nothing of it is buffered.)"""

    max_buffered_body = 1 << 20
    _body: bytearray | None = None
    _body_too_big = False

    def accept_body(self) -> None:
        length = self.request.headers.get("Content-Length")
        if length is not None and (not length.isdigit() or int(length) > self.max_buffered_body):
            raise HTTPError(413, f"the body must be at most {self.max_buffered_body} bytes")
        connection = getattr(self.request, "connection", None)
        if connection is not None and hasattr(connection, "set_max_body_size"):
            connection.set_max_body_size(self.max_buffered_body)
        self._body = bytearray()

    def data_received(self, chunk: bytes) -> None:
        if self._body is None or self._body_too_big:
            return
        self._body += chunk
        if len(self._body) > self.max_buffered_body:
            self._body_too_big, self._body = True, bytearray()

    def take_body(self) -> None:
        if self._body_too_big:
            raise HTTPError(413, f"the body must be at most {self.max_buffered_body} bytes")
        if self._body is not None:
            body, self._body = bytes(self._body), None
            self.request.body = body
            if body:
                parse_body_arguments(
                    self.request.headers.get("Content-Type", ""),
                    body,
                    self.request.body_arguments,
                    self.request.files,
                    self.request.headers,
                )
                for k, v in self.request.body_arguments.items():
                    self.request.arguments.setdefault(k, []).extend(v)


def _with_body(method: Callable) -> Callable:
    @functools.wraps(method)
    def with_body(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.take_body()
        return method(self, *args, **kwargs)

    return with_body


def _protected(method: Callable, buffered: bool) -> Callable:
    from jupyter_server.auth.decorator import authorized

    wrapped = web.authenticated(
        authorized(resource=AUTH_RESOURCE)(_with_body(method) if buffered else method)
    )
    setattr(
        wrapped, "__allow_unauthenticated", False
    )  # (copied by functools.wraps from an allow-listed one)
    return wrapped


def jupyter_handler(cls: type, api: bool) -> type:
    """`cls` behind Jupyter's rules (module doc); `api`: JSON answers (APIHandler, 403
    for anonymous requests), else a page or file (JupyterHandler, anonymous GETs go to
    Jupyter's login page).  Every one streams its body: a handler that reads its own
    (the analytics server's BodyReader) as before, any other through BodyAfterLogin."""
    from jupyter_server.base.handlers import APIHandler, JupyterHandler

    base = APIHandler if api else JupyterHandler
    buffered = not getattr(cls, "_stream_request_body", False)
    bases = (JupyterRules, cls, *([BodyAfterLogin] if buffered else []), _HandlerEnd, base)
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": cls.__doc__,
        "_jupyter_base": base,
    }
    # A RequestHandler: `base` is one (mypy cannot tell from type()'s three arguments).
    draft = cast(type[RequestHandler], type(f"Jupyter{cls.__name__}", bases, dict(namespace)))
    for name in draft.SUPPORTED_METHODS:
        method = getattr(draft, name.lower(), None)
        if method is not None and method is not RequestHandler._unimplemented_method:
            namespace[name.lower()] = _protected(method, buffered)
    return stream_request_body(type(draft.__name__, bases, namespace))


def _logged_in(handler: Any) -> bool:
    return getattr(handler, "current_user", None) is not None


class _LabHandler(RequestHandler):
    """The extension's own endpoints: errors as the analytics API gives them."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = (exc.log_message if isinstance(exc, HTTPError) else None) or self._reason
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps({"error": message, "status": status_code}))


class LabInfo(_LabHandler):
    """GET {base}dask-analytics/lab-info: what the sidebar shows in its footer."""

    def initialize(self, info: dict) -> None:
        self.info = info

    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(self.info)


def _share_body(body: bytes | None) -> dict:
    """{"computation_id": str, "private": bool} of a share or download request; ValueError if not."""
    try:
        asked = json.loads(body or b"{}")
        computation_id = asked["computation_id"]
        private = asked.get("private", False)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError from None
    if (
        not isinstance(computation_id, str)
        or not 0 < len(computation_id) <= 200
        or not isinstance(private, bool)
    ):
        raise ValueError
    return {"computation_id": computation_id, "private": private}


class ShareHandler(_LabHandler):
    """POST {base}dask-analytics/lab/share {"computation_id", "private"?}: the sidebar
    panel's "Share report" button; the same report the notebook's button makes, uploaded
    to the team server when one is configured (reports/share.py).  A failure is 502 with
    a message that says what to do."""

    max_buffered_body = 16 * 1024  # BodyAfterLogin: {"computation_id": ...} is small
    fields = ("id", "url", "json_url", "title", "local", "private", "server", "hint")

    def initialize(self, store_url: str) -> None:
        self.store_url = store_url

    def _bad_body(self) -> None:
        self.set_status(400)
        self.finish(
            {
                "error": 'the body must be {"computation_id": "<id>", "private": true|false}',
                "status": 400,
            }
        )

    async def _made(self, what: str, make: Callable[..., Any], cid: str, **kw: Any) -> Any:
        """make(cid, **kw) on a thread; a failure is logged and answered 502 in its words
        (None is returned then)."""
        try:
            return await asyncio.to_thread(make, cid, **kw)
        except Exception as e:
            logger.warning("dask-analytics: %s of %s failed: %s", what, cid, e)
            self.set_status(502)
            self.finish({"error": str(e), "status": 502})
            return None

    async def post(self) -> None:
        from ..reports.share import share_computation

        try:
            args = _share_body(self.request.body)
        except ValueError:
            return self._bad_body()
        row = await self._made(
            "share report",
            share_computation,
            args["computation_id"],
            store=self.store_url,
            private=args["private"],
        )
        if row is None:
            return
        self.set_status(201)
        self.finish({"report": {k: row.get(k) for k in self.fields}})


class ReportFileHandler(ShareHandler):
    """POST {base}dask-analytics/lab/report-file {"computation_id"}: the panel's
    "Download HTML": {"filename", "html"}, the report as one file, stored nowhere."""

    async def post(self) -> None:
        from ..reports.share import report_file

        try:
            args = _share_body(self.request.body)
        except ValueError:
            return self._bad_body()
        made = await self._made(
            "report file", report_file, args["computation_id"], store=self.store_url
        )
        if made is None:
            return
        filename, page = made
        self.finish({"filename": filename, "html": page})


def _is_team(store_url: str) -> bool:
    return store_url.startswith(("http://", "https://"))


def _lab_specs(prefix: str, store_url: str, info: dict) -> list[URLSpec]:
    """The sidebar's own endpoints: lab-info and the panel's Share and Download HTML."""
    from jupyter_server.utils import url_path_join

    lab: list[tuple[str, type, dict[str, Any]]] = [
        (url_path_join(prefix, "lab", "share"), ShareHandler, {"store_url": store_url}),
        (url_path_join(prefix, "lab", "report-file"), ReportFileHandler, {"store_url": store_url}),
        (url_path_join(prefix, "lab-info"), LabInfo, {"info": info}),
    ]
    return [URLSpec(path, jupyter_handler(cls, api=True), kwargs) for path, cls, kwargs in lab]


def make_routes(base_url: str, store_url: str) -> list[URLSpec]:
    """Every route the extension mounts, under base_url + "dask-analytics", each behind
    Jupyter's rules (JupyterRules): none is left as it came.

    An embedded store: the analytics server's routes (routes.py), the same computations
    query at the path the sidebar reads (lab/computations) and the sidebar's own.
    A team server (an http(s) store): the sidebar's own, and the Lab's reads forwarded
    to that server with analytics.token (team.py); nothing else."""
    from jupyter_server.utils import url_path_join

    prefix = url_path_join(base_url, PATH).rstrip("/")
    if _is_team(store_url):
        from .team import team_specs

        shown = mask_url(store_url)
        info = {"prefix": prefix, "store": shown, "mounted": True, "team_server": shown}
        specs = _lab_specs(prefix, store_url, info)
        specs += [
            URLSpec(path, jupyter_handler(cls, api=True), kwargs)
            for path, cls, kwargs in team_specs(prefix, store_url)
        ]
        return specs
    from ..server.routes import routes

    info = {"prefix": prefix, "store": mask_url(store_url), "mounted": True, "team_server": None}
    specs = _lab_specs(prefix, store_url, info)
    served = routes(
        prefix, {"store_url": store_url, "token_required": False, "local_auth": _logged_in}
    )
    # The sidebar's list (lab/computations?cluster_id=&limit=) is the team server's own
    # computations query, labels and code lines as stored, at the path the sidebar reads.
    computations = next(
        s for s in served if s.regex.pattern == url_path_join(prefix, "api", "computations") + "$"
    )
    specs.append(
        URLSpec(
            url_path_join(prefix, "lab", "computations"),
            jupyter_handler(computations.handler_class, api=True),
            computations.kwargs,
        )
    )
    for spec in served:
        if spec.regex.pattern in (f"{prefix}/login$", f"{prefix}/logout$"):
            # The analytics server's own token login: Jupyter's login is the one here
            # (the pages show "all accounts" and no log-out button).
            continue
        api = spec.regex.pattern.startswith(url_path_join(prefix, "api") + "/")
        specs.append(
            URLSpec(
                spec.regex.pattern,
                jupyter_handler(spec.handler_class, api=api),
                spec.kwargs,
                spec.name,
            )
        )
    return specs


def unavailable_routes(base_url: str, problem: str) -> list[URLSpec]:
    """Only lab-info, saying why nothing else is served (the Lab shows it), behind
    Jupyter's rules like every route."""
    from jupyter_server.utils import url_path_join

    prefix = url_path_join(base_url, PATH).rstrip("/")
    info = {"prefix": prefix, "store": None, "mounted": False, "error": problem}
    return [
        URLSpec(
            url_path_join(prefix, "lab-info"), jupyter_handler(LabInfo, api=True), {"info": info}
        )
    ]


def load(serverapp: Any) -> None:
    from .. import config

    base_url = serverapp.web_app.settings.get("base_url", "/")
    try:
        store_url = config.validate_store(config.get("analytics.store"))
    except Exception as e:
        serverapp.log.warning("dask-analytics: not serving analytics (%s)", e)
        serverapp.web_app.add_handlers(
            ".*$",
            unavailable_routes(
                base_url,
                f"this Jupyter server does not serve analytics: {e}; fix it and restart Jupyter",
            ),
        )
        return
    serverapp.web_app.add_handlers(".*$", make_routes(base_url, store_url))
    if _is_team(store_url):
        serverapp.log.info(
            "dask-analytics: serving the team server %s's reads to the Lab at %s%s/ (with %s)",
            mask_url(store_url),
            base_url,
            PATH,
            "analytics.token"
            if config.get("analytics.token")
            else "no token: analytics.token is not set",
        )
        return
    serverapp.log.info("dask-analytics: serving %s at %s%s/", mask_url(store_url), base_url, PATH)
