"""Where the shipper writes: straight into a store, or to an analytics server over HTTP."""
from __future__ import annotations

import gzip
import json
import ssl
import urllib.error
import urllib.request
from typing import Protocol

from ..messages import MessageError


class Sink(Protocol):
    def write(self, messages: list[dict]) -> int: ...
    def close(self) -> None: ...


class StoreSink:
    """Writes into a SQLite/PostgreSQL store through one connection, opened here (on
    the shipper's thread) and kept: the scheduler's descriptors stay constant."""

    def __init__(self, url: str):
        from ..store import open_store

        self.store = open_store(url, single_connection=True)

    def write(self, messages: list[dict]) -> int:
        return self.store.ingest(messages)

    def close(self) -> None:
        self.store.close()


class HttpSink:
    """POSTs gzip'd JSON batches to a `dask-analytics server`'s ingest endpoint."""

    def __init__(self, url: str, token: str | None = None, ca_file: str | None = None, timeout: float = 10):
        self.url = url.rstrip("/") + "/api/ingest"
        self.token = token
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca_file) if url.startswith("https") else None

    def write(self, messages: list[dict]) -> int:
        body = gzip.compress(json.dumps(messages, default=repr).encode())
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                return int(json.loads(response.read() or b"{}").get("stored", 0))
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            if e.code in (400, 413, 422):
                # The server read the batch and refused it: retrying cannot help.
                raise MessageError(f"server refused the batch ({e.code}): {detail}") from None
            raise ConnectionError(f"{self.url} answered {e.code}: {detail}") from None

    def close(self) -> None:
        pass


def open_sink(url: str, token: str | None = None, ca_file: str | None = None) -> Sink:
    if url.startswith(("http://", "https://")):
        return HttpSink(url, token=token, ca_file=ca_file)
    return StoreSink(url)
