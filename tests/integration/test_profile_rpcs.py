"""Issue 19, item 3: profile fetches are flat in prefixes.

Real LocalClusters, real worker profiles.  What workers are asked is counted where it
arrives, in each worker's comm handlers (`run`, and Dask's per-prefix `profile`), not
by the collector's own counter alone: a fetch is one RPC per worker whatever the
number of prefixes, each prefix's profile still holds only its own frames, and runs
back to back still count each of Dask's samples once.
"""

from __future__ import annotations

import time
import types
from typing import Any

import dask
import pytest
from distributed.protocol.pickle import loads

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.profiles import SLACK

from ..cluster_helpers import FAST, recorded_cluster


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _work(x: int, seconds: float = 0.08) -> int:
    _spin(seconds)
    return x


def _named(name: str) -> Any:
    """_work under its own name, so that its frames (and its tasks' prefix) are its own;
    a module attribute, so that process workers unpickle it by reference."""
    fn = types.FunctionType(
        _work.__code__.replace(co_name=name), globals(), name, _work.__defaults__
    )
    fn.__qualname__ = name
    globals()[name] = fn
    return fn


WORK = [_named(f"p{i:02d}_work") for i in range(30)]
NAMES = {fn.__name__ for fn in WORK}

# (worker address, op, what was asked) of every `run` and `profile` call a worker got,
# in the process the worker runs in.
_CALLS: list[tuple[str, str, str]] = []
# (worker address, (starts, stop)) of each prefix_trees call.
_WINDOWS: list[tuple[str, tuple[dict[str, float], float]]] = []


def _count_calls(dask_worker: Any = None) -> None:
    w = dask_worker
    run, prof = w.handlers["run"], w.handlers["profile"]

    async def counted_run(comm: Any, **msg: Any) -> Any:
        _CALLS.append((w.address, "run", loads(msg["function"]).__name__))
        if _CALLS[-1][2] == "prefix_trees":
            _WINDOWS.append((w.address, loads(msg["args"])))
        return await run(comm, **msg)

    async def counted_profile(**msg: Any) -> Any:
        _CALLS.append((w.address, "profile", str(msg.get("key"))))
        return await prof(**msg)

    w.handlers["run"], w.handlers["profile"] = counted_run, counted_profile


def _calls(dask_worker: Any = None) -> list[tuple[str, str, str]]:
    return [c for c in _CALLS if c[0] == dask_worker.address]


def _dask_trees(prefixes: list[str], dask_worker: Any = None) -> dict[str, list[dict]]:
    """Every tree of each prefix the worker holds: its chunks and the cycle in progress."""
    out: dict[str, list[dict]] = {p: [] for p in prefixes}
    for _, trees in dask_worker.profile_keys_history:
        for p in prefixes:
            if p in trees:
                out[p].append(trees[p])
    for p in prefixes:
        tree = dask_worker.profile_keys.get(p)
        if tree is not None:
            out[p].append(tree)
    return out


def _dask_counts(prefixes: list[str], dask_worker: Any = None) -> dict[str, int]:
    """Every sample the worker took of each prefix."""
    return {
        p: sum(t["count"] for t in trees) for p, trees in _dask_trees(prefixes, dask_worker).items()
    }


def frames(tree: dict) -> set[str]:
    out, stack = set(), [tree]
    while stack:
        node = stack.pop()
        out.add(node.get("description", {}).get("name", ""))
        stack.extend(node.get("children", {}).values())
    return out


def _own_frames_only(trees: dict[str, dict], dask_trees: list[dict[str, list[dict]]]) -> None:
    """Each stored prefix profile holds the functions Dask's own trees of that prefix hold:
    its own, never another prefix's.  A sample may catch the thread just outside the task's
    function (in Dask's code around it: rare, on a loaded machine), so a prefix can have
    samples and no frame of its function; most prefixes do have it."""
    for name, tree in trees.items():
        seen = {f for ts in dask_trees for t in ts[name] for f in frames(t)} & NAMES
        assert seen <= {name}, (name, seen)
        assert frames(tree) & NAMES == seen, name
    sampled = [name for name, tree in trees.items() if tree["count"]]
    assert 2 * sum(name in frames(trees[name]) for name in sampled) >= len(sampled), sampled


def _in_process(client: Any) -> list[Any]:
    workers = list(client.cluster.workers.values())
    for w in workers:
        _count_calls(w)
    return workers


def _per_worker(calls: dict[str, list], op: str, what: str | None = None) -> dict[str, int]:
    return {a: sum(1 for _, o, w in c if o == op and what in (None, w)) for a, c in calls.items()}


def _comps(cluster_id: str, store: str) -> list[dict]:
    return sorted(dal.list_computations(cluster_id, store=store), key=lambda c: c["start"])


@pytest.fixture(autouse=True)
def _clean():
    _CALLS.clear()
    _WINDOWS.clear()
    yield
    _CALLS.clear()
    _WINDOWS.clear()
    close_readers()


def test_a_fetch_is_one_rpc_per_worker_at_30_prefixes(tmp_path):
    store = str(tmp_path / "analytics.db")
    with recorded_cluster(store, n_workers=3) as (client, info):
        workers = _in_process(client)
        parts = [dask.delayed(fn)(i) for i, fn in enumerate(WORK)]
        assert sum(client.compute(parts, sync=True)) == sum(range(30))
        flushed = dal.flush(client, timeout=60)
        assert flushed["flushed"]
        calls = {w.address: _calls(w) for w in workers}
        dask_trees = [_dask_trees(sorted(NAMES), w) for w in workers]
        dask_counts = [_dask_counts(sorted(NAMES), w) for w in workers]
    assert _per_worker(calls, "profile") == {w.address: 0 for w in workers}
    fetches = flushed["profiles_fetched"]
    assert fetches >= 1
    # Every run call a worker got is a fetch, and each fetch asked each worker once.
    assert (
        _per_worker(calls, "run")
        == _per_worker(calls, "run", "prefix_trees")
        == {w.address: fetches for w in workers}
    )
    assert flushed["profile_rpcs"] == 3 * fetches
    (comp,) = _comps(info["cluster_id"], store)
    trees = {
        name: dal.get_profile(comp["computation_id"], prefix=name, store=store)
        for name in sorted(NAMES)
    }
    # Every sample Dask took, each in its own prefix's profile, beside none of the others' frames.
    assert {name: tree["count"] for name, tree in trees.items()} == {
        name: sum(c[name] for c in dask_counts) for name in trees
    }
    assert sum(tree["count"] for tree in trees.values())
    _own_frames_only(trees, dask_trees)


def test_no_live_fetch_while_a_computation_is_younger_than_a_cycle(tmp_path, monkeypatch):
    """Even with a live fetch due at every tick: while it is younger than a profile cycle
    its samples are in the workers' cycle in progress, and its final fetch follows."""
    monkeypatch.setattr("dask_analytics_lab.collect.ticks.LIVE_EVERY", 0.0)
    store = str(tmp_path / "analytics.db")
    with recorded_cluster(store) as (client, info):
        workers = _in_process(client)
        assert client.compute([dask.delayed(WORK[0])(i, 0.1) for i in range(2)], sync=True) == [
            0,
            1,
        ]
        flushed = dal.flush(client, timeout=60)
        windows = {w.address: [a for addr, a in _WINDOWS if addr == w.address] for w in workers}
    (comp,) = _comps(info["cluster_id"], store)
    # distributed.worker.profile.cycle, and the margin the collector adds
    cycle = dask.utils.parse_timedelta(FAST["distributed.worker.profile.cycle"]) + 0.1
    for asked in windows.values():
        *live, (_, final_stop) = asked
        # The final window reaches SLACK cycles past the stop (a chunk's stamp can be early).
        assert abs(final_stop - (comp["stop"] + SLACK * cycle)) < 1e-3
        assert all(stop - min(starts.values()) >= cycle for starts, stop in live), live
    if comp["stop"] - comp["start"] < cycle - 0.1:  # as it nearly always is: 2 x 0.1 s of work
        assert flushed["profiles_fetched"] == 1
        assert {a: len(asked) for a, asked in windows.items()} == {w.address: 1 for w in workers}
    assert "p00_work" in frames(dal.get_profile(comp["computation_id"], store=store))


def test_back_to_back_runs_on_process_workers_count_each_sample_once(tmp_path):
    store = str(tmp_path / "analytics.db")
    first, again, other = WORK[:4], WORK[:4], WORK[4:6]
    prefixes = sorted(fn.__name__ for fn in WORK[:6])
    with recorded_cluster(store, processes=True) as (client, info):
        client.run(_count_calls)
        for n, fns in enumerate((first, again, other)):
            parts = [dask.delayed(fn)(100 * n + i, 0.15) for i, fn in enumerate(fns * 2)]
            client.compute(parts, sync=True)
        flushed = dal.flush(client, timeout=60)
        assert flushed["flushed"]
        calls = client.run(_calls)
        dask_counts = client.run(_dask_counts, prefixes)
    assert _per_worker(calls, "profile") == dict.fromkeys(calls, 0)
    assert _per_worker(calls, "run", "prefix_trees") == dict.fromkeys(
        calls, flushed["profiles_fetched"]
    )
    assert flushed["profile_rpcs"] == 2 * flushed["profiles_fetched"]

    comps = _comps(info["cluster_id"], store)
    assert len(comps) == 3
    stored = dict.fromkeys(prefixes, 0)
    for comp, fns in zip(comps, (first, again, other)):
        for fn in fns:
            tree = dal.get_profile(comp["computation_id"], prefix=fn.__name__, store=store)
            stored[fn.__name__] += tree["count"]
            assert frames(tree) & NAMES <= {fn.__name__}, (fn.__name__, frames(tree) & NAMES)
    # Each of Dask's samples in exactly one computation's profile: none twice, none lost.
    assert stored == {p: sum(c[p] for c in dask_counts.values()) for p in prefixes}
    # The re-run's samples in the chunk that straddles both runs went to the first run.
    names = [frames(dal.get_profile(c["computation_id"], store=store)) & NAMES for c in comps]
    assert names[0] == {fn.__name__ for fn in first} and names[2] == {fn.__name__ for fn in other}
    assert names[1] <= {fn.__name__ for fn in again}
    assert all(stored.values())


def test_a_worker_that_blocks_run_is_asked_a_prefix_at_a_time(tmp_path):
    """`distributed.worker.blocked-handlers: [run]`: profiles as Dask's handler gives them."""
    store = str(tmp_path / "analytics.db")
    config = {"distributed.worker.blocked-handlers": ["run"]}
    with recorded_cluster(store, config=config) as (client, info):
        workers = _in_process(client)
        client.compute([dask.delayed(fn)(i) for i, fn in enumerate(WORK[:3])], sync=True)
        flushed = dal.flush(client, timeout=60)
        assert flushed["flushed"]
        calls = {w.address: _calls(w) for w in workers}
        names = [fn.__name__ for fn in WORK[:3]]
        dask_trees = [_dask_trees(names, dask_worker=w) for w in workers]
        dask_counts = [_dask_counts(names, dask_worker=w) for w in workers]
    fetches = flushed["profiles_fetched"]
    assert fetches >= 1
    # Asked once to run (refused before any handler), then 3 prefixes a fetch.
    assert _per_worker(calls, "run") == {w.address: 0 for w in workers}
    assert _per_worker(calls, "profile") == {w.address: 3 * fetches for w in workers}
    assert flushed["profile_rpcs"] == 2 * (1 + 3 * fetches)
    (comp,) = _comps(info["cluster_id"], store)
    trees = {
        name: dal.get_profile(comp["computation_id"], prefix=name, store=store) for name in names
    }
    # Every sample Dask took, in its own prefix's profile.  On a loaded machine Dask's
    # sampler may miss an 80 ms task altogether: then there is nothing to store for it.
    assert {name: tree["count"] for name, tree in trees.items()} == {
        name: sum(c[name] for c in dask_counts) for name in names
    }
    assert sum(tree["count"] for tree in trees.values())
    _own_frames_only(trees, dask_trees)


def _tree(name: str, count: int) -> dict:
    leaf = {
        "count": count,
        "children": {},
        "identifier": name,
        "description": {"filename": "f.py", "name": name, "line_number": 1, "line": ""},
    }
    return {
        "count": count,
        "children": {name: leaf},
        "identifier": "root",
        "description": {"filename": "", "name": "", "line_number": 0, "line": ""},
    }


def test_prefix_trees_takes_each_prefixs_window_and_only_reads():
    """The worker side alone, on a worker's history: chunks stamped with their cycle's end."""
    from collections import defaultdict, deque

    from distributed import profile

    from dask_analytics_lab.collect.profile_window import prefix_trees

    worker = types.SimpleNamespace(
        profile_keys_history=deque(
            [
                (10.0, {"a": _tree("a", 1)}),
                (11.0, {"a": _tree("a", 2), "b": _tree("b", 4)}),
                (12.0, {"b": _tree("b", 8)}),
                (13.0, {"a": _tree("a", 16)}),
            ]
        ),
        profile_keys=defaultdict(profile.create, {"a": _tree("a", 32)}),
        scheduler_delay=0.0,
    )
    # a from 10.5: the chunks ending at 11 and 12 (12 holds 11.5); b's from 11.
    assert {
        p: t["count"]
        for p, t in prefix_trees({"a": 10.5, "b": 10.5, "c": 0.0}, 11.5, worker).items()
    } == {"a": 2, "b": 12}
    assert prefix_trees({"b": 11.5}, 11.5, worker)["b"]["count"] == 8
    # No chunk has ended since `stop`: the cycle in progress too.
    assert prefix_trees({"a": 12.5}, 13.5, worker)["a"]["count"] == 48
    assert prefix_trees({"a": 0.0}, None, worker)["a"]["count"] == 51
    assert prefix_trees({"a": 12.5}, 12.5, worker)["a"]["count"] == 16
    assert prefix_trees({}, 13.0, worker) == {}
    # Nothing added to the worker's defaultdict, and what comes back is not its own.
    assert prefix_trees({"z": 0.0}, None, worker) == {} and set(worker.profile_keys) == {"a"}
    prefix_trees({"a": 12.5}, None, worker)["a"]["children"]["a"]["count"] = 0
    assert worker.profile_keys["a"]["children"]["a"]["count"] == 32
