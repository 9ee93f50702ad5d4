"""Report answers made off the event loop, shared by the requests that want the same one
at the same time (server/report_handlers.py makes them; the context holds the table)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

# Bytes of rendered report pages (gzip'd) a server keeps; past it, the least recently
# read are dropped (and rendered again when read again).
PAGES_BYTES = 256 * 2**20


class Body:
    """A report answer made off the loop: its bytes, their Content-Encoding, and the
    row's metadata (None: no such report), which each request checks for itself."""

    __slots__ = ("data", "encoding", "meta", "__weakref__")

    def __init__(self, data: bytes, encoding: str | None, meta: dict | None):
        self.data, self.encoding, self.meta = data, encoding, meta


class SharedBodies:
    """Report answers in flight, by (id, form, encoding): a request for one already being
    made or sent gets the same bytes.  64 clients reading one report then cost one read
    and one copy in memory, not 64 (event loop only)."""

    def __init__(self) -> None:
        self._live: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._making: dict[Any, asyncio.Future] = {}
        self.pages = RenderedPages()

    async def get(self, key: Any, make: Callable[[], Awaitable[Body]]) -> Body:
        body = self._live.get(key)
        if body is not None:
            return body
        fut = self._making.get(key)
        if fut is None:
            fut = self._making[key] = asyncio.ensure_future(make())
            fut.add_done_callback(lambda f: self._made(key, f))
        return await asyncio.shield(fut)

    def _made(self, key: Any, fut: asyncio.Future) -> None:
        self._making.pop(key, None)
        if not fut.cancelled() and fut.exception() is None:
            self._live[key] = fut.result()  # kept while some request still holds it


class RenderedPages:
    """Report pages rendered from their twins, gzip'd, by report id: a page is rendered
    once and then served as bytes, so a reader's GET costs a lookup and a send, not a
    parse and a render (which hold the GIL for as long, whoever waits on it).  A report's
    page never changes: its twin and row are written once.  Read threads; locked."""

    def __init__(self, limit: int = PAGES_BYTES):
        self.limit = limit
        self.used = 0
        self.rendered = 0  # pages rendered since start (/metrics)
        self._pages: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._rendering: dict[str, threading.Lock] = {}

    def get_or_make(self, report_id: str, make: Callable[[], bytes | None]) -> bytes | None:
        """The kept page, else make() it (once, however many threads ask at the same time)
        and keep it; None when make() finds no report."""
        with self._lock:
            page = self._kept(report_id)
            if page is not None:
                return page
            rendering = self._rendering.setdefault(report_id, threading.Lock())
        with rendering:
            try:
                with self._lock:
                    page = self._kept(report_id)
                if page is None:
                    page = make()
                    if page is not None:
                        with self._lock:
                            self.rendered += 1
                            self._keep(report_id, page)
            finally:
                with self._lock:
                    self._rendering.pop(report_id, None)
        return page

    def _kept(self, report_id: str) -> bytes | None:
        page = self._pages.get(report_id)
        if page is not None:
            self._pages.move_to_end(report_id)
        return page

    def _keep(self, report_id: str, page: bytes) -> None:
        if len(page) > self.limit:
            return  # served, not kept: it would push out every other page
        self._pages[report_id] = page
        self.used += len(page)
        while self.used > self.limit:
            _, dropped = self._pages.popitem(last=False)
            self.used -= len(dropped)
