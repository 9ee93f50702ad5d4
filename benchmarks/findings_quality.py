"""Can the findings be trusted?  (Issues 38 and 43.)

Runs, on real LocalClusters recording into a fresh SQLite store, scenarios built to have
one problem each (at least two per kind this machine can make; gpu-underused needs a
GPU: benchmarks/gpu_check.py) and healthy workloads of many shapes (arrays, dataframes,
bags, delayed, client.map, persist, long steady jobs), then asks `dal.explain` of each
and prints:

- recall per kind: the kind among the first two findings of its scenarios;
- false findings: healthy runs with a finding whose impact is over 10% of their wall
  time.  cpu-starved on a loaded machine is counted apart ("machine"): it is true there
  of every run, healthy or not;
- claimed against saved: for each scenario whose advice can be applied mechanically
  (split the straggler, batch the tiny tasks, unpin the work, cut the one task, use
  processes, stop the retried failures, work where the data is, reduce before moving,
  send DataFrames rather than Python objects, give workers more memory, make each task
  need less, free the cores), the same work with the advice applied runs right after
  (on a cluster of the shape the advice names, when it names one); saved = wall before
  - wall after (all of the wall before when that computation erred: nothing it did was
  kept, and the fixed run is needed anyway), against the finding's impact (the ratio
  should be within 1.5x either way).  slower-than-before and idle-cluster have none: their advice is to undo a
  change, and an idle timeout (cluster time, not wall time);
- computations whose findings together claim more than their wall time less their
  ideal time (CPU time over threads), which explain never allows.

    python benchmarks/findings_quality.py            # as the machine is
    python benchmarks/findings_quality.py --loaded   # two CPU burners per core throughout
    python benchmarks/findings_quality.py --only straggler,small-tasks
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.bag as db  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from dask import delayed  # noqa: E402
from distributed import Client, LocalCluster, wait  # noqa: E402

import dask_analytics_lab as dal  # noqa: E402
from dask_analytics_lab import config  # noqa: E402
from dask_analytics_lab.findings import stands_apart  # noqa: E402
from dask_analytics_lab.findings.record import read  # noqa: E402
from dask_analytics_lab.store import open_store  # noqa: E402
from tests.cluster_helpers import cores_taken  # noqa: E402  (the tests' busy machine)

CONFIG = {
    "analytics.interval": "100ms",
    "analytics.workers.interval": "100ms",
    "distributed.worker.profile.cycle": "250ms",
    # An idle cluster counts after 3 s here (5 minutes by default): the idle scenarios
    # wait that long, not minutes.
    "analytics.findings.idle-min": "3s",
}
SHARE = 0.10  # a healthy run's finding over this share of its wall time is false


# --- what the tasks do -------------------------------------------------------------
def spin(seconds: float, i: int = 0) -> int:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    return i


def nap(seconds: float, i: int = 0) -> int:
    time.sleep(seconds)
    return i


def inc(x: int) -> int:
    return x + 1


def incs(xs: list[int]) -> list[int]:
    return [x + 1 for x in xs]


def total(xs: list) -> Any:
    return sum(xs)


def fails(i: int) -> int:
    raise ValueError(f"bad input {i}")


# One folder for this run's worker processes too: they import this module afresh, and
# inherit the environment.
ATTEMPTS = os.environ.setdefault("DAL_QUALITY_ATTEMPTS", tempfile.mkdtemp(prefix="dal-attempts-"))


def attempt(name: str) -> int:
    """This attempt's number (1, 2, ...) at the task called `name`: counted in files, not
    in a global a pickled function would take along, nor one a killed worker loses."""
    n = 1
    while True:
        try:
            os.close(os.open(os.path.join(ATTEMPTS, f"{name}-{n}"), os.O_CREAT | os.O_EXCL))
            return n
        except FileExistsError:
            n += 1


def flaky(name: str, fails_first: int, seconds: float) -> str:
    """Fails its first `fails_first` attempts (a connection reset, as a flaky service
    does)."""
    n = attempt(name)
    spin(seconds)
    if n <= fails_first:
        raise ConnectionResetError(f"[Errno 104] Connection reset by peer ({n})")
    return name


def block(i: int, mib: int) -> np.ndarray:
    return np.arange(mib * 2**17, dtype="float64") * (i + 1.5)


def builds(i: int, mib: int, seconds: float) -> int:
    """Works `seconds`, then builds `mib` MiB page by page (the RSS a nanny watches)."""
    spin(seconds)
    big = bytearray(mib * 2**20)
    for at in range(0, len(big), 4096):
        big[at] = 1
    return len(big) + i


def outgrows(i: int, mib: int, seconds: float, name: str = "") -> int:
    """As `builds`, then holds what it built: a worker with less memory is killed
    meanwhile.  With `name`, only the first attempt does (the retry, on a fresh worker,
    fits)."""
    if name and attempt(name) > 1:
        return builds(i, 1, seconds)
    n = builds(i, mib, seconds)
    time.sleep(10)
    return n


def count(xs: list) -> int:
    return sum(len(x) if hasattr(x, "__len__") else int(x) for x in xs)


def objects(i: int, n: int) -> list:
    return [(j, str(j), {"k": i}) for j in range(n)]


def frame(i: int, n: int) -> pd.DataFrame:
    """What `objects` holds, as a DataFrame (the serialization finding's advice)."""
    return pd.DataFrame({"j": np.arange(n), "s": np.arange(n).astype(str), "k": i})


def job(client: Client, seconds: float) -> int:
    # One line makes every run: the runs share their fingerprint.
    return client.compute(delayed(total)([delayed(spin)(seconds, i) for i in range(4)])).result()


def mapped(client: Client, seconds: float) -> list:
    return client.gather(client.map(spin, [seconds] * 4, range(4), pure=False))  # one line


# --- scenarios -----------------------------------------------------------------------
Run = Callable[[Client], Any]


@dataclass
class Scenario:
    name: str
    kind: str | None  # None: a healthy workload
    run: Run
    fixed: Run | None = None  # the same work with the advice applied
    fixed_on: dict | None = None  # the advice is another cluster: its LocalCluster kwargs
    before: Run | None = None  # runs first, not looked at (earlier runs of the code)
    # Its fix frees cores a loaded run keeps busy (cpu-starved's): not run when loaded.
    fix_needs_quiet: bool = False


@dataclass
class Cluster:
    name: str
    kwargs: dict
    scenarios: list[Scenario]
    idle_after: bool = False  # sits idle past idle-min after its last computation
    config: dict = field(default_factory=dict)


def d_total(xs: list) -> Any:
    return delayed(total)(xs)


def straggled(long: float) -> Run:
    return lambda c: c.compute(
        d_total([delayed(spin)(long if i == 5 else 0.05, i) for i in range(10)])
    ).result()


def split_evenly(long: float) -> Run:
    each = (long + 9 * 0.05) / 10
    return lambda c: c.compute(d_total([delayed(spin)(each, i) for i in range(10)])).result()


def pinned(n: int, seconds: float, pin: bool) -> Run:
    def run(c: Client) -> Any:
        a = sorted(c.scheduler_info()["workers"])[0]
        where = {"workers": [a], "allow_other_workers": False} if pin else {}
        return c.gather(c.map(spin, [seconds] * n, range(n), pure=False, **where))

    return run


def threads2(loaded: bool) -> Cluster:
    """2 workers x 1 thread in this process: how work is cut and spread, failures, runs
    of the same code, healthy shapes, and an idle cluster at the end."""
    x = da.random.random((4000, 4000), chunks=(1000, 1000))
    small = da.random.random((2000, 2000), chunks=(1000, 1000))
    pdf = pd.DataFrame({"k": np.arange(200_000) % 13, "v": np.arange(200_000, dtype=float)})
    df = dd.from_pandas(pdf, npartitions=8)
    bag = db.from_sequence(range(200_000), npartitions=8)
    healthy = [
        ("array-sum", lambda c: c.compute(x.sum()).result()),
        ("array-mean-axis", lambda c: c.compute(x.mean(axis=0)).result()),
        ("array-matmul", lambda c: c.compute((small @ small.T).sum()).result()),
        ("array-elementwise", lambda c: c.compute(((x + 1) * 2).std()).result()),
        ("array-rechunk", lambda c: c.compute(x.rechunk((4000, 250)).sum()).result()),
        ("array-persist", lambda c: c.compute(c.persist(x * 3).sum()).result()),
        ("dataframe-groupby", lambda c: c.compute(df.groupby("k").v.mean()).result()),
        ("dataframe-sum", lambda c: c.compute(df.v.sum()).result()),
        (
            "dataframe-map-partitions",
            lambda c: c.compute(df.map_partitions(lambda p: p.assign(w=p.v * 2)).w.sum()).result(),
        ),
        (
            "dataframe-shuffle",
            lambda c: c.compute(df.shuffle("k", shuffle_method="tasks").v.sum()).result(),
        ),
        ("dataframe-persist", lambda c: len(c.persist(df[df.v > 10]))),
        (
            "bag-map-filter",
            lambda c: c.compute(bag.map(inc).filter(lambda v: v % 3).sum()).result(),
        ),
        ("bag-frequencies", lambda c: c.compute(bag.map(lambda v: v % 7).frequencies()).result()),
        (
            "delayed-fan-in",
            lambda c: c.compute(d_total([delayed(spin)(0.2, i) for i in range(8)])).result(),
        ),
        (
            "delayed-stages",
            lambda c: c.compute(
                d_total([delayed(spin)(0.1, j) for j in [delayed(spin)(0.1, i) for i in range(8)]])
            ).result(),
        ),
        ("map-steady", lambda c: c.gather(c.map(spin, [0.3] * 16, range(16), pure=False))),
        ("map-gather", lambda c: c.gather(c.map(spin, [0.2] * 8, range(8), pure=False))),
        (
            "submit-reduce",
            lambda c: c.submit(total, c.map(spin, [0.2] * 6, range(6), pure=False)).result(),
        ),
        ("one-short-task", lambda c: c.submit(spin, 0.3, pure=False).result()),
        ("long-steady", lambda c: c.gather(c.map(spin, [0.5] * 12, range(12), pure=False))),
    ]
    scenarios = [Scenario(name, None, run) for name, run in healthy]
    scenarios += [
        Scenario(
            "small-tasks: delayed",
            "small-tasks",
            lambda c: c.compute(d_total([delayed(inc)(i) for i in range(3000)])).result(),
            fixed=lambda c: c.compute(
                d_total(
                    [
                        delayed(sum)(delayed(incs)(list(range(i, i + 750))))
                        for i in range(0, 3000, 750)
                    ]
                )
            ).result(),
        ),
        Scenario(
            "small-tasks: client.map",
            "small-tasks",
            lambda c: sum(c.gather(c.map(inc, range(3000)))),
            fixed=lambda c: sum(
                sum(b)
                for b in c.gather(
                    c.map(incs, [list(range(i, i + 750)) for i in range(0, 3000, 750)])
                )
            ),
        ),
        Scenario("straggler: 3 s", "straggler", straggled(3.0), fixed=split_evenly(3.0)),
        Scenario("straggler: 5 s", "straggler", straggled(5.0), fixed=split_evenly(5.0)),
        Scenario(
            "imbalance: 8 pinned", "imbalance", pinned(8, 0.4, True), fixed=pinned(8, 0.4, False)
        ),
        Scenario(
            "imbalance: 12 pinned", "imbalance", pinned(12, 0.3, True), fixed=pinned(12, 0.3, False)
        ),
        Scenario(
            "too-few-tasks: one task",
            "too-few-tasks",
            lambda c: c.submit(spin, 3.0, 1, pure=False).result(),
            fixed=lambda c: c.gather(c.map(spin, [0.75] * 4, range(4), pure=False)),
        ),
        Scenario(
            "too-few-tasks: one long step",
            "too-few-tasks",
            # A short step, then one long one (3 s) that nothing can share.
            lambda c: c.compute(delayed(spin)(delayed(spin)(0.2, 0) + 3.0, 2)).result(),
            fixed=lambda c: c.gather(c.map(spin, [0.675] * 4, range(4), pure=False)),
        ),
        Scenario(
            "failures: erred",
            "failures",
            lambda c: c.compute(d_total([delayed(fails)(i) for i in range(3)])).result(),
        ),
        Scenario(
            "failures: hidden by retries",
            "failures",
            lambda c: c.gather(
                [
                    c.submit(flaky, f"r{i}-{time.time()}", 2, 0.5, retries=3, pure=False)
                    for i in range(2)
                ]
            ),
            fixed=lambda c: c.gather(
                [c.submit(flaky, f"f{i}-{time.time()}", 0, 0.5, pure=False) for i in range(2)]
            ),
        ),
        Scenario(
            "slower-than-before: 8x",
            "slower-than-before",
            lambda c: job(c, 0.8),
            before=lambda c: (job(c, 0.1), job(c, 0.1)),
        ),
        Scenario(
            "slower-than-before: 5x",
            "slower-than-before",
            lambda c: mapped(c, 1.0),
            before=lambda c: (mapped(c, 0.2), mapped(c, 0.2)),
        ),
        # The cluster's last computation: it then sits idle past idle-min.
        Scenario("idle-cluster: left open", "idle-cluster", lambda c: c.submit(inc, 1).result()),
    ]
    return Cluster(
        "2 workers x 1 thread",
        {"n_workers": 2, "threads_per_worker": 1},
        scenarios,
        idle_after=True,
    )


def threads1x2() -> Cluster:
    """One worker of 2 threads in this process: the GIL, and spilling (200 MiB)."""
    gil = lambda c: c.gather(c.map(spin, [0.3] * 8, range(8), pure=False))  # noqa: E731
    gil4 = lambda c: c.gather(c.map(spin, [0.2] * 12, range(12), pure=False))  # noqa: E731
    # The advice: the same threads as processes (one thread each), and more memory.
    apart = {"n_workers": 2, "threads_per_worker": 1, "processes": True}
    roomy = {"n_workers": 1, "threads_per_worker": 2, "memory_limit": "4 GiB"}
    return Cluster(
        "1 worker x 2 threads, 200 MiB",
        {"n_workers": 1, "threads_per_worker": 2, "memory_limit": "200 MiB"},
        [
            Scenario("gil-contention: spin x8", "gil-contention", gil, fixed=gil, fixed_on=apart),
            Scenario(
                "gil-contention: spin x12", "gil-contention", gil4, fixed=gil4, fixed_on=apart
            ),
            # Three to four times the memory limit, so the disk time is seconds, clear of
            # min-impact on a fast disk too.
            Scenario(
                "spilling: 16 x 64 MiB",
                "spilling",
                gathered(block, 16, 64),
                fixed=gathered(block, 16, 64),
                fixed_on=roomy,
            ),
            Scenario(
                "spilling: 40 x 32 MiB",
                "spilling",
                gathered(block, 40, 32),
                fixed=gathered(block, 40, 32),
                fixed_on=roomy,
            ),
            Scenario(
                "healthy: naps",
                None,
                lambda c: c.gather(c.map(nap, [0.3] * 8, range(8), pure=False)),
            ),
            # The cluster's last computation: it then sits idle past idle-min.
            Scenario(
                "idle-cluster: after the naps",
                "idle-cluster",
                lambda c: c.gather(c.map(nap, [0.1] * 4, range(4), pure=False)),
            ),
        ],
        idle_after=True,
        config={
            "distributed.worker.memory.target": 0.5,
            "distributed.worker.memory.spill": False,
            "distributed.worker.memory.pause": False,
            "distributed.worker.memory.terminate": False,
            "distributed.worker.memory.spill-compression": False,
        },
    )


def gathered(make: Callable[[int, int], Any], parts: int, n: int) -> Run:
    """`parts` results of `make(i, n)` counted in one task: half of them cross."""
    return lambda c: c.compute(delayed(count)([delayed(make)(i, n) for i in range(parts)])).result()


def processes() -> Cluster:
    """Worker processes, 2 x 1 thread: data moved between workers, serialization, the GIL
    done right (gil-contention's fix), and a machine whose cores others take."""
    return Cluster(
        "2 worker processes x 1 thread",
        {"n_workers": 2, "threads_per_worker": 1, "processes": True, "memory_limit": "4 GiB"},
        [
            # Data an earlier computation left on one worker, used on the other (pinned, as
            # resources do), so every byte crosses; the fix runs the work where the data is.
            Scenario(
                "transfer-bound: 16 x 100 MiB used elsewhere",
                "transfer-bound",
                (placed := Placed(16, 100)).use(elsewhere=True),
                fixed=placed.use(elsewhere=False),
                before=placed.make,
            ),
            Scenario(
                "transfer-bound: 8 x 200 MiB gathered",
                "transfer-bound",
                lambda c: _gathered(c, 8, 200, reduce_first=False),
                fixed=lambda c: _gathered(c, 8, 200, reduce_first=True),
            ),
            Scenario(
                "serialization: objects",
                "serialization",
                gathered(objects, 8, 40_000),
                fixed=gathered(frame, 8, 40_000),
            ),
            Scenario(
                "serialization: more objects",
                "serialization",
                gathered(objects, 6, 60_000),
                fixed=gathered(frame, 6, 60_000),
            ),
            Scenario("healthy: little moved", None, gathered(block, 8, 1)),
            Scenario(
                "healthy: processes spin",
                None,
                lambda c: c.gather(c.map(spin, [0.3] * 8, range(8), pure=False)),
            ),
            Scenario(
                "cpu-starved: spin",
                "cpu-starved",
                lambda c: _starved(c, 0.3, 8),
                fixed=lambda c: c.gather(c.map(spin, [0.3] * 8, range(8), pure=False)),
                fix_needs_quiet=True,
            ),
            Scenario(
                "cpu-starved: longer",
                "cpu-starved",
                lambda c: _starved(c, 0.5, 8),
                fixed=lambda c: c.gather(c.map(spin, [0.5] * 8, range(8), pure=False)),
                fix_needs_quiet=True,
            ),
        ],
        config={
            "distributed.comm.compression": False,
            "distributed.worker.memory.target": False,
            "distributed.worker.memory.spill": False,
        },
    )


def memory() -> Cluster:
    """Worker processes of 500 MiB, their nannies killing at 95%: a task that needs more
    than its worker has.  One retry (allowed-failures 1): a task killed twice errs."""
    return Cluster(
        "2 worker processes x 1 thread, 500 MiB",
        {"n_workers": 2, "threads_per_worker": 1, "processes": True, "memory_limit": "500 MiB"},
        [
            Scenario(
                "memory-kill: one task too big",
                "memory-kill",
                lambda c: c.submit(outgrows, 0, 800, 1.5, pure=False).result(),
                # The advice: cut the work so each task needs less.
                fixed=lambda c: sum(
                    c.gather(c.map(builds, range(4), [100] * 4, [0.375] * 4, pure=False))
                ),
            ),
            Scenario(
                "memory-kill: killed once, fits on retry",
                "memory-kill",
                lambda c: sum(
                    c.gather(
                        [c.submit(outgrows, 0, 800, 1.0, f"once-{time.time()}", pure=False)]
                        + c.map(builds, range(1, 4), [1] * 3, [1.0] * 3, pure=False)
                    )
                ),
                fixed=lambda c: sum(
                    c.gather(c.map(builds, range(4), [1] * 4, [1.0] * 4, pure=False))
                ),
            ),
        ],
        config={
            "distributed.scheduler.allowed-failures": 1,
            "distributed.worker.memory.target": False,
            "distributed.worker.memory.spill": False,
            "distributed.worker.memory.pause": False,
        },
    )


def _two(c: Client) -> tuple[str, str]:
    a, b = sorted(c.scheduler_info()["workers"])[:2]
    return a, b


class Placed:
    """n blocks an earlier computation left on one worker (data loaded there, or
    scattered), measured by tasks on the other worker (every block crosses) or, the
    fix, on the same one (none does)."""

    def __init__(self, n: int, mib: int):
        self.n, self.mib = n, mib
        self.blocks: list = []

    def make(self, c: Client) -> None:
        a, _ = _two(c)
        self.blocks = [c.submit(block, i, self.mib, workers=[a], pure=False) for i in range(self.n)]
        wait(self.blocks)

    def use(self, elsewhere: bool) -> Run:
        def run(c: Client) -> int:
            a, b = _two(c)
            on = [b if elsewhere else a]
            lengths = c.map(len, self.blocks, workers=on, allow_other_workers=False, pure=False)
            total = sum(c.gather(lengths))
            if not elsewhere:  # the fix runs last: the blocks are no longer needed
                self.blocks = []
            return total

        return run


def _gathered(c: Client, n: int, mib: int, reduce_first: bool) -> int:
    """n blocks made on one worker, all gathered into one task on the other; the fix
    reduces each block where it is first (a length crosses, not the block)."""
    a, b = _two(c)
    blocks = [c.submit(block, i, mib, workers=[a], pure=False) for i in range(n)]
    if reduce_first:
        blocks = c.map(len, blocks, workers=[a], pure=False)
    return c.submit(count, blocks, workers=[b], allow_other_workers=False, pure=False).result()


def _starved(c: Client, seconds: float, n: int) -> Any:
    with cores_taken():
        return c.gather(c.map(spin, [seconds] * n, range(n), pure=False))


# --- running ---------------------------------------------------------------------------
@dataclass
class Outcome:
    scenario: Scenario
    cid: str
    wall: float
    found: list[dict] = field(default_factory=list)
    fixed_wall: float | None = None
    erred: bool = False

    @property
    def saved(self) -> float | None:
        """What applying the advice saved (None: no fix was run)."""
        if self.fixed_wall is None:
            return None
        return self.wall if self.erred else self.wall - self.fixed_wall


def _new_id(client: Client, store: str, cluster_id: str, before: set[str]) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        dal.flush(client)
        ids = {
            c["computation_id"] for c in dal.list_computations(cluster_id, limit=1000, store=store)
        }
        new = ids - before
        if new:
            # Several (a persist, then its compute): the longest is the one looked at.
            comps = [dal.get_computation(i, store=store) for i in new]
            return max(comps, key=lambda c: (c["stop"] or 0) - c["start"])["computation_id"]
        time.sleep(0.2)
    raise TimeoutError("no computation recorded")


def _known(client: Client, store: str, cluster_id: str) -> set[str]:
    dal.flush(client)
    return {c["computation_id"] for c in dal.list_computations(cluster_id, limit=1000, store=store)}


def _wall_of(client: Client, store: str, cluster_id: str, run: Run) -> float:
    """The recorded wall time of what `run` computes."""
    known = _known(client, store, cluster_id)
    run(client)
    comp = dal.get_computation(_new_id(client, store, cluster_id, known), store=store)
    return (comp["stop"] or time.time()) - comp["start"]


def _fixed_wall(s: Scenario, client: Client, store: str, cluster_id: str) -> float:
    if s.fixed is None:
        raise ValueError(f"{s.name} has no fix to run")
    if s.fixed_on is None:
        return _wall_of(client, store, cluster_id, s.fixed)
    # Its own cluster, recorded too (its start is not in the computation's wall time).
    with (
        LocalCluster(dashboard_address=":0", **s.fixed_on) as cluster,
        Client(cluster) as other,
    ):
        info = dal.register(other, store=store)
        return _wall_of(other, store, info["cluster_id"], s.fixed)


def run_cluster(spec: Cluster, store: str, loaded: bool, only: set[str] | None) -> list[Outcome]:
    out: list[Outcome] = []
    scenarios = [s for s in spec.scenarios if only is None or (s.kind or "healthy") in only]
    if not scenarios:
        return out
    with dask.config.set({**CONFIG, **spec.config}):
        with (
            LocalCluster(dashboard_address=":0", **spec.kwargs) as cluster,
            Client(cluster) as client,
        ):
            info = dal.register(client, store=store)
            cid = info["cluster_id"]
            for s in scenarios:
                if s.before is not None:
                    s.before(client)
                known = _known(client, store, cid)
                with contextlib.suppress(Exception):  # scenarios that fail on purpose
                    s.run(client)
                got = _new_id(client, store, cid, known)
                comp = dal.get_computation(got, store=store)
                outcome = Outcome(
                    s,
                    got,
                    (comp["stop"] or time.time()) - comp["start"],
                    erred=comp["state"] == "erred",
                )
                if s.fixed is not None and not (loaded and s.fix_needs_quiet):
                    outcome.fixed_wall = _fixed_wall(s, client, store, cid)
                out.append(outcome)
                print(f"  {s.name}: {outcome.wall:.2f} s", file=sys.stderr, flush=True)
            if spec.idle_after:
                last = dal.get_computation(out[-1].cid, store=store)["stop"]
                while True:
                    dal.flush(client)
                    if (dal.get_cluster(cid, store=store)["sample_time"] or 0) > last + 5:
                        break
                    time.sleep(0.5)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--loaded", action="store_true", help="two CPU burners per core throughout")
    ap.add_argument("--only", help="kinds to run, comma-separated (healthy: the healthy workloads)")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    store = "sqlite:///" + str(Path(tempfile.mkdtemp()) / "quality.db")
    outcomes: list[Outcome] = []
    load = cores_taken() if args.loaded else contextlib.nullcontext()
    started = time.monotonic()
    with load:
        for spec in (threads2(args.loaded), threads1x2(), processes(), memory()):
            print(f"# {spec.name}", file=sys.stderr, flush=True)
            outcomes += run_cluster(spec, store, args.loaded, only)
    with dask.config.set(CONFIG):
        for o in outcomes:
            o.found = dal.explain(o.cid, store=store)
    print(
        f"findings quality, {'loaded (2 burners per core)' if args.loaded else 'as the machine is'}, "
        f"{os.cpu_count()} cores, {time.monotonic() - started:.0f} s\n"
    )
    kinds = sorted({o.scenario.kind for o in outcomes if o.scenario.kind})
    print(f"{'kind':<20} {'recall':>8}  {'claimed s':>10} {'saved s':>8} {'ratio':>6}  scenarios")
    for kind in kinds:
        mine = [o for o in outcomes if o.scenario.kind == kind]
        hit = [o for o in mine if kind in [f["kind"] for f in o.found[:2]]]
        pairs = [
            (next(f["impact"] for f in o.found if f["kind"] == kind), o.saved)
            for o in hit
            if o.saved is not None
        ]
        claimed = sum(p[0] for p in pairs)
        saved = sum(p[1] for p in pairs)
        ratio = f"{claimed / saved:.2f}" if pairs and saved > 0 else "-"
        print(
            f"{kind:<20} {len(hit)}/{len(mine):<6} "
            + (
                f"{claimed:>10.2f} {saved:>8.2f} {ratio:>6}"
                if pairs
                else f"{'-':>10} {'-':>8} {'-':>6}"
            )
            + "  "
            + "; ".join(
                f"{o.scenario.name.split(': ')[-1]}: {', '.join(f['kind'] for f in o.found[:3]) or 'none'}"
                for o in mine
            )
        )
    healthy = [o for o in outcomes if o.scenario.kind is None]
    false, machine = [], []
    for o in healthy:
        big = [f for f in o.found if f["impact"] > SHARE * o.wall]
        (machine if big and all(f["kind"] == "cpu-starved" for f in big) else false).extend(
            [(o, big)] if big else []
        )
    print(
        f"\nhealthy workloads: {len(healthy)}, with a false finding (impact > {SHARE:.0%} of the wall): {len(false)}"
    )
    for o, big in false:
        print(
            f"  {o.scenario.name} ({o.wall:.2f} s): "
            + "; ".join(f"{f['kind']} {f['impact']:.2f} s" for f in big)
        )
    if machine:
        print(f"  with only cpu-starved (true of a loaded machine): {len(machine)}")
    over = []
    with open_store(store) as opened, dask.config.set(CONFIG):
        settings = config.findings_settings()
        for o in outcomes:
            with opened.snapshot() as snap:
                rec = read(snap, o.cid, settings=settings)
            causes = [f for f in o.found if not stands_apart(f, rec.comp)]
            claimed = sum(f["impact"] for f in causes)
            if claimed > rec.wall - rec.ideal + 1e-3:
                over.append(
                    f"{o.scenario.name}: {claimed:.2f} s > {rec.wall:.2f} - {rec.ideal:.2f} s ("
                    + ", ".join(f["kind"] for f in causes)
                    + ")"
                )
    print(
        "computations whose causes claim more than their wall time less their ideal time: "
        f"{len(over)}"
    )
    for line in over:
        print(f"  {line}")


if __name__ == "__main__":
    main()
