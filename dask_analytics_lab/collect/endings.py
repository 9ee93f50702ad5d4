"""The end of the process a scheduler lives in: interpreter exit, and SIGTERM.

A LocalCluster's scheduler lives in the process that made it (a script, a notebook's
kernel).  When that process ends, the recording must end at that moment:

- At interpreter exit (the end of a script, Ctrl-C ending it, a kernel's shutdown) the
  `atexit` hook here runs before distributed's own, which close the LocalCluster:
  registered later, it runs first.  The cluster's close first takes the workers away
  (a process-based worker still running a task is killed by its nanny only after 4 s),
  so what ran at the end would read "never ran" and the end would land seconds late.
- A SIGTERM runs no `atexit`: JupyterLab restarting a kernel asks it to shut down,
  sends SIGTERM after 2.5 s if it has not exited (a process-based LocalCluster's close
  takes longer), then SIGKILL.  The handler here ends the recording, then does what the
  previous handler would have done.

Ending means: every task not finished yet is cancelled at that moment, those running
then "cancelled while running", as a `client.cancel` would count them; the running
computations and the cluster stop then; and the store has it all before the process
goes on ending.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from .group_figures import NOT_DONE
from .lost import WORKER_DIED

logger = logging.getLogger("dask_analytics_lab")

# Seconds an ending may take to reach the store, per cluster (JupyterLab sends
# SIGKILL 2.5 s after its SIGTERM).
END_TIMEOUT = 2.0


class Ending(Protocol):
    def end_now(self, at: float, reason: str, timeout: float) -> bool: ...


_live: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.RLock()  # reentrant: the SIGTERM handler may interrupt its holder
_atexit_registered = False
_sigterm_installed = False
_previous: Any = None


def track(plugin: Ending) -> None:
    """`plugin` records a scheduler of this process: end it when the process ends."""
    global _atexit_registered
    with _lock:
        _live.add(plugin)
        if not _atexit_registered:
            # Registered now, after distributed registered its own: run before them.
            atexit.register(end_all, "closed")
            _atexit_registered = True


def untrack(plugin: Ending) -> None:
    with _lock:
        _live.discard(plugin)


def end_all(reason: str) -> None:
    """End every recording of this process now; each is written before this returns.
    Never raises (it runs in atexit and in a signal handler)."""
    at = time.time()
    with _lock:
        # Readers of the written record (alerts, traces) after the recordings that feed
        # them: their last batches come from those ends.
        plugins = sorted(_live, key=lambda p: bool(getattr(p, "ends_after_recorders", False)))
        _live.clear()
    for plugin in plugins:
        try:
            plugin.end_now(at, reason, END_TIMEOUT)
        except Exception:
            logger.exception("dask-analytics: could not record the end of a cluster")


def install_sigterm_handler() -> bool:
    """End the recordings of this process on SIGTERM, then do what the handler in place
    did (ignore it, call it, or end the process as SIGTERM does).  Once per process,
    from the main thread only (where Python allows it); False where it cannot."""
    global _sigterm_installed, _previous
    if threading.current_thread() is not threading.main_thread():
        return False
    with _lock:
        if _sigterm_installed:
            return True
        try:
            _previous = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError, AttributeError) as e:  # no SIGTERM here, or not allowed
            logger.info("dask-analytics: cannot watch for SIGTERM (%s)", e)
            return False
        _sigterm_installed = True
        return True


def _on_sigterm(signum: int, frame: Any) -> None:
    previous = _previous
    if previous == signal.SIG_IGN:
        return  # the process goes on: so does its recording
    end_all("terminated")
    if callable(previous):
        previous(signum, frame)
        return
    # SIG_DFL, or a handler set outside Python: end the process as SIGTERM does.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def cancel_unfinished(
    scheduler: Any, counts_for: Callable[[Any], Any], lost_keys: dict[Any, Any], at: float
) -> None:
    """Count what has not finished as a `client.cancel` at `at` would: cancelled, those
    processing then as cancelled while running (`counts_for`: the tracker's, by group;
    `lost_keys`: collect/lost.py's).  O(task groups)."""
    for tg in list(scheduler.task_groups.values()):
        states = tg.states
        running = states.get("processing", 0)
        unfinished = sum(states.get(s, 0) for s in NOT_DONE)
        if not unfinished:
            continue
        counts = counts_for(tg)
        # Done once and wanted again after a worker left with it: done, not cancelled.
        counts.cancelled += max(0, unfinished - counts.lost_waiting)
        counts.cancelled_running += running
        counts.cancelled_at = at
    # A task that was running on a worker that left just before (a terminal's Ctrl-C
    # reaches the workers too) is back to waiting: it ran, and was cancelled so.
    # O(keys lost, bounded by lost.MAX_KEYS).
    for key, entry in lost_keys.items():
        ts = scheduler.tasks.get(key) if entry.kind == WORKER_DIED else None
        if ts is not None and ts.state in NOT_DONE and ts.state != "processing":
            counts_for(ts.group).cancelled_running += 1
