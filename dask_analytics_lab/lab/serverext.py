"""The Jupyter server extension: the analytics server's handlers, mounted under
{base_url}dask-analytics/ and guarded by Jupyter's own login.

It serves the store in `analytics.store` (the one the kernels record into by default)
to the JupyterLab sidebar and panels, and opens shared report links
({base_url}dask-analytics/reports/<id>) in the same server.
"""
from __future__ import annotations

import logging
from typing import Any

import dask.config
from tornado.web import RequestHandler, URLSpec

logger = logging.getLogger("dask_analytics_lab")

PATH = "dask-analytics"


def _jupyter_auth(cls: type, public_get: bool = False) -> type:
    """`cls` behind Jupyter's authentication: its prepare() logs the user in (token,
    cookie or password, whatever the server uses) and refuses strangers.

    The analytics handlers stay first in the MRO, so their JSON errors and headers
    win; JupyterHandler adds login, XSRF and host checks.
    """
    from jupyter_server.auth.decorator import allow_unauthenticated
    from jupyter_server.base.handlers import JupyterHandler

    namespace: dict[str, Any] = {"__module__": __name__}
    if public_get:
        # A public report's link is the permission (private ones check the login below).
        namespace["get"] = allow_unauthenticated(cls.get)
    return type(f"Jupyter{cls.__name__}", (cls, JupyterHandler), namespace)


def _logged_in(handler: Any) -> bool:
    return getattr(handler, "current_user", None) is not None


class LabInfo(RequestHandler):
    """GET {base}dask-analytics/lab-info: what the sidebar shows in its footer."""

    def initialize(self, info: dict) -> None:
        self.info = info

    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(self.info)


class ShareHandler(RequestHandler):
    """POST {base}dask-analytics/lab/share {"computation_id"}: the sidebar panel's
    "Share report" button; the same report the notebook's button makes."""

    def initialize(self, store_url: str) -> None:
        self.store_url = store_url

    async def post(self) -> None:
        import asyncio
        import json

        from ..widgets.report import share_computation

        try:
            body = json.loads(self.request.body or b"{}")
            computation_id = body["computation_id"]
            if not isinstance(computation_id, str) or not 0 < len(computation_id) <= 200:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            self.set_status(400)
            self.finish({"error": 'the body must be {"computation_id": "<id>"}', "status": 400})
            return
        try:
            row = await asyncio.to_thread(share_computation, computation_id, store=self.store_url)
        except Exception as e:
            logger.warning("dask-analytics: share report of %s failed: %r", computation_id, e)
            self.set_status(500)
            self.finish({"error": str(e), "status": 500})
            return
        self.set_status(201)
        self.finish({"report": {k: row.get(k) for k in ("id", "url", "json_url", "title", "local")}})


class LabComputations(RequestHandler):
    """GET {base}dask-analytics/lab/computations?cluster_id=&limit=: a cluster's
    computations, each with its `label` (what it ran, stored when it was recorded) and
    `code_line` (what the sidebar lists).  A computation recorded before labels were
    stored is named from its final task groups; a finished one never changes, so that
    name is cached."""

    labels: dict[str, str] = {}

    def initialize(self, store_url: str) -> None:
        self.store_url = store_url

    async def get(self) -> None:
        import asyncio

        cluster_id = self.get_argument("cluster_id")
        try:
            limit = max(1, min(int(self.get_argument("limit", "50")), 500))
        except ValueError:
            limit = 50
        try:
            rows = await asyncio.to_thread(self._rows, cluster_id, limit)
        except Exception as e:
            self.set_status(404 if type(e).__name__ == "NotFound" else 500)
            self.finish({"error": str(e), "status": self.get_status()})
            return
        self.set_header("Cache-Control", "no-store")
        self.finish({"computations": rows})

    def _rows(self, cluster_id: str, limit: int) -> list[dict]:
        from .. import api
        from ..widgets._feed import clean, label_of

        rows = clean(api.list_computations(cluster_id, limit=limit, store=self.store_url))
        for r in rows:
            if r.get("label"):
                continue
            cid = r["computation_id"]
            label = self.labels.get(cid)
            if label is None:
                label = label_of(api.get_computation(cid, store=self.store_url).get("groups") or [])
                if r.get("state") != "running":
                    if len(self.labels) > 100_000:
                        self.labels.clear()
                    self.labels[cid] = label
            r["label"] = label or None
        return rows


def make_routes(base_url: str, store_url: str) -> list[URLSpec]:
    """The analytics routes under base_url + "dask-analytics", behind Jupyter's login."""
    from jupyter_server.utils import url_path_join

    from ..server.report_handlers import ReportView
    from ..server.routes import routes

    prefix = url_path_join(base_url, PATH).rstrip("/")
    specs = routes(prefix, {"store_url": store_url, "token_required": False, "local_auth": _logged_in})
    wrapped = []
    for spec in specs:
        cls = spec.handler_class
        # Redirects, static files and the catch-all 404 hold nothing to protect.
        if cls.__module__.startswith("dask_analytics_lab.server") and cls.__name__ not in ("NotFoundHandler",):
            cls = _jupyter_auth(cls, public_get=cls is ReportView)
        wrapped.append(URLSpec(spec.regex.pattern, cls, spec.kwargs, spec.name))
    info = {"prefix": prefix, "store": _mask(store_url), "mounted": True}
    wrapped.insert(0, URLSpec(url_path_join(prefix, "lab-info"), _jupyter_auth(LabInfo), {"info": info}))
    wrapped.insert(0, URLSpec(url_path_join(prefix, "lab", "share"), _jupyter_auth(ShareHandler), {"store_url": store_url}))
    wrapped.insert(0, URLSpec(url_path_join(prefix, "lab", "computations"), _jupyter_auth(LabComputations),
                              {"store_url": store_url}))
    return wrapped


def _mask(url: str) -> str:
    from ..collect.plugin import mask_url

    return mask_url(url)


def load(serverapp: Any) -> None:
    from .. import config

    try:
        store_url = config.validate_store(dask.config.get("analytics.store"))
    except Exception as e:
        serverapp.log.warning("dask-analytics: not serving analytics (%s)", e)
        return
    if store_url.startswith(("http://", "https://")):
        # Kernels record to a team server; its own pages and links serve the team.
        serverapp.log.info("dask-analytics: analytics.store is the team server %s; open it there", _mask(store_url))
        return
    base_url = serverapp.web_app.settings.get("base_url", "/")
    serverapp.web_app.add_handlers(".*$", make_routes(base_url, store_url))
    serverapp.log.info("dask-analytics: serving %s at %s%s/", _mask(store_url), base_url, PATH)
