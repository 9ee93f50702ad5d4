"""Issue 44, item 5: a killed scheduler reads lost within 10 s of its death, and a live
one stays live however busy its event loop or slow its store: its writer thread, not
its event loop, says it lives, with every write it makes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from distributed import Client

import dask_analytics_lab as dal
from dask_analytics_lab import messages
from dask_analytics_lab.collect.shipper import Shipper
from dask_analytics_lab.messages import BEAT, HEARTBEAT, LOST_AFTER_HEARTBEATS, Envelope
from dask_analytics_lab.store.queries import lost_after

from ..cluster_helpers import preloaded_scheduler
from ..factories import Cluster
from ..waiting import wait_for


def kind(envelope: Envelope) -> str:
    return envelope.__struct_config__.tag


def test_the_promise_leaves_a_margin_and_reads_lost_within_10_s():
    # Lost at most this long after its last word, so after its death.
    assert lost_after(HEARTBEAT) == LOST_AFTER_HEARTBEATS * HEARTBEAT <= 10.0
    # The thread beats before the promise is due: a write may wait this long before
    # readers call a live cluster lost.
    assert lost_after(HEARTBEAT) - BEAT >= 5.0


class SlowSink:
    """A store whose first write hangs until `release` is set (a store that stalled),
    and that notes when each write began and returned, by its wall clock."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.writing = threading.Event()
        self.writes: list[tuple[float, float, list[Envelope]]] = []

    def write(self, batch: list[Envelope]) -> int:
        began = time.time()
        self.writing.set()
        self.release.wait(60)
        self.writes.append((began, time.time(), list(batch)))
        return len(batch)

    def close(self) -> None:
        pass


def test_every_write_carries_a_heartbeat_made_as_it_starts():
    """A backlog that built up while the store stalled holds messages made long ago: each
    batch of it also says the scheduler lives now, not when those were made."""
    sink = SlowSink()
    c = Cluster()
    shipper = Shipper(
        lambda: sink,
        max_messages=100_000,
        heartbeat=lambda: messages.make(c.id, 0, "heartbeat", time.time(), {}),
    )
    try:
        shipper.put(c.sample())
        assert sink.writing.wait(30)
        for _ in range(1200):  # three batches' worth, queued behind the stalled write
            shipper.put(c.sample())
        made = time.time()  # every sample above was made before this
        sink.release.set()
        assert shipper.flush(60)
    finally:
        shipper.close()
    assert len(sink.writes) >= 3
    returned = None
    for began, done, batch in sink.writes:
        (beat,) = [m for m in batch if kind(m) == "heartbeat"]
        assert beat is batch[-1] and beat.time <= began
        if returned is not None:
            # Made after the write before it returned: as this one started.
            assert beat.time >= returned
            assert beat.time >= made
        returned = done
    # Written, not queued: the buffer holds no heartbeat for a full buffer to drop.
    assert sum(kind(m) == "cluster_sample" for _, _, b in sink.writes for m in b) == 1201


def test_an_idle_shipper_writes_a_heartbeat_alone():
    sink = SlowSink()
    sink.release.set()
    c = Cluster()
    shipper = Shipper(
        lambda: sink, heartbeat=lambda: messages.make(c.id, 0, "heartbeat", time.time(), {})
    )
    try:
        shipper.put(c.sample())
        wait_for(lambda: len(sink.writes) >= 3, what="two heartbeats of the idle shipper")
    finally:
        shipper.close()
    assert [[kind(m) for m in batch] for _, _, batch in sink.writes[:3]] == [
        ["cluster_sample", "heartbeat"],
        ["heartbeat"],
        ["heartbeat"],
    ]


def block(where: str, seconds: float) -> None:
    """Hold the scheduler's event loop (and the GIL, but for the interpreter's switches)."""
    Path(where).touch()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_scheduler_whose_loop_is_blocked_stays_live(tmp_path, sqlite_url):
    """Longer than the rule's silence: its writer thread goes on beating."""
    marker = tmp_path / "blocked"
    seconds = lost_after(HEARTBEAT) + 3
    with preloaded_scheduler(tmp_path, sqlite_url) as (sched, scheduler_file):
        with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            assert client.submit(sum, [1, 2], pure=False).result() == 3
            cluster_id = dal.flush(client)["cluster_id"]
            blocker = threading.Thread(
                target=client.run_on_scheduler, args=(block, str(marker), seconds)
            )
            blocker.start()
            wait_for(marker.exists, what="the scheduler's loop to block")
            blocked_at = marker.stat().st_mtime
            seen = []
            while blocker.is_alive():
                row = dal.get_cluster(cluster_id, store=sqlite_url)
                seen.append((row["status"], row["last_seen"]))
                time.sleep(0.25)
            blocker.join()
    assert seen and {status for status, _ in seen} == {"live"}
    # Heard from while its loop was held: its writer thread's heartbeats.
    assert max(last for _, last in seen) > blocked_at
