"""The team server as a service: GET /health, GET /metrics (Prometheus) and retention,
on a real server; /metrics attacked as test_server_security.py attacks the API."""

from __future__ import annotations

import re
import time
import urllib.parse

import pytest

from dask_analytics_lab import __version__
from dask_analytics_lab.server.app import start_retention
from dask_analytics_lab.store.migrate import head

from ..server_helpers import ServerThread, browser, form_xsrf, full_cluster, log_in, request
from ..waiting import wait_for

METRICS_TOKEN = "metrics-" + "x" * 24
DAY = 86400.0


@pytest.fixture
def server(sqlite_url):
    with ServerThread({"store_url": sqlite_url, "metrics_token": METRICS_TOKEN}) as s:
        yield s


def scrape(server, token: str = METRICS_TOKEN, query: str = "") -> tuple[int, str, dict]:
    return request(server.url + "/metrics" + query, headers={"Authorization": f"Bearer {token}"})


def value(text: str, name: str, labels: str = "") -> float:
    """The sample `name{labels}`, its labels in any order (prometheus_client sorts them)."""
    want = tuple(sorted(re.findall(r'([a-z_]+)="([^"]*)"', labels)))
    found = samples(text, name)
    assert want in found, f"{name}{labels} not in\n{text}"
    return found[want]


def samples(text: str, name: str) -> dict[tuple, float]:
    """{((label, value), ... sorted): value} of one metric's samples on the page."""
    out = {}
    for m in re.finditer(rf"^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$", text, re.M):
        out[tuple(sorted(re.findall(r'([a-z_]+)="([^"]*)"', m.group(1) or "")))] = float(m.group(2))
    return out


def test_health_is_open_and_says_only_ok(server):
    status, body, headers = request(server.url + "/health")
    assert status == 200 and body == {"status": "ok", "version": __version__}
    assert headers["Content-Type"].startswith("application/json")
    assert request(server.url + "/health", method="HEAD")[0] == 200
    assert request(server.url + "/health", method="POST", raw=b"{}")[0] == 405


def test_ready_is_open_and_says_the_schema_is_at_head(server):
    status, body, _ = request(server.url + "/ready")
    assert status == 200 and body["status"] == "ready" and body["database"] == "reachable"
    assert body["schema"] == head() and body["version"] == __version__
    assert request(server.url + "/ready", method="HEAD")[0] == 200
    assert request(server.url + "/ready", method="POST", raw=b"{}")[0] == 405


@pytest.mark.postgres
def test_health_lives_and_ready_says_503_while_postgres_is_down():
    from ..postgres_server import PostgresServer

    pg = PostgresServer()
    pg.start()
    try:
        with ServerThread({"store_url": pg.url("postgres")}) as server:
            assert request(server.url + "/ready")[0] == 200
            pg.halt()
            # Liveness asks no database: PostgreSQL being down is no reason to restart this process.
            assert request(server.url + "/health")[0] == 200
            status, body, headers = request(server.url + "/ready")
            assert status == 503 and headers["Retry-After"] == "1"
            assert body == {
                "status": "unavailable",
                "reason": "the database cannot be reached",
                "version": __version__,
            }
            assert "127.0.0.1" not in str(body) and "postgres" not in str(
                body
            )  # never the driver's words
            pg.resume()
            wait_for(
                lambda: request(server.url + "/ready")[0] == 200,
                timeout=60,
                what="the server to see PostgreSQL come back",
            )
    finally:
        pg.stop()


def test_ready_says_503_while_the_schema_is_behind_or_ahead(store_url):
    from alembic import command

    from dask_analytics_lab.store.engine import make_engine
    from dask_analytics_lab.store.migrate import _revisions, alembic_config

    with ServerThread({"store_url": store_url}) as server:
        assert request(server.url + "/ready")[0] == 200
        previous = _revisions()[head()]
        command.downgrade(alembic_config(url=store_url), previous)  # an older release's schema
        status, body, _ = request(server.url + "/ready")
        assert status == 503 and body["reason"] == (
            f"the database schema is at revision {previous}, behind this "
            f"release's {head()}: a starting replica migrates it"
        )
        assert request(server.url + "/health")[0] == 200
        command.upgrade(alembic_config(url=store_url), "head")
        assert request(server.url + "/ready")[0] == 200
        engine = make_engine(store_url)
        try:
            with engine.begin() as conn:  # what a newer release's migration leaves
                conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
            status, body, _ = request(server.url + "/ready")
            assert status == 503 and body["reason"] == (
                f"the database schema is at revision 9999, newer than this "
                f"release's {head()}: upgrade this replica"
            )
        finally:
            engine.dispose()


def test_metrics_count_ingest_refusals_latency_rows_and_live_clusters(server):
    token = server.token("A")
    c, msgs = full_cluster("A")
    c.t = time.time()  # heard from just now: live
    msgs.append(c.sample())
    assert request(server.url + "/api/ingest", method="POST", token=token, body=msgs)[0] == 200
    assert (
        request(server.url + "/api/ingest", method="POST", token=token, body=msgs)[0] == 200
    )  # a retry
    assert (
        request(server.url + "/api/ingest", method="POST", token=token, body=[{"kind": "nope"}])[0]
        == 422
    )
    assert request(server.url + "/api/ingest", method="POST", token="dal_x_y", body=msgs)[0] == 401
    assert (
        request(
            server.url + "/api/ingest",
            method="POST",
            token=token,
            raw=b"[]",
            headers={"Content-Type": "text/plain"},
        )[0]
        == 415
    )
    assert request(server.url + "/api/clusters", token=token)[0] == 200

    status, text, headers = scrape(server)
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert value(text, "dask_analytics_ingest_batches_total") == 2
    assert value(text, "dask_analytics_ingest_messages_total", '{result="received"}') == 2 * len(
        msgs
    )
    assert value(text, "dask_analytics_ingest_messages_total", '{result="stored"}') == len(msgs)
    for reason in ("invalid", "unauthorized", "unsupported_media_type"):
        assert value(text, "dask_analytics_ingest_refused_total", f'{{reason="{reason}"}}') == 1
    assert value(text, "dask_analytics_store_seconds_count", '{op="ingest"}') == 2
    assert value(text, "dask_analytics_store_seconds_bucket", '{op="ingest",le="+Inf"}') == 2
    assert value(text, "dask_analytics_store_seconds_count", '{op="read"}') >= 1
    assert value(text, "dask_analytics_table_rows", '{table="clusters"}') == 1
    assert value(text, "dask_analytics_table_rows", '{table="computations"}') == 1
    assert value(text, "dask_analytics_clusters_live") == 1
    assert (
        value(text, "dask_analytics_build_info", f'{{version="{__version__}",store="sqlite"}}') == 1
    )
    # Every sample line is `name{labels} number` (what Prometheus parses).
    for line in text.splitlines():
        assert line.startswith("# ") or re.fullmatch(
            r'[a-z_]+(\{[a-z_]+="[^"\n]*"(,[a-z_]+="[^"\n]*")*\})? \S+', line
        ), line


def test_metrics_time_requests_by_route_template_and_status_class(server):
    token = server.token("A")
    c, msgs = full_cluster("A")
    assert request(server.url + "/api/ingest", method="POST", token=token, body=msgs)[0] == 200
    assert request(server.url + "/api/clusters", token=token)[0] == 200
    assert request(server.url + f"/api/clusters/{c.id}", token=token)[0] == 200
    assert request(server.url + "/api/clusters/no-such-cluster", token=token)[0] == 404
    assert request(server.url + "/api/clusters")[0] == 401
    assert request(server.url + "/health")[0] == 200

    status, text, _ = scrape(server)
    assert status == 200
    counts = samples(text, "dask_analytics_request_seconds_count")
    assert counts == {
        (("route", "/api/ingest"), ("status", "2xx")): 1,
        (("route", "/api/clusters"), ("status", "2xx")): 1,
        (("route", "/api/clusters/{id}"), ("status", "2xx")): 1,
        (("route", "/api/clusters/{id}"), ("status", "4xx")): 1,
        (("route", "/api/clusters"), ("status", "4xx")): 1,
        (("route", "/health"), ("status", "2xx")): 1,
    }
    assert (
        value(
            text,
            "dask_analytics_request_seconds_bucket",
            '{route="/api/ingest",status="2xx",le="+Inf"}',
        )
        == 1
    )
    assert (
        value(text, "dask_analytics_request_seconds_sum", '{route="/api/ingest",status="2xx"}') > 0
    )
    # The ingest's write, timed apart from its request; the reads' store calls too.
    assert value(text, "dask_analytics_store_seconds_count", '{op="ingest"}') == 1
    assert (
        0
        < value(text, "dask_analytics_store_seconds_sum", '{op="ingest"}')
        <= value(text, "dask_analytics_request_seconds_sum", '{route="/api/ingest",status="2xx"}')
    )
    assert value(text, "dask_analytics_store_seconds_count", '{op="read"}') >= 2
    # The scrape itself is counted once it has been answered: the next page shows it.
    assert (
        samples(scrape(server)[1], "dask_analytics_request_seconds_count")[
            (("route", "/metrics"), ("status", "2xx"))
        ]
        == 1
    )


def test_hostile_paths_add_no_label_values(server):
    token = server.token("A")
    hostile = [
        "/api/clusters/%3Cscript%3E",
        "/api/clusters/" + "x" * 150,
        "/api/clusters/a/b/c/d",
        "/no/such/page",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/api/" + "y" * 2000,
        "/metrics/extra",
        "/api/computations/%22%7D%20evil%3D%221",
    ]
    for i, path in enumerate(hostile * 3):
        assert request(server.url + path + f"?n={i}", token=token)[0] >= 400
    status, text, _ = scrape(server)
    assert status == 200
    routes = {
        dict(labels)["route"] for labels in samples(text, "dask_analytics_request_seconds_count")
    }
    assert routes == {"/api/clusters/{id}", "/api/computations/{id}", "other"}
    assert (
        "script" not in text and "passwd" not in text and "xxxx" not in text and "evil" not in text
    )
    total = sum(samples(text, "dask_analytics_request_seconds_count").values())
    assert total == 3 * len(hostile)


def test_metrics_want_the_operators_token_and_nothing_else(server):
    a, b = server.token("A"), server.token("B")
    assert request(server.url + "/metrics")[0] == 401  # no credentials
    assert request(server.url + "/metrics", token=a)[0] == 401  # an account's token (token scheme)
    assert scrape(server, token=b)[0] == 401  # another account's token as a bearer
    assert scrape(server, token=METRICS_TOKEN[:-1])[0] == 401  # almost right
    assert scrape(server, token=METRICS_TOKEN + "x")[0] == 401
    assert (
        request(server.url + "/metrics", headers={"Authorization": f"Basic {METRICS_TOKEN}"})[0]
        == 401
    )
    # A logged-in browser's session cookie does not open it either.
    opener, _ = browser()
    log_in(opener, server.url, a).close()
    with pytest.raises(Exception) as e:
        opener.open(server.url + "/metrics")
    assert getattr(e.value, "code", None) == 401
    # Only GET: a forged form post (with a real XSRF token) or any other method is refused.
    xsrf = form_xsrf(opener, server.url + "/login")
    data = urllib.parse.urlencode({"_xsrf": xsrf, "token": METRICS_TOKEN}).encode()
    with pytest.raises(Exception) as e:
        opener.open(server.url + "/metrics", data=data)
    assert getattr(e.value, "code", None) in (403, 405)
    for method in ("POST", "PUT", "DELETE"):
        assert (
            request(
                server.url + "/metrics",
                method=method,
                raw=b"x",
                headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
            )[0]
            == 405
        )
    # Hostile query parameters change nothing: the same page, no echo.
    evil = (
        "?account=B&limit=-1&format=json&name=%3Cscript%3E&table=clusters%00&" + "x=" + "y" * 5000
    )
    status, text, headers = scrape(server, query=evil)
    assert (
        status == 200
        and headers["Content-Type"].startswith("text/plain")
        and "<script>" not in text
    )
    assert "dask_analytics_table_rows" in text


def test_metrics_guessing_is_throttled(server):
    # What is throttled is one wrong credential from one address (issue 20, item 4) ...
    for _ in range(10):
        assert scrape(server, token="guess-again-" + "z" * 16)[0] == 401
    status, _, headers = scrape(server, token="guess-again-" + "z" * 16)
    assert status == 429 and int(headers["Retry-After"]) > 0
    # ... never the right one (Prometheus behind the same proxy keeps scraping).
    assert scrape(server)[0] == 200


def test_without_a_metrics_token(sqlite_url):
    # With account tokens: off (403), whichever token is sent.
    with ServerThread({"store_url": sqlite_url}) as server:
        token = server.token("A")
        assert request(server.url + "/metrics", token=token)[0] == 403
        assert request(server.url + "/metrics")[0] == 403
        assert request(server.url + "/health")[0] == 200
    # Without tokens (a local-only server): open, like its API; another Host is refused.
    with ServerThread({"store_url": sqlite_url, "token_required": False}) as server:
        assert request(server.url + "/metrics")[0] == 200
        assert request(server.url + "/metrics", headers={"Host": "evil.example"})[0] == 403
        assert request(server.url + "/health", headers={"Host": "evil.example"})[0] == 403


def test_a_short_metrics_token_is_refused(sqlite_url):
    with pytest.raises(ValueError, match="at least 16"):
        ServerThread({"store_url": sqlite_url, "metrics_token": "short"})


def test_the_server_prunes_and_counts_it(sqlite_url):
    from ..factories import Cluster, every_table

    with ServerThread(
        {"store_url": sqlite_url, "metrics_token": METRICS_TOKEN, "retention": 90 * DAY}
    ) as server:
        server.ctx.store.ingest(
            every_table(Cluster("old", t0=time.time() - 100 * DAY), "c-old", ["h1"])
        )
        token = server.token("A")
        c, msgs = full_cluster("A")
        job = start_retention(server.ctx, delay=0)
        try:
            deadline = time.monotonic() + 60
            while job.runs == 0:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            # The server keeps taking batches meanwhile and after.
            assert (
                request(server.url + "/api/ingest", method="POST", token=token, body=msgs)[0] == 200
            )
        finally:
            job.stop()
        assert job.last["clusters"] == 1
        text = scrape(server)[1]
        assert value(text, "dask_analytics_retention_runs_total") == 1
        assert value(text, "dask_analytics_retention_deleted_total", '{table="clusters"}') == 1
        assert [r["cluster_id"] for r in server.ctx.store.list_clusters()] == [c.id]


def test_server_command_refuses_a_bad_retention(tmp_path):
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "dask_analytics_lab.server",
            "server",
            "--db",
            str(tmp_path / "a.db"),
            "--retention",
            "forever",
            "--session-secret-file",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "--retention must be a positive duration" in r.stderr
