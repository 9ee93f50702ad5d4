"""The reader of a store URL: the Store itself for SQLite/PostgreSQL, an HttpReader for a
`dask-analytics server`; both answer the same read methods.

One reader per (URL, token) per process, shared by the public API, performance reports
and the widgets, so a notebook that reads a store many times opens it once.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from . import config

if TYPE_CHECKING:
    from .reader import Reader

_readers: dict[tuple[str, str | None], Reader] = {}
_readers_lock = threading.Lock()


def open_reader(store: str | None = None, token: str | None = None) -> Reader:
    """The reader of `store` (default `analytics.store`), opened on first use.

    token: for a server, default `analytics.token`; ignored for an embedded store.
    Raises config.ConfigError for a store URL that is not one, StoreUnavailable when
    the database cannot be opened."""
    url = config.validate_store(store if store is not None else config.get("analytics.store"))
    if token is None:
        token = config.get("analytics.token")
    key = (url, token if url.startswith("http") else None)
    with _readers_lock:
        reader: Reader | None = _readers.get(key)
        if reader is None:
            if url.startswith(("http://", "https://")):
                from .http_reader import HttpReader

                reader = HttpReader(url, token=token, ca_file=config.get("analytics.ca-file"))
            else:
                from .store import open_store

                reader = open_store(url)
            _readers[key] = reader
        return reader


def close_readers() -> None:
    """Close every store connection this process opened for reading."""
    with _readers_lock:
        readers = list(_readers.values())
        _readers.clear()
    for reader in readers:
        reader.close()
