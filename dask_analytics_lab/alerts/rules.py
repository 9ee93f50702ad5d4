"""Which stored messages fire which alerts.

`Evaluator.written(batch)` is called with each batch right after the store took it (the
recorder's writer thread, or a team server's ingest) and only queues it: the rules run
on the evaluator's own thread, reading through the Store's read methods (findings
through `findings.explain`, the baseline through `Store.compare`, idle time and cost from
the cluster's row), and every alert is claimed in the record of fired alerts before it is
sent, so each (rule, subject, webhook) goes once whatever repeats the messages or how many
processes evaluate them.

- `failed`: a computation message whose state is `erred`.
- `finding` and `slower`: a computation that ended (finished or erred), looked at
  SETTLE seconds later, once its profile, task stream and metrics have been written too.
- `idle` and `cost`: any message of a cluster (samples, heartbeats), the cluster's row
  read at most every `check_every` seconds per cluster.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import queue
import threading
import time
from typing import Any

from .. import messages
from .deliver import Alert, Deliveries
from .settings import AlertSettings, Rule

logger = logging.getLogger("dask_analytics_lab.alerts")

# Seconds after a computation's end before its findings and baseline are read: the
# scheduler writes its profile, task stream and metrics after the computation message.
SETTLE = 5.0
# Batches waiting for the evaluator; past this the oldest go (counted, logged once).
MAX_WAITING = 10_000
FINAL = ("finished", "erred")
# Subjects remembered as fired by this process (saves the record a claim per repeat).
REMEMBERED = 10_000
# Pending alerts whose next attempt is this late (beyond the delivery timeout) belong to
# a process that ended before delivering them: looked for at start and every SWEEP_EVERY.
ORPHANED_AFTER = 120.0
SWEEP_EVERY = 60.0


class Evaluator:
    """Evaluates `settings`' rules over `store` (a Store, or a callable opening one on
    the evaluator's thread) and hands alerts to its Deliveries.

    link_base: where links point (`<link_base>/computations/<id>`); None: the alert
    names `dask analytics explain ID` instead."""

    def __init__(
        self,
        settings: AlertSettings,
        store: Any,
        *,
        link_base: str | None = None,
        account: str | None = None,
        findings_settings: dict | None = None,
    ):
        self.settings = settings
        self.link_base = link_base
        self.account = account  # the recorder's account (a server passes each batch's)
        self.dropped = 0
        self._open = store if callable(store) else None
        # The Store (opened on the evaluator's thread when given a callable).
        self._store: Any = None if callable(store) else store
        self._own_store = callable(store)
        self._findings_settings = findings_settings
        # Batches with their account; an Event: set when reached (idle()); None: stop.
        self._queue: queue.Queue[Any] = queue.Queue(MAX_WAITING)
        self._later: list[tuple[float, int, str, str, str | None]] = []
        self._count = itertools.count()
        self._checked: dict[str, float] = {}
        self._fired: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        self._by_on: dict[str, list[Rule]] = collections.defaultdict(list)
        for rule in settings.rules:
            self._by_on[rule.on].append(rule)
        self.deliveries: Deliveries | None = None
        self._log: Any = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dal-alerts", daemon=True)
        self._thread.start()

    # --- any thread ---------------------------------------------------------------
    def written(self, batch: list[messages.Envelope], account: str | None = None) -> None:
        """The store took `batch`: queue it for the rules (never waits)."""
        try:
            self._queue.put_nowait((list(batch), account if account is not None else self.account))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                logger.error(
                    "dask-analytics alerts: the evaluator fell %d batches behind; dropping the "
                    "newest (this is logged once)",
                    MAX_WAITING,
                )

    def idle(self, timeout: float = 30.0) -> bool:
        """Wait until every batch handed over so far is evaluated and every alert due now
        is sent (tests, a closing recorder).  True when that happened in time."""
        deadline = time.monotonic() + timeout
        reached = threading.Event()
        try:
            self._queue.put(reached, timeout=timeout)
        except queue.Full:
            return False
        if not reached.wait(max(0.0, deadline - time.monotonic())):
            return False
        if self.deliveries is None:
            return True
        return self.deliveries.idle(max(0.0, deadline - time.monotonic()))

    def close(self, timeout: float = 10.0) -> None:
        """Evaluate what was handed over and send what is due (at most `timeout` s), then
        stop.  Alerts whose retries are still waiting stay pending in the record."""
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self.deliveries is not None:
            self.deliveries.close(max(0.0, deadline - time.monotonic()))
        if self._own_store and self._store is not None:
            self._store.close()

    # --- the evaluator's thread ---------------------------------------------------------
    def _run(self) -> None:
        try:
            if self._store is None and self._open is not None:
                self._store = self._open()
            from ..store.alerts import AlertLog

            self._log = AlertLog(self._store)
            self.deliveries = Deliveries(
                self._log,
                max_attempts=self.settings.max_attempts,
                timeout=self.settings.timeout,
            )
        except Exception:
            logger.exception("dask-analytics alerts: could not open the store; no alerts")
            self._ready.set()
            return
        self._ready.set()
        swept = float("-inf")
        while True:
            if time.monotonic() - swept >= SWEEP_EVERY:
                swept = time.monotonic()
                self._adopt_orphans()
            wait = max(0.0, self._later[0][0] - time.monotonic()) if self._later else None
            wait = min(wait, SWEEP_EVERY) if wait is not None else SWEEP_EVERY
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                item = ([], None)
            if item is None:
                self._due(flush=True)
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self._batch(*item)
                self._due()
            except Exception:
                logger.exception("dask-analytics alerts: evaluating a batch failed")

    def _adopt_orphans(self) -> None:
        """Deliver the pending alerts a process that ended left behind (never lost)."""
        try:
            now = time.time()
            rows = self._log.orphans(before=now - ORPHANED_AFTER - self.settings.timeout)
            hooks = {w.name: w for w in self.settings.webhooks}
            for row in rows:
                if not self._log.adopt(row, next_try=now):
                    continue  # another process took it
                hook = hooks.get(row["webhook"])
                if hook is None:
                    self._log.failed(
                        row["rule"],
                        row["subject"],
                        row["webhook"],
                        attempts=row["attempts"],
                        error="its webhook is no longer in analytics.alerts.webhooks",
                    )
                    continue
                alert = Alert(
                    rule=row["rule"],
                    on=row["rule"].split(":", 1)[0],
                    subject=row["subject"],
                    cluster_id=row["cluster_id"],
                    computation_id=row["computation_id"],
                    account=row["account"],
                    title=row["title"],
                    text="",
                    link=row["link"],
                    time=row["fired"],
                )
                assert self.deliveries is not None
                self.deliveries.send(alert, hook, payload=row["body"], attempts=row["attempts"])
        except Exception:
            logger.exception("dask-analytics alerts: looking for undelivered alerts failed")

    def _batch(self, batch: list[messages.Envelope], account: str | None) -> None:
        now = time.time()
        for msg in batch:
            if isinstance(msg, messages.ComputationMessage):
                self._computation(msg, account)
            elif isinstance(msg, messages.ClusterStopMessage):
                self._checked.pop(msg.cluster_id, None)
                continue
            if (self._by_on["idle"] or self._by_on["cost"]) and now - self._checked.get(
                msg.cluster_id, float("-inf")
            ) >= self.settings.check_every:
                self._checked[msg.cluster_id] = now
                self._cluster(msg.cluster_id, account)

    def _computation(self, msg: messages.ComputationMessage, account: str | None) -> None:
        data = msg.data
        if data.state == "erred":
            for rule in self._by_on["failed"]:
                if not self._seen(rule, data.id):
                    self._failed(rule, msg, account)
        if data.state in FINAL and (self._by_on["finding"] or self._by_on["slower"]):
            heapq.heappush(
                self._later,
                (time.monotonic() + SETTLE, next(self._count), msg.cluster_id, data.id, account),
            )

    def _due(self, flush: bool = False) -> None:
        seen: set[str] = set()
        while self._later and (flush or self._later[0][0] <= time.monotonic()):
            _, _, cluster_id, computation_id, account = heapq.heappop(self._later)
            if computation_id in seen:
                continue
            seen.add(computation_id)
            try:
                self._settled(cluster_id, computation_id, account)
            except Exception:
                logger.exception(
                    "dask-analytics alerts: evaluating computation %s failed", computation_id
                )

    # --- the rules ---------------------------------------------------------------------
    def _failed(self, rule: Rule, msg: messages.ComputationMessage, account: str | None) -> None:
        data, store = msg.data, self._store
        what = data.label or data.id
        cluster = self._cluster_row(msg.cluster_id)
        lines = [f"Cluster {cluster.get('name') or msg.cluster_id}" + _by(cluster)]
        try:
            failures = store.list_exceptions(computation_id=data.id, limit=1)
        except Exception:
            failures = []
        if failures:
            f = failures[0]
            text = str(f.get("exception_text") or "").strip().splitlines()
            lines.append(
                f"{f.get('exc_type') or 'Error'} in {f.get('task_group') or '?'}: "
                + (text[-1][:300] if text else "")
            )
        self._fire(
            rule,
            subject=data.id,
            cluster_id=msg.cluster_id,
            computation_id=data.id,
            account=account,
            title=f"Computation failed: {what}",
            text="\n".join(lines),
            details={"label": data.label, "start": data.start, "stop": data.stop},
        )

    def _settled(self, cluster_id: str, computation_id: str, account: str | None) -> None:
        store = self._store
        for rule in self._by_on["finding"]:
            if self._seen(rule, computation_id):
                continue
            from .. import config
            from ..findings import explain

            if self._findings_settings is None:
                self._findings_settings = config.findings_settings()
            found = [
                f
                for f in explain(store, computation_id, settings=self._findings_settings)
                if (rule.kind is None or f["kind"] == rule.kind)
                and (rule.min_impact is None or f["impact"] >= rule.min_impact)
            ]
            if found:
                top = found[0]
                self._fire(
                    rule,
                    subject=computation_id,
                    cluster_id=cluster_id,
                    computation_id=computation_id,
                    account=account,
                    title=f"Finding: {top['title']}",
                    text=f"{top.get('advice') or ''}".strip()[:1000],
                    details={
                        "findings": [
                            {k: f.get(k) for k in ("kind", "title", "impact")} for f in found
                        ]
                    },
                )
        for rule in self._by_on["slower"]:
            if self._seen(rule, computation_id):
                continue
            try:
                compared = store.compare(computation_id)
            except Exception:  # no baseline (a first run), or a record cut short
                continue
            wall = compared.get("wall") or {}
            ratio = wall.get("ratio")
            if ratio is not None and ratio >= (rule.ratio or 0):
                self._fire(
                    rule,
                    subject=computation_id,
                    cluster_id=cluster_id,
                    computation_id=computation_id,
                    account=account,
                    title=f"Run {ratio:.1f}x slower than its baseline",
                    text=(
                        f"{wall.get('after', 0):.1f} s against {wall.get('before', 0):.1f} s "
                        f"(baseline {compared.get('baseline_id')})"
                    ),
                    details={"wall": wall, "baseline_id": compared.get("baseline_id")},
                )

    def _cluster(self, cluster_id: str, account: str | None) -> None:
        row = self._cluster_row(cluster_id)
        if not row or row.get("status") != "live":
            return
        now = time.time()
        name = row.get("name") or cluster_id
        for rule in self._by_on["idle"]:
            since = row.get("idle_since")
            if since is None or now - since < (rule.minutes or 0) * 60:
                continue
            subject = f"{cluster_id}@{since:.0f}"  # one alert per idle period
            if not self._seen(rule, subject):
                self._fire(
                    rule,
                    subject=subject,
                    cluster_id=cluster_id,
                    account=account,
                    title=f"Cluster {name} idle for {(now - since) / 60:.0f} minutes",
                    text=f"Still running{_by(row)}; `analytics.idle.timeout` closes it when idle",
                    details={"idle_since": since},
                )
        for rule in self._by_on["cost"]:
            cost = row.get("cost")
            if cost is None or cost < (rule.budget or 0) or self._seen(rule, cluster_id):
                continue
            self._fire(
                rule,
                subject=cluster_id,
                cluster_id=cluster_id,
                account=account,
                title=f"Cluster {name} cost {cost:.2f}, over its budget of {rule.budget:g}",
                text=f"Still running{_by(row)}",
                details={"cost": cost, "budget": rule.budget},
            )

    def _cluster_row(self, cluster_id: str) -> dict[str, Any]:
        try:
            return self._store.get_cluster(cluster_id)
        except Exception:  # not there yet (its first message is in a later batch)
            return {}

    # --- firing ----------------------------------------------------------------------
    def _seen(self, rule: Rule, subject: str) -> bool:
        return (rule.key, subject) in self._fired

    def link(self, computation_id: str, cluster_id: str) -> str | None:
        if not self.link_base:
            return None
        if computation_id:
            return f"{self.link_base}/computations/{computation_id}"
        return f"{self.link_base}/clusters/{cluster_id}"

    def _fire(
        self,
        rule: Rule,
        *,
        subject: str,
        cluster_id: str,
        title: str,
        text: str,
        account: str | None,
        computation_id: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        self._fired[(rule.key, subject)] = None
        while len(self._fired) > REMEMBERED:
            self._fired.popitem(last=False)
        link = self.link(computation_id, cluster_id)
        if link is None and computation_id:
            text += f"\nDetails: `dask analytics explain {computation_id}`"
        alert = Alert(
            rule=rule.key,
            on=rule.on,
            subject=subject,
            cluster_id=cluster_id,
            computation_id=computation_id,
            account=account,
            title=title,
            text=text,
            link=link,
            time=time.time(),
            details=details or {},
        )
        for hook in self.settings.webhooks_for(rule):
            from .deliver import body

            if self._log.claim(
                rule=rule.key,
                subject=subject,
                webhook=hook.name,
                cluster_id=cluster_id,
                computation_id=computation_id,
                account=account,
                fired=alert.time,
                title=title,
                link=link,
                body=body(alert, hook.format),
            ):
                assert self.deliveries is not None
                self.deliveries.send(alert, hook)


def _by(cluster: dict[str, Any]) -> str:
    user = cluster.get("user")
    return f" (user {user})" if user else ""
