"""Issue 14, part B: the scheduler's store connections are opened when the plugin starts
and their number stays the same for the scheduler's life (distributed's
test_file_descriptors_dont_leak counts a scheduler's descriptors around a worker that
comes and goes).  The scheduler runs in this process, so /proc/self/fd is its table.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab import messages
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.shipper import Shipper
from dask_analytics_lab.collect.sinks import open_sink

from ..cluster_helpers import FAST
from ..waiting import wait_for

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)"
)


def open_files(folder: Path) -> Counter:
    """Descriptors of this process open on files under `folder`, by path."""
    found: Counter = Counter()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith(str(folder) + os.sep):
            found[target] += 1
    return found


def n_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fd_kinds() -> Counter:
    """This process's descriptors by what they are open on (a file's path; "socket",
    "pipe" and the like without their inode numbers): what a leak was made of."""
    found: Counter = Counter()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        found[target.split(":[")[0]] += 1
    return found


def cluster_message(seq: int) -> dict:
    return messages.make(
        "fd-test", seq, "event", time.time(), {"topic": "t", "time": time.time(), "msg": seq}
    )


def test_shipper_opens_the_store_before_anything_is_written(tmp_path):
    url = "sqlite:///" + str(tmp_path / "analytics.db")
    shipper = Shipper(lambda: open_sink(url))
    try:
        opened = open_files(tmp_path)
        # The database and its WAL files, once each: one connection, open already.
        assert sorted(p.rsplit("/", 1)[1] for p in opened) == [
            "analytics.db",
            "analytics.db-shm",
            "analytics.db-wal",
        ]
        assert set(opened.values()) == {1}
        for i in range(1, 2001):  # several batches
            shipper.put(cluster_message(i))
        assert shipper.flush(30) and shipper.stored == 2000
        assert open_files(tmp_path) == opened
    finally:
        shipper.close()
    assert open_files(tmp_path) == Counter()


def test_a_shipper_whose_owner_is_gone_writes_what_it_holds_and_ends(tmp_path):
    # A scheduler stopped with Server.stop() never closes its plugins: its event loop
    # closes, and the shipper's thread must not outlive it (distributed's tests count
    # leaked threads: test_nanny.py::test_scheduler_file).
    url = "sqlite:///" + str(tmp_path / "analytics.db")
    owner_running = [True]
    shipper = Shipper(lambda: open_sink(url), alive=lambda: owner_running[0])
    for i in range(1, 11):
        shipper.put(cluster_message(i))
    assert shipper.flush(30) and shipper.stored == 10
    owner_running[0] = False
    wait_for(lambda: not shipper._thread.is_alive(), timeout=30, what="the shipper's thread to end")
    assert open_files(tmp_path) == Counter()  # the store is closed too


def slow_inc(x):
    time.sleep(0.05)  # the work: long enough that the tasks spread over the workers
    return x + 1


def fail(x):
    raise ValueError(f"bad {x}")


def test_scheduler_descriptors_stay_constant_while_workers_come_and_go(tmp_path):
    folder = tmp_path / "store"
    store = str(folder / "analytics.db")
    try:
        with dask.config.set(FAST):
            with (
                LocalCluster(
                    n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0"
                ) as cluster,
                Client(cluster) as client,
            ):
                info = dal.register(client, store=store)
                # The plugin's writer has its connection open already (register() also
                # opened a reader here); from now on nothing opens more on the store.
                store_files = open_files(folder)
                assert store_files and all(n >= 1 for n in store_files.values())

                def round_of_work(i: int) -> None:
                    assert sum(client.gather(client.map(slow_inc, range(20), pure=False))) == 210
                    client.gather(client.map(fail, range(3), pure=False), errors="skip")
                    cluster.scale(2)
                    client.wait_for_workers(2, timeout=60)
                    assert client.submit(slow_inc, i, pure=False).result() == i + 1
                    cluster.scale(1)
                    wait_for(
                        lambda: len(cluster.scheduler.workers) == 1, what="the worker to leave"
                    )

                def settled_fds() -> int:
                    # distributed keeps idle comms pooled (scheduler, client and nannies,
                    # all in this process), to whichever worker stayed: close them, so
                    # that what is counted is what is held, not what the pool happened
                    # to keep.
                    async def collect() -> None:
                        for pool in [
                            cluster.scheduler.rpc,
                            client.rpc,
                            *(n.rpc for n in cluster.workers.values()),
                        ]:
                            pool.collect()

                    client.sync(collect)
                    return n_fds()

                round_of_work(0)
                assert open_files(folder) == store_files
                # The closes run on the loop: the count once two readings in a row agree.
                counts = [settled_fds()]

                def settled() -> int | None:
                    counts.append(settled_fds())
                    return counts[-1] if counts[-1] == counts[-2] else None

                before = wait_for(settled, what="the descriptor count to settle")
                kinds_before = fd_kinds()
                for i in range(1, 4):
                    round_of_work(i)
                assert dal.flush(client)["flushed"]
                assert dal.status(client)["stored"] > 0

                assert open_files(folder) == store_files
                # Everything else a worker brought (comms) goes with it.
                try:
                    wait_for(lambda: settled_fds() <= before, what="the descriptors back")
                except AssertionError:
                    pytest.fail(
                        f"descriptors not back to {before} (now {n_fds()}); open now and not"
                        f" before: {dict(fd_kinds() - kinds_before)}; closed since:"
                        f" {dict(kinds_before - fd_kinds())}",
                        pytrace=False,
                    )
        comps = dal.list_computations(info["cluster_id"], store=store)
        assert len(comps) >= 4
    finally:
        close_readers()
