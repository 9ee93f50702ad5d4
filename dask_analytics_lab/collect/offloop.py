"""Run blocking work off the scheduler's event loop, also while the interpreter exits.

At interpreter exit `concurrent.futures` shuts the executors down before `atexit`
closes a LocalCluster, so `asyncio.to_thread` then raises "cannot schedule new futures
after shutdown".  Work that must still happen then (writing the last rows) runs inline:
the loop is closing anyway, and losing the record is worse than a blocked last step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def off_loop(func: Callable[..., T], *args: Any) -> T:
    """`await asyncio.to_thread(func, *args)`, or `func(*args)` inline once the loop's
    executor refuses work."""
    loop = asyncio.get_running_loop()
    try:
        future = loop.run_in_executor(None, func, *args)
    except RuntimeError:  # the executor (or the interpreter) is shutting down
        return func(*args)
    return await future
