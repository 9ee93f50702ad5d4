"""The scheduler plugin: every `interval`, read what the scheduler aggregates and
turn it into messages for the store.

Everything here runs on the scheduler's event loop, so each step is O(task
groups + workers) and nothing blocks: writing happens on the shipper's thread,
profiles arrive by RPC.  No hook may raise into the scheduler.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import dask.config
from dask.utils import parse_timedelta
from distributed.diagnostics.plugin import SchedulerPlugin
from tornado.ioloop import PeriodicCallback

from .. import messages
from .cluster import ClusterSampler
from .computations import NOT_DONE, ComputationTracker
from .errors import ErrorCounter
from .shipper import Shipper
from .sinks import open_sink

logger = logging.getLogger("dask_analytics_lab")

PLUGIN_NAME = "dask-analytics-lab"
# Stimuli under which a not-yet-finished task being released means the user gave up on it.
_CANCEL_STIMULI = ("cancel-key", "client-releases-keys")
IDLE_TOPIC = "analytics-idle-shutdown"


def _jsonable(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 20:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return repr(value)


def mask_url(url: str) -> str:
    """A store URL fit for logs: the password replaced by ***."""
    if "://" in url and "@" in url.split("://", 1)[1]:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":***"
        return f"{scheme}://{creds}@{host}"
    return url


class AnalyticsPlugin(SchedulerPlugin):
    """Records a cluster's computations, task groups, errors, events and profiles."""

    name = PLUGIN_NAME
    # register() twice on one cluster keeps the first plugin: nothing is recorded twice.
    idempotent = True

    def __init__(self, settings: dict):
        self.settings = settings
        self._started = False

    # --- lifecycle -----------------------------------------------------------
    async def start(self, scheduler: Any) -> None:
        if self._started:  # a preload's dask_setup and an explicit start()
            return
        self._started = True
        s = self.settings
        self.scheduler = scheduler
        self.cluster_id: str = scheduler.id
        self._seq = 0
        self._allow = frozenset(s["events_allow"])
        self._errors = ErrorCounter()
        self._cancelled_groups: set[str] = set()
        self._computations = ComputationTracker(self.emit, code_transmit=s["code_transmit"])
        self._sampler = ClusterSampler(s["price_per_core_hour"], time.time())
        self._last_counter = -1
        self._tick_cpu = 0.0
        self._ticks = 0
        self._idle_shutdown = False
        url = s["store"]
        self._shipper = Shipper(
            lambda: open_sink(url, token=s.get("token"), ca_file=s.get("ca_file")),
            max_messages=s["buffer_max_messages"],
            min_delay=s["retry_min_delay"],
            max_delay=s["retry_max_delay"],
            describe=mask_url(url),
        )
        self._profiles: asyncio.Queue = asyncio.Queue()
        self._profile_cycle = parse_timedelta(dask.config.get("distributed.worker.profile.cycle"), default="ms") + 0.1
        self._profile_task = asyncio.create_task(self._fetch_profiles())

        from .environment import platform_info, versions

        # importlib.metadata reads files: keep it off the event loop.
        found_versions, found_platform = await asyncio.to_thread(lambda: (versions(), platform_info()))
        self.emit("cluster", {
            "name": s.get("name") or self.cluster_id,
            "address": scheduler.address,
            "user": s["user"],
            "account": s["account"],
            "started": scheduler.time_started,
            "price_per_core_hour": s["price_per_core_hour"],
            "versions": found_versions,
            "platform": found_platform,
            "settings": {
                "interval": s["interval"],
                "code_transmit": s["code_transmit"],
                "profile_transmit": s["profile_transmit"],
                "events_allow": sorted(self._allow),
            },
        })
        scheduler.handlers["analytics_flush"] = self._handle_flush
        scheduler.handlers["analytics_info"] = self._handle_info
        self._tick()
        self._callback = PeriodicCallback(self._tick, s["interval"] * 1000)
        self._callback.start()
        logger.info("dask-analytics: recording cluster %s into %s", self.cluster_id, mask_url(url))

    async def close(self) -> None:
        if not self._started:
            return
        self._callback.stop()
        self._profile_task.cancel()
        self._tick(force=True)
        self.emit("cluster_stop", {
            "stopped": time.time(),
            "reason": "idle-timeout" if self._idle_shutdown else "closed",
            "idle_shutdown": self._idle_shutdown,
        })
        await asyncio.to_thread(self._shipper.close, 10.0)
        self._started = False

    # --- the one way anything becomes a message --------------------------------
    def emit(self, kind: str, data: dict) -> None:
        """Queue one message for the store.  O(1); safe on the event loop; never raises."""
        try:
            self._seq += 1
            self._shipper.put(messages.make(self.cluster_id, self._seq, kind, time.time(), data))
        except Exception:
            logger.exception("dask-analytics: could not queue a %s message", kind)

    # --- scheduler hooks: O(1) each ----------------------------------------------
    def transition(self, key: Any, start: str, finish: str, *args: Any, stimulus_id: str | None = None, **kwargs: Any) -> None:
        if finish == "erred":
            text = kwargs.get("exception_text")
            if text is None:
                return  # a dependent of the failed task; the group's counts show it
            ts = self.scheduler.tasks.get(key)
            if ts is not None:
                self._errors.record(ts.group.name, key, text, kwargs.get("traceback_text"), time.time())
        elif finish in ("released", "forgotten") and start in NOT_DONE \
                and stimulus_id is not None and stimulus_id.startswith(_CANCEL_STIMULI):
            ts = self.scheduler.tasks.get(key)
            if ts is not None:
                self._cancelled_groups.add(ts.group.name)

    def log_event(self, topic: str, msg: Any) -> None:
        if topic in self._allow:
            self.emit("event", {"topic": topic, "time": time.time(), "msg": _jsonable(msg)})

    # --- the periodic snapshot ---------------------------------------------------
    def _tick(self, force: bool = False) -> None:
        cpu = time.thread_time()
        try:
            now = time.time()
            sample = self._sampler.sample(self.scheduler, now, self._shipper.dropped, force=force)
            if sample is not None:
                self.emit("cluster_sample", sample)
            counter = self.scheduler.transition_counter
            changed = force or counter != self._last_counter
            self._last_counter = counter
            ended = self._computations.poll(
                self.scheduler.computations, self.scheduler.task_groups, self._cancelled_groups,
                self._errors.erred_groups, changed=changed,
            )
            for row in self._errors.drain(self._computations.group_owner):
                self.emit("exception", row)
            if self.settings["profile_transmit"]:
                for computation_id, start in ended:
                    self._profiles.put_nowait((computation_id, start, now))
            self._check_idle(now)
        except Exception:
            logger.exception("dask-analytics: snapshot failed; will try again next interval")
        finally:
            # What analytics costs the event loop, reported by `status()`.
            self._tick_cpu += time.thread_time() - cpu
            self._ticks += 1

    def _check_idle(self, now: float) -> None:
        timeout = self.settings["idle_timeout"]
        idle_since = self.scheduler.idle_since
        if timeout is None or self._idle_shutdown or idle_since is None or now - idle_since < timeout:
            return
        self._idle_shutdown = True
        logger.warning("dask-analytics: scheduler idle for %.0f s (analytics.idle.timeout); asking it to close", now - idle_since)
        self.emit("event", {"topic": IDLE_TOPIC, "time": now, "msg": {"idle_since": idle_since, "timeout": timeout}})
        asyncio.ensure_future(self.scheduler.close(reason="analytics-idle-timeout"))

    async def _fetch_profiles(self) -> None:
        # One at a time: each fetch is one RPC per worker.
        while True:
            computation_id, start, ended = await self._profiles.get()
            try:
                # Workers hand over their samples once per profile cycle: a computation
                # shorter than a cycle has nothing in their history until the cycle ends.
                wait = ended + self._profile_cycle - time.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                tree = await asyncio.wait_for(
                    self.scheduler.get_profile(start=start), self.settings["profile_timeout"]
                )
                if tree.get("count"):
                    self.emit("profile", {"computation_id": computation_id, "tree": tree, "count": tree["count"]})
            except asyncio.CancelledError:
                raise
            except Exception as e:
                logger.info("dask-analytics: no profile for computation %s: %r", computation_id, e)
            finally:
                self._profiles.task_done()

    # --- handlers clients call ------------------------------------------------------
    async def _handle_flush(self, timeout: float = 10.0) -> dict:
        """Snapshot now, wait for pending profiles, then for the store to have it all."""
        self._tick(force=True)
        try:
            await asyncio.wait_for(self._profiles.join(), timeout)
        except asyncio.TimeoutError:
            pass
        written = await asyncio.to_thread(self._shipper.flush, timeout)
        return {**self._handle_info(), "flushed": written}

    def _handle_info(self) -> dict:
        return {
            "cluster_id": self.cluster_id,
            "store": mask_url(self.settings["store"]),
            "pending": self._shipper.pending,
            "stored": self._shipper.stored,
            "dropped": self._shipper.dropped,
            "rejected": self._shipper.rejected,
            "failing_since": self._shipper.failing_since,
            "ticks": self._ticks,
            "tick_cpu_seconds": self._tick_cpu,
        }
