"""The plugin's periodic snapshot: every `interval` each part reads what changed since
the last tick and sends it.  A tick holds the event loop for about TICK_SLICE; a part
that ran out of it goes on in the next turns of the loop (`behind`), and only the parts
that did."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from tornado.ioloop import PeriodicCallback

from .profiles import LIVE_EVERY, LIVE_MAX

logger = logging.getLogger("dask_analytics_lab")

# Seconds of work one tick may hold the event loop for (each part does a little more at
# most); the rest follows in the next turns of the loop, each as short.
TICK_SLICE = 0.001


class Ticks:
    """Runs the started plugin's ticks (collect/plugin.py's AnalyticsPlugin)."""

    def __init__(self, plugin: Any):
        self._plugin = plugin
        self.count = 0
        self.callback: PeriodicCallback | None = None
        self._again = False  # a tick is due in the next turn of the loop
        self._last_counter = -1
        self._live_profiles_at = 0.0

    def start(self, interval: float) -> PeriodicCallback:
        plugin = self._plugin
        plugin._tick()
        # The plugin's `_tick`, looked up now: a benchmark may have replaced it.
        self.callback = PeriodicCallback(plugin._tick, interval * 1000)
        self.callback.start()
        return self.callback

    def stop(self) -> None:
        if self.callback is not None:
            self.callback.stop()

    def tick(self, force: bool = False, again: bool = False) -> None:
        """`again`: the rest of a tick that ran out of time: only the parts it left behind
        (the others wait for the next tick: a continuation per turn of the loop while a
        large computation runs must not summarise and send everything each time)."""
        meter = self._plugin._meter
        token = meter.enter("ticks")
        try:
            self._parts(time.time(), force, again)
        except Exception:
            logger.exception("dask-analytics: snapshot failed; will try again next interval")
        finally:
            meter.leave(token)
            self.count += 1
        try:
            if self._behind() and not self._again:
                # The rest of the summaries in a later turn of the loop, not after `interval`.
                asyncio.get_running_loop().call_soon(self._tick_again)
                self._again = True
        except Exception:
            logger.exception("dask-analytics: could not schedule the rest of a snapshot")

    def _parts(self, now: float, force: bool, again: bool) -> None:
        p = self._plugin
        scheduler, stream, metrics = p.scheduler, p._stream, p._metrics
        if not again:
            sample = p._sampler.sample(scheduler, now, p._shipper.dropped, force=force)
            if sample is not None:
                p.emit("cluster_sample", sample)
        counter = scheduler.transition_counter
        changed = force or counter != self._last_counter
        self._last_counter = counter
        # Each part stops at the deadline (after some work) and goes on at the next tick.
        deadline = None if force else time.perf_counter() + TICK_SLICE
        ended = []
        if not again or p._computations.behind:
            ended = p._computations.poll(
                p.source.computations,
                scheduler.task_groups,
                changed=changed,
                now=now,
                deadline=deadline,
            )
        for row in p._errors.drain():
            p.emit("exception", row)
        if p._lost.keys:
            p._lost.expire(now)
        gone = p._computations.forget_gone()
        p._errors.forget(gone)
        if stream is not None:
            stream.forget(gone)
            if not again or stream.behind:
                computations = p.source.computations
                newest = str(computations[-1].id) if computations else None
                stream.tick(newest, now, force=force, deadline=deadline)
        if p._workers is not None:
            workers = p._workers.sample(scheduler.workers, now, force=force)
            if workers is not None:
                p.emit("worker_samples", workers)
        p._lifecycle.flush(now, force=force)
        if metrics is not None and (not again or metrics.behind):
            metrics.tick(scheduler.cumulative_worker_metrics, p.source.computations, deadline)
        self._profiles(ended, now)

    def _profiles(self, ended: list[tuple[str, float, float, list[str]]], now: float) -> None:
        """Profiles of the computations that just ended, and now and then of the running."""
        p = self._plugin
        if p.settings["profile_transmit"]:
            for computation_id, start, stop, prefixes in ended:
                p._profiles.put(computation_id, start, stop, prefixes)
            if now - self._live_profiles_at >= LIVE_EVERY:
                self._live_profiles_at = now
                for computation_id, start, prefixes in p._computations.running()[:LIVE_MAX]:
                    p._profiles.put(computation_id, start, now, prefixes, live=True)
        p._profiles.tick()

    def _behind(self) -> bool:
        p = self._plugin
        return bool(
            p._computations.behind
            or (p._stream is not None and p._stream.behind)
            or (p._metrics is not None and p._metrics.behind)
        )

    def _tick_again(self) -> None:
        self._again = False
        if self._plugin._ready:
            self._plugin._tick(again=True)
