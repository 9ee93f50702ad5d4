"""Fingerprints that do not depend on a run's size: stored computations get the
fingerprint the collector now sends (messages.fingerprint), so the runs recorded
before this release pair with the runs after it.

Before: the line that made a computation and the set of its task prefixes, which
changes with the depth of a tree reduction.  Now: the line alone; without a line, the
prefixes less the stages of tree reductions.  The prefixes come from the stored task
groups.  A line stored encrypted is opened with this process's code key; where no key
here opens it, that row keeps its old fingerprint (its runs then pair only with the
runs recorded before this release).  Downgrade leaves the new fingerprints: the old
release reads them as it reads any fingerprint.

Frozen once released: the rule is copied here, so a later change of
messages.fingerprint needs a migration of its own.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

import hashlib
import re
from collections.abc import Callable, Iterable

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_REDUCTION_STAGE = re.compile(r"-(partial|aggregate|combine|tree)\Z")
_MARK = "fernet:gAAAAA"
_CHUNK = 1000


def _fingerprint(code_line: str | None, prefixes: Iterable[str]) -> str:
    if code_line:
        text = "line\0" + code_line
    else:
        names = set(prefixes)
        kept = {p for p in names if not _REDUCTION_STAGE.search(p)} or names
        text = "prefixes\0" + "\0".join(sorted(kept))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _opener() -> Callable[[str | None], tuple[str | None, bool]]:
    from dask_analytics_lab.codecrypt import reading_cipher

    cipher = reading_cipher()

    def line(text: str | None) -> tuple[str | None, bool]:
        if not (isinstance(text, str) and text.startswith(_MARK)):
            return text, True
        if not cipher.enabled:
            return None, False
        opened, error = cipher.open(text)
        return opened, error is None

    return line


def upgrade() -> None:
    conn = op.get_bind()
    comps = sa.table(
        "computations",
        sa.column("computation_id"),
        sa.column("cluster_id"),
        sa.column("code_line"),
        sa.column("fingerprint"),
    )
    groups = sa.table(
        "task_groups",
        sa.column("cluster_id"),
        sa.column("computation_id"),
        sa.column("name"),
        sa.column("prefix"),
    )
    rows = conn.execute(
        sa.select(
            comps.c.computation_id, comps.c.cluster_id, comps.c.code_line, comps.c.fingerprint
        ).where(comps.c.fingerprint.is_not(None))
    ).all()
    if not rows:
        return
    # Prefixes matter only where there is no line: read just those, once each.
    no_line = sa.and_(
        comps.c.fingerprint.is_not(None),
        sa.or_(comps.c.code_line.is_(None), comps.c.code_line == ""),
    )
    q = (
        sa.select(
            groups.c.cluster_id,
            groups.c.computation_id,
            sa.func.coalesce(groups.c.prefix, groups.c.name),
        )
        .select_from(
            groups.join(
                comps,
                sa.and_(
                    comps.c.computation_id == groups.c.computation_id,
                    comps.c.cluster_id == groups.c.cluster_id,
                ),
            )
        )
        .where(no_line)
        .distinct()
    )
    prefixes: dict[tuple[str, str], set[str]] = {}
    for cid, comp_id, prefix in conn.execute(q):
        prefixes.setdefault((cid, comp_id), set()).add(prefix)
    line_of = _opener()
    changed = []
    for comp_id, cid, code_line, old in rows:
        line, readable = line_of(code_line)
        if not readable:
            continue
        new = _fingerprint(line, prefixes.get((cid, comp_id), ()))
        if new != old:
            changed.append({"b_id": comp_id, "b_fp": new})
    stmt = (
        sa.update(comps)
        .where(comps.c.computation_id == sa.bindparam("b_id"))
        .values(fingerprint=sa.bindparam("b_fp"))
    )
    for i in range(0, len(changed), _CHUNK):
        conn.execute(stmt, changed[i : i + _CHUNK])


def downgrade() -> None:
    pass
