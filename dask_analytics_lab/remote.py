"""The one HTTP client to a `dask-analytics server`: the scheduler plugin's sink writes
batches with it, the Python API's reader (http_reader.py) reads with it.

- Connections are kept alive and reused, a few per origin: a caller's thread takes one
  out of the pool for one request and gives it back, so the reader may be shared by
  threads.  A kept connection the server has closed meanwhile (its idle timeout, a
  restart) is noticed before use, and a request it drops anyway is sent once more on a
  new connection when sending twice is harmless (GETs; ingest, which stores a message
  once per (cluster_id, seq)).
- TLS is verified, against `ca_file` when given (a self-signed server).
- Request bodies are gzip'd JSON; the token goes in `Authorization: token <token>`.
- A GET follows redirects, with the token only to the configured server's origin
  (scheme, host and port): whoever redirects the reader elsewhere never receives it.
  A POST (a batch, a report: both carry the token) follows none: that is an error to
  fix in `analytics.store`.
- Errors are the store's: NotFound (404), PermissionError (401/403), MessageError (a
  ValueError: 400/413/422, the server read the request and refused it, so sending it
  again cannot help), ValueError (other 4xx), StoreUnavailable (a ConnectionError:
  cannot connect, timeouts, 5xx, redirects refused), each with the server's message;
  a 503's Retry-After is its `retry_after`, which the shipper waits out.
- Each request says how long this client waits for its answer (X-Request-Timeout): the
  server refuses at once what it could not answer in time (server/deadlines.py).
"""

from __future__ import annotations

import gzip
import http.client
import json
import selectors
import ssl
import threading
import urllib.parse
from typing import Any

import msgspec

from .messages import Envelope, MessageError
from .store_errors import NotFound, StoreUnavailable

Origin = tuple[str, str, int]

# Idle connections kept per origin: the sink uses one; a reader shared by threads a few.
MAX_IDLE = 4
MAX_REDIRECTS = 10  # as urllib
REDIRECTS = (301, 302, 303, 307, 308)
REFUSED = (400, 413, 422)  # the server read the body and refused it
# Above level 5, JSON shrinks little more for much more CPU (on the scheduler's host).
GZIP_LEVEL = 5
# A kept connection the peer dropped between our requests shows as one of these.
DROPPED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)


def origin(url: str) -> Origin:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{url!r} is not an http(s) URL")
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def _target(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return (parts.path or "/") + ("?" + parts.query if parts.query else "")


def _seconds(value: str | None) -> float | None:
    """Retry-After in seconds (its HTTP-date form is not sent by our server: None)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """An idle kept connection with something to read was closed by the server (EOF), or
    holds bytes no request asked for: either way it cannot carry the next request."""
    if conn.sock is None:
        return True
    with selectors.DefaultSelector() as sel:  # no FD_SETSIZE limit, unlike select()
        sel.register(conn.sock, selectors.EVENT_READ)
        return bool(sel.select(0))


class ServerClient:
    """JSON over HTTP(S) to one server with one token, on kept-alive connections."""

    def __init__(
        self, url: str, *, token: str | None = None, ca_file: str | None = None, timeout: float = 30
    ):
        self.url = url.rstrip("/")
        self.origin = origin(self.url)
        self.token = token
        self.timeout = timeout
        self._ca_file = ca_file
        # Made now for an https server, so a CA bundle that cannot be read fails here.
        self._tls = (
            ssl.create_default_context(cafile=ca_file) if self.origin[0] == "https" else None
        )
        self._idle: dict[Origin, list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    # --- the public calls ----------------------------------------------------
    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params)

    def post(self, path: str, body: Any, *, idempotent: bool = False) -> Any:
        """POST `body` as gzip'd JSON.  `idempotent`: the server stores it once however often
        it arrives, so a request a dropped connection lost may be sent again."""
        return self.request("POST", path, body=body, idempotent=idempotent)

    def request(
        self,
        method: str,
        path: str,
        params: dict | None = None,
        body: Any = None,
        *,
        idempotent: bool | None = None,
    ) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        # How long this client waits for the answer (the socket's timeout): the server
        # drops a batch it could not store in time rather than store what nobody awaits.
        headers = {"Accept": "application/json", "X-Request-Timeout": f"{self.timeout:g}"}
        data = None
        if body is not None:
            # Typed messages and dicts alike; NaN and infinities become null (as the server
            # reads them), and a value JSON cannot hold goes as its repr, not the whole batch lost.
            data = gzip.compress(msgspec.json.encode(body, enc_hook=repr), GZIP_LEVEL)
            headers.update({"Content-Type": "application/json", "Content-Encoding": "gzip"})
        for _ in range(MAX_REDIRECTS + 1):
            status, reason, answer, payload = self._exchange(
                method,
                url,
                data,
                self._with_token(url, headers),
                idempotent=method == "GET" if idempotent is None else idempotent,
            )
            if status not in REDIRECTS or not answer.get("Location"):
                return self._reply(status, reason, answer, payload)
            url = self._redirect(method, url, answer["Location"])
        raise StoreUnavailable(
            f"analytics server {self.url}: more than {MAX_REDIRECTS} redirects; "
            "set analytics.store to the server's own URL"
        )

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    # --- one exchange on a pooled connection ------------------------------------
    def _exchange(
        self, method: str, url: str, data: bytes | None, headers: dict, *, idempotent: bool
    ) -> tuple[int, str, http.client.HTTPMessage, bytes]:
        where = origin(url)
        conn, reused = self._checkout(where)
        try:
            try:
                response = self._send(conn, method, url, data, headers)
            except DROPPED:
                conn.close()
                if not (reused and idempotent):
                    raise
                # The server closed the kept connection as the request went out: once more, new.
                conn, reused = self._connect(where), False
                response = self._send(conn, method, url, data, headers)
        except ssl.SSLCertVerificationError as e:
            conn.close()
            raise StoreUnavailable(
                f"cannot reach the analytics server at {self.url}: {e}; for a server with a "
                "self-signed certificate set analytics.ca-file to its CA bundle"
            ) from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise StoreUnavailable(
                f"cannot reach the analytics server at {self.url}: {type(e).__name__}: {e}"
            ) from None
        except BaseException:
            conn.close()
            raise
        self._checkin(where, conn)
        return response

    @staticmethod
    def _send(
        conn: http.client.HTTPConnection, method: str, url: str, data: bytes | None, headers: dict
    ) -> tuple[int, str, http.client.HTTPMessage, bytes]:
        conn.request(method, _target(url), body=data, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        if response.will_close:
            conn.close()
        return response.status, response.reason, response.headers, payload

    def _checkout(self, where: Origin) -> tuple[http.client.HTTPConnection, bool]:
        """(a connection to `where`, whether it was kept from an earlier request)."""
        while True:
            with self._lock:
                idle = self._idle.get(where)
                conn = idle.pop() if idle else None
            if conn is None:
                return self._connect(where), False
            if not _closed_by_peer(conn):
                return conn, True
            conn.close()

    def _checkin(self, where: Origin, conn: http.client.HTTPConnection) -> None:
        if conn.sock is None:  # closed as its response said it would (Connection: close)
            return
        with self._lock:
            idle = self._idle.setdefault(where, [])
            if len(idle) < MAX_IDLE:
                idle.append(conn)
                return
        conn.close()

    def _connect(self, where: Origin) -> http.client.HTTPConnection:
        scheme, host, port = where
        if scheme == "https":
            if self._tls is None:  # an http server that redirected to https
                self._tls = ssl.create_default_context(cafile=self._ca_file)
            return http.client.HTTPSConnection(host, port, timeout=self.timeout, context=self._tls)
        return http.client.HTTPConnection(host, port, timeout=self.timeout)

    # --- redirects, tokens and answers ----------------------------------------------
    def _with_token(self, url: str, headers: dict) -> dict:
        if self.token and origin(url) == self.origin:
            return {**headers, "Authorization": f"token {self.token}"}
        return headers

    def _redirect(self, method: str, url: str, location: str) -> str:
        new = urllib.parse.urljoin(url, location)
        if method != "GET":
            raise StoreUnavailable(
                f"the store redirects to {new}: set analytics.store to the server's own URL"
            )
        try:
            origin(new)
        except ValueError:
            raise StoreUnavailable(
                f"analytics server {self.url} redirects to {new}, not an http(s) URL; "
                "set analytics.store to the server's own URL"
            ) from None
        return new

    def _reply(
        self, status: int, reason: str, answer: http.client.HTTPMessage, payload: bytes
    ) -> Any:
        if status >= 300:
            error = self._error(status, reason, payload)
            if isinstance(error, StoreUnavailable):
                error.retry_after = _seconds(answer.get("Retry-After"))
            raise error
        try:
            return json.loads(payload or b"null")
        except ValueError:
            raise StoreUnavailable(
                f"analytics server {self.url} answered {status} with {answer.get('Content-Type') or 'no type'}, "
                "not JSON: is analytics.store the analytics server's URL?"
            ) from None

    def _error(self, status: int, reason: str, payload: bytes) -> Exception:
        text = payload.decode("utf-8", "replace")
        try:
            message = json.loads(text).get("error") or reason
        except (ValueError, AttributeError):
            message = text[:500] or reason
        if status == 404:
            return NotFound(message)
        if status in (401, 403):
            return PermissionError(f"analytics server {self.url}: {message}")
        if status in REFUSED:
            return MessageError(
                f"analytics server {self.url} refused the request ({status}): {message}"
            )
        if 400 <= status < 500:
            return ValueError(f"analytics server {self.url} answered {status}: {message}")
        return StoreUnavailable(f"analytics server {self.url} answered {status}: {message}")


class HttpSink:
    """The scheduler plugin's writer: POSTs batches to the server's ingest endpoint (from
    the shipper's one thread; the shipper decides when to retry)."""

    def __init__(
        self, url: str, token: str | None = None, ca_file: str | None = None, timeout: float = 10
    ):
        self.client = ServerClient(url, token=token, ca_file=ca_file, timeout=timeout)

    def write(self, messages: list[Envelope] | list[dict]) -> int:
        """messages: typed (what the shipper sends) or in their wire form."""
        # Ingest stores each (cluster_id, seq) once: a batch sent twice is harmless.
        return int(
            (self.client.post("/api/ingest", messages, idempotent=True) or {}).get("stored", 0)
        )

    def close(self) -> None:
        self.client.close()
