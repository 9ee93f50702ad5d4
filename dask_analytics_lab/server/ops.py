"""For running the server as a service: GET {prefix}/health and GET {prefix}/metrics.

/health is open (behind the Host check, like every route): it says only "ok" and the
version, or 503 when the store cannot be reached, never why (an error could name
hosts or users).  For load balancers and orchestrators' liveness probes.

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

from .base import BaseHandler
from .errors import ApiError

# From the installed distribution, not the package: importing the package root from here
# would close an import loop (package -> lab -> serverext -> server.routes -> here).
__version__ = version("dask-analytics-lab")

PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Health(BaseHandler):
    async def get(self) -> None:
        t0 = time.perf_counter()
        try:
            await self.call(_ping, self.ctx.store)
        except Exception:  # unreachable, or broken: either way not healthy, and never why
            self.write_json({"status": "unavailable", "store": "unreachable", "version": __version__}, status=503)
            return
        self.write_json({"status": "ok", "store": "reachable", "version": __version__,
                         "store_seconds": round(time.perf_counter() - t0, 4)})

    head = get


def _ping(store) -> None:
    import sqlalchemy as sa

    with store.reading() as conn:
        conn.execute(sa.text("SELECT 1"))


class Metrics(BaseHandler):
    async def get(self) -> None:
        self.check_operator()
        rows, live = await self.call(self.ctx.metrics.store_figures, self.ctx.store)
        self.set_header("Content-Type", PROMETHEUS_TYPE)
        self.finish(self.ctx.metrics.render(rows, live, __version__, self.ctx.store.dialect, self.ctx.loop_lag))

    def check_operator(self) -> None:
        expected = self.ctx.metrics_token
        if expected is None:
            if self.ctx.token_required:
                raise ApiError(403, "metrics are off: start the server with --metrics-token-file FILE and give "
                                    "Prometheus that token (authorization: credentials_file)")
            return  # no tokens at all: a local-only server, open like its API
        header = self.request.headers.get("Authorization", "")
        self.refuse_if_throttled(header)
        scheme, _, given = header.strip().partition(" ")
        if scheme.lower() not in ("bearer", "token") or not hmac.compare_digest(given.strip().encode(),
                                                                               expected.encode()):
            self.auth_failure("a missing or wrong metrics token", header)
            raise ApiError(401, "/metrics needs the server's metrics token: 'Authorization: Bearer <token>'")
