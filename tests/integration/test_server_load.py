"""Load: 20 simulated clusters post to one server at once for a bounded time, retrying
and re-sending batches as a real plugin does; afterwards every message is stored once.

The issue asks for a minute: `DAL_LOAD_SECONDS=60` (benchmarks/server_load.py runs that);
the suite runs a few seconds per backend.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field

from dask_analytics_lab.messages import MessageError
from dask_analytics_lab.remote import HttpSink
from dask_analytics_lab.store import open_store

from ..server_helpers import Cluster, ServerProcess, free_port, group, make_tokens, tree

SECONDS = float(os.environ.get("DAL_LOAD_SECONDS", "4"))
CLUSTERS = 20


@dataclass
class Sent:
    cluster_id: str = ""
    distinct: int = 0  # messages made (each seq once)
    stored: int = 0  # what the server said it newly stored
    posts: int = 0
    resent: int = 0  # batches sent again (as after a lost answer)
    samples: int = 0
    events: int = 0
    computations: set = field(default_factory=set)
    errors: list = field(default_factory=list)


def simulate_cluster(url: str, token: str, until: float, seed: int) -> Sent:
    """One scheduler's traffic: samples, computations with groups, errors, events, code."""
    rng = random.Random(seed)
    c = Cluster(account="load")
    sink = HttpSink(url, token=token, timeout=30)
    out = Sent(cluster_id=c.id)
    previous: list[dict] = []

    def post(batch: list[dict]) -> int:
        for attempt in range(50):  # the shipper retries connection trouble the same way
            try:
                out.posts += 1
                return sink.write(batch)
            except MessageError as e:
                out.errors.append(str(e))
                return 0
            except OSError:
                time.sleep(0.05 * (attempt + 1))
        out.errors.append("gave up after 50 tries")
        return 0

    batch = [c.cluster(name=f"load-{seed}"), c.code(text=f"work({seed})")]
    n_comp = 0
    while True:
        for _ in range(rng.randint(5, 40)):
            roll = rng.random()
            if roll < 0.4:
                batch.append(c.sample(n_workers=rng.randint(1, 50)))
                out.samples += 1
            elif roll < 0.7:
                n_comp += 1
                comp = f"{c.id}-comp-{n_comp}"
                groups = [
                    group(f"g{k}-{n_comp}", n_tasks=rng.randint(1, 1000))
                    for k in range(rng.randint(1, 8))
                ]
                batch.append(c.computation(comp, state="running", groups=groups))
                batch.append(c.computation(comp, state="finished", groups=groups[:1]))
                out.computations.add(comp)
            elif roll < 0.8:
                batch.append(
                    c.exception(
                        f"{c.id}-comp-{max(n_comp, 1)}",
                        "g0",
                        h=f"e{rng.randint(0, 3)}",
                        count=rng.randint(1, 100),
                    )
                )
            elif roll < 0.95:
                batch.append(c.event(topic="load", msg={"i": rng.randint(0, 10**6)}))
                out.events += 1
            else:
                batch.append(c.profile(None, tree("main", f"f{rng.randint(0, 9)}")))
        out.distinct += len(batch)
        out.stored += post(batch)
        if previous and rng.random() < 0.15:  # an answer lost on the way: the plugin sends again
            out.resent += 1
            out.stored += post(previous + batch[: len(batch) // 2])
        previous = batch
        if time.time() >= until:
            break
        batch = []
    out.distinct += 1
    out.stored += post([c.stop()])
    return out


def run_load(url: str, tokens: list[str], seconds: float) -> tuple[list[Sent], float]:
    """Every simulated cluster in its own thread; returns their tallies and the wall time."""
    results: list[Sent | None] = [None] * len(tokens)
    until = time.time() + seconds

    def one(i: int) -> None:
        results[i] = simulate_cluster(url, tokens[i], until, seed=i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(tokens))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - t0  # type: ignore[return-value]


def check_stored_once(store_url: str, results: list[Sent]) -> None:
    store = open_store(store_url)
    try:
        assert not [r.errors for r in results if r.errors]
        assert sum(r.resent for r in results) > 0  # duplicates really were sent
        # Every message stored once: the server counted each as new exactly one time...
        assert [r.stored for r in results] == [r.distinct for r in results]
        # ... and the rows are there, none twice.
        for r in results:
            assert len(store.list_cluster_samples(r.cluster_id, limit=None)) == r.samples
            assert (
                len(store.list_events(cluster_id=r.cluster_id, topic="load", limit=None))
                == r.events
            )
            comps = store.list_computations(cluster_id=r.cluster_id, limit=None)
            assert {c["computation_id"] for c in comps} == r.computations
            assert all(c["state"] == "finished" for c in comps)
            assert store.get_cluster(r.cluster_id)["stopped"] is not None
    finally:
        store.close()


def test_twenty_clusters_post_at_once(store_url):
    tokens = make_tokens(store_url, CLUSTERS)
    port = free_port()
    with ServerProcess(store_url, port):
        results, wall = run_load(f"http://127.0.0.1:{port}", tokens, SECONDS)
    check_stored_once(store_url, results)
    total = sum(r.distinct for r in results)
    print(
        f"\n{store_url.split(':')[0]}: {total} messages from {CLUSTERS} clusters in {wall:.1f} s "
        f"= {total / wall:.0f} messages/s"
    )
