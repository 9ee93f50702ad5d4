"""Reads. Each takes an open read connection and returns plain, JSON-able dicts.

`account` (when given) limits every read to clusters of that account: the team
server authorises with it, so an id from another account is NotFound, exactly like
an id nobody knows.
"""
from __future__ import annotations

import sqlalchemy as sa
from distributed import profile as dask_profile

from . import schema as s
from .errors import unknown

# Key columns where "" stands for "none" (see schema.py); reads give None back.
_EMPTY_IS_NONE = {"computation_id", "task_group"}


def _rows(result: sa.Result, *, blanks: bool = False) -> list[dict]:
    rows = [dict(r._mapping) for r in result]
    if blanks:
        for r in rows:
            for k in _EMPTY_IS_NONE.intersection(r):
                if r[k] == "":
                    r[k] = None
    return rows


def _limit(limit: int | None) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a whole number >= 0 or None, got {limit!r}")
    return limit


def _in_account(table: sa.Table, account: str | None) -> sa.ColumnElement:
    if account is None:
        return sa.true()
    return table.c.cluster_id.in_(sa.select(s.clusters.c.cluster_id).where(s.clusters.c.account == account))


def _require_cluster(conn: sa.Connection, cluster_id: str, account: str | None) -> None:
    q = sa.select(s.clusters.c.cluster_id).where(s.clusters.c.cluster_id == cluster_id, _in_account(s.clusters, account))
    if conn.execute(q).first() is None:
        raise unknown("cluster", cluster_id, "clusters")


def _computation_row(conn: sa.Connection, computation_id: str, account: str | None) -> dict:
    c = s.computations
    q = sa.select(c).where(c.c.computation_id == computation_id, _in_account(c, account))
    rows = _rows(conn.execute(q))
    if not rows:
        raise unknown("computation", computation_id, "computations")
    return rows[0]


def list_clusters(conn: sa.Connection, *, account: str | None = None, limit: int | None = 100) -> list[dict]:
    c = s.clusters.c
    q = sa.select(s.clusters).where(_in_account(s.clusters, account))
    q = q.order_by(c.started.desc(), c.cluster_id.desc()).limit(_limit(limit))
    return _rows(conn.execute(q))


def get_cluster(conn: sa.Connection, cluster_id: str, *, account: str | None = None) -> dict:
    q = sa.select(s.clusters).where(s.clusters.c.cluster_id == cluster_id, _in_account(s.clusters, account))
    rows = _rows(conn.execute(q))
    if not rows:
        raise unknown("cluster", cluster_id, "clusters")
    return rows[0]


def list_cluster_samples(conn: sa.Connection, cluster_id: str, *, account: str | None = None,
                         limit: int | None = 10_000) -> list[dict]:
    """The newest `limit` samples, oldest first (a time series to plot)."""
    _require_cluster(conn, cluster_id, account)
    t = s.cluster_samples
    q = sa.select(t).where(t.c.cluster_id == cluster_id).order_by(t.c.time.desc(), t.c.id.desc())
    return _rows(conn.execute(q.limit(_limit(limit))))[::-1]


def list_computations(conn: sa.Connection, *, cluster_id: str | None = None, account: str | None = None,
                      limit: int | None = 100) -> list[dict]:
    """Newest first, with their totals. The totals live on the row, so this reads
    `limit` rows of one table, however many task groups there are."""
    c = s.computations
    q = sa.select(c).where(_in_account(c, account))
    if cluster_id is not None:
        _require_cluster(conn, cluster_id, account)
        q = q.where(c.c.cluster_id == cluster_id)
    q = q.order_by(c.c.start.desc(), c.c.computation_id.desc()).limit(_limit(limit))
    return _rows(conn.execute(q))


def list_task_groups(conn: sa.Connection, computation_id: str, *, account: str | None = None) -> list[dict]:
    comp = _computation_row(conn, computation_id, account)
    return _task_groups(conn, comp)


def _task_groups(conn: sa.Connection, comp: dict) -> list[dict]:
    g = s.task_groups
    # By the computation's own cluster: another cluster reusing the id is not mixed in.
    q = sa.select(g).where(g.c.cluster_id == comp["cluster_id"], g.c.computation_id == comp["computation_id"])
    return _rows(conn.execute(q.order_by(g.c.start.is_(None), g.c.start, g.c.name)))


def get_computation(conn: sa.Connection, computation_id: str, *, account: str | None = None) -> dict:
    """The computation with its "groups" and its "code" snippets (in the order sent;
    a snippet whose `code` message never arrived has text None)."""
    comp = _computation_row(conn, computation_id, account)
    comp["groups"] = _task_groups(conn, comp)
    hashes = comp["code_hashes"] or []
    found = {}
    if hashes:
        q = sa.select(s.code_snippets).where(s.code_snippets.c.hash.in_(hashes))
        found = {r["hash"]: r for r in _rows(conn.execute(q))}
    blank = {"text": None, "filename": None, "lineno_frame": None, "lineno_relative": None}
    comp["code"] = [found.get(h, {"hash": h, **blank}) for h in hashes]
    return comp


def list_exceptions(conn: sa.Connection, *, cluster_id: str | None = None, computation_id: str | None = None,
                    account: str | None = None, limit: int | None = 100) -> list[dict]:
    """Newest (last seen) first; one row per distinct failure with its count."""
    e = s.exceptions
    q = sa.select(e).where(_in_account(e, account))
    if cluster_id is not None:
        _require_cluster(conn, cluster_id, account)
        q = q.where(e.c.cluster_id == cluster_id)
    if computation_id is not None:
        comp = _computation_row(conn, computation_id, account)
        q = q.where(e.c.cluster_id == comp["cluster_id"], e.c.computation_id == computation_id)
    q = q.order_by(e.c.last_time.desc(), e.c.id.desc()).limit(_limit(limit))
    return _rows(conn.execute(q), blanks=True)


def list_events(conn: sa.Connection, *, cluster_id: str | None = None, topic: str | None = None,
                account: str | None = None, limit: int | None = 1000) -> list[dict]:
    """Newest first."""
    ev = s.events
    q = sa.select(ev).where(_in_account(ev, account))
    if cluster_id is not None:
        _require_cluster(conn, cluster_id, account)
        q = q.where(ev.c.cluster_id == cluster_id)
    if topic is not None:
        q = q.where(ev.c.topic == topic)
    q = q.order_by(ev.c.time.desc(), ev.c.id.desc()).limit(_limit(limit))
    return _rows(conn.execute(q))


def get_profile(conn: sa.Connection, *, computation_id: str | None = None, cluster_id: str | None = None,
                account: str | None = None) -> dict:
    """Dask's profile tree: of one computation, or of a whole cluster (its computations'
    profiles merged with any cluster-level one). An empty tree when none was recorded."""
    p = s.profiles
    if computation_id is not None:
        comp = _computation_row(conn, computation_id, account)
        if cluster_id is not None and comp["cluster_id"] != cluster_id:
            raise unknown("computation", computation_id, "computations")
        q = sa.select(p.c.tree).where(p.c.cluster_id == comp["cluster_id"], p.c.computation_id == computation_id)
    elif cluster_id is not None:
        _require_cluster(conn, cluster_id, account)
        q = sa.select(p.c.tree).where(p.c.cluster_id == cluster_id).order_by(p.c.computation_id)
    else:
        raise TypeError("get_profile needs computation_id= or cluster_id=")
    trees = list(conn.execute(q).scalars())
    return dask_profile.merge(*trees) if len(trees) > 1 else (trees[0] if trees else dask_profile.create())


def list_gpu_metrics(conn: sa.Connection, *, cluster_id: str | None = None, monitor_id: str | None = None,
                     worker: str | None = None, account: str | None = None,
                     limit: int | None = 100_000) -> list[dict]:
    """One row per sample per GPU: the newest `limit`, oldest first."""
    g = s.gpu_samples
    q = sa.select(g).where(_in_account(g, account))
    if cluster_id is not None:
        _require_cluster(conn, cluster_id, account)
        q = q.where(g.c.cluster_id == cluster_id)
    if monitor_id is not None:
        q = q.where(g.c.monitor_id == monitor_id)
    if worker is not None:
        q = q.where(g.c.worker == worker)
    q = q.order_by(g.c.time.desc(), g.c.id.desc()).limit(_limit(limit))
    return _rows(conn.execute(q))[::-1]


def export(conn: sa.Connection, *, account: str | None = None) -> dict[str, list[dict]]:
    """Every row of every data table (not the bookkeeping ones), by table name."""
    out: dict[str, list[dict]] = {}
    for table in s.DATA_TABLES:
        if table is s.code_snippets:
            continue  # shared between clusters: below, only the ones this account's computations use
        q = sa.select(table).where(_in_account(table, account)).order_by(*table.primary_key.columns)
        out[table.name] = _rows(conn.execute(q), blanks=True)
    snippets = s.code_snippets
    if account is None:
        out[snippets.name] = _rows(conn.execute(sa.select(snippets).order_by(snippets.c.hash)))
    else:
        used = sorted({h for c in out["computations"] for h in (c["code_hashes"] or [])})
        out[snippets.name] = []
        for i in range(0, len(used), 500):  # SQLite caps the number of bound values
            q = sa.select(snippets).where(snippets.c.hash.in_(used[i:i + 500])).order_by(snippets.c.hash)
            out[snippets.name] += _rows(conn.execute(q))
    return {t.name: out[t.name] for t in s.DATA_TABLES}

