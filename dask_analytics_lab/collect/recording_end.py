"""How a cluster's recording ends, once: the scheduler closes (its idle timeout may be
why), or the process it lives in ends first (collect/endings.py calls `end_now` at
interpreter exit and on SIGTERM).  Either way every part sends what it holds, the
running computations stop, and a `cluster_stop` says when and why."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from dask.utils import format_time

from .endings import cancel_unfinished

logger = logging.getLogger("dask_analytics_lab")

# Our own event topic: recorded when in analytics.events.allow, like any other topic.
IDLE_TOPIC = "analytics-idle-shutdown"


class RecordingEnd:
    """The end of the started `plugin`'s recording (collect/plugin.py)."""

    def __init__(self, plugin: Any, loop: Any):
        self._plugin = plugin
        self._loop = loop
        self._loop_thread = threading.get_ident()
        # Reentrant: a signal handler may interrupt its holder on the same thread.
        self._lock = threading.RLock()
        self.ended = False

    def closing(self) -> None:
        """The scheduler closes: the end now, unless the process's end came first."""
        with self._lock:
            ended, self.ended = self.ended, True
        if not ended:
            self._record(time.time())

    def end_now(self, at: float, reason: str, timeout: float) -> bool:
        """The process ends (interpreter exit, SIGTERM): record the end as of `at` and
        wait (at most `timeout` seconds) until the store has it.  Called from any thread
        (atexit, a signal handler).  True when written."""
        deadline = time.monotonic() + timeout
        if not self._plugin._ready or self.ended:
            return False
        done = threading.Event()

        def end() -> None:
            try:
                self._end(at, reason)
            finally:
                done.set()

        loop = self._loop
        if threading.get_ident() == self._loop_thread or loop.is_closed() or not loop.is_running():
            end()  # the loop cannot run it (or this is the loop's thread, interrupted)
        else:
            try:
                loop.call_soon_threadsafe(end)
            except RuntimeError:  # closed meanwhile
                end()
            if not done.wait(timeout / 2):
                # The loop is stuck (or busy for longer than the process has left): end
                # from here; the lock lets only one of the two record it.
                end()
        return bool(self._plugin._shipper.flush(max(0.0, deadline - time.monotonic())))

    def _end(self, at: float, reason: str) -> None:
        plugin = self._plugin
        with self._lock:
            if self.ended or not plugin._ready:
                return
            self.ended = True
        try:
            tracker = plugin._computations
            cancel_unfinished(plugin.scheduler, tracker.counts_for, plugin._lost.keys, at)
            self._record(at, reason)
        except Exception:
            logger.exception("dask-analytics: recording the end of the process failed")
        finally:
            # Nothing after the end belongs to this recording: the workers' closing, the
            # client's last releases.  close() still closes the shipper.
            plugin._stop_hooks()

    def _record(self, now: float, reason: str | None = None) -> None:
        plugin = self._plugin
        plugin._ticks.stop()
        plugin._profiles.close()
        plugin._lifecycle.scheduler_closing(now)
        plugin._tick(force=True)
        plugin._computations.closing(now)
        idle = reason is None and self._closed_for_idleness()
        plugin.emit(
            "cluster_stop",
            {
                "stopped": now,
                "reason": reason or ("idle-timeout" if idle else "closed"),
                "idle_shutdown": idle,
            },
        )

    def _closed_for_idleness(self) -> bool:
        """Whether the scheduler closes because its idle timeout ran out (any other close
        would come before that moment: check_idle closes as soon as it has passed)."""
        scheduler = self._plugin.scheduler
        timeout, idle_since = scheduler.idle_timeout, scheduler.idle_since
        if not timeout or idle_since is None or time.time() < idle_since + timeout:
            return False
        logger.warning(
            "dask-analytics: scheduler closing after %s idle (its idle timeout)",
            format_time(timeout),
        )
        self._plugin._event(IDLE_TOPIC, {"idle_since": idle_since, "timeout": timeout})
        return True
