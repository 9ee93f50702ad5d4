"""What reads the recorder's written record on the scheduler: alerts (alerts/), the
trace exporter (otel/) and the findings keeper (findings/keeper.py), hosted by one
scheduler plugin beside the analytics plugin.

Why a plugin of its own: the recorder (collect/) may import only collect/, store/ and
the base modules (tests/unit/test_layout.py), while alerts and traces read findings
(findings/); and a scheduler with neither configured loads none of this.  Why one
plugin for both: Dask calls every scheduler plugin's `transition` for every transition of
every task, so each plugin costs the loop, even one whose hook does nothing.  Named for
the recorder's `written_readers` hook it fills (readers.py is the store's read path).

`api.register()` and `api.dask_setup` add it after the analytics plugin only when
`plugin_for` finds alerts or otel configured.  Its start() appends each reader to the
recorder's `written_readers`: they run on the shipper's writer thread and only file the
batch; the rules, webhooks, findings and OTLP exports run on their own threads, never
on the scheduler's event loop.  Its close waits for the recorder's last write.  When the
process ends without closing (a script's end, SIGTERM) collect/endings.py ends it after
the recorder: the traces of the computations that ended then are sent before exit.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from .collect import endings
from .collect.offloop import off_loop
from .collect.plugin import PLUGIN_NAME

logger = logging.getLogger("dask_analytics_lab")

NAME = "dask-analytics-readers"


class WrittenReadersPlugin(SchedulerPlugin):
    """Alerts (when `alerts` is given) and trace export (when `settings["otel"]` is set)
    for the recorder resolved as `settings` (config.resolve())."""

    name = NAME
    idempotent = True
    # collect/endings.py: ended after the recordings whose written batches feed it.
    ends_after_recorders = True

    def __init__(self, settings: dict[str, Any], alerts: Any = None, keep: bool = False):
        self.settings = settings
        self.alerts = alerts  # alerts.settings.AlertSettings, or None
        self.keep = keep  # keep each computation's findings as it ends
        self.evaluator: Any = None
        self.exporter: Any = None
        self.keeper: Any = None
        self._recorder: Any = None
        # The findings' reader: opened at start when findings are kept, else on first use.
        self._store: Any = None
        self._store_lock: Any = None  # made in start(): the plugin is pickled before

    async def start(self, scheduler: Any) -> None:
        if self._recorder is not None:
            return
        recorder = scheduler.plugins.get(PLUGIN_NAME)
        if recorder is None:
            logger.warning(
                "dask-analytics: no analytics plugin on this scheduler; no alerts or traces"
            )
            return
        self._recorder = recorder
        self._store_lock = threading.Lock()
        s = self.settings
        if self.alerts is not None:
            from .alerts.rules import Evaluator
            from .store import open_store

            url = s["store"]
            self.evaluator = Evaluator(
                self.alerts,
                lambda: open_store(url),
                link_base=self.alerts.link_base,
                account=s.get("account"),
            )
            recorder.written_readers.append(self.evaluator.written)
            logger.info(
                "dask-analytics alerts: %d rules to %d webhooks",
                len(self.alerts.rules),
                len(self.alerts.webhooks),
            )
        if self.keep:
            from .findings.keeper import Keeper
            from .store import open_store

            try:
                # Opened before register() returns, off the loop: the scheduler holds the
                # store's files open from then on, as many as it ever will.  The one
                # reader of the findings here: the trace exporter's too (_findings).
                self._store = await off_loop(open_store, s["store"])
            except Exception as e:
                # The recorder buffers and retries its writes; findings can wait to be asked.
                logger.warning(
                    "dask-analytics: findings are not kept as computations end (%s); "
                    "each is explained when first asked",
                    e,
                )
            else:
                self.keeper = Keeper(
                    self._store,
                    # Dask's own idle check (every 250 ms): None while tasks are unfinished.
                    busy=lambda: scheduler.idle_since is None,
                )
                recorder.written_readers.append(self.keeper.written)
        if s.get("otel"):
            from .otel.exporter import TraceExporter

            self.exporter = TraceExporter(
                s["otel"],
                {
                    # The recorder's cluster id (it may not have started yet: a preload
                    # starts the plugins together).
                    "id": scheduler.id,
                    "name": s.get("name") or scheduler.id,
                    "user": s.get("user"),
                    "account": s.get("account"),
                },
                findings=self._findings,
                findings_timeout=float(s["otel"].get("timeout", 10.0)),
            )
            recorder.written_readers.append(self.exporter.written)
            recorder.info_parts.append(self._info)
        endings.track(self)

    def _info(self) -> dict[str, Any]:
        e = self.exporter
        return {
            "otel_exported": e.exported,
            "otel_dropped": e.dropped,
            "otel_findings_failed": e.findings_failed,
        }

    def _findings(self, computation_id: str) -> list[dict[str, Any]]:
        """The exporter's findings thread: the computation's findings, read as
        `dask-analytics explain` reads them, with the recorder's store and token."""
        from . import findings

        with self._store_lock:
            if self._store is None:
                url = self.settings["store"]
                if url.startswith(("http://", "https://")):
                    from .http_reader import HttpReader

                    self._store = HttpReader(
                        url, token=self.settings.get("token"), ca_file=self.settings.get("ca_file")
                    )
                else:
                    from .store import open_store

                    self._store = open_store(url)
            reader = self._store
        return findings.explain_from(reader, computation_id)

    def end_now(self, at: float, reason: str, timeout: float) -> bool:
        """The process ends (collect/endings.py, after the recorder wrote its end): send
        the traces of every computation that ended, without waiting out their delay.
        At interpreter exit nothing kills the process: the exports may take up to their
        own timeout; on SIGTERM (a kernel's SIGKILL follows) `timeout` bounds it."""
        exporter = self.exporter
        if exporter is None:
            return True
        wait = timeout
        if reason != "terminated":
            wait = max(timeout, float(self.settings["otel"].get("timeout", 10.0)))
        try:
            return bool(exporter.flush(wait))
        except Exception:
            logger.exception("dask-analytics: could not send the last traces")
            return False

    async def close(self) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is None:
            return
        endings.untrack(self)
        # The scheduler closes its plugins together: the recorder writes its last batch
        # (a computation cancelled at the end) while closing, so wait for it first.
        deadline = time.monotonic() + 15
        while getattr(recorder, "_started", False) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        evaluator, self.evaluator = self.evaluator, None
        exporter, self.exporter = self.exporter, None
        keeper, self.keeper = self.keeper, None
        for reader in (evaluator, exporter, keeper):
            if reader is None:
                continue
            try:
                recorder.written_readers.remove(reader.written)
            except ValueError:
                pass
        # Inline at the interpreter's exit, when the executors are gone (offloop.py).
        if evaluator is not None:
            await off_loop(evaluator.close, 10.0)  # its timeout
        if exporter is not None:
            await off_loop(exporter.close)
        if keeper is not None:
            await off_loop(keeper.close)  # what it never got to is explained when asked
        if exporter is not None:
            # Its last counts stay in dal.status() until the recorder goes.
            final = {
                "otel_exported": exporter.exported,
                "otel_dropped": exporter.dropped,
                "otel_findings_failed": exporter.findings_failed,
            }
            try:
                index = recorder.info_parts.index(self._info)
                recorder.info_parts[index] = lambda: final
            except ValueError:
                pass
        store, self._store = self._store, None
        if store is not None and hasattr(store, "close"):
            await off_loop(store.close)


def plugin_for(settings: dict[str, Any], overrides: dict | None = None) -> Any:
    """The readers' plugin for a recorder resolved as `settings` (config.resolve()), or
    None when it has nothing to do: no otel, no alerts and no findings to keep (a team
    server's store evaluates alerts and keeps findings itself).  Loads alerts/ only when
    analytics.alerts has rules and webhooks (a bad analytics.alerts raises
    config.ConfigError here)."""
    import dask

    from . import config

    alerts = None
    team = settings["store"].startswith(("http://", "https://"))
    with dask.config.set(overrides or {}):
        wanted = bool(
            config.get("analytics.alerts.rules") and config.get("analytics.alerts.webhooks")
        )
        keep = not team and bool(config.get("analytics.findings.keep"))
    if wanted:
        from .alerts.settings import from_config

        alerts = from_config(overrides)
        if not alerts.enabled:
            alerts = None
        elif team:
            logger.info(
                "dask-analytics alerts: the team server evaluates alerts; analytics.alerts "
                "here are not used"
            )
            alerts = None
    if alerts is None and not settings.get("otel") and not keep:
        return None
    return WrittenReadersPlugin(settings, alerts, keep)
