"""Where the shipper writes: straight into a store, or to an analytics server over HTTP."""
from __future__ import annotations

import gzip
import json
import ssl
import urllib.error
import urllib.request
from typing import Any, Protocol

import msgspec

from ..messages import Envelope, MessageError


class Sink(Protocol):
    def write(self, messages: list[Envelope]) -> int: ...
    def close(self) -> None: ...


class StoreSink:
    """Writes into a SQLite/PostgreSQL store through one connection, opened here (on
    the shipper's thread) and kept: the scheduler's descriptors stay constant."""

    def __init__(self, url: str):
        from ..store import open_store

        self.store = open_store(url, single_connection=True)

    def write(self, messages: list[Envelope]) -> int:
        return self.store.ingest(messages)

    def close(self) -> None:
        self.store.close()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """The token goes to the configured server only: a redirect is an error to fix in
    `analytics.store`, never a request (with the token) to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        raise urllib.error.HTTPError(
            req.full_url, code, f"the store redirects to {newurl}: set analytics.store to the server's own URL",
            headers, fp)


class HttpSink:
    """POSTs gzip'd JSON batches to a `dask-analytics server`'s ingest endpoint."""

    def __init__(self, url: str, token: str | None = None, ca_file: str | None = None, timeout: float = 10):
        self.url = url.rstrip("/") + "/api/ingest"
        self.token = token
        self.timeout = timeout
        context = ssl.create_default_context(cafile=ca_file) if url.startswith("https") else None
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _NoRedirects())

    def write(self, messages: list[Envelope] | list[dict]) -> int:
        """messages: typed (what the shipper sends) or in their wire form."""
        # NaN and infinities become null, as the server would read them.
        body = gzip.compress(msgspec.json.encode(messages, enc_hook=_unknown))
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return int(json.loads(response.read() or b"{}").get("stored", 0))
        except urllib.error.HTTPError as e:
            detail = (e.read().decode(errors="replace") if e.fp else "")[:500] or str(e.msg)
            if e.code in (400, 413, 422):
                # The server read the batch and refused it: retrying cannot help.
                raise MessageError(f"server refused the batch ({e.code}): {detail}") from None
            raise ConnectionError(f"{self.url} answered {e.code}: {detail}") from None

    def close(self) -> None:
        pass


def _unknown(value: Any) -> str:
    return repr(value)


def open_sink(url: str, token: str | None = None, ca_file: str | None = None) -> Sink:
    if url.startswith(("http://", "https://")):
        return HttpSink(url, token=token, ca_file=ca_file)
    return StoreSink(url)
