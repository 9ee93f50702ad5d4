"""Report answers made off the event loop, shared by the requests that want the same one
at the same time (server/report_handlers.py makes them; the context holds the table)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any


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
