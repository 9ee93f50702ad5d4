"""Stores holding what the views must show as it is (issue 8): a stopped cluster and the
size it reached, a cluster whose scheduler died without a word (lost), a computation
whose tasks partly erred and partly never ran, and one failure raised by 500 tasks.

Messages go through the store's own ingest (the contract in messages.py), with times
relative to now so the store's lifecycle rule sees the clusters as they should be.
(Holds no tests: the browser tests import it.)
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from dask_analytics_lab.messages import fingerprint, make
from dask_analytics_lab.store import open_store

from .factories import group, tree

GiB = 2**30


@dataclass
class Scenario:
    now: float
    stopped: dict = field(
        default_factory=dict
    )  # cluster_id, name, started, ended, peaks, computation ids
    lost: dict = field(default_factory=dict)


class _Maker:
    def __init__(self, cluster_id: str):
        self.id = cluster_id
        self.seq = itertools.count()

    def msg(self, kind: str, t: float, data: dict) -> dict:
        return make(self.id, next(self.seq), kind, t, data)

    def cluster(self, t: float, name: str, started: float, interval: float) -> dict:
        return self.msg(
            "cluster",
            t,
            {
                "name": name,
                "address": "tcp://10.1.2.3:8786",
                "user": "ann",
                "account": "default",
                "started": started,
                "price_per_core_hour": 0.05,
                "versions": {"python": "3.11.7", "dask": "2026.8.0", "distributed": "2026.8.0"},
                "platform": {"arch": "x86_64", "os": "Linux", "python": "3.11.7"},
                # A long interval: a reader with a rule of its own ("no news for 10 intervals")
                # would still call the lost cluster live; only the store's rule says lost.
                "settings": {
                    "interval": interval,
                    "code_transmit": True,
                    "profile_transmit": True,
                    "events_allow": [],
                },
            },
        )

    def sample(self, t: float, workers: int, threads: int, memory: int) -> dict:
        return self.msg(
            "cluster_sample",
            t,
            {
                "n_workers": workers,
                "n_threads": threads,
                "memory_used": memory // 4,
                "memory_total": memory,
                "processing": 0,
                "worker_seconds": 100.0,
                "core_seconds": 400.0,
                "cost": 0.42,
                "idle_since": None,
                "last_activity": t,
                "dropped_messages": 0,
            },
        )


def _group(
    name: str,
    prefix: str,
    n: int,
    done: int,
    erred: int = 0,
    not_run: int = 0,
    *,
    start: float,
    deps: list[str] | None = None,
    states: dict | None = None,
) -> dict:
    return {
        "name": name,
        "prefix": prefix,
        "n_tasks": n,
        "n_done": done,
        "n_erred": erred,
        "n_not_run": not_run,
        # What Dask's TaskGroup says once its tasks are forgotten: every task "forgotten",
        # finished or not.  The views must count from n_done / n_erred / n_not_run.
        "states": states if states is not None else {"forgotten": n},
        "compute": 0.02 * done,
        "transfer": 0.1,
        "disk_read": 0.0,
        "disk_write": 0.0,
        "nbytes": 8000 * done,
        "start": start,
        "stop": start + 3.0,
        "dependencies": deps or [],
    }


KEYERROR_EXAMPLES = ["KeyError('key-17')", "KeyError('key-251')", "KeyError('key-498')"]
KEYERROR_TRACEBACK = (
    '  File "/home/ann/etl.py", line 42, in parse\n    return lookup[record["key"]]\n'
)


def build(url: str) -> Scenario:
    """Fill the store at `url` (a SQLite URL) and say what it holds."""
    now = time.time()
    sc = Scenario(now=now)

    # --- a cluster that stopped an hour ago, after an hour with 4 workers --------------
    st = _Maker("tcp://10.1.2.3:8786-stopped-etl")
    started, ended = now - 7200.0, now - 3600.0
    c1, c2, c3 = "comp-etl-groupby", "comp-etl-parse", "comp-etl-early"
    msgs = [
        st.cluster(started, "etl-nightly", started, 1.0),
        st.sample(started + 10, 2, 8, 32 * GiB),
        st.sample(started + 60, 4, 16, 64 * GiB),  # the peak
        st.sample(ended - 5, 0, 0, 0),  # workers gone before the scheduler closed
        st.msg(
            "computation",
            started + 100,
            {
                "id": c3,
                "start": started + 90,
                "stop": started + 95,
                "state": "finished",
                "label": "from_pandas → sum",
                "code_line": "df.x.sum().compute()",
                "code": [],
                "code_frames": [],
                "totals": {
                    "n_tasks": 8,
                    "n_groups": 1,
                    "n_done": 8,
                    "n_erred": 0,
                    "n_not_run": 0,
                    "compute": 0.16,
                    "transfer": 0.0,
                    "disk": 0.0,
                    "nbytes": 64,
                },
                "groups": [_group("sum-9f3a2b1c0d", "sum", 8, 8, start=started + 90)],
            },
        ),
        st.msg(
            "computation",
            started + 300,
            {
                "id": c1,
                "start": started + 200,
                "stop": started + 260,
                "state": "finished",
                "label": "read_parquet → groupby-agg",
                "code_line": 'df.groupby("k").x.mean().compute()',
                "fingerprint": fingerprint(
                    'df.groupby("k").x.mean().compute()', ["read_parquet", "groupby-agg"]
                ),
                "code": [],
                "code_frames": [],
                "totals": {
                    "n_tasks": 65,
                    "n_groups": 2,
                    "n_done": 65,
                    "n_erred": 0,
                    "n_not_run": 0,
                    "compute": 1.3,
                    "transfer": 0.2,
                    "disk": 0.0,
                    "nbytes": 520000,
                },
                "groups": [
                    _group("read_parquet-1a2b3c4d5e", "read_parquet", 64, 64, start=started + 200),
                    _group(
                        "groupby-agg-6f7a8b9c0d",
                        "groupby-agg",
                        1,
                        1,
                        start=started + 230,
                        deps=["read_parquet-1a2b3c4d5e"],
                    ),
                ],
            },
        ),
        # 1,000 records loaded; parsing raised on 500, 100 were never run (their input
        # had failed), 400 finished; what came after parsing never ran at all.
        st.msg(
            "computation",
            started + 900,
            {
                "id": c2,
                "start": started + 800,
                "stop": started + 812.5,
                "state": "erred",
                "label": "load → parse",
                "code_line": "client.gather(client.map(parse, records))",
                "code": [],
                "code_frames": [],
                "totals": {
                    "n_tasks": 2100,
                    "n_groups": 3,
                    "n_done": 1400,
                    "n_erred": 500,
                    "n_not_run": 200,
                    "compute": 30.0,
                    "transfer": 1.0,
                    "disk": 0.0,
                    "nbytes": 8_000_000,
                },
                "groups": [
                    _group("load-0a1b2c3d4e", "load", 1000, 1000, start=started + 800),
                    _group(
                        "parse-5f6a7b8c9d",
                        "parse",
                        1000,
                        400,
                        500,
                        100,
                        start=started + 801,
                        deps=["load-0a1b2c3d4e"],
                        states={"forgotten": 900, "erred": 100},
                    ),
                    _group(
                        "store-1c2d3e4f5a",
                        "store",
                        100,
                        0,
                        0,
                        100,
                        start=started + 802,
                        deps=["parse-5f6a7b8c9d"],
                    ),
                ],
            },
        ),
        st.msg(
            "exception",
            started + 900,
            {
                "computation_id": c2,
                "group": "parse-5f6a7b8c9d",
                "hash": "keyerror-etl-42",
                "exc_type": "KeyError",
                "location": "/home/ann/etl.py:42 in parse",
                "pattern": "KeyError('key-…')",
                "examples": KEYERROR_EXAMPLES,
                "workers": ["tcp://10.1.2.4:40001", "tcp://10.1.2.5:40001"],
                "exception_text": KEYERROR_EXAMPLES[0],
                "traceback_text": KEYERROR_TRACEBACK,
                "key": "('parse-5f6a7b8c9d', 17)",
                "count": 500,
                "first_time": started + 801,
                "last_time": started + 812,
            },
        ),
        st.msg(
            "cluster_stop", ended, {"stopped": ended, "reason": "closed", "idle_shutdown": False}
        ),
    ]
    sc.stopped = {
        "cluster_id": st.id,
        "name": "etl-nightly",
        "started": started,
        "ended": ended,
        "peak_workers": 4,
        "peak_threads": 16,
        "peak_memory": 64 * GiB,
        "groupby": c1,
        "parse": c2,
        "early": c3,
    }

    # --- a cluster whose scheduler died an hour into its work: nothing since --------------
    lo = _Maker("tcp://10.9.8.7:8786-lost-kernel")
    started, last = now - 3800.0, now - 200.0  # silent for 200 s: more than 3 heartbeats
    c4 = "comp-lost-train"
    msgs += [
        lo.cluster(started, "crashed-kernel", started, 30.0),
        lo.sample(started + 5, 3, 6, 24 * GiB),
        lo.msg(
            "computation",
            started + 600,
            {
                "id": c4,
                "start": started + 500,
                "stop": None,
                "state": "running",
                "label": "random_sample → fit",
                "code_line": "model.fit(X).compute()",
                "code": [],
                "code_frames": [],
                "totals": {
                    "n_tasks": 10,
                    "n_groups": 1,
                    "n_done": 4,
                    "n_erred": 0,
                    "n_not_run": 0,
                    "compute": 2.0,
                    "transfer": 0.0,
                    "disk": 0.0,
                    "nbytes": 0,
                },
                "groups": [
                    _group(
                        "fit-0f1e2d3c4b",
                        "fit",
                        10,
                        4,
                        start=started + 500,
                        states={"memory": 4, "processing": 3, "waiting": 3},
                    )
                ],
            },
        ),
        lo.sample(last, 3, 6, 24 * GiB),
    ]
    sc.lost = {
        "cluster_id": lo.id,
        "name": "crashed-kernel",
        "started": started,
        "ended": last,
        "peak_workers": 3,
        "peak_threads": 6,
        "peak_memory": 24 * GiB,
        "train": c4,
    }

    store = open_store(url)
    try:
        store.ingest(msgs)
        rows = {r["cluster_id"]: r for r in store.list_clusters()}
    finally:
        store.close()
    # The store's rule must see them as the tests expect; say so plainly if it does not.
    assert rows[sc.stopped["cluster_id"]].get("status") == "stopped", rows[sc.stopped["cluster_id"]]
    assert rows[sc.lost["cluster_id"]].get("status") == "lost", rows[sc.lost["cluster_id"]]
    return sc


# A cluster name that is an HTML tag: the views must show it as text.
HOSTILE = '<img src=x onerror="window.__xss=1">'


def live_cluster(
    url: str,
    *,
    name: str = HOSTILE,
    cluster_id: str = "tcp://10.0.0.9:8786-live-now",
    computation: str = "comp-live-sum",
    user: str = "bob",
) -> str:
    """A live cluster started a minute ago (a long heartbeat interval keeps it live while
    the tests run), with one finished computation and a cluster-wide profile."""
    now = time.time()
    seq = itertools.count()

    def msg(kind: str, t: float, data: dict) -> dict:
        return make(cluster_id, next(seq), kind, t, data)

    msgs = [
        msg(
            "cluster",
            now - 60,
            {
                "name": name,
                "address": "tcp://10.0.0.9:8786",
                "user": user,
                "account": "default",
                "started": now - 60,
                "price_per_core_hour": 0.05,
                "versions": {"python": "3.11.7", "dask": "2026.8.0", "distributed": "2026.8.0"},
                "platform": {"arch": "x86_64", "os": "Linux", "python": "3.11.7"},
                "settings": {
                    "interval": 600.0,
                    "code_transmit": True,
                    "profile_transmit": True,
                    "events_allow": [],
                },
            },
        ),
        msg(
            "cluster_sample",
            now - 30,
            {
                "n_workers": 2,
                "n_threads": 4,
                "memory_used": 2**30,
                "memory_total": 2**33,
                "processing": 0,
                "worker_seconds": 60.0,
                "core_seconds": 120.0,
                "cost": 0.01,
                "idle_since": None,
                "last_activity": now - 30,
                "dropped_messages": 0,
            },
        ),
        msg(
            "computation",
            now - 20,
            {
                "id": computation,
                "start": now - 25,
                "stop": now - 20,
                "state": "finished",
                "label": "ones → sum",
                "code_line": "x.sum().compute()",
                "code": [],
                "code_frames": [],
                "totals": {
                    "n_tasks": 20,
                    "n_groups": 2,
                    "n_done": 20,
                    "n_erred": 0,
                    "n_not_run": 0,
                    "compute": 10.0,
                    "transfer": 0.1,
                    "disk": 0.0,
                    "nbytes": 160000,
                },
                "groups": [
                    group("ones-aaa", n_tasks=16),
                    group("sum-bbb", n_tasks=4, dependencies=["ones-aaa"]),
                ],
            },
        ),
        msg(
            "profile",
            now - 19,
            {"computation_id": computation, "tree": tree("main", "ones"), "count": 1},
        ),
    ]
    store = open_store(url)
    try:
        store.ingest(msgs)
    finally:
        store.close()
    return cluster_id
