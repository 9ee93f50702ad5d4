"""Sending alerts to webhooks: the two bodies (our JSON, Slack's incoming-webhook
format), one POST, and retries with backoff whose every outcome is written to the
record of fired alerts (store/alerts.py), so a delivery that keeps failing is marked
failed and logged, never dropped unseen.

Deliveries run on threads of their own: whoever hands an alert over (the recorder's
writer thread, a server's ingest) never waits for a webhook.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .settings import Webhook

logger = logging.getLogger("dask_analytics_lab.alerts")

# Backoff between attempts: doubling from MIN_DELAY up to MAX_DELAY, each wait drawn
# from the upper half of its step (as the shipper does), so replicas do not retry in step.
MIN_DELAY = 1.0
MAX_DELAY = 300.0
# Webhooks posted to at once: one that hangs until its timeout holds one of these only.
SENDERS = 4


@dataclasses.dataclass
class Alert:
    rule: str  # the rule's key (settings.Rule.key)
    on: str  # failed, finding, idle, slower, cost, or test
    subject: str
    cluster_id: str
    title: str
    text: str
    link: str | None
    time: float
    computation_id: str = ""
    account: str | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


def body(alert: Alert, fmt: str) -> dict[str, Any]:
    """What is POSTed: `json`, the alert's fields; `slack`, Slack's incoming-webhook body
    (a plain `text` for notifications, one section block with the link)."""
    if fmt == "slack":
        link = f"<{alert.link}|Open in dask-analytics>" if alert.link else ""
        section = "\n".join(p for p in (f"*{alert.title}*", alert.text, link) if p)
        return {
            "text": f"{alert.title}" + (f" {alert.link}" if alert.link else ""),
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": section[:2900]}}],
        }
    return {
        "alert": alert.on,
        "rule": alert.rule,
        "subject": alert.subject,
        "title": alert.title,
        "text": alert.text,
        "link": alert.link,
        "cluster_id": alert.cluster_id,
        "computation_id": alert.computation_id or None,
        "account": alert.account,
        "time": alert.time,
        "details": alert.details,
    }


def post(url: str, payload: dict[str, Any], timeout: float) -> tuple[int, str]:
    """(HTTP status, the start of the answer's body) of one POST; OSError when no
    answer came (refused, unreachable, timed out)."""
    data = json.dumps(payload, default=str).encode()
    req = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "dask-analytics-lab alerts"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(2000).decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read(2000).decode("utf-8", "replace")


def backoff(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt number `attempt` (1, 2, ...)."""
    step = min(MAX_DELAY, MIN_DELAY * 2 ** (attempt - 1))
    return (rng or random).uniform(step / 2, step)


@dataclasses.dataclass(order=True)
class _Due:
    at: float
    n: int
    alert: Alert = dataclasses.field(compare=False)
    webhook: Webhook = dataclasses.field(compare=False)
    attempts: int = dataclasses.field(compare=False, default=0)
    payload: dict[str, Any] | None = dataclasses.field(compare=False, default=None)


class Deliveries:
    """Sends each alert handed over to its webhook, retrying with backoff up to
    `max_attempts`; `log` (an AlertLog, or None) records every outcome."""

    def __init__(self, log: Any, *, max_attempts: int = 6, timeout: float = 10.0):
        self.log = log
        self.max_attempts = max_attempts
        self.timeout = timeout
        self.sent = 0
        self.failed = 0
        self._heap: list[_Due] = []
        self._count = itertools.count()
        self._wake = threading.Condition()
        self._in_flight = 0
        self._closing = False
        self._rng = random.Random()
        self._pool = ThreadPoolExecutor(SENDERS, thread_name_prefix="dal-alerts-send")
        self._thread = threading.Thread(target=self._run, name="dal-alerts-retry", daemon=True)
        self._thread.start()

    def send(
        self,
        alert: Alert,
        webhook: Webhook,
        *,
        payload: dict[str, Any] | None = None,
        attempts: int = 0,
    ) -> None:
        """Deliver, soon, on another thread.  payload: the body recorded when the alert
        fired (a retry taken over from another process); attempts: those made before."""
        self._push(_Due(time.monotonic(), next(self._count), alert, webhook, attempts, payload))

    def _push(self, due: _Due) -> None:
        with self._wake:
            heapq.heappush(self._heap, due)
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closing and (not self._heap or self._heap[0].at > time.monotonic()):
                    wait = self._heap[0].at - time.monotonic() if self._heap else None
                    self._wake.wait(wait)
                if self._closing:
                    return
                due = heapq.heappop(self._heap)
                self._in_flight += 1
            try:
                self._pool.submit(self._attempt, due)
            except RuntimeError:  # the pool shut down (closing, or the interpreter's exit)
                return

    def _attempt(self, due: _Due) -> None:
        alert, hook = due.alert, due.webhook
        due.attempts += 1
        try:
            try:
                payload = due.payload if due.payload is not None else body(alert, hook.format)
                status, answer = post(hook.url, payload, self.timeout)
                error = None if 200 <= status < 300 else f"HTTP {status}: {answer[:200]}"
            except (OSError, ValueError) as e:  # no answer, or a URL urllib cannot use
                error = f"{type(e).__name__}: {e}"
            if error is None:
                self.sent += 1
                self._record("delivered", alert, hook, attempts=due.attempts, now=time.time())
                return
            if due.attempts >= self.max_attempts:
                self.failed += 1
                logger.error(
                    "dask-analytics alerts: could not deliver %r to webhook %s after %d attempts: %s",
                    alert.title,
                    hook.name,
                    due.attempts,
                    error,
                )
                self._record("failed", alert, hook, attempts=due.attempts, error=error)
                return
            wait = backoff(due.attempts, self._rng)
            logger.warning(
                "dask-analytics alerts: webhook %s refused %r (%s); attempt %d of %d in %.1f s",
                hook.name,
                alert.title,
                error,
                due.attempts + 1,
                self.max_attempts,
                wait,
            )
            self._record(
                "retry",
                alert,
                hook,
                attempts=due.attempts,
                error=error,
                next_try=time.time() + wait,
            )
            due.at = time.monotonic() + wait
            self._push(due)
        finally:
            with self._wake:
                self._in_flight -= 1
                self._wake.notify_all()

    def _record(self, outcome: str, alert: Alert, hook: Webhook, **values: Any) -> None:
        if self.log is None:
            return
        try:
            getattr(self.log, outcome)(alert.rule, alert.subject, hook.name, **values)
        except Exception as e:  # the store is away: the outcome is in the log at least
            logger.warning(
                "dask-analytics alerts: could not record the %s delivery of %r to %s: %s",
                outcome,
                alert.title,
                hook.name,
                e,
            )

    def idle(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) until nothing is due now or being sent; True then."""
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._in_flight or (self._heap and self._heap[0].at <= time.monotonic()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(min(left, 0.1))
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Send what is due now (at most `timeout` s), then stop.  Retries still waiting
        stay `pending` in the record, with their next_try."""
        self.idle(timeout)
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        self._thread.join(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
