"""Findings kept with their computation (schema.explained and schema.findings): what
findings/kept.py writes after explaining a computation, and what the finding filter of
list_computations and cluster_findings read.  SQL only: when to explain, and with which
thresholds, is findings/kept.py's."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from . import schema as s
from .engine import dialect_insert


def recall(conn: sa.Connection, computation_id: str, settings: str) -> list[dict[str, Any]] | None:
    """The findings kept for this computation under `settings`, most costly first, when
    its record can no longer change; None: explain it."""
    e = s.explained.c
    row = conn.execute(
        sa.select(e.settings, e.final).where(e.computation_id == computation_id)
    ).first()
    if row is None or row.settings != settings or not row.final:
        return None
    f = s.findings.c
    rows = conn.execute(
        sa.select(f.body).where(f.computation_id == computation_id).order_by(f.rank)
    )
    return [r.body for r in rows]


def keep(
    conn: sa.Connection,
    *,
    cluster_id: str,
    computation_id: str,
    settings: str,
    final: bool,
    found: list[dict[str, Any]],
    now: float,
) -> None:
    """Replace what was kept for the computation with `found` (in explain's order)."""
    row = {
        "computation_id": computation_id,
        "cluster_id": cluster_id,
        "settings": settings,
        "final": final,
        "kept": now,
    }
    # The upsert first: it locks the row, so two processes keeping one computation at
    # once replace its findings one after the other (PostgreSQL), never both inserting.
    stmt = dialect_insert(conn, s.explained).values(row)
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=[s.explained.c.computation_id],
            set_={k: stmt.excluded[k] for k in ("settings", "final", "kept")},
        )
    )
    conn.execute(sa.delete(s.findings).where(s.findings.c.computation_id == computation_id))
    if found:
        conn.execute(
            sa.insert(s.findings),
            [
                {
                    "computation_id": computation_id,
                    "rank": rank,
                    "cluster_id": cluster_id,
                    "kind": f["kind"],
                    "impact": float(f["impact"]),
                    "body": f,
                }
                for rank, f in enumerate(found)
            ],
        )


def fresh(settings: str, since: float) -> sa.ColumnElement[bool]:
    """A computation whose findings are kept under `settings`, final (never explained
    again under them) or kept at `since` or later (not yet again)."""
    e = s.explained.c
    return sa.exists().where(
        e.computation_id == s.computations.c.computation_id,
        e.settings == settings,
        sa.or_(e.final, e.kept >= since),
    )


def cluster_has_kind(kind: str) -> sa.ColumnElement[bool]:
    """list_clusters' `finding=`: a cluster with a kept finding of this kind."""
    f = s.findings.c
    return sa.exists().where(f.cluster_id == s.clusters.c.cluster_id, f.kind == kind)


def has_kind(kind: str) -> sa.ColumnElement[bool]:
    """list_computations' `finding=`: a computation with a kept finding of this kind."""
    f = s.findings.c
    return sa.exists().where(f.computation_id == s.computations.c.computation_id, f.kind == kind)


def of_cluster(conn: sa.Connection, cluster_id: str) -> list[dict[str, Any]]:
    """The kept findings of a cluster's computations: (computation_id, kind, impact, body)
    rows, each computation's most costly first."""
    f = s.findings.c
    rows = conn.execute(
        sa.select(f.computation_id, f.kind, f.impact, f.body)
        .where(f.cluster_id == cluster_id)
        .order_by(f.computation_id, f.rank)
    )
    return [r._asdict() for r in rows]


def provisional(conn: sa.Connection, cluster_id: str) -> list[str]:
    """The cluster's computations whose findings were kept while they could still change."""
    e = s.explained.c
    return list(
        conn.execute(
            sa.select(e.computation_id).where(e.cluster_id == cluster_id, e.final.is_(False))
        ).scalars()
    )


def finish_moved_on(
    conn: sa.Connection, cluster_id: str, settings: str, settle: float, gone: tuple[str, ...]
) -> list[str]:
    """The cluster moved on: its computations kept provisional under `settings`, at least
    `settle` after their stop, that now have a later computation are made final with the
    findings of the `gone` kinds taken out.  Returns the cluster's other provisional ones
    (to explain again).  The later computation is the one findings/record.py reads:
    another of the cluster's, started no earlier."""
    e, c = s.explained.c, s.computations.c
    later = s.computations.alias("later")
    rows = conn.execute(
        sa.select(
            e.computation_id,
            sa.and_(
                e.settings == settings,
                c.stop.is_not(None),
                e.kept >= c.stop + settle,
                sa.exists().where(
                    later.c.cluster_id == cluster_id,
                    later.c.start >= c.start,
                    later.c.computation_id != e.computation_id,
                ),
            ).label("done"),
        )
        .join(s.computations, c.computation_id == e.computation_id)
        .where(e.cluster_id == cluster_id, e.final.is_(False))
    ).all()
    done = [r.computation_id for r in rows if r.done]
    for part in range(0, len(done), 500):  # SQLite caps the number of bound values
        ids = done[part : part + 500]
        f = s.findings.c
        conn.execute(sa.delete(s.findings).where(f.computation_id.in_(ids), f.kind.in_(gone)))
        conn.execute(sa.update(s.explained).where(e.computation_id.in_(ids)).values(final=True))
    return [r.computation_id for r in rows if not r.done]
