"""Reads. Each takes an open read connection and returns plain, JSON-able dicts.

`account` (when given) limits every read to clusters of that account: the team
server authorises with it, so an id from another account is NotFound, exactly like
an id nobody knows.

A cluster's lifecycle is decided here, once, for every reader (API, server, CLI,
widgets, team page): see `lifecycle`.  Reads that depend on it take `now` (seconds
since the epoch; default: the clock) so tests can say when "now" is.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from distributed import profile as dask_profile

from ..codecrypt import is_sealed, reading_cipher
from ..filters import (
    CLUSTER_STATES,
    COMPUTATION_STATES,
    decode_cursor,
    encode_cursor,
    parse_by,
    parse_state,
    parse_text,
    parse_time,
)
from ..ids import MAX_CANDIDATES, MIN_PREFIX
from ..messages import LEGACY_HEARTBEAT, LOST_AFTER_HEARTBEATS
from ..store_errors import ambiguous, unknown
from . import kept, partitions
from . import schema as s
from .budget import collect
from .budget import current as current_budget
from .dynamic_code import Snippets, has_dynamic_code, place
from .ingest import cluster_accounts

# Where a computation's label leaves prefixes out (collect/labels.py prefix_label).
LABEL_CUT = "…"
# Key columns where "" stands for "none" (see schema.py); reads give None back.
_EMPTY_IS_NONE = {"computation_id", "task_group"}


def _rows(
    result: sa.Result[Any], *, blanks: bool = False, page: bool = False, plain: bool = False
) -> list[dict[str, Any]]:
    """page: a list query, which a server's answer budget may cut short (store/budget.py);
    plain: its columns need no conversion (budget.collect)."""
    rows = collect(result, page=page, plain=plain)
    return _blanks(rows) if blanks else rows


def _blanks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def _in_account(table: sa.Table, account: str | None) -> sa.ColumnElement[bool]:
    if account is None:
        return sa.true()
    return table.c.cluster_id.in_(
        sa.select(s.clusters.c.cluster_id).where(s.clusters.c.account == account)
    )


def _require_cluster(conn: sa.Connection, cluster_id: str, account: str | None) -> str:
    """The cluster's full id (`cluster_id` may be a unique prefix, see ids.py)."""
    q = sa.select(s.clusters.c.cluster_id).where(
        s.clusters.c.cluster_id == cluster_id, _in_account(s.clusters, account)
    )
    if conn.execute(q).first() is None:
        return _by_prefix(conn, s.clusters, cluster_id, account, "cluster", "clusters")
    return cluster_id


def _computation_row(
    conn: sa.Connection, computation_id: str, account: str | None
) -> dict[str, Any]:
    """Its row; `computation_id` may be a unique prefix (ids.py): use the row's id after."""
    c = s.computations
    q = sa.select(c).where(c.c.computation_id == computation_id, _in_account(c, account))
    rows = _rows(conn.execute(q))
    if not rows:
        full = _by_prefix(conn, c, computation_id, account, "computation", "computations")
        rows = _rows(conn.execute(sa.select(c).where(c.c.computation_id == full)))
    return rows[0]


def _by_prefix(
    conn: sa.Connection, table: sa.Table, prefix: str, account: str | None, what: str, command: str
) -> str:
    """The one id of `table` in the account that starts with `prefix` (MIN_PREFIX characters
    or more), as git takes a short commit id; NotFound for none, AmbiguousId for several."""
    if not isinstance(prefix, str) or len(prefix) < MIN_PREFIX:
        raise unknown(what, prefix, command)
    col = table.c[f"{what}_id"]
    # substr, not LIKE: SQLite's LIKE ignores case, and a prefix holds no wildcards to escape.
    q = (
        sa.select(col)
        .where(sa.func.substr(col, 1, len(prefix)) == prefix, _in_account(table, account))
        .order_by(col)
        .limit(MAX_CANDIDATES + 1)
    )
    found = list(conn.execute(q).scalars())
    if not found:
        raise unknown(what, prefix, command)
    if len(found) > 1:
        raise ambiguous(what, prefix, found[:MAX_CANDIDATES], more=len(found) > MAX_CANDIDATES)
    full: str = found[0]
    return full


def _clock(now: float | None) -> float:
    return time.time() if now is None else float(now)


def lost_after(heartbeat: float | None) -> float:
    """Seconds of silence after which a cluster that promised `heartbeat` is lost."""
    return LOST_AFTER_HEARTBEATS * (heartbeat or LEGACY_HEARTBEAT)


def _lost_after_sql() -> sa.ColumnElement[float]:
    return LOST_AFTER_HEARTBEATS * sa.func.coalesce(s.clusters.c.heartbeat, LEGACY_HEARTBEAT)


def lifecycle(
    stopped: float | None,
    last_seen: float,
    started: float,
    now: float,
    heartbeat: float | None = None,
) -> dict[str, Any]:
    """The one rule for a cluster's lifecycle: {"status", "ended", "duration"}.

    "stopped" once its scheduler said it closed (it ended then); "lost" when nothing
    came from it for LOST_AFTER_HEARTBEATS of its heartbeats (its scheduler died
    without closing: it ended when it was last seen); else "live" (not ended: its
    duration runs to now).
    """
    if stopped is not None:
        status, ended = "stopped", stopped
    elif now - last_seen > lost_after(heartbeat):
        status, ended = "lost", last_seen
    else:
        status, ended = "live", None
    duration = max(0.0, (ended if ended is not None else now) - started)
    return {"status": status, "ended": ended, "duration": duration}


def _with_lifecycle(row: dict[str, Any], now: float) -> dict[str, Any]:
    row.update(
        lifecycle(row["stopped"], row["last_seen"], row["started"], now, row.get("heartbeat"))
    )
    row["cursor"] = encode_cursor(row["started"], row["cluster_id"])
    return row


def _with_cursors(comps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in comps:
        r["cursor"] = encode_cursor(r["start"], r["computation_id"])
    return comps


def list_clusters(
    conn: sa.Connection,
    *,
    account: str | None = None,
    user: str | None = None,
    state: str | None = None,
    since: Any = None,
    until: Any = None,
    text: str | None = None,
    finding: str | None = None,
    before: str | None = None,
    limit: int | None = 100,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """Newest first by (started, cluster_id); each row with its `status`, `ended` and
    `duration` (see `lifecycle`) and its `cursor`: pass the last row's as `before=` for
    the next (older) page.

    user: exactly; state: "live", "stopped" or "lost"; since/until: started in
    [since, until) (see filters.parse_time); text: in its name, any case; finding: with
    a computation that has a kept finding of this kind."""
    now = _clock(now)
    q = _clusters_in(
        sa.select(s.clusters),
        account=account,
        user=user,
        state=state,
        since=since,
        until=until,
        text=text,
        before=before,
        now=now,
    )
    if finding is not None:
        q = q.where(kept.cluster_has_kind(finding))
    return [_with_lifecycle(r, now) for r in _rows(conn.execute(q.limit(_limit(limit))), page=True)]


def _clusters_in(
    q: sa.Select[Any],
    *,
    account: str | None = None,
    since: Any = None,
    until: Any = None,
    before: str | None = None,
    now: float | None = None,
    **terms: Any,
) -> sa.Select[Any]:
    """`q` over clusters, narrowed to list_clusters' filters (`terms`: _cluster_filters'),
    newest first."""
    now = _clock(now)
    c = s.clusters
    q = q.where(_in_account(c, account), *_cluster_filters(**terms, now=now))
    return _keyset(q, c.c.started, c.c.cluster_id, since=since, until=until, before=before, now=now)


def _cluster_filters(
    *, user: Any = None, state: Any = None, text: Any = None, now: float
) -> list[sa.ColumnElement[bool]]:
    """WHERE terms on clusters; the lifecycle's SQL twin for `state`."""
    c = s.clusters.c
    terms: list[sa.ColumnElement[bool]] = []
    user, text = parse_text(user, "user"), parse_text(text, "text")
    state = parse_state(state, CLUSTER_STATES)
    if user is not None:
        terms.append(c.user == user)
    if text is not None:
        terms.append(c.name.icontains(text, autoescape=True))
    if state == "stopped":
        terms.append(c.stopped.is_not(None))
    elif state == "lost":
        terms += [c.stopped.is_(None), c.last_seen < now - _lost_after_sql()]
    elif state == "live":
        terms += [c.stopped.is_(None), c.last_seen >= now - _lost_after_sql()]
    return terms


def _keyset(
    q: sa.Select[Any],
    start: sa.Column[float],
    ident: sa.Column[str],
    *,
    since: Any,
    until: Any,
    before: Any,
    now: float,
) -> sa.Select[Any]:
    """The date range and the page: rows older than the cursor, newest first.

    `start <= S` on its own bounds the index range scan on both databases; the OR
    then only breaks ties on the id."""
    since, until = parse_time(since, "since", now=now), parse_time(until, "until", now=now)
    cursor = decode_cursor(before)
    if since is not None:
        q = q.where(start >= since)
    if until is not None:
        q = q.where(start < until)
    if cursor is not None:
        q = q.where(start <= cursor[0], sa.or_(start < cursor[0], ident < cursor[1]))
    return q.order_by(start.desc(), ident.desc())


def get_cluster(
    conn: sa.Connection, cluster_id: str, *, account: str | None = None, now: float | None = None
) -> dict[str, Any]:
    """The cluster row with its `status`, `ended` and `duration` (see `lifecycle`)."""
    q = sa.select(s.clusters).where(
        s.clusters.c.cluster_id == cluster_id, _in_account(s.clusters, account)
    )
    rows = _rows(conn.execute(q))
    if not rows:
        full = _by_prefix(conn, s.clusters, cluster_id, account, "cluster", "clusters")
        rows = _rows(conn.execute(sa.select(s.clusters).where(s.clusters.c.cluster_id == full)))
    return _with_lifecycle(rows[0], _clock(now))


def _cluster_ends(conn: sa.Connection, cluster_ids: set[str], now: float) -> dict[str, float]:
    """{cluster_id: when it ended} for those of these clusters that are stopped or lost."""
    c = s.clusters.c
    ends: dict[str, float] = {}
    ids = sorted(cluster_ids)
    for i in range(0, len(ids), 500):  # SQLite caps the number of bound values
        q = sa.select(c.cluster_id, c.stopped, c.last_seen, c.started, c.heartbeat).where(
            c.cluster_id.in_(ids[i : i + 500])
        )
        for r in conn.execute(q):
            ended = lifecycle(r.stopped, r.last_seen, r.started, now, r.heartbeat)["ended"]
            if ended is not None:
                ends[r.cluster_id] = ended
    return ends


def _mark_lost(
    conn: sa.Connection, comps: list[dict[str, Any]], now: float
) -> list[dict[str, Any]]:
    """A computation still running on a cluster that ended will never finish: it reads
    state "lost", stopped when its cluster ended."""
    running = {r["cluster_id"] for r in comps if r["state"] == "running"}
    if not running:
        return comps
    ends = _cluster_ends(conn, running, now)
    for r in comps:
        if r["state"] == "running" and r["cluster_id"] in ends:
            r["state"] = "lost"
            r["stop"] = max(ends[r["cluster_id"]], r["start"])
    return comps


def list_cluster_samples(
    conn: sa.Connection,
    cluster_id: str,
    *,
    account: str | None = None,
    limit: int | None = 10_000,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """The newest `limit` samples (after skipping the newest `offset`), oldest first."""
    cluster_id = _require_cluster(conn, cluster_id, account)
    t = s.cluster_samples
    q = sa.select(t).where(t.c.cluster_id == cluster_id).order_by(t.c.time.desc(), t.c.id.desc())
    return _rows(conn.execute(q.limit(_limit(limit)).offset(offset)), page=True)[::-1]


def list_computations(
    conn: sa.Connection,
    *,
    cluster_id: str | None = None,
    account: str | None = None,
    user: str | None = None,
    state: str | None = None,
    since: Any = None,
    until: Any = None,
    text: str | None = None,
    finding: str | None = None,
    before: str | None = None,
    limit: int | None = 100,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """Newest first by (start, computation_id), with their totals, label, code line and
    `cursor` (pass the last row's as `before=` for the next page). The totals live on
    the row, so this reads `limit` rows of one table, however many task groups there
    are (then the clusters of the page's running ones, for `_mark_lost`).

    user: of its cluster; state: running, finished, erred, cancelled or lost (running
    on a cluster that ended); since/until: start in [since, until); text: in its label, the
    line of code that made it or a task prefix of it; finding: with a kept finding of
    this kind (findings/kept.py keeps those of the computations in scope first)."""
    now = _clock(now)
    q = _computations_in(
        conn,
        sa.select(s.computations),
        cluster_id=cluster_id,
        account=account,
        user=user,
        state=state,
        since=since,
        until=until,
        text=text,
        before=before,
        now=now,
    )
    if finding is not None:
        q = q.where(kept.has_kind(finding))
    return _with_cursors(
        _mark_lost(
            conn, open_code_lines(_rows(conn.execute(q.limit(_limit(limit))), page=True)), now
        )
    )


def computations_to_explain(
    conn: sa.Connection, settings: str, kept_since: float, **scope: Any
) -> list[str]:
    """The ids list_computations with these filters (`scope`: its keywords but `before`,
    `limit` and `finding`) lists, every page, newest first, whose findings are not kept
    under `settings`, final or since `kept_since` (kept.fresh)."""
    c = s.computations
    q = _computations_in(conn, sa.select(c.c.computation_id), before=None, **scope)
    return list(conn.execute(q.where(~kept.fresh(settings, kept_since))).scalars())


def cluster_computations_to_explain(
    conn: sa.Connection, settings: str, kept_since: float, **scope: Any
) -> list[str]:
    """computations_to_explain over the computations of the clusters list_clusters with
    these filters (`scope`: its keywords but `before`, `limit` and `finding`) lists."""
    c = s.computations
    clusters = _clusters_in(sa.select(s.clusters.c.cluster_id), before=None, **scope)
    q = sa.select(c.c.computation_id).where(
        c.c.cluster_id.in_(clusters.order_by(None)), ~kept.fresh(settings, kept_since)
    )
    return list(conn.execute(q.order_by(c.c.start.desc(), c.c.computation_id.desc())).scalars())


def _computations_in(
    conn: sa.Connection,
    q: sa.Select[Any],
    *,
    cluster_id: str | None = None,
    account: str | None = None,
    since: Any = None,
    until: Any = None,
    before: str | None = None,
    now: float | None = None,
    **terms: Any,
) -> sa.Select[Any]:
    """`q` over computations, narrowed to list_computations' filters (`terms`:
    _computation_filters'), newest first."""
    now = _clock(now)
    c = s.computations
    q = q.where(_in_account(c, account), *_computation_filters(**terms, now=now))
    if cluster_id is not None:
        q = q.where(c.c.cluster_id == _require_cluster(conn, cluster_id, account))
    return _keyset(
        q, c.c.start, c.c.computation_id, since=since, until=until, before=before, now=now
    )


def computation_id(conn: sa.Connection, computation_id: str, account: str | None) -> str:
    """The full id of a computation the account may see (a unique prefix taken, ids.py);
    NotFound otherwise."""
    c = s.computations
    found = conn.execute(
        sa.select(c.c.computation_id).where(
            c.c.computation_id == computation_id, _in_account(c, account)
        )
    ).scalar()
    if found is not None:
        return str(found)
    return _by_prefix(conn, c, computation_id, account, "computation", "computations")


def _computation_filters(
    *, user: Any = None, state: Any = None, text: Any = None, now: float
) -> list[sa.ColumnElement[bool]]:
    c = s.computations.c
    terms: list[sa.ColumnElement[bool]] = []
    user, text = parse_text(user, "user"), parse_text(text, "text")
    state = parse_state(state, COMPUTATION_STATES)
    if user is not None:
        terms.append(
            c.cluster_id.in_(sa.select(s.clusters.c.cluster_id).where(s.clusters.c.user == user))
        )
    if text is not None:
        g = s.task_groups.c
        # A label names every prefix of its computation unless it was cut ("a → b → … → z",
        # collect/labels.py prefix_label) or never made: only then are the groups read, so
        # a search that matches nothing reads the labels, not every task group.  A code line
        # a team server stored encrypted cannot be searched in SQL.
        cut = sa.or_(c.label.is_(None), c.label.contains(LABEL_CUT, autoescape=True))
        prefix = sa.and_(
            cut,
            sa.exists().where(
                g.cluster_id == c.cluster_id,
                g.computation_id == c.computation_id,
                g.prefix.icontains(text, autoescape=True),
            ),
        )
        terms.append(
            sa.or_(
                c.label.icontains(text, autoescape=True),
                c.code_line.icontains(text, autoescape=True),
                prefix,
            )
        )
    if state in ("running", "lost"):
        # Stored "running"; "lost" when its cluster ended (as _mark_lost says it).
        live = sa.select(s.clusters.c.cluster_id).where(*_cluster_filters(state="live", now=now))
        terms += [
            c.state == "running",
            c.cluster_id.in_(live) if state == "running" else c.cluster_id.not_in(live),
        ]
    elif state is not None:
        terms.append(c.state == state)
    return terms


def list_task_groups(
    conn: sa.Connection, computation_id: str, *, account: str | None = None
) -> list[dict[str, Any]]:
    comp = _computation_row(conn, computation_id, account)
    return _task_groups(conn, comp)


def _task_groups(conn: sa.Connection, comp: dict[str, Any]) -> list[dict[str, Any]]:
    g = s.task_groups
    # By the computation's own cluster: another cluster reusing the id is not mixed in.
    q = sa.select(g).where(
        g.c.cluster_id == comp["cluster_id"], g.c.computation_id == comp["computation_id"]
    )
    return _rows(conn.execute(q.order_by(g.c.start.is_(None), g.c.start, g.c.name)))


def get_computation(
    conn: sa.Connection,
    computation_id: str,
    *,
    account: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The computation with its "groups" and its "code" snippets (in the order sent;
    a snippet whose `code` message never arrived has text None).

    Each snippet's text is stored once, however many computations it made; its
    lineno_frame / lineno_relative here are where *this* computation was made (from
    the row's code_frames; a row recorded before those existed falls back to the
    snippet's own, which are its first sender's)."""
    comp = _with_cursors(
        _mark_lost(
            conn, open_code_lines([_computation_row(conn, computation_id, account)]), _clock(now)
        )
    )[0]
    comp["groups"] = _task_groups(conn, comp)
    comp["code"] = _code([comp], conn)[comp["cluster_id"], comp["computation_id"]]
    comp["metrics"] = _metrics(conn, comp)
    return comp


def _code(
    comps: list[dict[str, Any]], conn: sa.Connection
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each computation's code snippets, readable (open_code), by (cluster_id, computation_id)."""
    hashes = {h for comp in comps for h in comp["code_hashes"] or []}
    found: dict[tuple[str, str], dict[str, Any]] = {}
    owners: dict[str, str] = {}
    if hashes:
        # Only the code each computation's own account sent.
        owners = cluster_accounts(conn, {comp["cluster_id"] for comp in comps})
        snippets = s.code_snippets.c
        q = sa.select(s.code_snippets).where(
            snippets.account.in_(set(owners.values())), snippets.hash.in_(hashes)
        )
        found = {(r.pop("account"), r["hash"]): r for r in _rows(conn.execute(q))}
    blank = {"text": None, "filename": None, "lineno_frame": None, "lineno_relative": None}
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for comp in comps:
        its: list[str] = comp["code_hashes"] or []
        frames = comp["code_frames"]
        owner = owners[comp["cluster_id"]] if its else ""  # read only for a hash
        code: list[dict[str, Any]] = []
        for i, h in enumerate(its):
            snippet = dict(found.get((owner, h)) or {"hash": h, **blank})
            if frames is not None:
                # The i-th frame of this hash: one snippet may be sent for several frames.
                frame = _frame_for(frames, h, sum(1 for x in its[:i] if x == h))
                snippet["lineno_frame"] = frame.get("lineno_frame") if frame else None
                snippet["lineno_relative"] = frame.get("lineno_relative") if frame else None
            code.append(snippet)
        out[comp["cluster_id"], comp["computation_id"]] = open_code(code)
    return out


def _metrics(conn: sa.Connection, comp: dict[str, Any]) -> list[dict[str, Any]]:
    """The computation's fine performance metrics: [{prefix, context, activity, unit, value}]."""
    m = s.computation_metrics.c
    q = (
        sa.select(m.prefix, m.context, m.activity, m.unit, m.value)
        .where(m.cluster_id == comp["cluster_id"], m.computation_id == comp["computation_id"])
        .order_by(m.prefix, m.context, m.activity, m.unit)
    )
    return [{**r, "prefix": r["prefix"] or None} for r in _rows(conn.execute(q))]


def open_code_lines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Computation rows with their code_line readable, as open_code does for snippets
    (one that cannot be opened reads None, with `code_error`)."""
    cipher = reading_cipher()
    if cipher.enabled or cipher.problem:
        for row in rows:
            if is_sealed(row.get("code_line")):
                row["code_line"], error = cipher.open(row["code_line"])
                if error:
                    row["code_error"] = error
    return rows


def open_code(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Snippet rows with their text readable, when this process has the code key
    (codecrypt.local_cipher); text stored encrypted that its key does not open reads
    None, with `code_error` saying why.  Without a key here, encrypted text is left
    as stored, for a team server holding its own key to open."""
    cipher = reading_cipher()
    return cipher.open_rows(rows) if cipher.enabled or cipher.problem else rows


def _frame_for(frames: list[dict[str, Any]], h: str, nth: int) -> dict[str, Any] | None:
    same = [f for f in frames if isinstance(f, dict) and f.get("hash") == h]
    return same[nth] if nth < len(same) else (same[-1] if same else None)


def list_exceptions(
    conn: sa.Connection,
    *,
    cluster_id: str | None = None,
    computation_id: str | None = None,
    account: str | None = None,
    limit: int | None = 100,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Newest (last seen) first, from the `offset`th; one row per distinct failure with its count."""
    e = s.exceptions
    q = sa.select(e).where(_in_account(e, account))
    if cluster_id is not None:
        cluster_id = _require_cluster(conn, cluster_id, account)
        q = q.where(e.c.cluster_id == cluster_id)
    if computation_id is not None:
        comp = _computation_row(conn, computation_id, account)
        q = q.where(
            e.c.cluster_id == comp["cluster_id"], e.c.computation_id == comp["computation_id"]
        )
    q = q.order_by(e.c.last_time.desc(), e.c.id.desc()).limit(_limit(limit)).offset(offset)
    return _place_dynamic_code(conn, _rows(conn.execute(q), blanks=True, page=True))


def _place_dynamic_code(conn: sa.Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Frames of functions sent by value (`<dynamic-code>`) placed in the cell or file
    of their computation's snippets: see dynamic_code."""
    wanted = {
        (r["cluster_id"], r["computation_id"])
        for r in rows
        if r["computation_id"] and has_dynamic_code(r)
    }
    if not wanted:
        return rows
    c = s.computations.c
    q = sa.select(c.cluster_id, c.computation_id, c.code_hashes, c.code_frames).where(
        c.computation_id.in_({cid for _, cid in wanted}), c.cluster_id.in_({cl for cl, _ in wanted})
    )
    comps = [r for r in _rows(conn.execute(q)) if (r["cluster_id"], r["computation_id"]) in wanted]
    snippets = {k: Snippets(code) for k, code in _code(comps, conn).items()}
    return [
        place(r, snippets[k]) if (k := (r["cluster_id"], r["computation_id"])) in snippets else r
        for r in rows
    ]


def _window(column: Any, since: float | None, until: float | None) -> Any:
    """Rows with `column` (a time) in [since, until]; either end open when None."""
    return sa.and_(
        sa.true() if since is None else column >= since,
        sa.true() if until is None else column <= until,
    )


# Reads of the time-partitioned tables (partitions.py) name a time range, so PostgreSQL
# reads only the partitions in it.  A cluster's samples and events lie in its life as the
# store saw it (first message to last), give or take LIFE_MARGIN: clocks disagree (a
# worker's against its scheduler's), and a margin of one partition costs at most one
# partition more each side.
LIFE_MARGIN = partitions.INTERVAL


def _in_life(conn: sa.Connection, column: Any, cluster_id: str) -> Any:
    c = s.clusters.c
    row = conn.execute(
        sa.select(c.started, c.first_seen, c.last_seen, c.stopped).where(c.cluster_id == cluster_id)
    ).one()
    lo = min(t for t in (row.started, row.first_seen) if t is not None)
    hi = max(t for t in (row.last_seen, row.stopped) if t is not None)
    return _window(column, lo - LIFE_MARGIN, hi + LIFE_MARGIN)


def list_events(
    conn: sa.Connection,
    *,
    cluster_id: str | None = None,
    topic: str | None = None,
    account: str | None = None,
    limit: int | None = 1000,
    since: float | None = None,
    until: float | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Newest first, from the `offset`th; `since`/`until` bound their time."""
    ev = s.events
    q = sa.select(ev).where(_in_account(ev, account), _window(ev.c.time, since, until))
    if cluster_id is not None:
        cluster_id = _require_cluster(conn, cluster_id, account)
        q = q.where(ev.c.cluster_id == cluster_id, _in_life(conn, ev.c.time, cluster_id))
    if topic is not None:
        q = q.where(ev.c.topic == topic)
    q = q.order_by(ev.c.time.desc(), ev.c.id.desc()).limit(_limit(limit)).offset(offset)
    return _rows(conn.execute(q), page=True)


def list_topics(
    conn: sa.Connection, cluster_id: str, *, account: str | None = None
) -> list[dict[str, Any]]:
    """The event topics a cluster recorded, with how many events and the newest's time,
    the most frequent first."""
    ev = s.events
    cluster_id = _require_cluster(conn, cluster_id, account)
    n = sa.func.count().label("events")
    q = (
        sa.select(ev.c.topic, n, sa.func.max(ev.c.time).label("last_time"))
        .where(ev.c.cluster_id == cluster_id, _in_life(conn, ev.c.time, cluster_id))
        .group_by(ev.c.topic)
        .order_by(n.desc(), ev.c.topic)
    )
    return _rows(conn.execute(q))


def get_profile(
    conn: sa.Connection,
    *,
    computation_id: str | None = None,
    cluster_id: str | None = None,
    prefix: str | None = None,
    account: str | None = None,
) -> dict[str, Any]:
    """Dask's profile tree: of one computation (of one of its task prefixes), or of a
    whole cluster (its computations' profiles merged with any cluster-level one).  An
    empty tree when none was recorded."""
    p = s.profiles
    if computation_id is not None:
        comp = _computation_row(conn, computation_id, account)
        if cluster_id is not None and comp["cluster_id"] != _require_cluster(
            conn, cluster_id, account
        ):
            raise unknown("computation", computation_id, "computations")
        q = sa.select(p.c.tree).where(
            p.c.cluster_id == comp["cluster_id"], p.c.computation_id == comp["computation_id"]
        )
        q = q.order_by(p.c.prefix)
    elif cluster_id is not None:
        cluster_id = _require_cluster(conn, cluster_id, account)
        q = (
            sa.select(p.c.tree)
            .where(p.c.cluster_id == cluster_id)
            .order_by(p.c.computation_id, p.c.prefix)
        )
    else:
        raise TypeError("get_profile needs computation_id= or cluster_id=")
    if prefix is not None:
        q = q.where(p.c.prefix == prefix)
    trees = list(conn.execute(q).scalars())
    return (
        dask_profile.merge(*trees)
        if len(trees) > 1
        else (trees[0] if trees else dask_profile.create())
    )


def list_gpu_metrics(
    conn: sa.Connection,
    *,
    cluster_id: str | None = None,
    monitor_id: str | None = None,
    worker: str | None = None,
    account: str | None = None,
    limit: int | None = 100_000,
    since: float | None = None,
    until: float | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """One row per sample per GPU: the newest `limit` (of [since, until]; after skipping the
    newest `offset`), oldest first."""
    g = s.gpu_samples
    q = sa.select(g).where(_in_account(g, account), _window(g.c.time, since, until))
    if cluster_id is not None:
        cluster_id = _require_cluster(conn, cluster_id, account)
        q = q.where(g.c.cluster_id == cluster_id, _in_life(conn, g.c.time, cluster_id))
    if monitor_id is not None:
        q = q.where(g.c.monitor_id == monitor_id)
    if worker is not None:
        q = q.where(g.c.worker == worker)
    q = q.order_by(g.c.time.desc(), g.c.id.desc()).limit(_limit(limit)).offset(offset)
    return _rows(conn.execute(q), page=True)[::-1]


def list_worker_samples(
    conn: sa.Connection,
    cluster_id: str,
    *,
    worker: str | None = None,
    account: str | None = None,
    limit: int | None = 100_000,
    since: float | None = None,
    until: float | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Each worker over time: the newest `limit` samples (of [since, until]; after skipping
    the newest `offset`), oldest first."""
    cluster_id = _require_cluster(conn, cluster_id, account)
    w = s.worker_samples
    q = sa.select(w).where(
        w.c.cluster_id == cluster_id,
        _window(w.c.time, since, until),
        _in_life(conn, w.c.time, cluster_id),
    )
    if worker is not None:
        q = q.where(w.c.worker == worker)
    q = q.order_by(w.c.time.desc(), w.c.id.desc()).limit(_limit(limit)).offset(offset)
    return _rows(conn.execute(q), page=True)[::-1]


def list_task_stream(
    conn: sa.Connection,
    computation_id: str,
    *,
    account: str | None = None,
    limit: int | None = 100_000,
    offset: int = 0,
    fields: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """A computation's task stream, by start (from the `offset`th): one row per task, or
    per bin (binned); fields: only these columns (start and stop always)."""
    comp = _computation_row(conn, computation_id, account)
    t, sp = s.task_stream, s.task_stream_spans
    key = (comp["cluster_id"], comp["computation_id"])
    # Not the ids the caller asked by, nor what it did not ask for: the text columns of
    # 10,000 rows are most of reading them (the findings read a whole stream).
    wanted = {"start", "stop", *fields} if fields else None
    q = (
        sa.select(
            *(
                c
                for c in t.c
                if c.name not in ("cluster_id", "computation_id")
                and (wanted is None or c.name in wanted)
            )
        )
        .where(t.c.cluster_id == key[0], t.c.computation_id == key[1])
        .order_by(t.c.start, t.c.id)
        .limit(_limit(limit))
        .offset(offset)
    )
    span = conn.execute(
        sa.select(sp.c.first_start, sp.c.last_start).where(
            sp.c.cluster_id == key[0], sp.c.computation_id == key[1]
        )
    ).first()
    if span is not None:  # its time partitions only; without a span, all of them
        q = q.where(_window(t.c.start, span.first_start, span.last_start))
    rows = _rows(conn.execute(q), page=True, plain=True)
    if wanted is None or "binned" in wanted:
        for r in rows:  # SQLite's 0 or 1
            r["binned"] = bool(r["binned"])
    return rows


def cost_report(
    conn: sa.Connection,
    *,
    by: str = "user",
    since: Any = None,
    until: Any = None,
    account: str | None = None,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """Cost per user, UTC day or UTC month: [{"key", "clusters", "computations",
    "core_hours", "cost"}], by user the dearest first, by day/month the newest first.

    A cluster counts whole in the bucket of the day it started (since/until pick
    clusters by start too), with its cost and core-hours so far; `cost` is None for a
    bucket where no cluster had a price."""
    by = parse_by(by)
    c = s.clusters.c
    now = _clock(now)
    n_comps = (
        sa.select(sa.func.count())
        .select_from(s.computations)
        .where(s.computations.c.cluster_id == c.cluster_id)
        .scalar_subquery()
    )
    clusters = sa.select(
        _bucket(conn, by).label("key"), c.core_seconds, c.cost, n_comps.label("n_comps")
    )
    per_cluster = (
        _keyset(
            clusters.where(_in_account(s.clusters, account)),
            c.started,
            c.cluster_id,
            since=since,
            until=until,
            before=None,
            now=now,
        )
        .order_by(None)
        .subquery()
    )
    k = per_cluster.c
    cost = sa.func.sum(k.cost)
    q = sa.select(
        k.key,
        sa.func.count().label("clusters"),
        sa.func.coalesce(sa.func.sum(k.n_comps), 0).label("computations"),
        (sa.func.coalesce(sa.func.sum(k.core_seconds), 0.0) / 3600.0).label("core_hours"),
        cost.label("cost"),
    ).group_by(k.key)
    q = q.order_by(cost.desc().nulls_last(), k.key) if by == "user" else q.order_by(k.key.desc())
    return [
        {**r, "computations": int(r["computations"]), "core_hours": float(r["core_hours"])}
        for r in _rows(conn.execute(q))
    ]


def _bucket(conn: sa.Connection, by: str) -> sa.ColumnElement[str]:
    """The report's key for a cluster: its user, or the UTC day/month it started."""
    c = s.clusters.c
    if by == "user":
        return c.user
    if conn.dialect.name == "sqlite":
        return sa.func.strftime("%Y-%m-%d" if by == "day" else "%Y-%m", c.started, "unixepoch")
    return sa.func.to_char(
        sa.func.timezone("UTC", sa.func.to_timestamp(c.started)),
        "YYYY-MM-DD" if by == "day" else "YYYY-MM",
    )


def export(conn: sa.Connection, *, account: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every row of every data table (not the bookkeeping ones), by table name."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table in s.DATA_TABLES:
        if table is s.code_snippets:
            # Scoped by their own account column, not by a cluster.
            where = sa.true() if account is None else table.c.account == account
        else:
            where = _in_account(table, account)
        q = sa.select(table).where(where).order_by(*table.primary_key.columns)
        out[table.name] = _rows(conn.execute(q), blanks=True)
        if table is s.code_snippets:
            open_code(out[table.name])
        elif table is s.computations:
            open_code_lines(out[table.name])
    return {t.name: out[t.name] for t in s.DATA_TABLES}


def export_page(
    conn: sa.Connection,
    table_name: str,
    *,
    account: str | None = None,
    after: tuple[Any, ...] | None = None,
    limit: int = 1000,
) -> tuple[list[dict[str, Any]], tuple[Any, ...] | None]:
    """`export`'s rows of one table, `limit` at most, in primary key order after `after`;
    with the key of the last row (None when there are no more).  Under a server's answer
    budget the page may hold fewer (store/budget.py): the key then points after the last
    row kept, so an export of large rows is more pages, never a cut answer."""
    table = next(t for t in s.DATA_TABLES if t.name == table_name)
    where = (
        (sa.true() if account is None else table.c.account == account)
        if table is s.code_snippets
        else _in_account(table, account)
    )
    key = list(table.primary_key.columns)
    q = sa.select(table).where(where)
    if after is not None:
        q = q.where(sa.tuple_(*key) > sa.tuple_(*after))
    rows = _rows(conn.execute(q.order_by(*key).limit(limit + 1)), page=True)
    budget = current_budget()
    more = len(rows) > limit or (budget is not None and budget.truncated is not None)
    rows = rows[:limit]
    last = tuple(rows[-1][c.name] for c in key) if more else None  # before _blanks: the stored key
    _blanks(rows)
    if table is s.code_snippets:
        open_code(rows)
    elif table is s.computations:
        open_code_lines(rows)
    return rows, last
