"""Queries of the team server's tables (team_schema.py): tokens, cluster ownership and
performance reports, for `dask_analytics_lab.server`, `dask-analytics token` and
`dask_analytics_lab.reports`.  The same SQLAlchemy Core on SQLite and PostgreSQL.

    team = TeamStore(open_store(url))
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from . import schema as s
from . import usage
from .engine import dialect_insert
from .store import Store
from .team_schema import (
    accounts,
    auth_failures,
    cluster_owners,
    dropped_messages,
    reports,
    sessions,
    tokens,
    users,
)

_REPORT_META = [c for c in reports.c if c.name not in ("html_gz", "twin_gz")]


def _report(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    d["id"] = d.pop("report_id")
    return d


class TeamStore:
    """The team tables of one open Store, read and written through the Store's own
    transactions (so connection trouble is StoreUnavailable, as for every Store method)."""

    def __init__(self, store: Store):
        self._store = store

    # --- tokens ------------------------------------------------------------
    def add_token(
        self,
        *,
        token_id: str,
        token_hash: str,
        account: str,
        user: str,
        expires: float | None = None,
    ) -> None:
        """Keep a new token's hash (making its account and user on first use).
        expires: seconds since the epoch after which it is refused; None: never."""
        now = time.time()
        with self._store.transaction() as conn:
            conn.execute(
                dialect_insert(conn, accounts).on_conflict_do_nothing(),
                {"account": account, "created": now},
            )
            conn.execute(
                dialect_insert(conn, users).on_conflict_do_nothing(),
                {"account": account, "user": user, "created": now},
            )
            conn.execute(
                sa.insert(tokens),
                {
                    "token_id": token_id,
                    "token_hash": token_hash,
                    "account": account,
                    "user": user,
                    "created": now,
                    "revoked": None,
                    "expires": expires,
                },
            )

    _FOUND = (tokens.c.token_id, tokens.c.account, tokens.c.user, tokens.c.expires)

    def find_token(self, token_hash: str) -> dict[str, Any] | None:
        """The unrevoked token with this hash: {token_id, account, user, expires}, or None.
        An expired one is returned too (with its `expires`), so the caller can say so."""
        q = sa.select(*self._FOUND).where(
            tokens.c.token_hash == token_hash, tokens.c.revoked.is_(None)
        )
        with self._store.reading() as conn:
            row = conn.execute(q).first()
        return dict(row._mapping) if row else None

    def find_token_by_id(self, token_id: str) -> dict[str, Any] | None:
        """The same for a token id (a login session names its token by id)."""
        q = sa.select(*self._FOUND).where(tokens.c.token_id == token_id, tokens.c.revoked.is_(None))
        with self._store.reading() as conn:
            row = conn.execute(q).first()
        return dict(row._mapping) if row else None

    def touch_token(self, token_id: str, when: float) -> None:
        """Record that a token was used at `when` (the server does so at most once a minute)."""
        q = sa.update(tokens).where(tokens.c.token_id == token_id).values(last_used=when)
        with self._store.transaction() as conn:
            conn.execute(q)

    def list_tokens(self, *, account: str | None = None) -> list[dict[str, Any]]:
        """Tokens' ids, owners, expiry and last use (never their hashes), by account then age."""
        q = sa.select(
            tokens.c.token_id,
            tokens.c.account,
            tokens.c.user,
            tokens.c.created,
            tokens.c.revoked,
            tokens.c.expires,
            tokens.c.last_used,
        )
        if account is not None:
            q = q.where(tokens.c.account == account)
        with self._store.reading() as conn:
            return [
                dict(r._mapping)
                for r in conn.execute(q.order_by(tokens.c.account, tokens.c.created))
            ]

    def revoke_token(self, token_id: str) -> bool:
        q = (
            sa.update(tokens)
            .where(tokens.c.token_id == token_id, tokens.c.revoked.is_(None))
            .values(revoked=time.time())
        )
        with self._store.transaction() as conn:
            return conn.execute(q).rowcount > 0

    def tokens_mark(self) -> tuple[Any, ...]:
        """What changes whenever a token is made or revoked, by any process: one cheap
        aggregate over the (small) tokens table, so a server may cache token lookups and
        still see every revocation within seconds (context.py)."""
        q = sa.select(
            sa.func.count(), sa.func.count(tokens.c.revoked), sa.func.max(tokens.c.revoked)
        )
        with self._store.reading() as conn:
            return tuple(conn.execute(q).one())

    # --- login sessions ------------------------------------------------------------
    def add_session(self, *, session_id: str, token_id: str, expires: float) -> None:
        """Keep a new login session of a token until `expires` (and forget expired ones)."""
        now = time.time()
        with self._store.transaction() as conn:
            conn.execute(sa.delete(sessions).where(sessions.c.expires < now))
            conn.execute(
                sa.insert(sessions),
                {
                    "session_id": session_id,
                    "token_id": token_id,
                    "created": now,
                    "expires": expires,
                },
            )

    def find_session(self, session_id: str) -> dict[str, Any] | None:
        """The unrevoked token of a live session: {token_id, account, user, expires}, or
        None (logged out, expired, never made, or its token revoked)."""
        q = (
            sa.select(*self._FOUND)
            .select_from(sessions.join(tokens, tokens.c.token_id == sessions.c.token_id))
            .where(
                sessions.c.session_id == session_id,
                sessions.c.expires > time.time(),
                tokens.c.revoked.is_(None),
            )
        )
        with self._store.reading() as conn:
            row = conn.execute(q).first()
        return dict(row._mapping) if row else None

    def end_session(self, session_id: str) -> bool:
        """Log a session out: its cookie, wherever a copy of it is, authorises nothing more."""
        with self._store.transaction() as conn:
            return (
                conn.execute(
                    sa.delete(sessions).where(sessions.c.session_id == session_id)
                ).rowcount
                > 0
            )

    # --- failed authentications (server/throttle.py) ------------------------------
    def count_auth_failure(
        self, address: str, fingerprint: str, *, now: float, window: float
    ) -> tuple[int, float]:
        """One more failed authentication with a credential from an address: (how many
        there were in the window of `window` seconds that began with the first of them,
        when that window began); a failure after the window ended begins a new one.  One statement, so replicas
        counting the same credential at once never lose a count."""
        t = auth_failures
        ended = t.c.since <= now - window
        with self._store.transaction() as conn:
            stmt = dialect_insert(conn, t).values(
                address=address, fingerprint=fingerprint, since=now, failures=1
            )
            stmt = stmt.on_conflict_do_update(
                index_elements=[t.c.address, t.c.fingerprint],
                set_={
                    "failures": sa.case((ended, 1), else_=t.c.failures + 1),
                    "since": sa.case((ended, now), else_=t.c.since),
                },
            ).returning(t.c.failures, t.c.since)
            row = conn.execute(stmt).one()
            return int(row.failures), float(row.since)

    def forget_auth_failures(self, before: float) -> int:
        """Delete the counts of windows that began before `before` (they are over)."""
        with self._store.transaction() as conn:
            return conn.execute(
                sa.delete(auth_failures).where(auth_failures.c.since < before)
            ).rowcount

    # --- messages for other accounts' clusters ---------------------------------------
    def remember_dropped(
        self, account: str, keys: list[tuple[str, int]], *, now: float | None = None
    ) -> int:
        """Remember the (cluster_id, seq) of messages `account` sent for other accounts'
        clusters; return how many were not remembered before (what a store would have
        answered for the same messages of an unknown id: new ones count, repeats do not)."""
        keys = sorted(set(keys))
        if not keys:
            return 0
        now = time.time() if now is None else now
        d = dropped_messages.c
        with self._store.transaction() as conn:
            known = set(
                conn.execute(
                    sa.select(d.cluster_id, d.seq).where(
                        d.account == account, sa.tuple_(d.cluster_id, d.seq).in_(keys)
                    )
                ).all()
            )
            new = [k for k in keys if k not in known]
            if new:
                conn.execute(
                    dialect_insert(conn, dropped_messages).on_conflict_do_nothing(),
                    [
                        {"account": account, "cluster_id": cid, "seq": seq, "time": now}
                        for cid, seq in new
                    ],
                )
        return len(new)

    # --- cluster ownership ---------------------------------------------------
    def claim_clusters(self, claims: dict[str, str], *, now: float | None = None) -> dict[str, str]:
        """Record {cluster_id: account} for ids nobody owns yet; return every id's owner.

        A cluster a scheduler wrote straight into the store belongs to the account its
        `cluster` message named.  One write transaction, so two accounts racing for a
        new id get one answer.  `now` is kept as the claim's time: release_claims takes
        back exactly the claims made with it.
        """
        if not claims:
            return {}
        ids = list(claims)
        now = time.time() if now is None else now
        owned = sa.select(cluster_owners.c.cluster_id, cluster_owners.c.account)
        with self._store.transaction() as conn:
            owners = dict(conn.execute(owned.where(cluster_owners.c.cluster_id.in_(ids))).all())
            missing = [cid for cid in ids if cid not in owners]
            if missing:
                written = dict(
                    conn.execute(
                        sa.select(s.clusters.c.cluster_id, s.clusters.c.account).where(
                            s.clusters.c.cluster_id.in_(missing), s.clusters.c.account.is_not(None)
                        )
                    ).all()
                )
                conn.execute(
                    dialect_insert(conn, cluster_owners).on_conflict_do_nothing(),
                    [
                        {
                            "cluster_id": cid,
                            "account": written.get(cid, claims[cid]),
                            "claimed": now,
                        }
                        for cid in missing
                    ],
                )
                owners.update(
                    conn.execute(owned.where(cluster_owners.c.cluster_id.in_(missing))).all()
                )
        return owners

    def release_claims(self, cluster_ids: list[str], *, account: str, claimed: float) -> list[str]:
        """Take back the claims `account` made at time `claimed` for ids that hold no data
        (a refused batch leaves nothing behind); return the ids released."""
        if not cluster_ids:
            return []
        o = cluster_owners.c
        cond = sa.and_(
            o.cluster_id.in_(list(cluster_ids)),
            o.account == account,
            o.claimed == claimed,
            ~sa.exists().where(s.clusters.c.cluster_id == o.cluster_id),
        )
        with self._store.transaction() as conn:
            ids = [r[0] for r in conn.execute(sa.select(o.cluster_id).where(cond))]
            if ids:
                conn.execute(sa.delete(cluster_owners).where(cond))
        return ids

    # --- reports -----------------------------------------------------------------
    def add_report(self, row: dict[str, Any], *, charge: usage.Charge | None = None) -> None:
        """Store one report: its id as "id", the blobs as html_gz and twin_gz.  charge:
        count the blobs' bytes in the account's usage in the same transaction, or raise
        usage.QuotaExceeded and store nothing."""
        with self._store.transaction() as conn:
            if charge is not None:
                n = len(row["html_gz"]) + len(row["twin_gz"])
                usage.charge(conn, charge.account, {"reports": n}, charge.limits)
            conn.execute(
                sa.insert(reports), {("report_id" if k == "id" else k): v for k, v in row.items()}
            )

    def get_report(self, report_id: str, *, content: str | None = None) -> dict[str, Any] | None:
        """One report's metadata, plus "html_gz" or "twin_gz" when content names it."""
        cols = list(_REPORT_META)
        if content in ("html", "twin"):
            cols.append(reports.c[content + "_gz"])
        with self._store.reading() as conn:
            row = conn.execute(sa.select(*cols).where(reports.c.report_id == report_id)).first()
        return _report(row) if row else None

    def list_reports(self, *, account: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Reports' metadata (no blobs), newest first; every account's when account is None."""
        q = sa.select(*_REPORT_META)
        if account is not None:
            q = q.where(reports.c.account == account)
        q = q.order_by(reports.c.created.desc(), reports.c.report_id).limit(limit)
        with self._store.reading() as conn:
            return [_report(r) for r in conn.execute(q)]

    # --- storage quota -----------------------------------------------------------
    def usage(self, account: str) -> dict[str, int]:
        """{kind: bytes} the account stores (usage.py), as the server's quotas count it."""
        with self._store.reading() as conn:
            return usage.usage(conn, account)
