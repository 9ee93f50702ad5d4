"""For running the server as a service: GET {prefix}/health, {prefix}/ready and {prefix}/metrics.

/health and /ready are open (behind the Host check, like every route) and say nothing
about any account, host or user:
- /health (liveness) answers 200 while this process serves requests; it asks no
  database, so an orchestrator does not restart every replica when PostgreSQL is down
  (that is no replica's fault, and a restart would not mend it).
- /ready (readiness, what a load balancer checks) answers 200 when the database
  answers and its schema is at this release's head, else 503 with the reason in
  words: unreachable (never the driver's error, which could name hosts or users),
  behind (a replica of this release has not migrated it yet) or ahead (a newer
  release migrated it: upgrade this replica).

/metrics (metrics.py) spans every account (rows per table, clusters live), so no
account's token opens it and neither does a login cookie: only the operator's metrics
token (`--metrics-token-file`, sent as `Authorization: Bearer <it>` as Prometheus'
`authorization` setting does), compared in constant time; failures count toward the
throttle like any bad token's (per address and credential: a wrong one does not lock
out the right one).  Without a metrics token it is open on a server without tokens
(localhost only) and refused (403) otherwise.
"""

from __future__ import annotations

import hmac
import time
from importlib.metadata import version
from typing import Any

from ..store.migrate import head, is_known
from .base import BaseHandler
from .errors import ApiError
from .metrics import CONTENT_TYPE

# From the installed distribution, not the package: importing the package root from here
# would close an import loop (package -> lab -> serverext -> server.routes -> here).
__version__ = version("dask-analytics-lab")


class Health(BaseHandler):
    async def get(self) -> None:
        self.write_json({"status": "ok", "version": __version__})

    head = get


class Ready(BaseHandler):
    async def get(self) -> None:
        t0 = time.perf_counter()
        try:
            revision = await self.call(schema_revision, self.ctx.store)
        except (
            Exception
        ):  # unreachable, or broken: either way not ready, and never the driver's words
            self.not_ready("the database cannot be reached")
            return
        want = head()
        if revision != want:
            known = revision is None or is_known(revision)
            self.not_ready(
                f"the database schema is at revision {revision or 'none'}, "
                + (
                    f"behind this release's {want}: a starting replica migrates it"
                    if known
                    else f"newer than this release's {want}: upgrade this replica"
                )
            )
            return
        self.write_json(
            {
                "status": "ready",
                "database": "reachable",
                "schema": want,
                "version": __version__,
                "store_seconds": round(time.perf_counter() - t0, 4),
            }
        )

    head = get

    def not_ready(self, reason: str) -> None:
        self.set_header("Retry-After", "1")
        self.write_json(
            {"status": "unavailable", "reason": reason, "version": __version__}, status=503
        )


def schema_revision(store: Any) -> str | None:
    """The database's Alembic revision (None: never migrated); blocking."""
    import sqlalchemy as sa

    with store.reading() as conn:
        try:
            return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
        except sa.exc.ProgrammingError:  # no alembic_version (PostgreSQL): never migrated
            return None
        except sa.exc.OperationalError as e:  # SQLite says "no such table" this way
            if "no such table" in str(e):
                return None
            raise


class Metrics(BaseHandler):
    async def get(self) -> None:
        self.check_operator()
        rows, live = await self.call(self.ctx.metrics.store_figures, self.ctx.store)
        self.set_header("Content-Type", CONTENT_TYPE)
        self.finish(
            self.ctx.metrics.render(
                rows,
                live,
                __version__,
                self.ctx.store.dialect,
                self.ctx.loop_lag,
                self.ctx.report_bodies.pages,
            )
        )

    def check_operator(self) -> None:
        expected = self.ctx.metrics_token
        if expected is None:
            if self.ctx.token_required:
                raise ApiError(
                    403,
                    "metrics are off: start the server with --metrics-token-file FILE and give "
                    "Prometheus that token (authorization: credentials_file)",
                )
            return  # no tokens at all: a local-only server, open like its API
        header = self.request.headers.get("Authorization", "")
        self.refuse_if_throttled(header)
        scheme, _, given = header.strip().partition(" ")
        if scheme.lower() not in ("bearer", "token") or not hmac.compare_digest(
            given.strip().encode(), expected.encode()
        ):
            self.auth_failure("a missing or wrong metrics token", header)
            raise ApiError(
                401, "/metrics needs the server's metrics token: 'Authorization: Bearer <token>'"
            )
