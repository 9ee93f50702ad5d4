"""Issue 42, alerts: rules in `analytics.alerts` evaluated where the record is (the
scheduler for a SQLite/PostgreSQL store, the team server for its own), fired once per
subject, posted to webhooks (our JSON, Slack's incoming-webhook body) with retries, every
delivery recorded.  Webhooks here are real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import dask
import pytest
from dask import delayed

import dask_analytics_lab as dal
from dask_analytics_lab import messages
from dask_analytics_lab.alerts.rules import Evaluator
from dask_analytics_lab.alerts.settings import from_config, parse
from dask_analytics_lab.api import _readers_plugin
from dask_analytics_lab.cli import main as cli
from dask_analytics_lab.config import ConfigError
from dask_analytics_lab.store import open_store
from dask_analytics_lab.store.alerts import AlertLog

from ..cluster_helpers import recorded_cluster
from ..factories import Cluster
from ..server_helpers import ServerThread, free_port, request
from ..waiting import wait_for


class Receiver:
    """A webhook: records each POST's JSON; answers `statuses` in turn, then 200; with
    `hang`, never answers (until the test ends)."""

    def __init__(self, statuses: list[int] | None = None, hang: bool = False):
        self.bodies: list[Any] = []
        self.answered: list[int] = []
        self.requests = 0
        statuses = list(statuses or [])
        release = self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests += 1
                if hang:
                    release.wait(120)
                    return
                status = statuses.pop(0) if statuses else 200
                if status == 200:
                    outer.bodies.append(json.loads(data))
                outer.answered.append(status)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"try later")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def fails(i: int) -> int:
    raise ValueError(f"bad input {i}")


def alerting(url: str, fmt: str = "slack", **more: Any) -> dict:
    return {
        "analytics.alerts.webhooks": [{"url": url, "format": fmt, "name": "team"}],
        "analytics.alerts.rules": [{"on": "failed"}],
        **more,
    }


def failed_batch(store: Any, cluster: Cluster, comp_id: str) -> list[messages.Envelope]:
    """A cluster and its erred computation, stored; the messages as the store took them."""
    raw = [cluster.cluster(), cluster.computation(comp_id, state="erred", stop=time.time())]
    batch = messages.check_batch(raw)
    store.ingest(batch)
    return batch


# --- the recorder (a SQLite store the scheduler writes) ------------------------------------
def test_a_failing_computation_posts_one_slack_message(sqlite_url):
    with Receiver() as hook, Receiver() as ops:
        config = {
            "analytics.alerts.webhooks": [
                {"url": hook.url, "format": "slack", "name": "team"},
                {"url": ops.url, "format": "json", "name": "ops"},
            ],
            "analytics.alerts.rules": [
                {"on": "failed", "webhook": "team"},
                {"on": "finding", "kind": "failures", "webhook": "ops"},
            ],
        }
        with recorded_cluster(sqlite_url, config=config) as (client, info):
            scheduler = client.cluster.scheduler
            with pytest.raises(ValueError, match="bad input 1"):
                client.compute(delayed(fails)(1)).result()
            # Within 10 s of its end (a deadline, not a measured duration).
            wait_for(lambda: hook.bodies, timeout=10, what="the Slack message")
            message = hook.bodies[0]
            assert set(message) == {"text", "blocks"}
            assert message["text"].startswith("Computation failed: fails")
            section = message["blocks"][0]
            assert section["type"] == "section" and section["text"]["type"] == "mrkdwn"
            comp = dal.list_computations(store=sqlite_url, state="erred")[0]
            # An embedded store with no link base: the alert names the command to run.
            assert f"dask analytics explain {comp['computation_id']}" in section["text"]["text"]
            assert "ValueError" in section["text"]["text"]

            # More ticks, a flush, and the same message handed over again: nothing new.
            evaluator = scheduler.plugins["dask-analytics-readers"].evaluator
            ticks = dal.status(client)["ticks"]
            wait_for(lambda: dal.status(client)["ticks"] >= ticks + 5, what="five more ticks")
            dal.flush(client)
            resent = messages.check_batch(
                [
                    messages.make(
                        info["cluster_id"],
                        10**9,
                        "computation",
                        time.time(),
                        {
                            "id": comp["computation_id"],
                            "start": comp["start"],
                            "state": "erred",
                            "stop": time.time(),
                        },
                    )
                ]
            )
            evaluator.written(resent)
            assert evaluator.idle(30)
            assert len(hook.bodies) == 1
            # The finding rule reads findings.explain once the record has settled.
            wait_for(lambda: ops.bodies, timeout=60, what="the finding's alert")
            assert ops.bodies[0]["alert"] == "finding"
            assert ops.bodies[0]["details"]["findings"][0]["kind"] == "failures"
            assert ops.bodies[0]["computation_id"] == comp["computation_id"]
            # A scheduler started afresh on the same store (its memory empty) reads the
            # record of fired alerts: still one.
            with open_store(sqlite_url) as store:
                other = Evaluator(from_config(alerting(hook.url)), store)
                other.written(resent)
                assert other.idle(30)
                other.close()
                rows = AlertLog(store).list()
            assert len(hook.bodies) == 1
            assert sorted(
                (r["webhook"], r["state"], r["attempts"], r["computation_id"]) for r in rows
            ) == [
                ("ops", "delivered", 1, comp["computation_id"]),
                ("team", "delivered", 1, comp["computation_id"]),
            ]
            assert len(ops.bodies) == 1
        out = cli_output(["alerts", "list", "--store", sqlite_url])
        assert "delivered" in out and "Computation failed: fails" in out


def cli_output(args: list[str], capsys: Any = None) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli(args)
    assert code == 0, buf.getvalue()
    return buf.getvalue()


def test_a_recorder_without_alerts_registers_no_readers_plugin(sqlite_url):
    with recorded_cluster(sqlite_url) as (client, _):
        assert "dask-analytics-readers" not in client.cluster.scheduler.plugins
        assert client.cluster.scheduler.plugins["dask-analytics-lab"].written_readers == []


# --- deliveries --------------------------------------------------------------------
def test_a_webhook_answering_500_then_200_is_retried_and_delivered_once(sqlite_url):
    with Receiver(statuses=[500]) as hook, open_store(sqlite_url) as store:
        evaluator = Evaluator(from_config(alerting(hook.url, "json")), store)
        try:
            evaluator.written(failed_batch(store, Cluster(t0=time.time()), "c-retry"))
            log = AlertLog(store)
            wait_for(
                lambda: log.list()[0]["state"] == "delivered" if log.list() else False,
                timeout=60,
                what="delivery after a retry",
            )
            assert hook.answered == [500, 200]
            assert len(hook.bodies) == 1 and hook.bodies[0]["computation_id"] == "c-retry"
            row = log.list()[0]
            assert row["attempts"] == 2 and "HTTP 500" in row["last_error"]
        finally:
            evaluator.close()


def test_a_webhook_that_never_answers_is_recorded_as_failed(sqlite_url):
    settings = alerting(
        "http://placeholder",
        "json",
        **{"analytics.alerts.timeout": "1s", "analytics.alerts.max-attempts": 2},
    )
    with Receiver(hang=True) as hook, open_store(sqlite_url) as store:
        settings["analytics.alerts.webhooks"][0]["url"] = hook.url
        evaluator = Evaluator(from_config(settings), store)
        try:
            cluster = Cluster(t0=time.time())
            evaluator.written(failed_batch(store, cluster, "c-hang"))
            # Whoever hands batches over goes on meanwhile: the next is taken and stored.
            more = messages.check_batch([cluster.computation("c-next", state="running")])
            store.ingest(more)
            evaluator.written(more)
            log = AlertLog(store)
            wait_for(
                lambda: [r["state"] for r in log.list()] == ["failed"],
                timeout=60,
                what="the delivery marked failed",
            )
            row = log.list()[0]
            assert row["attempts"] == 2 and "timed out" in row["last_error"]
            assert hook.requests == 2 and hook.bodies == []
        finally:
            evaluator.close(5)


# --- the team server ------------------------------------------------------------------------
@pytest.mark.postgres
def test_two_servers_on_one_database_fire_once(postgres_url):
    with Receiver() as hook:
        alerts = from_config(alerting(hook.url))
        port_a = free_port()
        public = f"http://127.0.0.1:{port_a}"
        with (
            ServerThread(
                {"store_url": postgres_url, "alerts": alerts, "public_url": public}, port=port_a
            ) as a,
            ServerThread({"store_url": postgres_url, "alerts": alerts, "public_url": public}) as b,
        ):
            token = a.token("data-team")
            cluster = Cluster(t0=time.time())
            batch = [
                cluster.cluster(),
                cluster.computation("c-server", state="erred", stop=time.time()),
            ]
            # The same batch through both replicas (a client's retry to another one).
            for server in (a, b):
                status, answer, _ = request(
                    server.url + "/api/ingest", method="POST", token=token, body=batch
                )
                assert status == 200, answer
            wait_for(lambda: hook.bodies, timeout=30, what="the alert")
            assert a.ctx.alerts.idle(30) and b.ctx.alerts.idle(30)
            assert len(hook.bodies) == 1
            assert f"{public}/computations/c-server" in hook.bodies[0]["text"]
            rows = AlertLog(a.ctx.store).list()
            assert [(r["state"], r["account"]) for r in rows] == [("delivered", "data-team")]


# --- the CLI and the config -------------------------------------------------------------------
def test_alerts_test_sends_a_sample_to_each_webhook():
    with Receiver() as slack, Receiver(statuses=[503]) as broken:
        hooks = [
            {"url": slack.url, "format": "slack", "name": "slack"},
            {"url": broken.url, "name": "ops"},
        ]
        with dask.config.set({"analytics.alerts.webhooks": hooks}):
            import contextlib
            import io

            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = cli(["alerts", "test"])
        assert code == 1  # one webhook refused the sample
        assert f"slack (slack) {slack.url}: ok HTTP 200" in out.getvalue()
        assert f"ops (json) {broken.url}: FAILED HTTP 503" in out.getvalue()
        assert slack.bodies[0]["text"] == "dask-analytics test alert"
        assert broken.requests == 1
        with dask.config.set({"analytics.alerts.webhooks": hooks}):
            assert cli(["alerts", "test", "--webhook", "slack"]) == 0
        assert len(slack.bodies) == 2 and broken.requests == 1


@pytest.mark.parametrize(
    "overrides, key",
    [
        (
            {"analytics.alerts.rules": [{"on": "slower", "ratio": "fast"}]},
            "analytics.alerts.rules[0].ratio",
        ),
        ({"analytics.alerts.rules": [{"on": "idle"}]}, "analytics.alerts.rules[0].minutes"),
        ({"analytics.alerts.rules": [{"on": "crashed"}]}, "analytics.alerts.rules[0].on"),
        (
            {"analytics.alerts.rules": [{"on": "failed", "webhook": "nope"}]},
            "analytics.alerts.rules[0].webhook",
        ),
        (
            {"analytics.alerts.webhooks": [{"url": "ftp://x", "name": "a"}]},
            "analytics.alerts.webhooks[0].url",
        ),
        (
            {"analytics.alerts.webhooks": [{"url": "http://x", "format": "teams"}]},
            "analytics.alerts.webhooks[0].format",
        ),
        ({"analytics.alerts.max-attempts": 0}, "analytics.alerts.max-attempts"),
    ],
)
def test_a_bad_alerts_value_names_its_key(overrides, key):
    base = {
        "analytics.alerts.webhooks": [{"url": "http://127.0.0.1:9/hook", "name": "team"}],
        "analytics.alerts.rules": [{"on": "failed"}],
    }
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]") + " = "):
        # What register() calls before it sends anything to the scheduler.
        _readers_plugin({"store": "sqlite:///x.db", "account": None}, {**base, **overrides})


def test_rules_have_stable_keys():
    settings = parse(
        [{"url": "http://127.0.0.1:9/", "name": "a"}],
        [{"on": "finding", "kind": "straggler", "min-impact": "5s"}, {"on": "slower", "ratio": 2}],
    )
    assert [r.key for r in settings.rules] == [
        "finding:kind=straggler,min-impact=5",
        "slower:ratio=2",
    ]


# --- the other rules, over a store's record -------------------------------------------------
def evaluate(store: Any, rules: list[dict], raw: list[dict], hook: Receiver) -> Evaluator:
    settings = from_config(
        {
            "analytics.alerts.webhooks": [{"url": hook.url, "name": "team"}],
            "analytics.alerts.rules": rules,
        }
    )
    evaluator = Evaluator(settings, store)
    batch = messages.check_batch(raw)
    store.ingest(batch)
    evaluator.written(batch)
    assert evaluator.idle(30)
    return evaluator


def test_slower_than_its_baseline_fires_for_the_slow_run_only(sqlite_url, monkeypatch):
    from dask_analytics_lab.alerts import rules

    from ..factories import group

    monkeypatch.setattr(rules, "SETTLE", 0.0)  # the record is whole already
    c = Cluster(t0=time.time() - 60)
    runs = [
        c.computation(
            f"run-{i}",
            start=c.t + i,
            stop=c.t + i + wall,
            fingerprint="f" * 16,
            groups=[group(f"work-{i}", n_tasks=4, compute=wall)],
        )
        for i, wall in ((1, 10.0), (2, 11.0), (3, 40.0))
    ]
    with Receiver() as hook, open_store(sqlite_url) as store:
        evaluator = evaluate(store, [{"on": "slower", "ratio": 2}], [c.cluster(), *runs], hook)
        evaluator.close()
    assert [b["computation_id"] for b in hook.bodies] == ["run-3"]
    assert hook.bodies[0]["title"].startswith("Run 3.6x slower than its baseline")
    assert hook.bodies[0]["details"]["baseline_id"] == "run-2"


def test_an_idle_cluster_and_one_over_budget_fire_once_each(sqlite_url):
    c = Cluster(t0=time.time() - 5)
    idle_since = time.time() - 300
    raw = [c.cluster(), c.sample(idle_since=idle_since, cost=12.5, at=time.time())]
    rules = [
        {"on": "idle", "minutes": 2},
        {"on": "cost", "budget": 10},
        {"on": "cost", "budget": 100},
    ]
    with Receiver() as hook, open_store(sqlite_url) as store:
        evaluator = evaluate(store, rules, raw, hook)
        # Later samples of the same idle period and cost: nothing new.
        more = messages.check_batch([c.sample(idle_since=idle_since, cost=13.0, at=time.time())])
        store.ingest(more)
        evaluator.written(more)
        assert evaluator.idle(30)
        evaluator.close()
    assert sorted(b["alert"] for b in hook.bodies) == ["cost", "idle"]
    idle = next(b for b in hook.bodies if b["alert"] == "idle")
    assert idle["subject"] == f"{c.id}@{idle_since:.0f}" and "idle for 5 minutes" in idle["title"]
    cost = next(b for b in hook.bodies if b["alert"] == "cost")
    assert cost["rule"] == "cost:budget=10" and "over its budget of 10" in cost["title"]


def test_the_readme_example_is_a_valid_config():
    import re
    from pathlib import Path

    import yaml

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### Alerts") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    example = yaml.safe_load(block.group(1))["analytics"]["alerts"]
    settings = parse(example["webhooks"], example["rules"], link_base=example.get("link-base"))
    assert [r.on for r in settings.rules] == ["failed", "finding", "slower", "idle", "cost"]
    assert [w.format for w in settings.webhooks] == ["slack", "json"]


def test_the_server_refuses_a_bad_alerts_config_naming_the_key(sqlite_url, capsys):
    bad = {
        "analytics.alerts.webhooks": [{"url": "http://127.0.0.1:9/hook", "name": "team"}],
        "analytics.alerts.rules": [{"on": "cost", "budget": -1}],
    }
    with dask.config.set(bad):
        code = cli(["server", "--db", sqlite_url, "--port", str(free_port())])
    assert code == 2
    assert "analytics.alerts.rules[0].budget = -1 is not valid" in capsys.readouterr().err


def test_an_alert_a_process_left_pending_is_delivered_by_the_next(sqlite_url):
    with Receiver() as hook, open_store(sqlite_url) as store:
        # Fired (and recorded) by a scheduler that ended before its delivery went out.
        long_ago = time.time() - 3600
        body = {"text": "Computation failed: sum", "blocks": []}
        assert AlertLog(store).claim(
            rule="failed",
            subject="c-orphan",
            webhook="team",
            cluster_id="gone",
            computation_id="c-orphan",
            fired=long_ago,
            title="Computation failed: sum",
            link=None,
            body=body,
        )
        evaluator = Evaluator(from_config(alerting(hook.url)), store)
        try:
            wait_for(lambda: hook.bodies, timeout=30, what="the orphan's delivery")
            assert evaluator.idle(30)
        finally:
            evaluator.close()
        assert hook.bodies == [body]  # the body recorded when it fired
        assert [(r["state"], r["attempts"]) for r in AlertLog(store).list()] == [("delivered", 1)]
