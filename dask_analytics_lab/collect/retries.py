"""Failures Dask's retries hide.  A task with `retries=` left that raises goes back to
waiting (processing -> waiting), and no transition carries its exception: only the
worker's task-erred message does.  A wrapper around the scheduler's stream handler for
that message reads it before Dask does, and counts the failure when Dask will run the
task again; the task's success later is counted against the same failure row.

O(1) per failed attempt.  The transition hook looks up a finishing task here only while
some retried task is pending (an empty dict is tested without a call).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("dask_analytics_lab")

TOPIC = "task-erred"  # the worker's message op, a key of Scheduler.stream_handlers
MAX_PENDING = 10_000  # retried tasks remembered until they finish (oldest dropped)


class Retries:
    """`on_retried(key, ts, msg)` counts one retried failure and returns the key of the
    row it went to (or None); `pending` maps each retried task's key to it."""

    def __init__(self, scheduler: Any, on_retried: Callable[[Any, Any, dict[str, Any]], Any]):
        self.scheduler = scheduler
        self.on_retried = on_retried
        self.pending: dict[Any, Any] = {}
        self._original: Callable[..., Any] | None = None
        self._wrapper: Callable[..., Any] | None = None

    def install(self) -> None:
        handlers: dict[str, Any] | None = getattr(self.scheduler, "stream_handlers", None)
        original = handlers.get(TOPIC) if handlers is not None else None
        if handlers is None or original is None:
            return  # another Dask: retried failures go unrecorded, as before

        def task_erred(*args: Any, **msg: Any) -> Any:
            try:
                self._seen(msg)
            except Exception:
                logger.exception("dask-analytics: reading a task-erred message failed")
            return original(*args, **msg)

        self._original, self._wrapper = original, task_erred
        handlers[TOPIC] = task_erred

    def uninstall(self) -> None:
        handlers = getattr(self.scheduler, "stream_handlers", None)
        if (
            handlers is not None
            and self._wrapper is not None
            and handlers.get(TOPIC) is self._wrapper
        ):
            handlers[TOPIC] = self._original
        self._original = self._wrapper = None
        self.pending.clear()

    def _seen(self, msg: dict[str, Any]) -> None:
        # What Scheduler.stimulus_task_erred checks before it retries the task.
        key = msg.get("key")
        ts = self.scheduler.tasks.get(key)
        if ts is None or ts.state != "processing" or ts.retries <= 0:
            return
        if ts.run_id != msg.get("run_id"):
            return
        row = self.on_retried(key, ts, msg)
        if row is None:
            return
        pending = self.pending
        if key not in pending and len(pending) >= MAX_PENDING:
            del pending[next(iter(pending))]
        pending[key] = row
