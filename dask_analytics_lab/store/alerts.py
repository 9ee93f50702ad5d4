"""The record of fired alerts (schema.alerts) for dask_analytics_lab/alerts/: who fires
an alert (an insert that finds no row), its delivery, and the list users read.

    log = AlertLog(open_store(url))
    if log.claim(row):   # only the first of every process on this database gets True
        ...send, then log.delivered(...) / log.retry(...) / log.failed(...)
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from .engine import dialect_insert
from .schema import alerts
from .store import Store

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


def _key(rule: str, subject: str, webhook: str) -> Any:
    c = alerts.c
    return sa.and_(c.rule == rule, c.subject == subject, c.webhook == webhook)


class AlertLog:
    """Fired alerts of one open Store, through its own transactions (connection trouble
    is StoreUnavailable, as for every Store method)."""

    def __init__(self, store: Store):
        self._store = store

    def claim(
        self,
        *,
        rule: str,
        subject: str,
        webhook: str,
        cluster_id: str,
        computation_id: str = "",
        account: str | None = None,
        fired: float,
        title: str,
        link: str | None,
        body: dict[str, Any],
    ) -> bool:
        """Insert the alert unless (rule, subject, webhook) is there already: True when
        this call inserted it (and so must send it)."""
        with self._store.transaction() as conn:
            # RETURNING, not rowcount: PostgreSQL's driver here counts a row that
            # ON CONFLICT skipped as one inserted.
            done = conn.execute(
                dialect_insert(conn, alerts).on_conflict_do_nothing().returning(alerts.c.rule),
                {
                    "rule": rule,
                    "subject": subject,
                    "webhook": webhook,
                    "cluster_id": cluster_id,
                    "computation_id": computation_id,
                    "account": account,
                    "fired": fired,
                    "title": title,
                    "link": link,
                    "body": body,
                    "state": PENDING,
                    "attempts": 0,
                    "next_try": fired,
                },
            )
            return done.first() is not None

    def fired(self, rule: str, subject: str) -> bool:
        """Whether the rule already fired for the subject (to any webhook)."""
        c = alerts.c
        with self._store.reading() as conn:
            return (
                conn.execute(
                    sa.select(c.rule).where(c.rule == rule, c.subject == subject).limit(1)
                ).first()
                is not None
            )

    def delivered(
        self, rule: str, subject: str, webhook: str, *, attempts: int, now: float
    ) -> None:
        self._update(
            rule, subject, webhook, state=DELIVERED, attempts=attempts, delivered=now, next_try=None
        )

    def retry(
        self, rule: str, subject: str, webhook: str, *, attempts: int, error: str, next_try: float
    ) -> None:
        self._update(
            rule, subject, webhook, attempts=attempts, last_error=error[:2000], next_try=next_try
        )

    def failed(self, rule: str, subject: str, webhook: str, *, attempts: int, error: str) -> None:
        self._update(
            rule,
            subject,
            webhook,
            state=FAILED,
            attempts=attempts,
            last_error=error[:2000],
            next_try=None,
        )

    def orphans(self, *, before: float, limit: int = 100) -> list[dict[str, Any]]:
        """Pending alerts whose next attempt was due before `before`: the process that
        fired them ended (or lost its store) before it delivered them."""
        c = alerts.c
        q = (
            sa.select(alerts)
            .where(c.state == PENDING, c.next_try < before)
            .order_by(c.next_try)
            .limit(limit)
        )
        with self._store.reading() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def adopt(self, row: dict[str, Any], *, next_try: float) -> bool:
        """Take over an orphan (orphans()): True for the one process whose update found
        it as it was read; the others leave it to that one."""
        c = alerts.c
        with self._store.transaction() as conn:
            done = conn.execute(
                sa.update(alerts)
                .where(
                    _key(row["rule"], row["subject"], row["webhook"]),
                    c.state == PENDING,
                    c.next_try == row["next_try"],
                )
                .values(next_try=next_try)
                .returning(c.rule)
            )
            return done.first() is not None

    def _update(self, rule: str, subject: str, webhook: str, **values: Any) -> None:
        with self._store.transaction() as conn:
            conn.execute(sa.update(alerts).where(_key(rule, subject, webhook)).values(**values))

    def list(
        self, *, account: str | None = None, state: str | None = None, limit: int | None = 100
    ) -> list[dict[str, Any]]:
        """Fired alerts, newest first, with their delivery state."""
        c = alerts.c
        q = sa.select(*(col for col in alerts.c if col.name != "body")).order_by(
            c.fired.desc(), c.rule, c.subject, c.webhook
        )
        if account is not None:
            q = q.where(c.account == account)
        if state is not None:
            q = q.where(c.state == state)
        if limit is not None:
            q = q.limit(limit)
        with self._store.reading() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]
