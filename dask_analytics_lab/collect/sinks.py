"""Where the shipper writes: straight into a store, or to an analytics server over HTTP."""

from __future__ import annotations

from typing import Protocol

from ..messages import Envelope
from ..remote import HttpSink


class Sink(Protocol):
    def write(self, messages: list[Envelope]) -> int: ...
    def close(self) -> None: ...


class StoreSink:
    """Writes into a SQLite/PostgreSQL store through one connection, opened here (on
    the shipper's thread) and kept: the scheduler's descriptors stay constant."""

    def __init__(self, url: str, retention: float | None = None):
        from ..store import open_store

        self.store = open_store(url, single_connection=True)
        # analytics.retention: pruned after the first hour or two (jittered: see
        # store/retention.py), then daily, through a Store of its own (opened per run) so
        # this writer's one connection never waits on it.
        self.retention = None
        if retention:
            from ..store.retention import DAY, Retention, first_delay

            self.retention = Retention(
                lambda: open_store(url), retention, every=DAY, delay=first_delay()
            ).start()

    def write(self, messages: list[Envelope]) -> int:
        return self.store.ingest(messages)

    def close(self) -> None:
        if self.retention is not None:
            self.retention.stop()
        self.store.close()


def open_sink(
    url: str, token: str | None = None, ca_file: str | None = None, retention: float | None = None
) -> Sink:
    """retention: analytics.retention in seconds, applied by a store sink; a server
    applies its own."""
    if url.startswith(("http://", "https://")):
        return HttpSink(url, token=token, ca_file=ca_file)
    return StoreSink(url, retention=retention)
