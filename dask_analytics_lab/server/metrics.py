"""The team server's own figures, for Prometheus, through prometheus_client: one
CollectorRegistry per server (Context), never the process-wide default one, so several
servers in one process (the tests, a Jupyter server) count apart.

Counted as they happen: ingest batches and messages, refused requests to /api/ingest by
reason, the latency of requests (histogram by route template and status class: both
bounded sets, never the raw path, which a client chooses) and of store calls (by
operation: ingest writes, reads), what retention deleted.  Read at a scrape: rows per
table and clusters live (from the store, at most every ROWS_TTL seconds: cached), the
event loop's lag.  Counters start at 0 with the process, as Prometheus expects.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

# What generate_latest writes: Prometheus' text format 0.0.4, which every Prometheus
# since 2.0 parses (newer prometheus_client name 1.0.0 their latest, not needed here).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: a store call or request from a millisecond (a cached read) to a minute (SQLite's lock).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ROWS_TTL = 60.0
# Why /api/ingest refused a request, by its status.
REASONS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method",
    408: "timeout",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    429: "throttled",
    503: "unavailable",
}
# The route label of a request no route of ours names (the catch-all 404, Jupyter's own paths).
OTHER_ROUTE = "other"


class Metrics:
    """Thread-safe (prometheus_client's metrics are): ingest runs on the body threads,
    reads on the query threads, requests end on the loop."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._batches = Counter(
            "dask_analytics_ingest_batches", "Ingest batches accepted (stored whole).", registry=r
        )
        self._messages = Counter(
            "dask_analytics_ingest_messages",
            "Messages in accepted batches: received, stored (new), dropped (another account's cluster).",
            ["result"],
            registry=r,
        )
        for result in ("received", "stored", "dropped"):  # shown at 0 from the start
            self._messages.labels(result)
        self._refused = Counter(
            "dask_analytics_ingest_refused",
            "Requests to /api/ingest refused, by reason.",
            ["reason"],
            registry=r,
        )
        self._store = Histogram(
            "dask_analytics_store_seconds",
            "Store calls' latency: ingest (a batch's write) and read (API queries).",
            ["op"],
            buckets=BUCKETS,
            registry=r,
        )
        self._requests = Histogram(
            "dask_analytics_request_seconds",
            "Requests' latency, from their headers to their last byte, by route template and status class.",
            ["route", "status"],
            buckets=BUCKETS,
            registry=r,
        )
        self._retention_runs = Counter(
            "dask_analytics_retention_runs", "Retention (prune) runs.", registry=r
        )
        self._retention_deleted = Counter(
            "dask_analytics_retention_deleted",
            "Rows retention deleted, by table.",
            ["table"],
            registry=r,
        )
        self._routes: list[tuple[re.Pattern, str]] = []
        self._rows: tuple[float, dict[str, int], int] | None = None
        self._rows_lock = threading.Lock()

    # --- counting -------------------------------------------------------------
    def ingested(self, received: int, stored: int, dropped: int) -> None:
        self._batches.inc()
        self._messages.labels("received").inc(received)
        self._messages.labels("stored").inc(stored)
        self._messages.labels("dropped").inc(dropped)

    def refused_ingest(self, status: int, reason: str | None = None) -> None:
        """reason: where the status alone does not say (a 503's "busy" or "expired")."""
        self._refused.labels(reason or REASONS.get(status, str(status))).inc()

    def store_call(self, op: str, seconds: float) -> None:
        self._store.labels(op).observe(seconds)

    def retention_done(self, result: dict) -> None:
        self._retention_runs.inc()
        for name, n in result.items():
            if name != "seconds":
                self._retention_deleted.labels(name).inc(int(n))

    # --- requests ---------------------------------------------------------------
    def set_routes(self, prefix: str, patterns: Iterable[str]) -> None:
        """The server's URL patterns (tornado's, ending in "$"), in the order tornado tries them."""
        self._routes = [(re.compile(p), route_template(p, prefix)) for p in patterns]

    def route_of(self, path: str) -> str:
        return next(
            (template for regex, template in self._routes if regex.match(path)), OTHER_ROUTE
        )

    def request_done(self, path: str, status: int, seconds: float) -> None:
        self._requests.labels(self.route_of(path), f"{status // 100}xx").observe(seconds)

    # --- from the store (blocking: call off the loop) ------------------------------
    def store_figures(self, store: Any, now: float | None = None) -> tuple[dict[str, int], int]:
        """({table: rows}, clusters live), at most ROWS_TTL seconds old."""
        with self._rows_lock:
            now = time.time() if now is None else now
            if self._rows is None or now - self._rows[0] >= ROWS_TTL:
                self._rows = (now, *_count(store, now))
            return self._rows[1], self._rows[2]

    # --- the page ---------------------------------------------------------------
    def render(
        self,
        rows: dict[str, int],
        live: int,
        version: str,
        dialect: str,
        lag: Any = None,
        pages: Any = None,
    ) -> bytes:
        """The page in Prometheus' text format 0.0.4 (CONTENT_TYPE): the counters, and what
        was read for this scrape."""
        return generate_latest(
            _Page(self.registry, list(_scraped(rows, live, version, dialect, lag, pages)))
        )


class _Page:
    """The registry's metrics and this scrape's: the figures read at a scrape are never
    kept in the registry, so two scrapes at once cannot mix theirs."""

    def __init__(self, registry: CollectorRegistry, scraped: list[Metric]) -> None:
        self.registry, self.scraped = registry, scraped

    def collect(self) -> Iterable[Metric]:
        yield from self.scraped
        yield from self.registry.collect()


def _scraped(
    rows: dict[str, int], live: int, version: str, dialect: str, lag: Any, pages: Any
) -> Iterable[Metric]:
    info = GaugeMetricFamily(
        "dask_analytics_build_info",
        "The server's version and store kind.",
        labels=["version", "store"],
    )
    info.add_metric([version, dialect], 1)
    yield info
    table_rows = GaugeMetricFamily(
        "dask_analytics_table_rows",
        f"Rows per table (PostgreSQL: its statistics' live rows; refreshed at most every {ROWS_TTL:.0f} s).",
        labels=["table"],
    )
    for t, n in sorted(rows.items()):
        table_rows.add_metric([t], n)
    yield table_rows
    yield GaugeMetricFamily(
        "dask_analytics_clusters_live",
        "Clusters recording now (not stopped, heard from lately).",
        value=live,
    )
    if lag is not None:  # looplag.LoopLag
        yield CounterMetricFamily(
            "dask_analytics_loop_stalls",
            f"Times the event loop ran a callback over {lag.stall:g} s late, whatever held it "
            "(its own work, another thread holding the GIL, no free CPU).",
            value=lag.stalls,
        )
        yield CounterMetricFamily(
            "dask_analytics_loop_busy_stalls",
            f"Of those, the times its own thread used over {lag.stall:g} s of CPU in between "
            "(heavy work on the loop itself).",
            value=lag.busy_stalls,
        )
        yield GaugeMetricFamily(
            "dask_analytics_loop_lag_max_seconds",
            "The largest event loop lag seen since start (also counts waiting for a CPU).",
            value=float(lag.worst),
        )
        yield GaugeMetricFamily(
            "dask_analytics_loop_busy_max_seconds",
            "The most CPU the loop's thread used between two probes (every 0.1 s) since start.",
            value=float(lag.worst_busy),
        )
    if pages is not None:  # report_bodies.RenderedPages
        yield CounterMetricFamily(
            "dask_analytics_report_pages_rendered",
            "Report pages rendered from their twins (each is kept and served as bytes after).",
            value=pages.rendered,
        )
        yield GaugeMetricFamily(
            "dask_analytics_report_pages_kept_bytes",
            "Bytes of rendered report pages kept (gzip'd).",
            value=pages.used,
        )


def route_template(pattern: str, prefix: str) -> str:
    """A URL pattern as a label: "/api/clusters/{id}/computations" for the pattern of
    {prefix}/api/clusters/([^/]+)/computations; the catch-all is OTHER_ROUTE."""
    path = pattern.removesuffix("$")
    if path.startswith(prefix):
        path = path[len(prefix) :]
    if path == "/.*":
        return OTHER_ROUTE
    path = path.replace("([^/]+)", "{id}").replace("(.*)", "{path}").replace("\\.", ".")
    return path or "/"


def _count(store: Any, now: float) -> tuple[dict[str, int], int]:
    from ..store import schema as s
    from ..store.queries import _lost_after_sql
    from ..store.team_schema import TEAM_TABLES

    tables = [*s.DATA_TABLES, s.ingested, *TEAM_TABLES]
    c = s.clusters.c
    with store.reading() as conn:
        if conn.dialect.name == "postgresql":
            # count(*) reads a whole table there; the statistics' count of live rows is
            # free (kept as rows are written, unlike the planner's reltuples, which reads
            # 0 until the table is first analyzed).  A time-partitioned table
            # (store/partitions.py) has its rows in its partitions.
            est = dict(
                conn.execute(
                    sa.text(
                        "SELECT coalesce(p.relname, c.relname) AS name, "
                        "sum(GREATEST(st.n_live_tup, 0))::bigint FROM pg_class c "
                        "JOIN pg_stat_user_tables st ON st.relid = c.oid "
                        "LEFT JOIN pg_inherits i ON i.inhrelid = c.oid "
                        "LEFT JOIN pg_class p ON p.oid = i.inhparent "
                        "WHERE c.relkind = 'r' AND coalesce(p.relname, c.relname) = ANY(:names) "
                        "AND c.relnamespace = to_regnamespace(current_schema()) GROUP BY 1"
                    ),
                    {"names": [t.name for t in tables]},
                ).all()
            )
            rows = {t.name: int(est.get(t.name, 0)) for t in tables}
        else:
            rows = {
                t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                for t in tables
            }
        live = conn.execute(
            sa.select(sa.func.count())
            .select_from(s.clusters)
            .where(c.stopped.is_(None), c.last_seen >= now - _lost_after_sql())
        ).scalar_one()
    return rows, int(live)
