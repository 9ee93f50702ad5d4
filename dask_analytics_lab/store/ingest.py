"""Write a batch of messages: check all (messages.check_batch), then store the new ones
in one transaction.

Idempotent on (cluster_id, seq): the `ingested` table claims each pair with
INSERT ... ON CONFLICT DO NOTHING RETURNING, so a retried or concurrently repeated
message is stored once.  Rows that are replaced over time (a computation, its task
groups, an exception's count, a profile) carry the time of the message they came
from in `updated`, and an upsert only wins when it is not older: messages may arrive
out of order after a retry.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from msgspec.structs import asdict

from ..codecrypt import local_cipher
from ..messages import (
    SAMPLE_FIELDS,
    ClusterMessage,
    ClusterSampleMessage,
    ClusterStopMessage,
    CodeMessage,
    ComputationMessage,
    Envelope,
    EventMessage,
    ExceptionMessage,
    GpuSamplesMessage,
    HeartbeatMessage,
    MessageError,
    MetricsMessage,
    ProfileMessage,
    TaskStreamMessage,
    Totals,
    WorkerSamplesMessage,
    check_batch,
)
from . import schema as s
from . import usage
from .bulk import insert_rows, upsert_rows
from .engine import dialect_insert as _insert
from .team_schema import cluster_owners

# The order kinds are applied in: the cluster row first, so other kinds find it filled.
KIND_ORDER = (
    ClusterMessage,
    ClusterSampleMessage,
    ClusterStopMessage,
    CodeMessage,
    ComputationMessage,
    ExceptionMessage,
    EventMessage,
    ProfileMessage,
    GpuSamplesMessage,
    MetricsMessage,
    WorkerSamplesMessage,
    TaskStreamMessage,
)


def ingest(
    engine: sa.Engine,
    messages: list[Envelope] | list[dict[str, Any]],
    *,
    charge: usage.Charge | None = None,
) -> int:
    """Store the messages not stored before; return how many that was.

    `messages` are wire-form dicts, checked here, or typed messages that already were
    (messages.check_batch: the server checks before it fixes accounts).  charge: count
    the new messages' bytes in its account's usage, in the same transaction (usage.py),
    or raise usage.QuotaExceeded and store nothing."""
    batch: dict[tuple[str, int], Envelope] = {}
    for m in check_batch(messages):
        batch.setdefault((m.cluster_id, m.seq), m)  # a pair twice in one batch: the first
    if not batch:
        return 0
    # Sorted, so concurrent batches take PostgreSQL's row locks in the same order.
    msgs = [batch[k] for k in sorted(batch)]
    if charge is not None and charge.sizes is None:
        charge.sizes = usage.measure(msgs)  # outside the transaction: SQLite's lock is held there
    try:
        return _store(engine, msgs, charge)
    except sa.exc.DataError as e:
        # A value the contract lets through but the database refuses: retrying cannot help,
        # so say so as the shipper understands it (drop, don't retry).
        raise MessageError(
            f"the store refused data in this batch: {str(e.orig).splitlines()[0]}"
        ) from e
    except (sa.exc.IntegrityError, sa.exc.OperationalError) as e:
        # A concurrent writer claimed the same rows first (PostgreSQL), or a deadlock
        # between two batches: once more, and it sees the other's committed work.
        if isinstance(e, sa.exc.OperationalError) and not _is_retryable(e):
            raise
        return _store(engine, msgs, charge)


def _is_retryable(e: sa.exc.OperationalError) -> bool:
    # deadlock_detected, serialization_failure
    return getattr(e.orig, "sqlstate", None) in ("40P01", "40001")


def _store(engine: sa.Engine, msgs: list[Any], charge: usage.Charge | None = None) -> int:
    sizes = charge.sizes if charge is not None else None
    with engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE
        # A heartbeat only moves last_seen on (a max: idempotent without a claim), so a
        # quiet cluster's heartbeats add no `ingested` rows.
        beats = [m for m in msgs if type(m) is HeartbeatMessage]
        if beats:
            msgs = [m for m in msgs if type(m) is not HeartbeatMessage]
        new = _claim(conn, msgs, sizes) if msgs else set()
        msgs = [m for m in msgs if (m.cluster_id, m.seq) in new]
        if not msgs and not beats:
            return 0
        _touch_clusters(conn, msgs + beats)
        if charge is not None and sizes is not None and msgs:
            # Only what this transaction claimed: a retried message was counted once
            # already.  Before the batch's rows are written, so a refused batch costs
            # its claims and cluster touch; after the touch, so its locks come in
            # prune's order (cluster rows, then usage).
            usage.charge(
                conn,
                charge.account,
                usage.by_kind(sizes[m.cluster_id, m.seq] for m in msgs),
                charge.limits,
            )
        by_kind: dict[type, list[Any]] = defaultdict(list)
        for m in msgs:
            by_kind[type(m)].append(m)
        for kind in KIND_ORDER:
            if by_kind[kind]:
                # Oldest first: where one key comes twice, _latest keeps the last.
                APPLY[kind](conn, sorted(by_kind[kind], key=lambda m: (m.time, m.seq)))
        return len(msgs) + len(beats)


def _per_dialect(build: Callable[..., Any]) -> Callable[..., Any]:
    """`build(dialect, *args)` once per dialect name (and args), then that statement
    again: building an upsert (its `excluded` columns) and its cache key took a good
    share of a small batch's CPU, and a statement never changes once built, so every
    thread can run the same one."""
    built = functools.cache(build)

    def get(conn: sa.Connection, *args: Any) -> Any:
        return built(conn.dialect.name, *args)

    return get


def _newer(table: sa.Table, stmt: Any) -> sa.ColumnElement[bool]:
    """Upsert guard: the incoming row is from a message no older than the stored one."""
    return sa.or_(table.c.updated.is_(None), stmt.excluded.updated >= table.c.updated)


def _set_from_excluded(stmt: Any, columns: Iterable[str]) -> dict[str, Any]:
    return {c: stmt.excluded[c] for c in columns}


def _latest(rows: list[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    """One row per key, the last given (rows come oldest first); a multi-row upsert
    may not touch one row twice on PostgreSQL."""
    return list({tuple(r[k] for k in key): r for r in rows}.values())


@_per_dialect
def _claim_stmt(dialect: str) -> Any:
    return (
        _insert(dialect, s.ingested)
        .on_conflict_do_nothing()
        .returning(s.ingested.c.cluster_id, s.ingested.c.seq)
    )


def _claim(
    conn: sa.Connection,
    msgs: list[Any],
    sizes: dict[tuple[str, int], tuple[int, int]] | None = None,
) -> set[tuple[str, int]]:
    if sizes is None:
        claims = [{"cluster_id": m.cluster_id, "seq": m.seq, "time": m.time} for m in msgs]
    else:  # kept, for prune to give back (usage.give_back)
        claims = []
        for m in msgs:
            kind, n = sizes[m.cluster_id, m.seq]
            claims.append(
                {"cluster_id": m.cluster_id, "seq": m.seq, "time": m.time, "kind": kind, "bytes": n}
            )
    rows = upsert_rows(conn, _claim_stmt(conn), claims)
    return {(cluster_id, seq) for cluster_id, seq in rows}


# {peak column: the sample field it is the largest of}
_PEAKS = {"peak_workers": "n_workers", "peak_threads": "n_threads", "peak_memory": "memory_total"}
_NO_SAMPLE = dict.fromkeys((*SAMPLE_FIELDS, "sample_time", *_PEAKS))


@_per_dialect
def _touch_stmt(dialect: str) -> Any:
    stmt = _insert(dialect, s.clusters)
    c, new = s.clusters.c, stmt.excluded
    # The batch's newest sample (none: NULL) replaces an older or equally old one.
    newer = sa.and_(
        new.sample_time.is_not(None),
        sa.or_(c.sample_time.is_(None), c.sample_time <= new.sample_time),
    )
    return stmt.on_conflict_do_update(
        index_elements=[c.cluster_id],
        set_={
            "last_seen": sa.case((new.last_seen > c.last_seen, new.last_seen), else_=c.last_seen),
            **{f: sa.case((newer, new[f]), else_=c[f]) for f in (*SAMPLE_FIELDS, "sample_time")},
            # The largest size it reached, whatever order samples arrive in (none: NULL).
            # -1 written in, not bound: a statement with values of its own cannot take
            # its rows as one document (bulk.py).
            **{
                f: sa.case(
                    (sa.func.coalesce(c[f], sa.literal_column("-1")) < new[f], new[f]), else_=c[f]
                )
                for f in _PEAKS
            },
        },
    )


def _touch_clusters(conn: sa.Connection, msgs: list[Any]) -> None:
    """Make a stub row for a cluster not seen yet (its `cluster` message may have been
    dropped, or be in a later batch), move last_seen on, and keep the newest sample's
    figures and the peaks (for list_clusters): one statement for all the batch does to
    the cluster rows but for `cluster` and `cluster_stop` messages (once a cluster)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    samples: dict[str, dict[str, Any]] = {}
    for m in msgs:
        cid, t = m.cluster_id, m.time
        first[cid] = min(first.get(cid, t), t)
        last[cid] = max(last.get(cid, t), t)
    # Oldest first, so the newest of a cluster comes last and stays.
    for m in sorted(
        (m for m in msgs if type(m) is ClusterSampleMessage), key=lambda m: (m.time, m.seq)
    ):
        row = samples.get(m.cluster_id)
        peaks = {p: max(row[p] if row else 0, getattr(m.data, f) or 0) for p, f in _PEAKS.items()}
        samples[m.cluster_id] = {**asdict(m.data), "sample_time": m.time, **peaks}
    upsert_rows(
        conn,
        _touch_stmt(conn),
        [
            {
                "cluster_id": cid,
                "started": first[cid],
                "first_seen": first[cid],
                "last_seen": last[cid],
                **samples.get(cid, _NO_SAMPLE),
            }
            for cid in sorted(first)
        ],
    )


def _clusters(conn: sa.Connection, msgs: list[ClusterMessage]) -> None:
    rows = []
    for m in msgs:
        d = m.data
        rows.append(
            {
                **asdict(d),
                "cluster_id": m.cluster_id,
                "started": d.started if d.started is not None else m.time,
                "first_seen": m.time,
                "last_seen": m.time,
                "updated": m.time,
            }
        )
    upsert_rows(conn, _clusters_stmt(conn), _latest(rows, ("cluster_id",)))


@_per_dialect
def _clusters_stmt(dialect: str) -> Any:
    stmt = _insert(dialect, s.clusters)
    fields = [
        "name",
        "address",
        "user",
        "account",
        "started",
        "price_per_core_hour",
        "versions",
        "platform",
        "settings",
        "reported_user",
        "heartbeat",
        "updated",
    ]
    return stmt.on_conflict_do_update(
        index_elements=[s.clusters.c.cluster_id],
        set_=_set_from_excluded(stmt, fields),
        where=_newer(s.clusters, stmt),
    )


def _cluster_samples(conn: sa.Connection, msgs: list[ClusterSampleMessage]) -> None:
    # The cluster row's latest figures and peaks: _touch_clusters.
    rows = [{"cluster_id": m.cluster_id, "time": m.time, **asdict(m.data)} for m in msgs]
    insert_rows(conn, s.cluster_samples, rows)


def _cluster_stops(conn: sa.Connection, msgs: list[ClusterStopMessage]) -> None:
    rows = [
        {
            "b_cluster_id": m.cluster_id,
            "b_stopped": m.data.stopped if m.data.stopped is not None else m.time,
            "b_reason": m.data.reason,
            "b_idle_shutdown": m.data.idle_shutdown,
        }
        for m in msgs
    ]
    conn.execute(_STOP, _latest(rows, ("b_cluster_id",)))


_c = s.clusters.c
_STOP = (
    sa.update(s.clusters)
    .where(_c.cluster_id == sa.bindparam("b_cluster_id"))
    .values(
        stopped=sa.bindparam("b_stopped"),
        stop_reason=sa.bindparam("b_reason"),
        idle_shutdown=sa.bindparam("b_idle_shutdown"),
    )
)


def _code(conn: sa.Connection, msgs: list[CodeMessage]) -> None:
    # First one wins: a snippet is known by its account and the hash of its content.
    accounts = cluster_accounts(conn, {m.cluster_id for m in msgs})
    rows = {
        (accounts[m.cluster_id], m.data.hash): {**asdict(m.data), "account": accounts[m.cluster_id]}
        for m in reversed(msgs)
    }
    # With a code key in this process (codecrypt.local_cipher), the text is stored
    # encrypted; text a team server already encrypted with its key is left as it is.
    # A key that is configured but unusable raises: never plain text instead.
    cipher = local_cipher(create=True)
    if cipher.enabled:
        for row in rows.values():
            if isinstance(row.get("text"), str):
                row["text"] = cipher.encrypt(row["text"])
    upsert_rows(conn, _code_stmt(conn), list(rows.values()))


@_per_dialect
def _code_stmt(dialect: str) -> Any:
    return _insert(dialect, s.code_snippets).on_conflict_do_nothing(
        index_elements=["account", "hash"]
    )


def cluster_accounts(conn: sa.Connection, cluster_ids: set[str]) -> dict[str, str]:
    """Each cluster's account: its own row's, else the team server's owner, else "default"."""
    ids = sorted(cluster_ids)
    c, o = s.clusters.c, cluster_owners.c
    q = (
        sa.select(c.cluster_id, sa.func.coalesce(c.account, o.account))
        .select_from(s.clusters.outerjoin(cluster_owners, o.cluster_id == c.cluster_id))
        .where(c.cluster_id.in_(ids))
    )
    found = dict(conn.execute(q).all())
    return {cid: found.get(cid) or "default" for cid in ids}


def _computations(conn: sa.Connection, msgs: list[ComputationMessage]) -> None:
    comps, groups = [], []
    # The line of code that made it is code: encrypted like the snippets (see _code).
    cipher = local_cipher(create=True)
    for m in msgs:
        d, cid, t = m.data, m.cluster_id, m.time
        comps.append(
            {
                "computation_id": d.id,
                "cluster_id": cid,
                "start": d.start,
                "stop": d.stop,
                "state": d.state,
                "code_hashes": d.code or [],
                "code_frames": None
                if d.code_frames is None
                else [asdict(f) for f in d.code_frames],
                "code_line": cipher.encrypt(d.code_line),
                "label": d.label,
                "fingerprint": d.fingerprint,
                **asdict(d.totals or Totals()),
                "updated": t,
            }
        )
        for g in d.groups or []:
            groups.append({**asdict(g), "cluster_id": cid, "computation_id": d.id, "updated": t})

    fields = tuple(col for col in comps[0] if col not in ("computation_id", "cluster_id"))
    upsert_rows(conn, _computations_stmt(conn, fields), _latest(comps, ("computation_id",)))
    if groups:
        key = ("cluster_id", "computation_id", "name")
        fields = tuple(col for col in groups[0] if col not in key)
        upsert_rows(conn, _task_groups_stmt(conn, fields), _latest(groups, key))


@_per_dialect
def _computations_stmt(dialect: str, fields: tuple[str, ...]) -> Any:
    stmt = _insert(dialect, s.computations)
    return stmt.on_conflict_do_update(
        index_elements=[s.computations.c.computation_id],
        set_=_set_from_excluded(stmt, fields),
        # A computation id another cluster already used is not overwritten by this one.
        where=sa.and_(
            s.computations.c.cluster_id == stmt.excluded.cluster_id, _newer(s.computations, stmt)
        ),
    )


@_per_dialect
def _task_groups_stmt(dialect: str, fields: tuple[str, ...]) -> Any:
    stmt = _insert(dialect, s.task_groups)
    return stmt.on_conflict_do_update(
        index_elements=["cluster_id", "computation_id", "name"],
        set_=_set_from_excluded(stmt, fields),
        where=_newer(s.task_groups, stmt),
    )


def _exceptions(conn: sa.Connection, msgs: list[ExceptionMessage]) -> None:
    rows = []
    for m in msgs:
        d, t = m.data, m.time
        rows.append(
            {
                "cluster_id": m.cluster_id,
                "computation_id": d.computation_id or "",
                "task_group": d.group or "",
                "hash": d.hash,
                "exception_text": d.exception_text,
                "traceback_text": d.traceback_text,
                "example_key": d.key,
                "count": d.count if d.count is not None else 1,
                "retried": d.retried,
                "recovered": d.recovered,
                "exc_type": d.exc_type,
                "location": d.location,
                "pattern": d.pattern,
                "examples": d.examples,
                "workers": d.workers,
                "first_time": d.first_time if d.first_time is not None else t,
                "last_time": d.last_time if d.last_time is not None else t,
                "updated": t,
            }
        )
    key = ("cluster_id", "computation_id", "task_group", "hash")
    upsert_rows(conn, _exceptions_stmt(conn), _latest(rows, key))


@_per_dialect
def _exceptions_stmt(dialect: str) -> Any:
    stmt = _insert(dialect, s.exceptions)
    return stmt.on_conflict_do_update(
        index_elements=["cluster_id", "computation_id", "task_group", "hash"],
        # count, first_time and last_time are cumulative in the message: they replace
        set_=_set_from_excluded(
            stmt,
            [
                "exception_text",
                "traceback_text",
                "example_key",
                "count",
                "retried",
                "recovered",
                "first_time",
                "last_time",
                "exc_type",
                "location",
                "pattern",
                "examples",
                "workers",
                "updated",
            ],
        ),
        where=_newer(s.exceptions, stmt),
    )


def _events(conn: sa.Connection, msgs: list[EventMessage]) -> None:
    insert_rows(
        conn,
        s.events,
        [
            {
                "cluster_id": m.cluster_id,
                "topic": m.data.topic,
                "time": m.data.time if m.data.time is not None else m.time,
                "msg": m.data.msg,
            }
            for m in msgs
        ],
    )


def _profiles(conn: sa.Connection, msgs: list[ProfileMessage]) -> None:
    rows = [
        {
            "cluster_id": m.cluster_id,
            "computation_id": m.data.computation_id or "",
            "prefix": m.data.prefix or "",
            "tree": m.data.tree,
            "count": m.data.count,
            "updated": m.time,
        }
        for m in msgs
    ]
    upsert_rows(
        conn, _profiles_stmt(conn), _latest(rows, ("cluster_id", "computation_id", "prefix"))
    )


@_per_dialect
def _profiles_stmt(dialect: str) -> Any:
    stmt = _insert(dialect, s.profiles)
    return stmt.on_conflict_do_update(
        index_elements=["cluster_id", "computation_id", "prefix"],
        set_=_set_from_excluded(stmt, ["tree", "count", "updated"]),
        where=_newer(s.profiles, stmt),
    )


def _gpu_samples(conn: sa.Connection, msgs: list[GpuSamplesMessage]) -> None:
    rows = []
    for m in msgs:
        d = m.data
        for sample in d.samples:
            rows.append(
                {
                    "cluster_id": m.cluster_id,
                    "worker": d.worker,
                    "host": d.host,
                    "monitor_id": d.monitor_id,
                    **asdict(sample),
                    "time": sample.time if sample.time is not None else m.time,
                }
            )
    if rows:
        insert_rows(conn, s.gpu_samples, rows)


def _metrics(conn: sa.Connection, msgs: list[MetricsMessage]) -> None:
    rows = [
        {
            "cluster_id": m.cluster_id,
            "computation_id": m.data.computation_id,
            "prefix": r.prefix or "",
            "context": r.context,
            "activity": r.activity,
            "unit": r.unit,
            "value": r.value,
            "updated": m.time,
        }
        for m in msgs
        for r in m.data.rows
    ]
    if not rows:
        return
    key = ("cluster_id", "computation_id", "prefix", "context", "activity", "unit")
    upsert_rows(conn, _metrics_stmt(conn), _latest(rows, key))


@_per_dialect
def _metrics_stmt(dialect: str) -> Any:
    stmt = _insert(dialect, s.computation_metrics)
    return stmt.on_conflict_do_update(
        index_elements=["cluster_id", "computation_id", "prefix", "context", "activity", "unit"],
        set_=_set_from_excluded(stmt, ["value", "updated"]),
        where=_newer(s.computation_metrics, stmt),
    )


def _worker_samples(conn: sa.Connection, msgs: list[WorkerSamplesMessage]) -> None:
    rows = [
        {"cluster_id": m.cluster_id, **asdict(sample)} for m in msgs for sample in m.data.samples
    ]
    if rows:
        insert_rows(conn, s.worker_samples, rows)


def _task_stream(conn: sa.Connection, msgs: list[TaskStreamMessage]) -> None:
    t = s.task_stream
    rows: list[dict[str, Any]] = []
    for m in msgs:  # in seq order: a replace drops what came before it, this batch's too
        d = m.data
        if d.replace:
            rows = [
                r
                for r in rows
                if not (r["cluster_id"] == m.cluster_id and r["computation_id"] == d.computation_id)
            ]
            conn.execute(
                sa.delete(t).where(
                    t.c.cluster_id == m.cluster_id, t.c.computation_id == d.computation_id
                )
            )
        rows += [
            {"cluster_id": m.cluster_id, "computation_id": d.computation_id, **asdict(r)}
            for r in d.rows
        ]
    if rows:
        insert_rows(conn, t, rows)
        _task_stream_spans(conn, rows)


def _task_stream_spans(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Widen each computation's span (schema.task_stream_spans) to these rows' starts."""
    spans: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        span = spans.setdefault((r["cluster_id"], r["computation_id"]), [r["start"], r["start"]])
        span[0], span[1] = min(span[0], r["start"]), max(span[1], r["start"])
    upsert_rows(
        conn,
        _spans_stmt(conn),
        [
            {"cluster_id": c, "computation_id": comp, "first_start": lo, "last_start": hi}
            for (c, comp), (lo, hi) in sorted(spans.items())
        ],
    )


@_per_dialect
def _spans_stmt(dialect: str) -> Any:
    sp = s.task_stream_spans
    stmt = _insert(dialect, sp)
    first, last = stmt.excluded.first_start, stmt.excluded.last_start
    return stmt.on_conflict_do_update(
        index_elements=["cluster_id", "computation_id"],
        set_={
            "first_start": sa.case((first < sp.c.first_start, first), else_=sp.c.first_start),
            "last_start": sa.case((last > sp.c.last_start, last), else_=sp.c.last_start),
        },
    )


# Each takes the messages of its kind.
APPLY: dict[type[Envelope], Callable[[sa.Connection, list[Any]], None]] = {
    ClusterMessage: _clusters,
    ClusterSampleMessage: _cluster_samples,
    ClusterStopMessage: _cluster_stops,
    CodeMessage: _code,
    ComputationMessage: _computations,
    ExceptionMessage: _exceptions,
    EventMessage: _events,
    ProfileMessage: _profiles,
    GpuSamplesMessage: _gpu_samples,
    MetricsMessage: _metrics,
    WorkerSamplesMessage: _worker_samples,
    TaskStreamMessage: _task_stream,
}
