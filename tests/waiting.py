"""Tests wait for a condition, never for a duration: CI machines are busy and slow."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    condition: Callable[[], Any], timeout: float = 60.0, what: str = "condition", every: float = 0.1
) -> Any:
    """The condition's first truthy value, checked every `every` seconds; an
    AssertionError naming `what` once `timeout` seconds have passed without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)
