"""Reading from a `dask-analytics server` over HTTP, with the Store's read methods.

`api._reader()` makes one for an http(s):// `analytics.store`, so `list_clusters()`
and the rest work unchanged against a server.  Errors come back as the Store's:
NotFound (404), StoreUnavailable (cannot connect, 5xx), PermissionError (401/403),
ValueError (other 4xx), each with the server's message.

Redirects are followed, but the token (the Authorization header) only to the same
origin (scheme, host and port): a server, proxy or attacker that redirects the reader
elsewhere never receives it.
"""
from __future__ import annotations

import gzip
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..store.errors import NotFound, StoreUnavailable


CREDENTIALS = ("authorization", "cookie", "proxy-authorization")


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects like urllib's own handler, dropping credentials on the way to
    another origin (another host, port or scheme: https -> http included)."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin(new.full_url) != origin(req.full_url):
            for name in list(new.headers):
                if name.lower() in CREDENTIALS:
                    del new.headers[name]
            for name in list(new.unredirected_hdrs):
                if name.lower() in CREDENTIALS:
                    del new.unredirected_hdrs[name]
        return new


def opener(context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    """An opener that verifies TLS with `context` and never forwards credentials across origins."""
    return urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), SameOriginRedirects())


def ssl_context(url: str, ca_file: str | None) -> ssl.SSLContext | None:
    """Verifying TLS context for https (ca_file: a CA bundle for a self-signed server)."""
    if not url.startswith("https"):
        return None
    return ssl.create_default_context(cafile=ca_file)


class ServerClient:
    """GET/POST JSON to one server with one token."""

    def __init__(self, url: str, *, token: str | None = None, ca_file: str | None = None, timeout: float = 30):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._ssl = ssl_context(self.url, ca_file)
        self._opener = opener(self._ssl)

    def request(self, method: str, path: str, params: dict | None = None, body: Any = None) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = gzip.compress(json.dumps(body).encode(), 5)
            headers.update({"Content-Type": "application/json", "Content-Encoding": "gzip"})
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(req, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            raise self._error(e) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise StoreUnavailable(f"cannot reach the analytics server at {self.url}: {reason}") from None

    def _error(self, e: urllib.error.HTTPError) -> Exception:
        try:
            message = json.loads(e.read()).get("error") or e.reason
        except Exception:
            message = e.reason
        if e.code == 404:
            return NotFound(message)
        if e.code in (401, 403):
            return PermissionError(f"analytics server {self.url}: {message}")
        if e.code >= 500:
            return StoreUnavailable(f"analytics server {self.url} answered {e.code}: {message}")
        return ValueError(f"analytics server {self.url} answered {e.code}: {message}")

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body=body)


def _q(ident: str) -> str:
    return urllib.parse.quote(ident, safe="")


class HttpReader:
    """The Store's read methods, answered by a server (the token decides the account)."""

    def __init__(self, url: str, *, token: str | None = None, ca_file: str | None = None):
        self.client = ServerClient(url, token=token, ca_file=ca_file)
        self.url = self.client.url

    def _get(self, path: str, key: str, **params: Any) -> Any:
        return self.client.get("/api" + path, **params)[key]

    def list_clusters(self, *, account: str | None = None, limit: int = 100) -> list[dict]:
        return self._get("/clusters", "clusters", account=account, limit=limit)

    def get_cluster(self, cluster_id: str, *, account: str | None = None) -> dict:
        return self._get(f"/clusters/{_q(cluster_id)}", "cluster", account=account)

    def list_cluster_samples(self, cluster_id: str, *, account: str | None = None, limit: int = 10_000) -> list[dict]:
        return self._get(f"/clusters/{_q(cluster_id)}/samples", "samples", account=account, limit=limit)

    def list_computations(self, *, cluster_id: str | None = None, account: str | None = None,
                          limit: int = 100) -> list[dict]:
        return self._get("/computations", "computations", cluster_id=cluster_id, account=account, limit=limit)

    def get_computation(self, computation_id: str, *, account: str | None = None) -> dict:
        return self._get(f"/computations/{_q(computation_id)}", "computation", account=account)

    def list_task_groups(self, computation_id: str, *, account: str | None = None) -> list[dict]:
        return self._get(f"/computations/{_q(computation_id)}/groups", "groups", account=account)

    def list_exceptions(self, *, cluster_id: str | None = None, computation_id: str | None = None,
                        account: str | None = None, limit: int = 100) -> list[dict]:
        return self._get("/exceptions", "exceptions", cluster_id=cluster_id, computation_id=computation_id,
                         account=account, limit=limit)

    def list_events(self, *, cluster_id: str | None = None, topic: str | None = None,
                    account: str | None = None, limit: int = 1000) -> list[dict]:
        return self._get("/events", "events", cluster_id=cluster_id, topic=topic, account=account, limit=limit)

    def get_profile(self, *, computation_id: str | None = None, cluster_id: str | None = None,
                    account: str | None = None) -> dict:
        if computation_id is not None:
            return self._get(f"/computations/{_q(computation_id)}/profile", "profile", account=account)
        if cluster_id is not None:
            return self._get(f"/clusters/{_q(cluster_id)}/profile", "profile", account=account)
        raise TypeError("get_profile needs computation_id= or cluster_id=")

    def list_gpu_metrics(self, *, cluster_id: str | None = None, monitor_id: str | None = None,
                         worker: str | None = None, account: str | None = None, limit: int = 100_000) -> list[dict]:
        return self._get("/gpu", "gpu", cluster_id=cluster_id, monitor_id=monitor_id, worker=worker,
                         account=account, limit=limit)

    def export(self, *, account: str | None = None) -> dict[str, list[dict]]:
        return self._get("/export", "export", account=account)

    # --- reports (not Store methods: reports.py uses these) -----------------------
    def upload_report(self, body: dict) -> dict:
        return self.client.post("/api/reports", body)["report"]

    def list_reports(self, *, account: str | None = None, limit: int = 100) -> list[dict]:
        return self._get("/reports", "reports", account=account, limit=limit)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<HttpReader {self.url}>"
