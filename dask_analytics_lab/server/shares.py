"""Each caller's share of the read threads.

Reads run on a few threads (`threads`, default 4).  Without shares, one account's four
big reads take all of them, and everyone else's requests, token checks included, wait
behind them.  A caller (an account; all anonymous callers together) may run at most
half of the threads at once; its further reads wait their turn on the loop, costing
no thread and no memory.  Event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any


class ReadShares:
    def __init__(self, threads: int):
        self.per_caller = max(1, threads // 2)
        self._held: dict[Any, list] = {}  # key -> [semaphore, users]

    @contextlib.asynccontextmanager
    async def hold(self, key: Any) -> AsyncIterator[None]:
        entry = self._held.get(key)
        if entry is None:
            entry = self._held[key] = [asyncio.Semaphore(self.per_caller), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._held[key]  # bounded: only callers with reads in flight have one


def caller_key(principal: Any) -> Any:
    """Whose share a read counts against: the account; anonymous callers share one."""
    if principal is None:
        return ("anonymous",)
    return ("account", principal.account)
