"""deploy/grafana/: the Grafana dashboard and the Prometheus rules name only metrics a
real server exports.  Every expression of both files is read, its metric names taken
out, and each looked for on the /metrics page of a real server after real traffic
(ingest, a refused batch, a dropped message, reads, a retention run)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

from dask_analytics_lab.server.app import start_retention

from ..factories import Cluster, every_table
from ..server_helpers import ServerThread, full_cluster, request
from ..waiting import wait_for

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dask-analytics.json"
RULES = GRAFANA / "alerts.yml"
METRICS_TOKEN = "metrics-" + "g" * 24
DAY = 86400.0
# Series Prometheus makes itself for every target, not the server's.
PROMETHEUS_OWN = {"up"}
# PromQL's words that read as names: functions are told by their "(", these are not.
KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana query) reads."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, legends)
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges: [5m], [$__rate_interval]
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\w+", "", expr)  # Grafana's variables
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?", expr):
        word, call = m.group(1), m.group(2)
        if call or word in KEYWORDS or re.fullmatch(r"\d.*|e|inf|nan", word, re.I):
            continue
        names.add(word)
    return names


def test_metric_names_reads_what_it_should():
    assert metric_names(
        'histogram_quantile(0.99, sum by (le, route) (rate(x_bucket{route="/a",le=~"1|2"}[$__rate_interval])))'
    ) == {"x_bucket"}
    assert metric_names("sum(rate(a_total[5m])) / sum(rate(b_count[5m])) > 0.5") == {
        "a_total",
        "b_count",
    }
    assert metric_names("label_values(dask_analytics_build_info, instance)") == {
        "dask_analytics_build_info",
        "instance",
    }
    assert metric_names('up{job="x"} == 0 and on (instance) c') == {"up", "c"}


def dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            # label_values(metric, label): the metric only.
            exprs.append(re.sub(r",\s*\w+\)$", ")", query))
    return exprs


def rule_exprs() -> list[str]:
    rules = yaml.safe_load(RULES.read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def test_both_files_load_and_say_what_they_cover():
    queries, exprs = dashboard_queries(), rule_exprs()
    assert len(queries) >= 12 and all(q.strip() for q in queries)
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] and len({p["id"] for p in board["panels"]}) == len(board["panels"])
    names = set().union(*map(metric_names, queries))
    for wanted in (
        "dask_analytics_ingest_messages_total",  # ingest rate (and dropped)
        "dask_analytics_ingest_refused_total",  # ingest errors by reason
        "dask_analytics_request_seconds_bucket",  # request latency
        "dask_analytics_request_seconds_count",  # requests by status
        "dask_analytics_loop_stalls_total",
        "dask_analytics_loop_lag_max_seconds",
        "dask_analytics_store_seconds_bucket",
        "dask_analytics_clusters_live",
        "dask_analytics_table_rows",
        "dask_analytics_report_pages_rendered_total",
    ):
        assert wanted in names, wanted
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert {
        "DaskAnalyticsIngestErrors",
        "DaskAnalyticsLoopStalls",
        "DaskAnalyticsStoreSlow",
        "DaskAnalyticsDroppedMessages",
    } <= alerts
    assert all(metric_names(e) for e in exprs)


def exported(text: str) -> set[str]:
    """The sample names of a /metrics page (names with their suffixes)."""
    return {
        m.group(1) for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{.*\})? \S+", text, re.M)
    }


@pytest.fixture
def busy_server(sqlite_url):
    """A real server after traffic of every kind its metrics count."""
    with ServerThread(
        {"store_url": sqlite_url, "metrics_token": METRICS_TOKEN, "retention": 90 * DAY}
    ) as server:
        server.ctx.store.ingest(
            every_table(Cluster("old", t0=time.time() - 100 * DAY), "c-old", ["h1"])
        )
        job = start_retention(server.ctx, delay=0)
        try:
            wait_for(lambda: job.runs, timeout=60, what="a retention run")
        finally:
            job.stop()
        a, b = server.token("A"), server.token("B")
        c, msgs = full_cluster("A")
        assert request(server.url + "/api/ingest", method="POST", token=a, body=msgs)[0] == 200
        # B writing under A's cluster id: dropped, counted.
        forged = {**msgs[1], "seq": 999}
        assert request(server.url + "/api/ingest", method="POST", token=b, body=[forged])[0] == 200
        assert request(server.url + "/api/ingest", method="POST", body=msgs)[0] == 401  # refused
        assert request(server.url + "/api/clusters", token=a)[0] == 200
        yield server


def test_every_metric_the_dashboard_and_rules_name_is_exported(busy_server):
    status, text, _ = request(
        busy_server.url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    assert status == 200
    on_page = exported(text)
    assert 'dask_analytics_ingest_messages_total{result="dropped"} 1.0' in text
    for source, exprs in (("dashboard", dashboard_queries()), ("rules", rule_exprs())):
        named = set().union(*map(metric_names, exprs))
        assert named, source
        missing = sorted(named - on_page - PROMETHEUS_OWN)
        assert not missing, f"{source} names metrics the server does not export: {missing}"
