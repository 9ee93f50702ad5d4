"""The team server's own figures, for Prometheus: counters kept in memory and rendered
in Prometheus' text format (version 0.0.4) by hand, so no new dependency.

Counted: ingest batches and messages, refused requests to /api/ingest by reason, the
store's latency (histograms: ingest writes, reads), what retention deleted.  Read from
the store on a scrape, at most every ROWS_TTL seconds (cached): rows per table and
clusters live.  Counters start at 0 with the process, as Prometheus expects.
"""
from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections import defaultdict
from typing import Any

import sqlalchemy as sa

# Seconds: a store call from a millisecond (a cached read) to a minute (SQLite's lock).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ROWS_TTL = 60.0
# Why /api/ingest refused a request, by its status.
REASONS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method",
           408: "timeout", 413: "too_large", 415: "unsupported_media_type", 422: "invalid",
           429: "throttled", 503: "unavailable"}


class Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)  # the last: +Inf
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds


class Metrics:
    """Thread-safe: ingest runs on the body threads, reads on the query threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches = 0
        self.messages: dict[str, int] = defaultdict(int)  # received, stored, dropped
        self.refused: dict[str, int] = defaultdict(int)
        self.latency: dict[str, Histogram] = defaultdict(Histogram)
        self.retention: dict[str, int] = defaultdict(int)
        self._rows: tuple[float, dict[str, int], int] | None = None
        self._rows_lock = threading.Lock()

    # --- counting -------------------------------------------------------------
    def ingested(self, received: int, stored: int, dropped: int) -> None:
        with self._lock:
            self.batches += 1
            self.messages["received"] += received
            self.messages["stored"] += stored
            self.messages["dropped"] += dropped

    def refused_ingest(self, status: int) -> None:
        with self._lock:
            self.refused[REASONS.get(status, str(status))] += 1

    def store_call(self, op: str, seconds: float) -> None:
        with self._lock:
            self.latency[op].observe(seconds)

    def retention_done(self, result: dict) -> None:
        with self._lock:
            self.retention["runs"] += 1
            for name, n in result.items():
                if name != "seconds":
                    self.retention[name] += int(n)

    # --- from the store (blocking: call off the loop) ------------------------------
    def store_figures(self, store: Any, now: float | None = None) -> tuple[dict[str, int], int]:
        """({table: rows}, clusters live), at most ROWS_TTL seconds old."""
        with self._rows_lock:
            now = time.time() if now is None else now
            if self._rows is None or now - self._rows[0] >= ROWS_TTL:
                self._rows = (now, *_count(store, now))
            return self._rows[1], self._rows[2]

    # --- the page ---------------------------------------------------------------
    def render(self, rows: dict[str, int], live: int, version: str, dialect: str, lag: Any = None) -> str:
        with self._lock:
            out: list[str] = []
            metric(out, "dask_analytics_build_info", "gauge", "The server's version and store kind.",
                   [({"version": version, "store": dialect}, 1)])
            metric(out, "dask_analytics_ingest_batches_total", "counter",
                   "Ingest batches accepted (stored whole).", [({}, self.batches)])
            metric(out, "dask_analytics_ingest_messages_total", "counter",
                   "Messages in accepted batches: received, stored (new), dropped (another account's cluster).",
                   [({"result": k}, self.messages[k]) for k in ("received", "stored", "dropped")])
            metric(out, "dask_analytics_ingest_refused_total", "counter",
                   "Requests to /api/ingest refused, by reason.", [({"reason": k}, v) for k, v in sorted(self.refused.items())])
            out += histogram("dask_analytics_store_seconds",
                             "Store calls' latency: ingest (a batch's write) and read (API queries).",
                             self.latency)
            metric(out, "dask_analytics_table_rows", "gauge",
                   f"Rows per table (PostgreSQL: the planner's estimate; refreshed at most every {ROWS_TTL:.0f} s).",
                   [({"table": t}, n) for t, n in sorted(rows.items())])
            metric(out, "dask_analytics_clusters_live", "gauge",
                   "Clusters recording now (not stopped, heard from lately).", [({}, live)])
            metric(out, "dask_analytics_retention_runs_total", "counter", "Retention (prune) runs.",
                   [({}, self.retention["runs"])])
            metric(out, "dask_analytics_retention_deleted_total", "counter", "Rows retention deleted, by table.",
                   [({"table": k}, v) for k, v in sorted(self.retention.items()) if k != "runs"])
            if lag is not None:  # looplag.LoopLag
                metric(out, "dask_analytics_loop_stalls_total", "counter",
                       f"Times the event loop ran a callback over {lag.stall:g} s late while its thread was busy "
                       f"(over {lag.stall:g} s of CPU in between: heavy work on the loop).", [({}, lag.stalls)])
                metric(out, "dask_analytics_loop_lag_max_seconds", "gauge",
                       "The largest event loop lag seen since start (also counts waiting for a CPU).",
                       [({}, float(lag.worst))])
                metric(out, "dask_analytics_loop_busy_max_seconds", "gauge",
                       "The most CPU the loop's thread used between two probes (every 0.1 s) since start.",
                       [({}, float(lag.worst_busy))])
        return "\n".join(out) + "\n"


def _label(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    esc = {k: str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for k, v in labels.items()}
    return "{" + ",".join(f'{k}="{v}"' for k, v in esc.items()) + "}"


def metric(out: list[str], name: str, kind: str, help_text: str, samples: list[tuple[dict, float]]) -> None:
    out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    out += [f"{name}{_label(labels)} {_number(value)}" for labels, value in samples]


def histogram(name: str, help_text: str, by_op: dict[str, Histogram]) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for op in sorted(by_op):
        h, total = by_op[op], 0
        for le, n in zip([*map(_number, BUCKETS), "+Inf"], h.counts):
            total += n
            out.append(f"{name}_bucket{_label({'op': op, 'le': le})} {total}")
        out.append(f"{name}_sum{_label({'op': op})} {_number(h.sum)}")
        out.append(f"{name}_count{_label({'op': op})} {total}")
    return out


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(int(value))


def _count(store: Any, now: float) -> tuple[dict[str, int], int]:
    from ..store import schema as s
    from ..store.queries import _lost_after_sql
    from ..store.team_schema import TEAM_TABLES

    tables = [*s.DATA_TABLES, s.ingested, *TEAM_TABLES]
    c = s.clusters.c
    with store.reading() as conn:
        if conn.dialect.name == "postgresql":
            # count(*) reads a whole table there; the planner's estimate is free.
            est = dict(conn.execute(sa.text(
                "SELECT relname, GREATEST(reltuples, 0)::bigint FROM pg_class "
                "WHERE relkind = 'r' AND relname = ANY(:names) AND relnamespace = to_regnamespace(current_schema())"),
                {"names": [t.name for t in tables]}).all())
            rows = {t.name: int(est.get(t.name, 0)) for t in tables}
        else:
            rows = {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() for t in tables}
        live = conn.execute(sa.select(sa.func.count()).select_from(s.clusters).where(
            c.stopped.is_(None), c.last_seen >= now - _lost_after_sql())).scalar_one()
    return rows, int(live)
