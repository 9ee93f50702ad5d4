"""Issue 19, items 7 and 8: the shipper's buffer is bounded in bytes, gives up samples
before the record and counts what it drops by kind; the shipper never closes its sink
under a write.

The outages here are driven through a real Shipper with a sink that refuses writes, fed
what the plugin's own samplers make for 200 workers over 10 minutes of cluster time:
no test waits out an outage.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace

import dask
import pytest

import dask_analytics_lab as dal
from dask_analytics_lab import config
from dask_analytics_lab.collect.buffer import estimate, measure
from dask_analytics_lab.collect.cluster import ClusterSampler
from dask_analytics_lab.collect.plugin import PLUGIN_NAME
from dask_analytics_lab.collect.shipper import DEFAULT_MAX_BYTES, Shipper
from dask_analytics_lab.collect.workers import WorkerSampler
from dask_analytics_lab.messages import Envelope

from ..cluster_helpers import recorded_cluster
from ..factories import T0, Cluster, group
from ..waiting import wait_for

SAMPLE_KINDS = {"worker_samples", "cluster_sample", "gpu_samples", "heartbeat"}
DETAIL_KINDS = {"profile", "metrics", "task_stream"}
RECORD_KINDS = {"cluster", "cluster_stop", "computation", "code", "exception", "event"}


def kind(envelope: Envelope) -> str:
    return envelope.__struct_config__.tag


class DownSink:
    """A store that refuses every write until `up` is set, then keeps what it is sent."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.written: list[Envelope] = []
        self.closed = 0

    def write(self, batch: list[Envelope]) -> int:
        if not self.up.is_set():
            raise ConnectionError("the store is down")
        self.written.extend(batch)
        return len(batch)

    def close(self) -> None:
        self.closed += 1


class BlockingSink:
    """A store whose writes hang until `release` is set (a store that stopped answering)."""

    def __init__(self) -> None:
        self.writing = threading.Event()
        self.release = threading.Event()
        self.in_write = False
        self.written: list[Envelope] = []
        self.closed_during_write = False
        self.closed = threading.Event()

    def write(self, batch: list[Envelope]) -> int:
        self.in_write = True
        self.writing.set()
        self.release.wait(60)
        self.written.extend(batch)
        self.in_write = False
        return len(batch)

    def close(self) -> None:
        self.closed_during_write = self.closed_during_write or self.in_write
        self.closed.set()


# --- what the plugin puts while the store is down ------------------------------------
class _Worker:
    """What the plugin's samplers read of a distributed WorkerState."""

    def __init__(self, i: int):
        self.address = f"tcp://10.0.{i // 250}.{i % 250 + 1}:{40000 + i}"
        self.name = i
        self.host = f"10.0.{i // 250}.{i % 250 + 1}"
        self.nthreads = 4
        self.memory_limit = 16 * 2**30
        self.memory = SimpleNamespace(
            managed=2**30, unmanaged=2**28, spilled=0, process=2**30 + 2**28
        )
        self.metrics = {"cpu": 87.5}
        self.processing: set = set()


def cluster_time(shipper: Shipper, n_workers: int, minutes: float) -> Iterator[dict]:
    """The messages the plugin puts over `minutes` of cluster time, with the default
    analytics.interval (1 s) and analytics.workers.interval (5 s): the plugin's own
    samplers' cluster sample every tick (each figure moves, so each is sent) and the
    workers' samples every 5 s; a computation every 30 s (running, then
    finished, then its task stream), a failure every 60 s, a worker leaving every 2
    minutes."""
    c = Cluster("Scheduler-outage", t0=T0)
    workers = {w.address: w for w in (_Worker(i) for i in range(n_workers))}
    scheduler = SimpleNamespace(workers=workers, total_nthreads=4 * n_workers, idle_since=None)
    cluster_sampler, worker_sampler = ClusterSampler(0.05, T0), WorkerSampler(5.0)
    yield c.cluster(started=T0)
    for step in range(int(minutes * 60)):
        now = T0 + step
        for w in workers.values():
            w.memory.unmanaged = 2**28 + step % 64 * 2**20
            w.memory.process = w.memory.managed + w.memory.unmanaged
        yield c.msg(
            "cluster_sample", cluster_sampler.sample(scheduler, now, shipper.dropped), time=now
        )
        sample = worker_sampler.sample(workers, now)
        if sample is not None:
            yield c.msg("worker_samples", sample, time=now)
        k, second = divmod(step, 30)
        cid = f"comp-{k}"
        groups = [group(f"ones-{k}-{g}", n_tasks=100) for g in range(5)]
        if second == 0:
            yield c.computation(cid, state="running", groups=groups, start=now)
        elif second == 20:
            yield c.computation(cid, state="finished", groups=groups, start=now - 20, stop=now)
            rows = [
                {
                    "worker": address,
                    "thread": 1,
                    "prefix": "ones",
                    "task_group": f"ones-{k}-0",
                    "state": "memory",
                    "start": now - 1,
                    "stop": now - 0.5,
                }
                for address in list(workers)[:100]
            ]
            yield c.tasks(cid, rows)
            if k % 2:
                yield c.exception(cid, f"ones-{k}-0", h=f"e{k}", count=3)
            if k % 4 == 3:
                yield c.event("worker-left", {"worker": next(iter(workers)), "reason": "died"})


def test_a_ten_minute_outage_of_200_workers_stays_under_the_bound():
    """The bound holds for what is held (by our estimate and by a deep size of the kept
    messages); only the oldest samples go; the drops are counted by kind; once the store
    is back, what was kept is written, in the order it was put."""
    bound = 8 << 20  # a third of what 200 workers' samples take in 10 minutes
    sink = DownSink()
    shipper = Shipper(lambda: sink, max_bytes=bound, min_delay=0.001, max_delay=0.01)
    fed: list[dict] = []
    try:
        for message in cluster_time(shipper, n_workers=200, minutes=10):
            shipper.put(message)
            fed.append(message)
            assert shipper.buffered_bytes <= bound
        drops = shipper.drop_counts()
        assert drops.get("worker_samples", 0) > 0 and set(drops) <= SAMPLE_KINDS, drops
        # Measured, not estimated: what the buffer holds stays under the bound.
        assert sum(measure(m) for m in shipper.held()) <= bound

        sink.up.set()
        assert shipper.flush(60)
    finally:
        shipper.close()
    # Counted now: entries dropped while a write of theirs was under way are counted when
    # that write fails, on the shipper's thread (after the count above, at times).
    drops = shipper.drop_counts()
    seqs = [m.seq for m in sink.written]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    fed_kinds = Counter(m["kind"] for m in fed)
    written_kinds = Counter(kind(m) for m in sink.written)
    for k in fed_kinds:
        assert fed_kinds[k] == written_kinds[k] + drops.get(k, 0), k
    assert shipper.dropped == sum(drops.values()) and shipper.rejected == 0
    # The oldest samples went: the ones written are the newest fed.
    for k in ("worker_samples", "cluster_sample"):
        kept = [m.seq for m in sink.written if kind(m) == k]
        of_kind = [m["seq"] for m in fed if m["kind"] == k]
        assert kept and kept == of_kind[len(of_kind) - len(kept) :], k
    # The last cluster sample written carries the count of what went.
    last_sample = [m for m in sink.written if kind(m) == "cluster_sample"][-1]
    assert 0 < last_sample.data.dropped_messages <= shipper.dropped


def test_defaults_keep_a_ten_minute_outage_of_200_workers_whole():
    sink = DownSink()
    shipper = Shipper(lambda: sink, min_delay=0.001, max_delay=0.01)
    assert shipper.max_bytes == DEFAULT_MAX_BYTES == 64 << 20
    try:
        fed = list(cluster_time(shipper, n_workers=200, minutes=10))
        for message in fed:
            shipper.put(message)
        assert shipper.dropped == 0 and shipper.buffered_bytes <= DEFAULT_MAX_BYTES
        sink.up.set()
        assert shipper.flush(60)
    finally:
        shipper.close()
    assert [m.seq for m in sink.written] == [m["seq"] for m in fed]


def test_samples_go_first_then_details_then_the_oldest_record(caplog):
    """A buffer too small even for the record: nothing of a tier goes while a more
    expendable tier holds a message, each tier's oldest first, and the first drop of
    each tier is logged once, naming what goes and the key to raise."""
    caplog.set_level(logging.WARNING, logger="dask_analytics_lab")
    bound = 256 << 10
    sink = DownSink()
    shipper = Shipper(lambda: sink, max_bytes=bound, min_delay=0.001, max_delay=0.01)
    fed: list[dict] = []
    went: set[str] = set()
    try:
        held: dict[int, str] = {}
        for message in cluster_time(shipper, n_workers=20, minutes=10):
            shipper.put(message)
            fed.append(message)
            assert shipper.buffered_bytes <= bound
            now_held = {m["seq"]: m["kind"] for m in shipper.held()}
            gone = {held[seq] for seq in held.keys() - now_held.keys()}
            if message["seq"] not in now_held:
                gone.add(message["kind"])
            # Without the message just put: the writer may have dropped before it came.
            others = {k for seq, k in now_held.items() if seq != message["seq"]}
            if gone & (DETAIL_KINDS | RECORD_KINDS):
                assert not others & SAMPLE_KINDS, (gone, others)
            if gone & RECORD_KINDS:
                assert not others & DETAIL_KINDS, (gone, others)
            went |= gone
            held = now_held
        assert {"worker_samples", "task_stream", "computation"} <= went, went
        assert went == set(shipper.drop_counts())
        sink.up.set()
        assert shipper.flush(60)
    finally:
        shipper.close()
    # Each kind's oldest went: the ones written are the newest fed.
    for k in ("worker_samples", "task_stream", "computation"):
        kept = [m.seq for m in sink.written if kind(m) == k]
        of_kind = [m["seq"] for m in fed if m["kind"] == k]
        assert kept == of_kind[len(of_kind) - len(kept) :], k
    warnings = [r.getMessage() for r in caplog.records if "buffer is full" in r.getMessage()]
    assert len(warnings) == 3, warnings
    assert "samples first" in warnings[0] and "analytics.buffer.max-bytes" in warnings[0]
    assert "profiles, metrics and task streams" in warnings[1]
    assert "computations, failures" in warnings[2] and "record will miss them" in warnings[2]
    assert all("Raise analytics.buffer.max-bytes" in w for w in warnings)


def test_max_messages_still_bounds_the_count(caplog):
    caplog.set_level(logging.WARNING, logger="dask_analytics_lab")
    sink = DownSink()
    shipper = Shipper(lambda: sink, max_messages=50, min_delay=0.001, max_delay=0.01)
    c = Cluster()
    try:
        for i in range(200):
            shipper.put(c.sample() if i % 2 else c.exception("c1", "g", h=f"e{i}"))
            assert shipper.pending <= 50
        # 100 samples and 100 failures: the samples go first, then the oldest failures.
        assert shipper.drop_counts() == {"cluster_sample": 100, "exception": 50}
    finally:
        shipper.close(timeout=0.1)
    assert any("Raise analytics.buffer.max-messages" in r.getMessage() for r in caplog.records)


def test_a_message_dropped_while_its_write_was_in_progress_and_then_stored_is_not_counted():
    """`dropped` counts what the store will never have: a message pushed out of the buffer
    while the write holding it was on its way, and that write succeeded, was stored."""
    sink = BlockingSink()
    shipper = Shipper(lambda: sink, max_messages=10)
    c = Cluster()
    fed = [c.sample() for _ in range(30)]
    try:
        shipper.put(fed[0])
        assert sink.writing.wait(30)  # the first message is being written
        for message in fed[1:]:
            shipper.put(message)
        sink.release.set()
        assert shipper.flush(30)
    finally:
        shipper.close()
    assert shipper.stored == len(sink.written)
    assert shipper.stored + shipper.dropped == len(fed)
    assert sink.written[0].seq == fed[0]["seq"]


def test_free_form_messages_are_measured_on_the_writer_thread():
    """An event's msg (any JSON) has no O(1) size: put counts a first figure, the
    writer measures it; a message larger than the whole buffer goes alone."""
    sink = DownSink()
    shipper = Shipper(lambda: sink, max_bytes=4 << 20, min_delay=0.001, max_delay=0.01)
    c = Cluster()
    try:
        shipper.put(c.computation("c1"))
        big = c.event("mine", {"values": list(range(100_000))})
        assert estimate("event", big["data"])[0] < 100_000  # the first figure
        shipper.put(big)
        wait_for(
            lambda: shipper.buffered_bytes > measure(big), what="the writer to measure the event"
        )
        shipper.put(
            c.event("mine", {"values": list(range(500_000))})
        )  # ~18 MB: over the bound alone
        wait_for(
            lambda: shipper.drop_counts() == {"event": 1},
            what="the writer to drop the oversized event",
        )
        assert shipper.pending == 2 and shipper.buffered_bytes <= 4 << 20
    finally:
        shipper.close(timeout=0.1)


def test_size_estimates_follow_real_messages(sqlite_url):
    """The per-kind figures (collect/buffer.py) against a deep size of what a real
    cluster's plugin puts: within a factor that keeps the bound honest."""
    import dask.array as da
    from distributed import wait

    seen: list[dict] = []
    with recorded_cluster(
        sqlite_url,
        config={
            "analytics.workers.interval": "100ms",
            "analytics.events.allow": ["mine", "worker-joined"],
        },
    ) as (client, _):
        shipper = client.cluster.scheduler.plugins[PLUGIN_NAME]._shipper
        put = shipper.put

        def recording(message: dict, **kw: bool) -> None:
            seen.append(message)
            put(message, **kw)

        shipper.put = recording
        da.ones((1000, 1000), chunks=100).sum().compute()
        wait(client.map(lambda i: 1 / (i % 5), range(40)))
        client.log_event("mine", {"a": [1, 2, 3]})

        def metrics_sent() -> bool:
            # Workers send fine metrics with their heartbeats: one may land after the last
            # task (a flush straight away found none, in CI).
            dal.flush(client)
            return any(m["kind"] == "metrics" for m in seen)

        wait_for(metrics_sent, what="a metrics message")
    kinds = set()
    for message in seen:
        size, exact = estimate(message["kind"], message["data"])
        if exact:
            kinds.add(message["kind"])
            # Rows of one message share their texts (a prefix, an activity): the deep size
            # counts each text once, so a message of rows naming few distinct ones measures
            # up to ~2x under the per-row figure, which is set for rows that share nothing.
            # Over is safe (the buffer drops early); under would break the bound.
            assert 0.8 <= size / measure(message) <= 2.0, (message["kind"], size, measure(message))
    assert {
        "worker_samples",
        "cluster_sample",
        "computation",
        "task_stream",
        "metrics",
        "exception",
    } <= kinds


def test_max_bytes_setting():
    assert config.resolve()["buffer_max_bytes"] == 64 * 2**20
    with dask.config.set({"analytics.buffer.max-bytes": "1 GiB"}):
        assert config.resolve()["buffer_max_bytes"] == 2**30
    with dask.config.set({"analytics.buffer.max-bytes": 10_000_000}):
        assert config.resolve()["buffer_max_bytes"] == 10_000_000
    for bad in ("lots", "MB", "", -1, 0, True, None, [64]):
        with (
            dask.config.set({"analytics.buffer.max-bytes": bad}),
            pytest.raises(dal.ConfigError) as err,
        ):
            config.resolve()
        text = str(err.value)
        assert "analytics.buffer.max-bytes" in text and "a positive size such as '64 MiB'" in text
        assert "DASK_ANALYTICS__BUFFER__MAX_BYTES" in text


# --- item 8: close never closes the sink under a write ---------------------------------
def test_close_never_closes_the_sink_under_a_write_in_progress():
    sink = BlockingSink()
    shipper = Shipper(lambda: sink)
    shipper.put(Cluster().sample())
    assert sink.writing.wait(30)
    shipper.close(timeout=0.1)  # gives up waiting for the write, as at a scheduler's close
    assert not sink.closed.is_set()
    sink.release.set()
    assert sink.closed.wait(30), "the writer thread closes the sink once its write returned"
    assert not sink.closed_during_write and len(sink.written) == 1


def test_after_write_sees_what_the_store_took_and_a_failing_reader_stops_nothing(caplog):
    """What reacts to the record (alerts, trace export) runs on the shipper's thread after
    each write: it sees every message the store took, none it refused or never got, and
    one that raises is logged and costs the writing nothing."""
    sink = DownSink()
    seen: list[Envelope] = []

    def reader(batch: list[Envelope]) -> None:
        seen.extend(batch)
        raise RuntimeError("a reader that fails")

    shipper = Shipper(lambda: sink, min_delay=0.001, max_delay=0.01, after_write=reader)
    c = Cluster()
    try:
        for msg in [c.cluster(), c.sample(), c.sample()]:
            shipper.put(msg)
        sink.up.set()
        assert shipper.flush(30)
        for msg in [c.sample(), c.stop()]:
            shipper.put(msg)
        assert shipper.flush(30)
    finally:
        shipper.close()
    assert seen == sink.written and len(seen) == 5
    assert "a reader of the written record failed" in caplog.text
