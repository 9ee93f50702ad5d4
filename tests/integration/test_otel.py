"""OpenTelemetry traces (analytics.otel): a real LocalCluster records into a real SQLite
file and sends each finished computation, as one trace, to a real OTLP receiver on
127.0.0.1 (HTTP and gRPC); the traces say what the store says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import dask
import pytest
import yaml
from dask import delayed
from distributed import wait

import dask_analytics_lab as dal
from dask_analytics_lab import config, messages
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.otel.exporter import TraceExporter

from ..cluster_helpers import recorded_cluster
from ..otlp_helpers import GrpcReceiver, HttpReceiver, closed_port
from ..waiting import wait_for


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


def inc(x):
    return x + 1


def total(xs):
    return sum(xs)


def boom(x):
    raise ValueError(f"bad value {x}")


def otel_config(endpoint: str, protocol: str = "http", **more) -> dict:
    return {
        "analytics.otel.enabled": True,
        "analytics.otel.protocol": protocol,
        "analytics.otel.endpoint": endpoint,
        "analytics.otel.delay": "200ms",
        "analytics.name": "traced",
        "analytics.user": "ann",
        "analytics.otel.headers": "x-team=data, authorization=Bearer t0ken",
        **more,
    }


def run_two(client) -> None:
    """One computation of two task groups (inc, total), then one that fails."""
    assert delayed(total)([delayed(inc)(i) for i in range(4)]).compute() == 10
    failing = client.compute(delayed(boom)(1))
    wait(failing)
    assert failing.status == "error"
    del failing


def roots(spans: list[dict]) -> list[dict]:
    return [s for s in spans if not s["parent_span_id"]]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_each_computation_is_one_trace_with_a_span_per_task_group(sqlite_url, protocol):
    receiver_type = HttpReceiver if protocol == "http" else GrpcReceiver
    with receiver_type() as receiver:
        with recorded_cluster(sqlite_url, config=otel_config(receiver.endpoint, protocol)) as (
            client,
            info,
        ):
            run_two(client)
            dal.flush(client)
            cluster_id = info["cluster_id"]
            wait_for(
                lambda: len(roots(receiver.snapshot())) >= 2,
                timeout=120,
                what="both computations' traces at the receiver",
            )
        spans = receiver.snapshot()
        assert receiver.headers["x-team"] == "data"
        assert receiver.headers["authorization"] == "Bearer t0ken"

    comps = {c["computation_id"]: c for c in dal.list_computations(cluster_id, store=sqlite_url)}
    assert len(comps) == 2, comps
    (cluster,) = [c for c in dal.list_clusters(store=sqlite_url) if c["cluster_id"] == cluster_id]
    by_root = {r["attributes"]["dask.computation.id"]: r for r in roots(spans)}
    # Exactly one trace per computation, however often its message was sent (the close
    # sent the last ones, and the exporter had every chance to send one twice).
    assert len(roots(spans)) == 2 and set(by_root) == set(comps), [r["name"] for r in roots(spans)]
    assert len({s["trace_id"] for s in spans}) == 2
    for cid, comp in comps.items():
        root = by_root[cid]
        a = root["attributes"]
        assert a["dask.computation.state"] == comp["state"]
        assert a["dask.computation.tasks"] == comp["n_tasks"]
        # The recorded times, not the export's.
        assert root["start"] == pytest.approx(comp["start"], abs=1e-3)
        assert root["end"] == pytest.approx(comp["stop"], abs=1e-3)
        assert root["resource"]["dask.cluster.id"] == cluster_id
        assert root["resource"]["dask.cluster.name"] == cluster["name"] == "traced"
        assert root["resource"]["dask.cluster.user"] == cluster["user"] == "ann"
        assert root["resource"]["service.name"] == "dask-analytics"
        children = [s for s in spans if s["parent_span_id"] == root["span_id"]]
        assert all(s["trace_id"] == root["trace_id"] for s in children)
        groups = {g["name"]: g for g in dal.list_task_groups(cid, store=sqlite_url)}
        assert sorted(s["name"] for s in children) == sorted(groups)
        for span in children:
            g, ga = groups[span["name"]], span["attributes"]
            assert ga["dask.task_group.prefix"] == g["prefix"]
            assert ga["dask.task_group.tasks"] == g["n_tasks"]
            assert ga["dask.task_group.done"] == g["n_done"]
            assert ga["dask.task_group.erred"] == g["n_erred"]
            assert ga["dask.task_group.compute_seconds"] == pytest.approx(g["compute"])
            assert ga["dask.task_group.transfer_seconds"] == pytest.approx(g["transfer"] or 0)
            assert ga["dask.task_group.spilled_bytes"] == 0
            # The group's own recorded times (Dask's TaskGroup start can come before the
            # computation's recorded start: each span says what was recorded).
            assert span["start"] == pytest.approx(g["start"], abs=1e-3)
            assert span["end"] == pytest.approx(g["stop"], abs=1e-3)

    ok = next(c for c in comps.values() if c["state"] == "finished")
    failed = next(c for c in comps.values() if c["state"] == "erred")
    ok_spans = [s for s in spans if s["trace_id"] == by_root[ok["computation_id"]]["trace_id"]]
    assert sorted(s["name"].split("-")[0] for s in ok_spans if s["parent_span_id"]) == [
        "inc",
        "total",
    ]
    assert not [e for s in ok_spans for e in s["events"]]
    # The failure: an exception event on its group's span, as the store has it.
    (row,) = dal.list_exceptions(cluster_id, store=sqlite_url)
    (boom_span,) = [
        s for s in spans if s["parent_span_id"] == by_root[failed["computation_id"]]["span_id"]
    ]
    (event,) = boom_span["events"]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.type"] == "ValueError" == row["exc_type"]
    assert "bad value 1" in event["attributes"]["exception.message"]
    assert "boom" in event["attributes"]["exception.stacktrace"]
    assert event["attributes"]["dask.exception.count"] == row["count"] == 1
    assert boom_span["status"] == 2  # STATUS_CODE_ERROR
    assert by_root[failed["computation_id"]]["status"] == 2


# Runs a recorded in-process cluster in a fresh interpreter: which modules the scheduler
# loaded once it recorded a computation (the test process itself has OpenTelemetry loaded).
SCRIPT = textwrap.dedent("""
    import json, sys
    from distributed import Client, LocalCluster
    import dask_analytics_lab as dal

    if __name__ == "__main__":
        with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
            with Client(cluster) as client:
                dal.register(client, store=sys.argv[1])
                client.submit(sum, [1, 2]).result()
                dal.flush(client)
                status = dal.status(client)
        loaded = sorted(
            m for m in sys.modules
            if m.split(".")[0] in ("opentelemetry", "grpc", "google")
            or m.startswith(("dask_analytics_lab.otel", "dask_analytics_lab.alerts"))
            or m in ("dask_analytics_lab.written_readers", "dask_analytics_lab.findings")
        )
        print(json.dumps({"loaded": loaded, "exported": status["otel_exported"]}))
""")


def modules_loaded(tmp_path, store: str, env: dict) -> dict:
    (tmp_path / "run.py").write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(tmp_path / "run.py"), store],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DASK_ANALYTICS__INTERVAL": "100ms", **env},
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_with_otel_off_nothing_is_sent_and_nothing_of_it_is_loaded(sqlite_url, tmp_path):
    with HttpReceiver() as receiver:
        endpoint = {"DASK_ANALYTICS__OTEL__ENDPOINT": receiver.endpoint}
        off = modules_loaded(tmp_path, sqlite_url, endpoint)
        assert off == {"loaded": [], "exported": 0}
        assert receiver.requests == 0 and receiver.snapshot() == []
        # The same run with it on loads the exporter and sends the computation: the check
        # above sees what it looks for.
        on = modules_loaded(
            tmp_path,
            sqlite_url,
            {
                **endpoint,
                "DASK_ANALYTICS__OTEL__ENABLED": "true",
                "DASK_ANALYTICS__OTEL__DELAY": "0",
            },
        )
        assert "dask_analytics_lab.otel.exporter" in on["loaded"]
        assert "dask_analytics_lab.written_readers" in on["loaded"]
        assert not [m for m in on["loaded"] if m.startswith("dask_analytics_lab.alerts")]
        assert "opentelemetry.sdk.trace" in on["loaded"], on["loaded"]
        wait_for(
            lambda: roots(receiver.snapshot()), timeout=60, what="the trace of the run with otel on"
        )
        assert on["exported"] == 1


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_receiver_that_is_down_costs_the_recording_nothing(sqlite_url, protocol):
    port = closed_port()
    endpoint = f"http://127.0.0.1:{port}" + ("/v1/traces" if protocol == "http" else "")
    config = otel_config(endpoint, protocol, **{"analytics.otel.timeout": "1s"})
    with recorded_cluster(sqlite_url, config=config) as (client, info):
        run_two(client)
        # The scheduler answers while the exporter fails beside it.
        assert client.run_on_scheduler(lambda: 42) == 42
        dal.flush(client)
        cluster_id = info["cluster_id"]
        wait_for(
            lambda: dal.status(client)["otel_exported"] == 2,
            timeout=60,
            what="both traces handed to the exporter",
        )
        run_two(client)  # and records what follows as before
        dal.flush(client)
    comps = dal.list_computations(cluster_id, store=sqlite_url)
    assert sorted(c["state"] for c in comps) == ["erred", "erred", "finished", "finished"]
    assert all(dal.list_task_groups(c["computation_id"], store=sqlite_url) for c in comps)
    assert len(dal.list_exceptions(cluster_id, store=sqlite_url)) == 2
    (cluster,) = [c for c in dal.list_clusters(store=sqlite_url) if c["cluster_id"] == cluster_id]
    assert cluster["stopped"] is not None


def test_alerts_and_traces_share_one_plugin_beside_the_recorder(sqlite_url):
    """Dask calls every plugin's transition for every task: both readers of the written
    record live in one plugin, and the recorder knows neither."""
    alerts = {
        "analytics.alerts.webhooks": [
            {"name": "team", "url": f"http://127.0.0.1:{closed_port()}/"}
        ],
        "analytics.alerts.rules": [{"on": "idle", "minutes": 30}],
    }
    with HttpReceiver() as receiver:
        config = otel_config(receiver.endpoint, **alerts)
        with recorded_cluster(sqlite_url, config=config) as (client, _):
            plugins = client.cluster.scheduler.plugins
            ours = sorted(n for n, p in plugins.items() if type(p).__module__.startswith("dask_"))
            assert ours == ["dask-analytics-lab", "dask-analytics-readers"]
            readers = plugins["dask-analytics-readers"]
            assert plugins["dask-analytics-lab"].written_readers == [
                readers.evaluator.written,
                readers.exporter.written,
            ]
            client.submit(sum, [1, 2]).result()
            dal.flush(client)
            wait_for(lambda: roots(receiver.snapshot()), timeout=60, what="the trace")


def test_the_readme_example_is_a_valid_config():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### OpenTelemetry traces") :]
    block = section[
        section.index("```yaml\n") + 8 : section.index("```\n", section.index("```yaml"))
    ]
    example = yaml.safe_load(block)
    with dask.config.set(example):
        settings = config.resolve()["otel"]
    assert settings == {
        "endpoint": "http://localhost:4318/v1/traces",
        "protocol": "http",
        "headers": {"authorization": "Bearer my-collector-token"},
        "service_name": "dask-analytics",
        "timeout": 10.0,
        "delay": 2.0,
    }
    # Off by default: the plugin gets None and loads nothing of it.
    assert config.resolve()["otel"] is None


class Feed:
    """Messages as the plugin sends them, typed as the shipper hands them to its readers."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, data: dict) -> object:
        self.seq += 1
        return messages.check(messages.make("Scheduler-feed", self.seq, kind, 1e9, data))


def group(name: str, **figures) -> dict:
    return {"name": name, "prefix": name.split("-")[0], "n_tasks": 4, **figures}


def test_the_exporter_ties_late_failures_and_sends_each_computation_once():
    """The exporter alone, fed batches as the shipper's thread feeds it: a computation's
    groups merged across its messages, its failure and spilled bytes from later batches
    (before its delay ran out) in its trace, anything after its export left out."""
    msg = Feed()
    with HttpReceiver() as receiver:
        exporter = TraceExporter(
            # A delay no busy machine outlasts: flush() sends it (the e2e tests wait it out).
            {"endpoint": receiver.endpoint, "protocol": "http", "delay": 600.0, "timeout": 5.0},
            {"id": "Scheduler-feed", "name": "feed", "user": "bob", "account": "default"},
        )
        start = 1_700_000_000.0
        running = {"id": "c1", "start": start, "state": "running", "label": "a → b"}
        exporter.written([msg("computation", {**running, "groups": [group("a-1", compute=1.0)]})])
        exporter.written(
            [
                msg("computation", {**running, "groups": [group("b-2", compute=2.0)]}),
                msg(
                    "computation",
                    {
                        **running,
                        "state": "erred",
                        "stop": start + 3,
                        "groups": [group("b-2", compute=2.5, n_erred=1, start=start + 1)],
                    },
                ),
            ]
        )
        # The next tick's batch: its failure and its spilled bytes, within the delay.
        exporter.written(
            [
                msg(
                    "exception",
                    {
                        "hash": "h1",
                        "computation_id": "c1",
                        "group": "b-2",
                        "exc_type": "KeyError",
                        "exception_text": "KeyError('k')",
                        "count": 1,
                        "first_time": start + 2,
                    },
                ),
                msg(
                    "metrics",
                    {
                        "computation_id": "c1",
                        "rows": [
                            {
                                "context": "execute",
                                "prefix": "b",
                                "activity": "disk-write",
                                "unit": "bytes",
                                "value": 4096,
                            },
                            {
                                "context": "execute",
                                "prefix": "b",
                                "activity": "thread-cpu",
                                "unit": "seconds",
                                "value": 2.0,
                            },
                        ],
                    },
                ),
            ]
        )
        assert exporter.flush(30)
        wait_for(lambda: roots(receiver.snapshot()), timeout=60, what="c1's trace")
        # After its export: a later summary and failure of c1 send nothing more.
        exporter.written(
            [
                msg("computation", {**running, "state": "erred", "stop": start + 3}),
                msg("exception", {"hash": "h2", "computation_id": "c1", "group": "a-1"}),
            ]
        )
        assert exporter.flush(30)
        exporter.close(30)
        spans = receiver.snapshot()
    assert exporter.exported == 1 and exporter.dropped == 0
    (root,) = roots(spans)
    assert root["name"] == "a → b" and root["start"] == start and root["end"] == start + 3
    assert root["resource"]["dask.cluster.user"] == "bob"
    assert root["attributes"]["dask.computation.spilled_bytes"] == 4096
    children = {s["name"]: s for s in spans if s["parent_span_id"] == root["span_id"]}
    assert sorted(children) == ["a-1", "b-2"]
    a, b = children["a-1"], children["b-2"]
    assert a["attributes"]["dask.task_group.compute_seconds"] == 1.0
    assert (a["start"], a["end"]) == (start, start + 3)  # no times of its own: the computation's
    assert b["attributes"]["dask.task_group.compute_seconds"] == 2.5  # the latest summary
    assert b["attributes"]["dask.task_group.spilled_bytes"] == 4096
    assert a["attributes"]["dask.task_group.spilled_bytes"] == 0
    assert b["start"] == start + 1
    (event,) = b["events"]
    assert event["attributes"]["exception.type"] == "KeyError" and event["time"] == start + 2
    assert a["events"] == []


def test_without_the_otel_extra_it_says_what_to_install_and_drops(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)  # not installed
    msg = Feed()
    exporter = TraceExporter({"delay": 600.0}, {"id": "Scheduler-feed"})
    done = {"id": "c1", "start": 1e9, "stop": 1e9 + 1, "state": "finished"}
    exporter.written([msg("computation", done), msg("computation", {**done, "id": "c2"})])
    with caplog.at_level("ERROR", logger="dask_analytics_lab"):
        assert exporter.flush(30)
        exporter.close(30)
    assert (exporter.exported, exporter.dropped) == (0, 2)
    (record,) = [r for r in caplog.records if "pip install" in r.getMessage()]
    assert "dask-analytics-lab[otel]" in record.getMessage()


# --- findings on the spans ---------------------------------------------------------
def test_a_failed_computation_carries_its_findings_on_its_spans(sqlite_url):
    """The failures finding (an erred computation always has it), read from the store as
    `dask-analytics explain` reads it, is on the root span and on the failing group's."""
    with HttpReceiver() as receiver:
        # A busy machine can take seconds to read the findings: they must come.
        config = otel_config(
            receiver.endpoint,
            **{"analytics.otel.delay": "1s", "analytics.otel.timeout": "120s"},
        )
        with recorded_cluster(sqlite_url, config=config) as (client, info):
            run_two(client)
            dal.flush(client)
            wait_for(
                lambda: len(roots(receiver.snapshot())) >= 2,
                timeout=120,
                what="both computations' traces at the receiver",
            )
            status = dal.status(client)
        spans = receiver.snapshot()
    assert status["otel_findings_failed"] == 0
    (failed,) = dal.list_computations(info["cluster_id"], store=sqlite_url, state="erred")
    (root,) = [
        r
        for r in roots(spans)
        if r["attributes"]["dask.computation.id"] == failed["computation_id"]
    ]
    kinds = root["attributes"]["dask.findings"]
    assert "failures" in kinds, root["attributes"]
    explained = dal.explain(failed["computation_id"], store=sqlite_url)
    failures = next(f for f in explained if f["kind"] == "failures")
    assert root["attributes"]["dask.findings.impact_seconds"] >= failures["impact"] > 0
    (boom_span,) = [s for s in spans if s["parent_span_id"] == root["span_id"]]
    assert boom_span["name"] in failures["groups"]
    assert boom_span["attributes"]["dask.findings"] == ["failures"]


def test_findings_that_fail_or_hang_cost_the_trace_only_its_findings():
    msg = Feed()
    release = threading.Event()
    calls: list[str] = []

    def findings(computation_id: str) -> list[dict]:
        calls.append(computation_id)
        if computation_id == "hangs":
            release.wait(120)
        if computation_id == "raises":
            raise ConnectionError("the store is gone")
        return [
            {"kind": "straggler", "impact": 4.0, "groups": ["a-1"], "title": "a straggler"},
            {"kind": "small-tasks", "impact": 1.5, "groups": ["a"], "title": "small"},
        ]

    with HttpReceiver() as receiver:
        exporter = TraceExporter(
            {"endpoint": receiver.endpoint, "protocol": "http", "delay": 600.0, "timeout": 5.0},
            {"id": "Scheduler-feed"},
            findings=findings,
            findings_timeout=0.5,
        )
        done = {"start": 1e9, "stop": 1e9 + 1, "state": "finished", "groups": [group("a-1")]}
        for cid in ("hangs", "raises"):
            exporter.written([msg("computation", {**done, "id": cid})])
            assert exporter.flush(60)
        release.set()
        exporter.written([msg("computation", {**done, "id": "ok"})])
        assert exporter.flush(60)
        exporter.close(30)
        wait_for(lambda: len(roots(receiver.snapshot())) == 3, timeout=60, what="three traces")
        spans = receiver.snapshot()
    assert exporter.exported == 3 and exporter.findings_failed == 2
    assert calls == ["hangs", "raises", "ok"]
    by_id = {r["attributes"]["dask.computation.id"]: r for r in roots(spans)}
    for cid in ("hangs", "raises"):
        assert "dask.findings" not in by_id[cid]["attributes"]
    ok = by_id["ok"]
    assert ok["attributes"]["dask.findings"] == ["straggler", "small-tasks"]
    assert ok["attributes"]["dask.findings.impact_seconds"] == 5.5
    (child,) = [s for s in spans if s["parent_span_id"] == ok["span_id"]]
    assert child["attributes"]["dask.findings"] == ["straggler", "small-tasks"]


# --- the process's end -------------------------------------------------------------
ENDS_WITHOUT_CLOSING = textwrap.dedent("""
    import json, os, signal, sys, time
    from distributed import Client
    import dask_analytics_lab as dal

    if __name__ == "__main__":
        client = Client(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
        info = dal.register(client, store=sys.argv[1])
        assert client.submit(sum, [1, 2]).result() == 3
        print(json.dumps({"cluster_id": info["cluster_id"]}), flush=True)
        if sys.argv[2] == "sigterm":
            # As a kernel's restart ends it: no atexit, no close, SIGTERM's 2 s to end.
            # The SDK set up first, as it is by then in any process that ran for a while.
            readers = client.cluster.scheduler.plugins["dask-analytics-readers"]
            deadline = time.monotonic() + 120
            while not readers.exporter.ready and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(120)  # not reached: the handler ends the process
""")


@pytest.mark.parametrize("ending", ["exit", "sigterm"])
def test_a_script_that_ends_without_closing_sends_its_last_trace(sqlite_url, tmp_path, ending):
    """A delay no script outlasts: the trace leaves only because the process ended, at
    the interpreter's exit or on SIGTERM (where no plugin's close runs)."""
    (tmp_path / "run.py").write_text(ENDS_WITHOUT_CLOSING)
    with HttpReceiver() as receiver:
        env = {
            "DASK_ANALYTICS__INTERVAL": "100ms",
            "DASK_ANALYTICS__OTEL__ENABLED": "true",
            "DASK_ANALYTICS__OTEL__ENDPOINT": receiver.endpoint,
            "DASK_ANALYTICS__OTEL__DELAY": "1h",
        }
        out = subprocess.run(
            [sys.executable, str(tmp_path / "run.py"), sqlite_url, ending],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **env},
            cwd=tmp_path,
        )
        assert out.returncode == (0 if ending == "exit" else -signal.SIGTERM), out.stderr[-3000:]
        # The process is gone: whatever reached the receiver was sent before it ended.
        spans = receiver.snapshot()
    cluster_id = json.loads(out.stdout.strip().splitlines()[-1])["cluster_id"]
    (comp,) = dal.list_computations(cluster_id, store=sqlite_url)
    assert comp["state"] == "finished"
    assert len(roots(spans)) == 1, out.stderr[-3000:]
    (root,) = roots(spans)
    assert root["attributes"]["dask.computation.id"] == comp["computation_id"]
    assert root["resource"]["dask.cluster.id"] == cluster_id
    assert [s["name"] for s in spans if s["parent_span_id"] == root["span_id"]] == [
        g["name"] for g in dal.list_task_groups(comp["computation_id"], store=sqlite_url)
    ]
