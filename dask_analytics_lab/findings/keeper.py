"""Keep each computation's findings in the store as it ends, so a list filtered by
finding kind (findings/across.py) finds them kept rather than explaining them then.

`Keeper.written(batch, account)` is called with each batch right after the store took
it (the recorder's writer thread through written_readers.py, or a team server's ingest)
and only queues it.  On the keeper's own thread a computation that ended is explained
kept.SETTLE seconds later (its events, profile and task stream written by then).  When
a cluster moves on, the findings of its computations kept while they could still change
are made final: when its next computation starts, by taking out what only a cluster's
last computation can have (kept.moved_on, not a second explain); when it stops, by
explaining them again (the idle time up to its end).  What the keeper never got to (a
process that ended first) is explained when first asked.

`busy`: a callable saying the cluster is computing; explaining then waits (a keeper on
the scheduler's host never competes with the work it records).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .. import messages
from . import explain, kept

logger = logging.getLogger("dask_analytics_lab")

ENDED = ("finished", "erred", "cancelled")
MAX_WAITING = 10_000  # batches queued; past this the newest are dropped (counted)
MAX_DUE = 100_000  # explains waiting for their time; past this the oldest go


class Keeper:
    """Explains and keeps the findings of computations as `written` batches show them
    ending, into `store` (an open Store, its owner closes it)."""

    def __init__(
        self,
        store: Any,
        *,
        settings: dict | None = None,
        busy: Callable[[], bool] | None = None,
        settle: float | None = None,
    ):
        self._store = store
        self._settings = settings
        self._settings_key: str | None = None
        self._busy = busy or (lambda: False)
        self._settle = kept.SETTLE if settle is None else settle
        self.kept = 0
        self.dropped = 0
        self.failed = 0
        self._queue: queue.Queue[Any] = queue.Queue(MAX_WAITING)
        # (due, n, what, id, account): what is "computation", "moved-on" (a cluster's
        # next computation started) or "cluster" (it stopped)
        self._due: list[tuple[float, int, str, str, str | None]] = []
        self._count = itertools.count()
        self._started: OrderedDict[str, None] = OrderedDict()  # computations seen running
        self._thread = threading.Thread(target=self._run, name="dal-findings", daemon=True)
        self._thread.start()

    # --- any thread -------------------------------------------------------------------
    def written(self, batch: list[messages.Envelope], account: str | None = None) -> None:
        """The store took `batch`: note what ended (never waits)."""
        wanted = [
            m
            for m in batch
            if isinstance(m, (messages.ComputationMessage, messages.ClusterStopMessage))
        ]
        if not wanted:
            return
        try:
            self._queue.put_nowait((wanted, account))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                logger.warning(
                    "dask-analytics: the findings keeper fell %d batches behind; their "
                    "findings are explained when first asked instead (logged once)",
                    MAX_WAITING,
                )

    def idle(self, timeout: float = 30.0) -> bool:
        """Wait until every batch handed over so far is filed and what is due now is
        kept (tests).  True when that happened in time."""
        reached = threading.Event()
        try:
            self._queue.put(reached, timeout=timeout)
        except queue.Full:
            return False
        return reached.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(timeout)

    # --- the keeper's thread -------------------------------------------------------------
    def _run(self) -> None:
        while True:
            wait = max(0.0, self._due[0][0] - time.monotonic()) if self._due else None
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                item = ()
            if item is None:
                return
            try:
                if isinstance(item, tuple) and item:
                    self._file(*item)
                self._explain_due()
            except Exception:
                logger.exception("dask-analytics: keeping findings failed")
            if isinstance(item, threading.Event):
                item.set()

    def _file(self, batch: list[Any], account: str | None) -> None:
        now = time.monotonic()
        for msg in batch:
            if isinstance(msg, messages.ClusterStopMessage):
                self._push(now, "cluster", msg.cluster_id, account)
                continue
            data = msg.data
            if data.state in ENDED:
                self._push(now + self._settle, "computation", data.id, account)
            elif data.state == "running" and data.id not in self._started:
                # The cluster moved on: what was kept of its earlier computations is final now.
                self._started[data.id] = None
                if len(self._started) > MAX_DUE:
                    self._started.popitem(last=False)
                self._push(now + self._settle, "moved-on", msg.cluster_id, account)

    def _push(self, due: float, what: str, ident: str, account: str | None) -> None:
        heapq.heappush(self._due, (due, next(self._count), what, ident, account))
        if len(self._due) > MAX_DUE:
            self._due.remove(min(self._due, key=lambda d: d[1]))
            heapq.heapify(self._due)
            self.dropped += 1

    def _explain_due(self) -> None:
        while self._due and self._due[0][0] <= time.monotonic():
            if self._busy():
                # Not while the cluster computes: look again a settle later.
                later = time.monotonic() + self._settle
                self._due = [(max(d, later), *rest) for d, *rest in self._due]  # type: ignore[misc]
                heapq.heapify(self._due)
                return
            _, _, what, ident, account = heapq.heappop(self._due)
            if what == "computation":
                self._keep([ident], account)
            elif what == "moved-on":
                self._keep(kept.moved_on(self._store, ident, self._key()), account)
            else:
                self._keep(self._provisional(ident), account)

    def _provisional(self, cluster_id: str) -> list[str]:
        from ..store import kept as stored

        with self._store.reading() as conn:
            return stored.provisional(conn, cluster_id)

    def _key(self) -> str:
        """The thresholds' fingerprint (kept.settings_key), the thresholds read once."""
        if self._settings_key is None:
            if self._settings is None:
                from .. import config

                self._settings = config.findings_settings()
            self._settings_key = kept.settings_key(self._settings)
        return self._settings_key

    def _keep(self, computation_ids: list[str], account: str | None) -> None:
        self._key()  # reads the thresholds explain is given
        for computation_id in computation_ids:
            try:
                explain(self._store, computation_id, account=account, settings=self._settings)
                self.kept += 1
            except Exception as e:
                self.failed += 1
                logger.info(
                    "dask-analytics: findings of %s not kept (%r); explained when asked",
                    computation_id,
                    e,
                )
