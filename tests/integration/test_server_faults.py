"""Faults: the server is killed while a real cluster works, then started again.  The
plugin keeps what it has (within its buffer), retries, and delivers everything; the
scheduler keeps answering (how promptly: benchmarks/server_outage.py) and nothing raises
into it.

The issue's outage is a minute: `DAL_OUTAGE_SECONDS=60`; the suite uses a few seconds.
"""

from __future__ import annotations

import logging
import os
import statistics
import time

import dask.array as da

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.plugin import PLUGIN_NAME

from ..cluster_helpers import recorded_cluster
from ..server_helpers import ServerProcess, free_port, make_tokens

OUTAGE = float(os.environ.get("DAL_OUTAGE_SECONDS", "4"))


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _round_trip(client, i: int) -> float:
    t = time.perf_counter()
    assert client.submit(lambda x: x + 1, i, pure=False).result() == i + 1
    return time.perf_counter() - t


def _work(client, i: int) -> None:
    assert da.ones((200, 200), chunks=50).sum().compute() == 40_000


def _held_sample_times(dask_scheduler) -> list[float]:
    shipper = dask_scheduler.plugins[PLUGIN_NAME]._shipper
    return [m["time"] for m in shipper.held() if m["kind"] == "cluster_sample"]


def test_server_killed_and_restarted_while_a_cluster_works(sqlite_url):
    token = make_tokens(sqlite_url, 1)[0]
    port = free_port()
    errors = _Errors()
    for name in ("distributed", "dask_analytics_lab"):
        logging.getLogger(name).addHandler(errors)
    config = {"analytics.token": token, "analytics.retry.max-delay": "300ms"}
    server = ServerProcess(sqlite_url, port)
    try:
        server.start()
        with recorded_cluster(server.url, config=config) as (client, info):
            before = []
            for i in range(3):
                before.append(_round_trip(client, i))
                _work(client, i)
            assert dal.flush(client, timeout=20)["flushed"]

            server.kill()  # SIGKILL: no goodbye, maybe mid-request
            outage_start = time.time()
            during, i = [], 3
            while time.time() - outage_start < OUTAGE:
                during.append(_round_trip(client, i))
                _work(client, i)
                i += 1
            status = dal.status(client)
            assert status["failing_since"] and status["pending"] > 0 and status["dropped"] == 0
            # The scheduler kept answering (how quickly: benchmarks/server_outage.py).

            held = client.run_on_scheduler(_held_sample_times)
            server.start()
            flushed = dal.flush(client, timeout=30)
            assert flushed["flushed"], flushed
            assert flushed["dropped"] == 0 and flushed["rejected"] == 0
            ran = client.run_on_scheduler(
                lambda dask_scheduler: {str(c.id) for c in dask_scheduler.computations}
            )
        # The cluster closed with the server up: its last messages arrived too.
        server.kill()
        stored = {
            c["computation_id"]
            for c in dal.list_computations(info["cluster_id"], limit=1000, store=sqlite_url)
        }
        assert ran <= stored and len(stored) >= 2 * i  # every computation that ran, none lost
        samples = dal.list_cluster_samples(info["cluster_id"], store=sqlite_url)
        sampled = [s for s in samples if outage_start < s["time"] < outage_start + OUTAGE]
        # Every sample the plugin held while the server was down arrived.  (A sample is sent
        # when a figure moves, so how many there are depends on how busy this machine was.)
        assert held and set(held) <= {s["time"] for s in samples}, (len(held), len(samples))
        assert dal.get_cluster(info["cluster_id"], store=sqlite_url)["stopped"] is not None
    finally:
        server.kill()
        for name in ("distributed", "dask_analytics_lab"):
            logging.getLogger(name).removeHandler(errors)
        close_readers()
    assert not errors.records, [r.getMessage() for r in errors.records]
    print(
        f"\noutage {OUTAGE:.0f} s: {status['pending']} messages held, {len(stored)} computations and "
        f"{len(sampled)} outage samples delivered after the restart, none dropped; scheduler round trip "
        f"median {statistics.median(before) * 1000:.1f} ms before, {statistics.median(during) * 1000:.1f} ms "
        f"during (max {max(during) * 1000:.0f} ms)"
    )


def test_a_refused_message_held_through_an_outage_is_counted_once(sqlite_url):
    """A message the contract refuses, put while the server is down, is checked once: the
    retries during the outage neither count it again nor hold back the good ones."""
    token = make_tokens(sqlite_url, 1)[0]
    config = {
        "analytics.token": token,
        "analytics.retry.max-delay": "200ms",
        "analytics.events.allow": ["my-topic"],
    }
    server = ServerProcess(sqlite_url, free_port())
    try:
        server.start()
        with recorded_cluster(server.url, config=config) as (client, info):
            assert dal.flush(client, timeout=20)["flushed"]
            server.kill()
            for x in (1, float("nan"), 2):
                client.log_event("my-topic", {"x": x})
            deadline = time.time() + 60
            while time.time() < deadline:  # the writer has retried a few times
                since = dal.status(client)["failing_since"]
                if since and time.time() - since > 1.5:
                    break
                time.sleep(0.1)
            assert dal.status(client)["failing_since"], "the writer never met the outage"
            server.start()
            flushed = dal.flush(client, timeout=30)
            assert flushed["flushed"] and flushed["rejected"] == 1 and flushed["dropped"] == 0, (
                flushed
            )
            cluster_id = info["cluster_id"]
        events = dal.list_events(cluster_id, topic="my-topic", store=sqlite_url)
        assert sorted(e["msg"]["x"] for e in events) == [1, 2]
    finally:
        server.kill()
        close_readers()
