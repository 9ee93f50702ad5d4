"""Issue 41, items 2 and 3 (the plugin's half): the shipper lingers after a first
message so what a tick makes leaves in one batch, yet nothing waits past a
computation's end or a flush; and a busy server's Retry-After is waited out.

Lingers here are long (a minute) where a test shows what does *not* wait: only the
path under test can write within the test's wait."""

from __future__ import annotations

import threading

import dask_analytics_lab as dal
from dask_analytics_lab import messages
from dask_analytics_lab.collect.plugin import PLUGIN_NAME
from dask_analytics_lab.collect.shipper import Shipper
from dask_analytics_lab.collect.writer import BATCH, next_delay
from dask_analytics_lab.messages import Envelope
from dask_analytics_lab.store_errors import NotFound, StoreUnavailable

from ..cluster_helpers import recorded_cluster
from ..waiting import wait_for

MINUTE = 60.0
T0 = 1_700_000_000.0


class KeepingSink:
    """A store that keeps each batch it is sent, as sent."""

    def __init__(self) -> None:
        self.batches: list[list[Envelope]] = []
        self.lock = threading.Lock()

    def write(self, batch: list[Envelope]) -> int:
        with self.lock:
            self.batches.append(list(batch))
        return len(batch)

    def messages(self) -> int:
        with self.lock:
            return sum(len(b) for b in self.batches)

    def close(self) -> None:
        pass


def event(seq: int) -> dict:
    data = {"topic": "t", "time": T0 + seq, "msg": f"event {seq}"}
    return messages.make("c-linger", seq, "event", T0 + seq, data)


def shipper(sink: KeepingSink, linger: float) -> Shipper:
    return Shipper(lambda: sink, linger=linger, min_delay=0.01, max_delay=0.05)


def test_what_one_tick_makes_leaves_in_one_batch():
    sink = KeepingSink()
    q = shipper(sink, linger=0.5)
    try:
        for seq in range(1, 21):  # a tick's messages, put one after another
            q.put(event(seq))
        wait_for(lambda: sink.messages() == 20, what="the tick's messages to be written")
        assert len(sink.batches) == 1, [len(b) for b in sink.batches]
    finally:
        q.close()


def test_a_computations_end_does_not_wait_for_the_linger():
    sink = KeepingSink()
    q = shipper(sink, linger=MINUTE)
    try:
        q.put(event(1))
        q.put(event(2), urgent=True)  # what the plugin marks: a computation that ended
        wait_for(lambda: sink.messages() == 2, timeout=20, what="the urgent message's batch")
        assert sink.batches == [sink.batches[0]] and len(sink.batches[0]) == 2
    finally:
        q.close()


def test_a_flush_and_a_full_batch_do_not_wait_for_the_linger():
    sink = KeepingSink()
    q = shipper(sink, linger=MINUTE)
    try:
        q.put(event(1))
        assert q.flush(timeout=20)
        assert sink.messages() == 1
        for seq in range(2, 2 + BATCH):
            q.put(event(seq))
        wait_for(lambda: sink.messages() == 1 + BATCH, timeout=20, what="a full batch")
        q.put(event(2 + BATCH))  # lingers again: the next tick's first message
        assert q.pending == 1
    finally:
        q.close(timeout=0.1)


def test_a_busy_servers_retry_after_is_waited_out_within_the_longest_backoff():
    busy = StoreUnavailable("503")
    busy.retry_after = 7.0
    assert next_delay(1, 0.2, 30.0, busy) >= 7.0
    assert next_delay(1, 0.2, 5.0, busy) <= 5.0  # never past analytics.retry.max-delay
    assert next_delay(1, 0.2, 30.0, ConnectionError("down")) <= 0.4


def test_a_recorded_computation_is_whole_in_the_store_once_it_ends(sqlite_url):
    """With the longest linger the setting allows, the computation's end still reaches
    the store at the tick that sees it: the plugin marks it urgent.  (The linger is then
    made an hour on the running shipper, so only that path can write within the wait.)"""
    with recorded_cluster(sqlite_url, config={"analytics.buffer.linger": "10s"}) as (client, info):
        plugin = client.cluster.scheduler.plugins[PLUGIN_NAME]
        assert plugin._shipper._linger == 10.0
        plugin._shipper._linger = 3600.0
        client.submit(sum, [1, 2, 3]).result()

        def finished() -> bool:
            try:
                rows = dal.list_computations(info["cluster_id"], store=sqlite_url)
            except NotFound:  # the cluster's own first message lingers with the rest
                return False
            return bool(rows) and rows[0]["state"] == "finished"

        wait_for(finished, timeout=30, what="the finished computation in the store")


def test_a_retry_through_an_outage_does_not_linger():
    """While the store fails, each retry goes once its backoff is over: a linger would
    only hold the backlog longer (and leave new messages unmeasured meanwhile)."""

    class Down(KeepingSink):
        def __init__(self) -> None:
            super().__init__()
            self.down = threading.Event()
            self.down.set()
            self.attempts = 0

        def write(self, batch: list[Envelope]) -> int:
            self.attempts += 1
            if self.down.is_set():
                raise ConnectionError("the store is down")
            return super().write(batch)

    sink = Down()
    q = Shipper(lambda: sink, linger=MINUTE, min_delay=0.01, max_delay=0.05)
    try:
        q.put(event(1), urgent=True)  # goes at once, and fails
        wait_for(lambda: sink.attempts >= 1, timeout=20, what="the first attempt")
        q.put(event(2))  # put during the outage
        attempts = sink.attempts
        wait_for(lambda: sink.attempts > attempts + 1, timeout=20, what="retries")
        sink.down.clear()  # back: the next retry takes both, without lingering
        wait_for(lambda: sink.messages() == 2, timeout=20, what="the retry")
    finally:
        q.close(timeout=0.1)
