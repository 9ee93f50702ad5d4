"""A Dask *client* preload: `%load_ext dask_analytics` lists this module in
`distributed.client.preload`, so every Client made later in the kernel registers
analytics as it connects, before it runs anything."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger("dask_analytics_lab")


async def dask_setup(client: Any) -> None:
    # Not inside a worker: tasks that make their own Client (get_client) inherit the
    # kernel's config through the nanny, and that cluster is recorded already.
    try:
        from distributed import get_worker

        get_worker()
        return
    except ValueError:
        pass
    if getattr(client, "_asynchronous", False):  # made with Client(asynchronous=True)
        logger.warning(
            "dask-analytics: an asynchronous Client is not registered automatically; "
            "call `await client.register_plugin(...)` via dask_analytics_lab.register in a thread"
        )
        return
    from .magics import register_and_say

    # register() is the blocking API: run it off the event loop this coroutine is on,
    # which stays free to serve the calls register() makes.
    await asyncio.to_thread(register_and_say, client)
