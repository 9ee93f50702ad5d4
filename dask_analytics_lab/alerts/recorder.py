"""Alerts where a scheduler writes straight into a SQLite/PostgreSQL store: a scheduler
plugin of its own, registered after the analytics plugin only when alerts are
configured, that adds the evaluator to the analytics plugin's `written_readers` (so the
collector knows nothing of alerts, and a scheduler without them loads none of this).

The reader runs on the shipper's writer thread and only queues the batch; the rules and
the webhooks run on the evaluator's threads, with a Store of their own, never on the
scheduler's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from ..collect.offloop import off_loop
from ..collect.plugin import PLUGIN_NAME
from .settings import AlertSettings

logger = logging.getLogger("dask_analytics_lab.alerts")

NAME = "dask-analytics-alerts"


class AlertsPlugin(SchedulerPlugin):
    name = NAME
    idempotent = True

    def __init__(self, settings: AlertSettings, store: str, account: str | None = None):
        self.settings = settings
        self.store = store
        self.account = account
        self.evaluator: Any = None

    async def start(self, scheduler: Any) -> None:
        if self.evaluator is not None:
            return
        recorder = scheduler.plugins.get(PLUGIN_NAME)
        if recorder is None:
            logger.warning(
                "dask-analytics alerts: no analytics plugin on this scheduler; no alerts"
            )
            return
        from ..store import open_store
        from .rules import Evaluator

        url = self.store
        self.evaluator = Evaluator(
            self.settings,
            lambda: open_store(url),
            link_base=self.settings.link_base,
            account=self.account,
        )
        self._recorder = recorder
        recorder.written_readers.append(self.evaluator.written)
        logger.info(
            "dask-analytics alerts: %d rules to %d webhooks",
            len(self.settings.rules),
            len(self.settings.webhooks),
        )

    async def close(self) -> None:
        evaluator, self.evaluator = self.evaluator, None
        if evaluator is None:
            return
        # The scheduler closes its plugins together: the recorder writes its last batch
        # (a computation cancelled at the end) while closing, so wait for it first.
        deadline = time.monotonic() + 15
        while getattr(self._recorder, "_started", False) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        try:
            self._recorder.written_readers.remove(evaluator.written)
        except ValueError:
            pass
        # Inline at the interpreter's exit, when the executors are gone (offloop.py).
        await off_loop(evaluator.close, 10.0)


def plugin_for(settings: dict[str, Any], overrides: dict | None = None) -> AlertsPlugin | None:
    """The alerts plugin for a recorder resolved as `settings` (config.resolve()), or
    None: no alerts configured, or a team server's store (which evaluates them itself)."""
    from .settings import from_config

    alerts = from_config(overrides)
    if not alerts.enabled:
        return None
    if settings["store"].startswith(("http://", "https://")):
        logger.info(
            "dask-analytics alerts: the team server evaluates alerts; analytics.alerts here "
            "are not used"
        )
        return None
    return AlertsPlugin(alerts, settings["store"], settings.get("account"))
