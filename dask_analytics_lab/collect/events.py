"""Events: what the scheduler logs on a topic (Dask's, a user's `log_event`, our own),
recorded when its topic is in `analytics.events.allow`; a topic that is not gets one
line in the log, unless it is Dask's own."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

logger = logging.getLogger("dask_analytics_lab")

# Topics Dask itself publishes on every cluster: not worth a line in the log when they
# are not recorded (worker addresses and client ids are Dask's too).
DASK_TOPICS = frozenset(
    {
        "all",
        "scheduler",
        "stealing",
        "worker-get-client",
        "p2p",
        "invalid-worker-transition",
        "invalid-task-states",
        "worker-fail-hard",
        "lost-data",
        "task-erred",
        "spans",
        "memory",
        # The nanny's, at each memory restart: read for the worker-left event's reason.
        "worker-restart-memory",
    }
)
_MAX_UNLISTED = 1000  # topics remembered as not recorded (each said once)


def jsonable(value: Any, depth: int = 0) -> Any:
    """`value` as JSON can hold it: containers walked, anything else by its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 20:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return repr(value)


class EventLog:
    """Turns allowed events into `event` messages."""

    def __init__(self, emit: Callable[[str, dict[str, Any]], None], allow: Iterable[str]):
        self._emit = emit
        self.allow = frozenset(allow)
        self._unlisted: set[str] = set()

    def __call__(self, topic: str, msg: Any, when: float | None = None) -> None:
        if topic in self.allow:
            self._emit("event", {"topic": topic, "time": when or time.time(), "msg": jsonable(msg)})
        elif topic not in self._unlisted and len(self._unlisted) < _MAX_UNLISTED:
            self._unlisted.add(topic)
            if topic in DASK_TOPICS or "://" in topic or topic.startswith("Client-"):
                return
            logger.warning(
                "dask-analytics: events on topic %r are not recorded; to record them add it to "
                "analytics.events.allow (e.g. dask.config.set({'analytics.events.allow': [..., %r]}) "
                "before register())",
                topic,
                topic,
            )


def no_event(topic: str, msg: Any, when: float | None = None) -> None:
    """An event sink that records nothing (worker joins without workers' samples)."""
