"""Each account's storage usage by kind, kept in the database (team_schema.account_usage),
for the team server's quotas (server/quota.py).

Kinds (KINDS), each with a quota of its own but `records`, all counted in the account's
total:
- task_stream: task stream messages;
- profiles: profile messages;
- events: events and exceptions;
- samples: cluster, worker and GPU samples and computation metrics;
- records: clusters, computations, code snippets, stops (small, bounded by the total);
- reports: uploaded performance reports.
Heartbeats only move a cluster's last_seen and are not counted.

Bytes: a message's JSON as the server stores it (its code already encrypted), measured
once per message (msgspec's encoder; a batch's measure is a small share of its
ingest), a report's stored blobs (gzip'd and encrypted).  A message counts only once
its (cluster, seq) is claimed as new in the transaction that stores it, so a retried or
repeated message adds nothing, and the charge runs in that transaction: a refused batch
rolls back whole, and replicas see one figure.  The charge is one INSERT ... ON
CONFLICT DO UPDATE ... WHERE used + n <= limit for every kind at once; no row back
means a quota would be passed (a second statement, on that path only, reads what to
say).  Ingest runs it after the claim and the clusters' touch, before any of the
batch's rows is written: a refused batch costs two statements, and the locks come in
prune's order (cluster rows, then usage).  On PostgreSQL the usage row stays locked to
the end of the transaction, so one account's concurrent batches, on any replica, pass
it one at a time: no quota is ever overshot.

Each message's kind and bytes are kept on its `ingested` row; prune deletes those rows
last for a cluster and gives their bytes back in the same transaction (give_back), so
usage falls as retention deletes.  Reports are never deleted, so never given back.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import sqlalchemy as sa

from ..messages import (
    ClusterSampleMessage,
    EventMessage,
    ExceptionMessage,
    GpuSamplesMessage,
    MetricsMessage,
    ProfileMessage,
    TaskStreamMessage,
    WorkerSamplesMessage,
)
from .bulk import upsert_rows
from .engine import dialect_insert
from .team_schema import account_usage, cluster_owners

KINDS = ("task_stream", "profiles", "events", "samples", "records", "reports")
# The code kept in ingested.kind: stable across releases (never renumber one).
CODES = {kind: i for i, kind in enumerate(KINDS, start=1)}
_KIND_OF: dict[type, str] = {
    TaskStreamMessage: "task_stream",
    ProfileMessage: "profiles",
    EventMessage: "events",
    ExceptionMessage: "events",
    ClusterSampleMessage: "samples",
    WorkerSamplesMessage: "samples",
    GpuSamplesMessage: "samples",
    MetricsMessage: "samples",
}
TOTAL = "total"

_ENCODER = msgspec.json.Encoder()


def kind_of(message: Any) -> str:
    """The kind a (typed) message counts as."""
    return _KIND_OF.get(type(message), "records")


def measure(messages: Iterable[Any]) -> dict[tuple[str, int], tuple[int, int]]:
    """{(cluster_id, seq): (kind code, bytes)} of typed messages (a pair twice: the first,
    as ingest keeps)."""
    sizes: dict[tuple[str, int], tuple[int, int]] = {}
    for m in messages:
        key = (m.cluster_id, m.seq)
        if key not in sizes:
            sizes[key] = (CODES[kind_of(m)], len(_ENCODER.encode(m)))
    return sizes


def by_kind(sizes: Iterable[tuple[int, int]]) -> dict[str, int]:
    """{kind: bytes} of (kind code, bytes) pairs."""
    out = dict.fromkeys(KINDS, 0)
    for code, n in sizes:
        out[KINDS[code - 1]] += n
    return out


class QuotaExceeded(Exception):
    """A charge that would take `account` past its `kind` quota (TOTAL: all kinds)."""

    def __init__(self, account: str, kind: str, used: int, limit: int, need: int):
        super().__init__(f"{account!r}: {kind} {used} + {need} > {limit}")
        self.account, self.kind, self.used, self.limit, self.need = (
            account,
            kind,
            used,
            limit,
            need,
        )


@dataclass
class Charge:
    """Whom a batch is charged to and the limits it must stay within.

    limits: {kind or TOTAL: bytes}; a kind missing, None or 0 has no limit (it is still
    counted).  sizes: measure() of the batch, when taken already."""

    account: str
    limits: Mapping[str, int | None] = field(default_factory=dict)
    sizes: dict[tuple[str, int], tuple[int, int]] | None = None


def _limited(limits: Mapping[str, int | None]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((k, int(v)) for k, v in limits.items() if v))


@functools.cache
def _charge_stmt(dialect: str, limited: tuple[tuple[str, int], ...]) -> Any:
    stmt = dialect_insert(dialect, account_usage)
    u, new = account_usage.c, stmt.excluded
    conds: list[Any] = []
    for kind, limit in limited:
        used = (
            sum((u[k] + new[k] for k in KINDS), sa.literal_column("0"))
            if kind == TOTAL
            else u[kind] + new[kind]
        )
        # Written in, not bound: a statement with values of its own cannot go as bulk.py
        # sends rows (on the driver, no SQLAlchemy execution context per batch).
        conds.append(used <= sa.literal_column(str(int(limit))))
    return stmt.on_conflict_do_update(
        index_elements=[u.account],
        set_={k: u[k] + new[k] for k in KINDS},
        where=sa.and_(*conds) if conds else None,
    ).returning(u.account)


def charge(
    conn: sa.Connection, account: str, adds: Mapping[str, int], limits: Mapping[str, int | None]
) -> None:
    """Add `adds` ({kind: bytes}) to the account's usage in this transaction, or raise
    QuotaExceeded and add nothing (the caller's transaction is to be rolled back).

    One statement.  A first charge of an account is not checked against its limits:
    check each batch alone first (server/quota.py: 413)."""
    n = {k: int(adds.get(k, 0)) for k in KINDS}
    if not any(n.values()):
        return
    stmt = _charge_stmt(conn.dialect.name, _limited(limits))
    if list(upsert_rows(conn, stmt, [{"account": account, **n}])):
        return
    used = usage(conn, account)
    for kind, limit in _limited(limits):
        if kind == TOTAL:
            have, need = sum(used.values()), sum(n.values())
        else:
            have, need = used[kind], n[kind]
        if need and have + need > limit:
            raise QuotaExceeded(account, kind, have, limit, need)
    # Not met: the row stays locked from the refused charge to the end of this transaction
    # (PostgreSQL locks a conflicting row even where the WHERE fails; SQLite writes alone).
    kind, limit = _limited(limits)[0]
    raise QuotaExceeded(account, kind, used.get(kind, sum(used.values())), limit, n.get(kind, 0))


def usage(conn: sa.Connection, account: str) -> dict[str, int]:
    """{kind: bytes} an account stores (zeros for one that stored nothing)."""
    u = account_usage.c
    row = conn.execute(sa.select(*(u[k] for k in KINDS)).where(u.account == account)).first()
    return dict(zip(KINDS, row)) if row is not None else dict.fromkeys(KINDS, 0)


def give_back(conn: sa.Connection, deleted: Iterable[tuple[str, int | None, int | None]]) -> None:
    """Subtract the bytes of deleted `ingested` rows ((cluster_id, kind code, bytes)) from
    their accounts' usage (cluster_owners says whose; kept past prune), in this transaction."""
    per_cluster: dict[str, dict[str, int]] = {}
    for cid, code, n in deleted:
        if code and n:
            adds = per_cluster.setdefault(cid, dict.fromkeys(KINDS, 0))
            adds[KINDS[code - 1]] += n
    if not per_cluster:
        return
    o = cluster_owners.c
    query = sa.select(o.cluster_id, o.account).where(o.cluster_id.in_(list(per_cluster)))
    owners = {cid: account for cid, account in conn.execute(query)}
    per_account: dict[str, dict[str, int]] = {}
    for cid, adds in per_cluster.items():
        if cid in owners:
            total = per_account.setdefault(owners[cid], dict.fromkeys(KINDS, 0))
            for k, n in adds.items():
                total[k] += n
    u = account_usage.c
    stmt = (
        sa.update(account_usage)
        .where(u.account == sa.bindparam("acc"))
        .values({k: u[k] - sa.bindparam(f"n_{k}", type_=sa.BigInteger) for k in KINDS})
    )
    # Sorted: concurrent prunes lock the rows in the same order.
    for account in sorted(per_account):
        conn.execute(
            stmt, {"acc": account, **{f"n_{k}": n for k, n in per_account[account].items()}}
        )
