"""Issue 22, item 4 and issue 41, item 5: the team service at scale, through a real HAProxy.

N simulated clusters (default 1,000) each send what a real scheduler's recorder sends
at the default settings (benchmarks/_simulated_cluster.py: a snapshot a second while a
computation runs, worker samples every 5-6 s, a 614-task computation a minute with its
groups, task stream, metrics and profiles) for M minutes, through HAProxy to 3
`dask-analytics server` replicas on one PostgreSQL with its durable defaults (fsync,
synchronous_commit and full_page_writes on, as deploy/compose.yaml runs it), with real
tokens (10 accounts, 50 users).  Each cluster ships by its writer thread's rules
(benchmarks/_shipper_model.py): the 200 ms linger after a batch's first message (a
computation's end and a cluster's close go at once), one batch in flight, everything
queued meanwhile in the next one (at most BATCH messages and BATCH_BYTES by the
shipper's estimate), a heartbeat with every write and one alone BEAT after the last
write started, retries with the shipper's backoff (a busy server's Retry-After
honoured), through the real HttpSink (its 10 s timeout included) on a kept-alive
connection of its own.  A pool of `--threads` threads sends for all of them, so the load
generator is one process; it also caps the requests in flight, so when the service
falls behind, part of the queue waits in the generator (counted in the message wait,
not in the POST's latency), where a real fleet would have one request in flight per
cluster.  Meanwhile a team lead clicks through the team page (the clusters list, a
cluster's page, one of its computations' pages: the API calls js/team/app.ts makes for
each, 6 at a time as a browser does), a page a second.  Then the same with one replica.

First, in the same run, the model is checked against the real thing: a real LocalCluster
records into a real server for `--check-minutes` (benchmarks/recorder_traffic.py's
record_real, every POST counted) and the simulated cluster is run over the same span
(its simulate, on a virtual clock): POSTs and messages a cluster-minute side by side; a
gap over 15% in POSTs is a loud warning (stderr and the final report).

The server side (the replicas, HAProxy, PostgreSQL's postmaster and so every backend it
forks) runs pinned to `--server-cores` (default: the last half of the machine's cores),
the generator (this process, all its threads) to the others, so a figure per server
core transfers to other machines.

Reported per configuration: messages stored exactly once (counted in the database: per
cluster by (cluster_id, seq) in `ingested`, and the rows of the sample, event and task
stream tables); ingest latency p50/p99 (a batch's POST, retries included, as the
shipper's thread sees it); how long a message waited from its tick to being stored
(the linger included); the team page's load time p50/p99; the database's growth per
cluster-hour and cluster-day (by table); and the CPU of each part: the load generator,
the replicas, PostgreSQL, HAProxy, and the rest of the machine (other jobs on a shared
machine).  Then one replica against three: the scale-out figure.  The first WARMUP
seconds (the clusters starting, each replica's first requests) are left out of the
latencies and the CPU.

`--find-capacity` steps the cluster count instead (from --clusters, x1.4 while p99 ingest
stays under 200 ms, then `--bisect` halvings between the last pass and the first miss),
each step a fresh database checked stored-once, and prints clusters per server core at
p99 < 200 ms.

The whole run has a deadline (derived from the arguments; `--deadline SECONDS`): a
watchdog that fires prints what was measured so far and the state of the configuration
that hangs (its posts, retries, backlog, errors, the replicas alive or dead and the last
lines of their logs, HAProxy's and PostgreSQL's), then exits non-zero; a configuration
that fails does the same at once.

    python benchmarks/team_scale.py                                  # 1,000 clusters, 10 min, 3 then 1
    python benchmarks/team_scale.py --clusters 50 --minutes 0.5      # a quick look
    python benchmarks/team_scale.py --find-capacity --clusters 50 --minutes 1 --replicas 3
    python benchmarks/team_scale.py --replicas 3 --postgres postgresql://user@host/scratch

The goal: p99 ingest < 200 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import itertools
import math
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import recorder_traffic  # noqa: E402
from benchmarks._shipper_model import EPS, ShipperModel  # noqa: E402
from benchmarks._simulated_cluster import COMPUTATION_EVERY, SimCluster  # noqa: E402
from dask_analytics_lab import config  # noqa: E402
from dask_analytics_lab.collect.writer import next_delay  # noqa: E402
from dask_analytics_lab.messages import MessageError  # noqa: E402
from dask_analytics_lab.remote import HttpSink, ServerClient  # noqa: E402
from tests.balancer import Replicas  # noqa: E402

ACCOUNTS, USERS = 10, 50
RAMP = 10.0  # seconds over which the clusters start (and stop): not all in one instant
# Seconds left out of the figures (not of the load): the clusters' starts, and each
# replica's first requests (imports, caches, connections), which only the first
# configuration of a run would pay otherwise.
WARMUP = 30.0
PAGE_EVERY = 1.0  # the reader's pause between two pages
BROWSER_CONNECTIONS = 6  # requests a browser runs at once to one origin (HTTP/1.1)
GOAL = 0.200  # seconds: p99 ingest
TOLERANCE = 0.15  # the simulated cluster's POSTs against a real recorder's
GROWTH = 1.4  # --find-capacity: the next step's clusters while the goal is met
LAG_LIMIT = 0.5  # seconds: a generator whose timeline ran later (p99) limits the step itself
LOG_LINES = 12  # lines of each log in a failure's report


class RunFailed(Exception):
    """A configuration could not finish or its figures are wrong: the report says why."""


def pct(values: list[float], q: int) -> float:
    values = list(values)
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


# --- cores: the server side apart from the generator -------------------------------------
def parse_cores(text: str) -> list[int]:
    """Core numbers, sorted, from "1", "2,3", "4-7" and mixes of them."""
    cores: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-")
            cores.update(range(int(a), int(b) + 1))
        elif part:
            cores.add(int(part))
    return sorted(cores)


@dataclass
class Cores:
    server: list[int]
    generator: list[int]
    shared: bool  # one core only: nothing apart

    @classmethod
    def split(cls, spec: str | None) -> Cores:
        mine = sorted(os.sched_getaffinity(0))
        server = parse_cores(spec) if spec else mine[len(mine) - max(1, len(mine) // 2) :]
        if not set(server) <= set(mine):
            raise SystemExit(f"--server-cores {server}: this process may run on {mine} only")
        generator = [c for c in mine if c not in server]
        return cls(server, generator or server, not generator)


def pin_process(pid: int, cores: list[int]) -> int:
    """Every thread of process `pid` on `cores` (sched_setaffinity sets one thread's,
    and a thread or child inherits its creator's); the threads pinned."""
    n = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            os.sched_setaffinity(int(tid), cores)
            n += 1
        except OSError:  # ended meanwhile
            pass
    return n


def pin_tree(proc: psutil.Process, cores: list[int]) -> int:
    """A process and its descendants (a postmaster's backends), every thread; the
    processes pinned."""
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    return sum(1 for p in procs if pin_process(p.pid, cores))


def off_cores(procs: list[psutil.Process], cores: list[int], tree: bool = True) -> list[str]:
    """The threads of `procs` (and their descendants, `tree`) not pinned to exactly `cores`."""
    wrong, want = [], set(cores)
    for proc in procs:
        try:
            family = [proc, *proc.children(recursive=True)] if tree else [proc]
        except psutil.Error:
            continue
        for p in family:
            try:
                tids = os.listdir(f"/proc/{p.pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    got = os.sched_getaffinity(int(tid))
                except OSError:
                    continue
                if got != want:
                    wrong.append(f"{p.pid}/{tid} on {sorted(got)}")
    return wrong


@contextlib.contextmanager
def spawning_on(cores: list[int]) -> Iterator[None]:
    """The calling thread on `cores` meanwhile: the processes it starts inherit them
    from their start (HAProxy counts its threads then; a postmaster's backends inherit
    the postmaster's)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def postmaster(pg) -> psutil.Process:
    return psutil.Process(int((pg.data / "postmaster.pid").read_text().split()[0]))


# --- the senders ----------------------------------------------------------------------
@dataclass(eq=False)
class Shipping:
    """One cluster's shipper: its queue and writer state (the model, under the
    generator's lock), its sink (one kept-alive connection)."""

    sim: SimCluster
    sink: HttpSink
    model: ShipperModel
    wakeup: float | None = None  # the writer's wake-up already in the timeline
    profiles_at: float | None = None  # the profiles already in the timeline
    stopped: bool = False


class Generator:
    """Runs the simulated clusters' timelines on one thread (ticks, profiles, the
    writers' wake-ups: the linger's end, a heartbeat's turn) and sends their batches
    from a small pool, each cluster's one at a time, as its writer thread would."""

    def __init__(
        self,
        url: str,
        sims: list[SimCluster],
        tokens: list[str],
        threads: int,
        warm: threading.Event,
    ):
        s = config.resolve({})
        self.tick_every = s["interval"]
        self.linger = s["buffer_linger"]
        self.min_delay, self.max_delay = s["retry_min_delay"], s["retry_max_delay"]
        self.ships = [
            Shipping(sim, HttpSink(url, token=tokens[sim.index % USERS]), ShipperModel(self.linger))
            for sim in sims
        ]
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="sender")
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)  # the timeline's: an earlier event came
        self.events: list[tuple[float, int, int, str]] = []  # (due, order, cluster, what)
        self.order = itertools.count()
        self.warm = warm  # set once the start-up is over: only then are figures kept
        self.stopping = threading.Event()  # a failure: the senders give up their retries
        self.started = 0.0
        self.latencies: list[float] = []  # seconds per batch, retries included
        self.waits: list[float] = []  # seconds from a batch's oldest message to stored
        self.lags: list[float] = []  # seconds the timeline ran late (the generator's own)
        self.posts = self.retries = 0
        self.failures: Counter[str] = Counter()  # why writes failed (each retried)
        self.delivered = 0  # messages stored so far
        self.kept_up = 0.0  # messages stored a second while the clusters ran
        self.backlog = 0  # messages queued when the clusters' time was up
        self.drain = 0.0  # seconds from the last cluster's stop to everything stored
        self.errors: list[str] = []

    # --- the timeline (the lock held) -------------------------------------------------
    def _push(self, due: float, i: int, what: str) -> None:
        if self.events and due < self.events[0][0]:
            self.wake.notify()
        heapq.heappush(self.events, (due, next(self.order), i, what))

    def _turn(self, ship: Shipping, now: float) -> bool:
        """The idle writer's decision at `now`: True to write now (the caller sends),
        else its next wake-up goes into the timeline."""
        m = ship.model
        if m.busy:
            return False
        if m.ready(now):
            m.busy = True  # this cluster's writer: taken
            return True
        at = m.next_wakeup(now)
        if at is not None and at != ship.wakeup:
            ship.wakeup = at
            self._push(at, ship.sim.index, "wake")
        return False

    def put(self, ship: Shipping, batch: list[dict], *, hurry: bool = False) -> None:
        now = time.time()
        with self.lock:
            ship.model.put(batch, now, hurry=hurry)
            go = self._turn(ship, now)
        if go:
            self.pool.submit(self._ship, ship)

    # --- a writer thread ----------------------------------------------------------------
    def _ship(self, ship: Shipping) -> None:
        """The writer thread of one cluster, while it has something due."""
        m = ship.model
        try:
            failures, t0 = 0, None
            while True:
                with self.lock:
                    batch = m.take()
                started = time.time()
                if t0 is None:
                    t0 = time.perf_counter()
                try:
                    ship.sink.write([e[2] for e in batch] + [ship.sim.heartbeat(started)])
                except MessageError as e:  # a bug of the simulation: stop here
                    self.errors.append(f"{ship.sim.id}: {e}")
                    return
                except Exception as e:
                    failures += 1
                    with self.lock:
                        self.retries += 1
                        why = " ".join(str(e).split())[:160]  # one line
                        self.failures[f"{type(e).__name__}: {why}"] += 1
                    if self.stopping.wait(next_delay(failures, self.min_delay, self.max_delay, e)):
                        return
                    continue
                now = time.time()
                if self.warm.is_set():
                    self.latencies.append(time.perf_counter() - t0)
                    if batch:
                        self.waits.append(now - batch[0][0])
                failures, t0 = 0, None
                with self.lock:
                    m.done(len(batch), started)
                    ship.sim.heartbeats += 1
                    self.posts += 1
                    self.delivered += len(batch)
                    go = self._turn(ship, now)
                if not go:
                    return
        except BaseException as e:
            self.errors.append(f"{ship.sim.id}: {type(e).__name__}: {e}")
            raise

    # --- the clusters' lives -----------------------------------------------------------
    def run(self, seconds: float, warmup: float, on_warm: Callable[[], None]) -> None:
        """Each cluster's life of `seconds` (their starts, and so their stops, spread over
        RAMP).  After `warmup` seconds, on_warm() and the figures start."""
        start = self.started = time.time()
        n = len(self.ships)
        with self.lock:
            for i in range(n):
                self._push(start + RAMP * i / n, i, "start")
                self._push(start + seconds + RAMP * i / n, i, "stop")
        end, warm_at = start + seconds, start + warmup
        stopped = 0
        while stopped < n:
            with self.lock:
                while True:
                    left = self.events[0][0] - time.time()
                    if left <= 0:
                        break
                    self.wake.wait(left)
                due, _, i, what = heapq.heappop(self.events)
            now = time.time()
            if now >= warm_at and not self.warm.is_set():
                on_warm()
                self.warm.set()
            if self.warm.is_set():
                self.lags.append(now - due)
            if what == "stop":
                if stopped == 0:  # the clusters' time is up (the first stop)
                    with self.lock:
                        self.backlog = sum(len(s.model.pending) for s in self.ships)
                        self.kept_up = self.delivered / max(1e-9, end - start)
                stopped += 1
            self._step(self.ships[i], what, due, now)
        self.stopped_at = time.time()

    def _step(self, ship: Shipping, what: str, due: float, now: float) -> None:
        sim = ship.sim
        if ship.stopped:
            return
        if what == "start":
            u = sim.index % USERS
            self.put(ship, sim.start(now, account=f"team-{u % ACCOUNTS}", user=f"user-{u}"))
            with self.lock:
                self._push(now + self.tick_every, sim.index, "tick")
        elif what == "tick":
            self.put(ship, sim.tick(now))
            nxt = due + self.tick_every  # the plugin's periodic callback: on its schedule,
            while nxt <= now:  # ticks it missed skipped
                nxt += self.tick_every
            with self.lock:
                if sim.profiles_due is not None and sim.profiles_due != ship.profiles_at:
                    ship.profiles_at = sim.profiles_due
                    self._push(sim.profiles_due, sim.index, "profiles")
                self._push(nxt, sim.index, "tick")
        elif what == "profiles":
            if sim.profiles_due is not None:
                self.put(ship, sim.profiles(now))
        elif what == "wake":
            with self.lock:
                if ship.wakeup is not None and abs(ship.wakeup - due) < EPS:
                    ship.wakeup = None
                go = self._turn(ship, now)
            if go:
                self.pool.submit(self._ship, ship)
        elif what == "stop":  # the plugin's close: the last messages, flushed
            self.put(ship, sim.stop(now), hurry=True)
            with self.lock:
                ship.model.closed = True
            ship.stopped = True

    def queued(self) -> int:
        return sum(len(s.model.pending) for s in self.ships)

    def flush(self, timeout: float) -> None:
        """Wait until every message is stored; RunFailed after `timeout` seconds."""
        deadline = time.time() + timeout
        while True:
            now = time.time()
            submit = []
            with self.lock:
                left = sum(len(s.model.pending) + s.model.busy for s in self.ships)
                for s in self.ships:  # no timeline any more: a writer due now is sent here
                    if self._turn(s, now):
                        submit.append(s)
            for s in submit:
                self.pool.submit(self._ship, s)
            if not left:
                break
            if self.errors:
                raise RunFailed(f"{len(self.errors)} senders failed, e.g. {self.errors[:3]}")
            if now > deadline:
                raise RunFailed(
                    f"{self.queued():,} messages still not stored {timeout:.0f} s after the "
                    f"last cluster stopped ({self.retries:,} retries so far)"
                )
            time.sleep(0.1)
        self.drain = time.time() - self.stopped_at
        self.pool.shutdown()
        for s in self.ships:
            s.sink.close()


# --- the team page ----------------------------------------------------------------------
class Reader:
    """A team lead on the team page: the clusters list, a cluster, one of its
    computations, each page's API calls at once (as js/team/app.ts makes them)."""

    def __init__(self, url: str, token: str, warm: threading.Event):
        self.warm = warm
        self.client = ServerClient(url, token=token, timeout=120)
        self.pool = ThreadPoolExecutor(BROWSER_CONNECTIONS, thread_name_prefix="page")
        self.times: dict[str, list[float]] = {"clusters": [], "cluster": [], "computation": []}
        self.failures = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.rng = random.Random(0)

    def _page(self, name: str, calls: list[tuple[str, dict]]) -> list:
        t0 = time.perf_counter()
        answers = list(self.pool.map(lambda c: self.client.get(c[0], **c[1]), calls))
        if self.warm.is_set():
            self.times[name].append(time.perf_counter() - t0)
        return answers

    def _visit(self) -> None:
        clusters, _ = self._page(
            "clusters", [("/api/clusters", {"limit": 100}), ("/api/exceptions", {"limit": 2000})]
        )
        if not clusters["clusters"]:
            return
        cid = self.rng.choice(clusters["clusters"][:20])["cluster_id"]
        answers = self._page(
            "cluster",
            [
                (f"/api/clusters/{cid}", {}),
                (f"/api/clusters/{cid}/samples", {"limit": 5000}),
                (f"/api/clusters/{cid}/computations", {"limit": 500}),
                ("/api/exceptions", {"cluster_id": cid, "limit": 500}),
                ("/api/events", {"cluster_id": cid, "limit": 200}),
                (f"/api/clusters/{cid}/workers", {"limit": 100000}),
                ("/api/events", {"cluster_id": cid, "topic": "worker-joined", "limit": 5000}),
                ("/api/events", {"cluster_id": cid, "topic": "worker-left", "limit": 5000}),
            ],
        )
        computations = answers[2]["computations"]
        if not computations or self.stopping.wait(PAGE_EVERY):
            return
        comp = self.rng.choice(computations)["computation_id"]
        self._page(
            "computation",
            [
                (f"/api/computations/{comp}", {}),
                ("/api/exceptions", {"computation_id": comp, "limit": 500}),
                (f"/api/computations/{comp}/profile", {}),
                (f"/api/computations/{comp}/summary", {}),
                (f"/api/computations/{comp}/tasks", {"limit": 50000}),
                (f"/api/computations/{comp}/findings", {}),
            ],
        )

    def _run(self) -> None:
        while not self.stopping.wait(PAGE_EVERY):
            try:
                self._visit()
            except Exception:
                self.failures += 1

    def start(self) -> Reader:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(180)
        self.pool.shutdown()
        self.client.close()


# --- CPU, by part ---------------------------------------------------------------------
def own_cpu(proc: psutil.Process) -> float:
    """CPU seconds of the process alone (the generator: its children are the replicas)."""
    t = proc.cpu_times()
    return t.user + t.system


def tree_cpu(proc: psutil.Process) -> float:
    """CPU seconds of a process, its reaped children and its live descendants (a
    PostgreSQL backend that ends is counted in its postmaster's children times)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def busy(m: Any) -> float:
    return m.user + m.nice + m.system + m.irq + m.softirq + getattr(m, "steal", 0)


class CpuMeter:
    """Cores each part kept busy between start() and stop(), the whole machine's, and
    those of the server's and the generator's cores (whoever ran there)."""

    def __init__(self, parts: dict[str, list[psutil.Process]], cores: Cores):
        self.parts = parts
        self.cores = cores

    def _read(self) -> dict[str, float]:
        got = {
            name: sum(own_cpu(p) if name == "generator" else tree_cpu(p) for p in procs)
            for name, procs in self.parts.items()
        }
        got["machine"] = busy(psutil.cpu_times())
        per = psutil.cpu_times(percpu=True)
        got["server cores"] = sum(busy(per[c]) for c in self.cores.server)
        got["gen. cores"] = sum(busy(per[c]) for c in self.cores.generator)
        return got

    def start(self) -> None:
        self.t0, self.before = time.time(), self._read()

    def stop(self) -> dict[str, float]:
        after, wall = self._read(), time.time() - self.t0
        cores = {k: (after[k] - self.before[k]) / wall for k in after}
        cores["others"] = max(0.0, cores["machine"] - sum(cores[k] for k in self.parts))
        ours = sum(cores[k] for k in self.parts if k != "generator")
        cores["others on server cores"] = max(0.0, cores["server cores"] - ours)
        return cores


# --- what is measured so far, and the report should the run fail ------------------------
@dataclass(eq=False)
class Current:
    """The configuration running now, for a failure's report."""

    name: str
    started: float = field(default_factory=time.time)
    phase: str = "starting"
    gen: Generator | None = None
    replicas: Replicas | None = None
    procs: dict[str, Any] = field(default_factory=dict)  # name -> Popen, kept past stop()
    state: list[str] | None = None  # as it failed, before its processes were stopped


class Progress:
    """Everything the final report prints, kept as the run goes: a failure (or the
    watchdog) prints it too."""

    def __init__(self, args: argparse.Namespace, cores: Cores):
        self.args = args
        self.cores = cores
        self.t0 = time.time()
        self.header: list[str] = []
        self.check: dict | None = None
        self.results: list[dict] = []  # finished configurations
        self.steps: list[dict] = []  # --find-capacity's steps
        self.capacity: list[str] = []
        self.warnings: list[str] = []
        self.current: Current | None = None
        self.pg = None
        self.ending = threading.Lock()  # one report, from one thread

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        print(f"\nWARNING: {text}\n", file=sys.stderr, flush=True)


def tail(lines: list[str], n: int = LOG_LINES) -> list[str]:
    return [f"    | {line.rstrip()}" for line in lines[-n:]] or ["    | (nothing)"]


def file_tail(path: Path | None, n: int = LOG_LINES) -> list[str]:
    try:
        return tail(path.read_text(errors="replace").splitlines(), n)
    except Exception as e:
        return [f"    | (unreadable: {e})"]


def describe_current(progress: Progress) -> list[str]:
    """The state of the configuration running now: each figure read without the
    generator's lock (a hung thread may hold it), each part on its own."""
    cur = progress.current
    if cur is None:
        return ["no configuration was running"]
    out = [f"{cur.name}: {cur.phase}, {time.time() - cur.started:.0f} s since it began"]
    gen = cur.gen
    if gen is not None:
        try:
            ran = time.time() - gen.started if gen.started else 0.0
            out.append(
                f"  generator: {ran:.0f} s since the clusters began, {gen.posts:,} POSTs, "
                f"{gen.delivered:,} messages stored, {gen.retries:,} retries, "
                f"{gen.queued():,} messages queued in the senders, "
                f"{sum(s.model.busy for s in gen.ships):,} of {len(gen.ships):,} writers busy, "
                f"p99 ingest so far {pct(gen.latencies, 99) * 1e3:.0f} ms"
            )
            for why, n in gen.failures.most_common(5):
                out.append(f"  failed writes: {n:,} x {why}")
            for e in gen.errors[:5]:
                out.append(f"  sender error: {e}")
        except Exception as e:
            out.append(f"  generator: unreadable ({type(e).__name__}: {e})")
    r = cur.replicas
    for name, proc in cur.procs.items():
        try:
            code = proc.poll()
            out.append(
                f"  {name} (pid {proc.pid}): "
                + ("alive" if code is None else f"dead, exit code {code}")
            )
        except Exception as e:
            out.append(f"  {name}: unknown ({e})")
        if r is not None and name in r.servers:
            out.extend(tail(list(r.servers[name].output)))
        elif r is not None and name == "haproxy":
            out.extend(file_tail(r.balancer.log))
    if progress.pg is not None:
        out.append("  PostgreSQL's log:")
        out.extend(file_tail(progress.pg.log))
    return out


def report(progress: Progress, reason: str | None) -> None:
    """All that was measured, then (a failure) why it ended and how the failing
    configuration stood."""
    for line in progress.header:
        print(line)
    if progress.check:
        show_check(progress.check)
    if progress.results:
        show(progress.results, progress)
    if progress.steps:
        show(progress.steps, progress)
        show_steps(progress)
    for line in progress.capacity:
        print(line)
    if reason is not None:
        print(f"\nTHE RUN FAILED after {time.time() - progress.t0:.0f} s: {reason}")
        cur = progress.current
        state = cur.state if cur is not None and cur.state else describe_current(progress)
        print("\nthe configuration that failed:")
        for line in state:
            print(line)
    if progress.warnings:
        print("\nWARNINGS:")
        for w in progress.warnings:
            print(f"  - {w}")
    sys.stdout.flush()


def end_run(
    progress: Progress, reason: str, code: int, cleanup: Callable[[], None] | None = None
) -> None:
    """Print the report, stop what can be stopped within a minute, and exit `code`
    without waiting for threads that may hang (os._exit)."""
    if not progress.ending.acquire(blocking=False):
        progress.ending.acquire(timeout=120)  # the other report is on its way out
        os._exit(code)
    try:
        report(progress, reason)
        print(f"\n{reason}", file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    if progress.current is not None and progress.current.gen is not None:
        progress.current.gen.stopping.set()
    if cleanup is not None:
        t = threading.Thread(target=cleanup, daemon=True)
        t.start()
        t.join(90)
    os._exit(code)


def watchdog(progress: Progress, seconds: float, cleanup: Callable[[], None]) -> threading.Event:
    """A hard stop: at the deadline, the report and exit 3.  Set the event to call it off."""
    done = threading.Event()

    def watch() -> None:
        if not done.wait(seconds):
            end_run(progress, f"the deadline of {seconds:.0f} s passed (--deadline)", 3, cleanup)

    threading.Thread(target=watch, name="watchdog", daemon=True).start()
    return done


# --- one configuration --------------------------------------------------------------------
def place(progress: Progress, r: Replicas, pg) -> list[str]:
    """Pin the server side (again: threads started since inherit, but be sure) to the
    server's cores and every thread of this process to the generator's; what is not
    where it should be, if anything."""
    cores = progress.cores
    server = [psutil.Process(s.proc.pid) for s in r.servers.values()]
    server.append(psutil.Process(r.balancer.proc.pid))
    if pg is not None:
        server.append(postmaster(pg))
    for p in server:
        pin_tree(p, cores.server)
    pin_process(os.getpid(), cores.generator)
    mine = off_cores([psutil.Process()], cores.generator, tree=False)  # its children: above
    return off_cores(server, cores.server) + mine


def run(
    progress: Progress,
    db: str,
    pg,
    workdir: Path,
    n_replicas: int,
    clusters: int,
    seconds: float,
) -> dict:
    args = progress.args
    cur = progress.current = Current(f"{n_replicas} replica(s), {clusters:,} clusters")
    r = Replicas(db, workdir, n=n_replicas)
    cur.replicas = r
    cur.phase = "starting the replicas and HAProxy"
    try:
        try:
            with spawning_on(progress.cores.server):
                r.start()
        finally:
            cur.procs = {name: s.proc for name, s in r.servers.items() if s.proc is not None}
            if r.balancer.proc is not None:
                cur.procs["haproxy"] = r.balancer.proc
        wrong = place(progress, r, pg)
        if wrong:
            progress.warn(f"{cur.name}: threads not on their cores: {wrong[:5]}")
        cur.phase = "making tokens"
        tokens = [r.token(f"team-{u % ACCOUNTS}", user=f"user-{u}") for u in range(USERS)]
        lead = r.token("team-0", user="lead")
        rng = random.Random(n_replicas * 100_003 + clusters)
        sims = [SimCluster(i, start=time.time(), rng=rng) for i in range(clusters)]
        # The same offered load in every configuration: each cluster's first computation
        # as far into its life (the shared rng's draws depend on the run's interleaving).
        for sim in sims:
            sim.next_computation = sim.t0 + random.Random(sim.index).uniform(0, COMPUTATION_EVERY)
        warm = threading.Event()
        gen = cur.gen = Generator(r.url, sims, tokens, args.threads, warm)
        parts = {
            "generator": [psutil.Process()],
            "replicas": [psutil.Process(s.proc.pid) for s in r.servers.values()],
            "haproxy": [psutil.Process(r.balancer.proc.pid)],
        }
        if pg is not None:
            parts["postgres"] = [postmaster(pg)]
        meter = CpuMeter(parts, progress.cores)
        size0 = database_size(db)
        reader = Reader(r.url, lead, warm).start()
        cur.phase = "running the clusters"
        gen.run(seconds, min(WARMUP, seconds / 3), meter.start)
        reader.stop()
        cores = meter.stop()
        cur.phase = "storing what the senders still hold (drain)"
        gen.flush(max(120.0, seconds))
        wall = time.time() - gen.started
        size1 = database_size(db)
        if gen.errors:
            raise RunFailed(f"{len(gen.errors)} senders failed, e.g. {gen.errors[:3]}")
        cur.phase = "checking every message stored exactly once"
        check_stored_once(db, sims)
        logged = log_problems(r)
    except BaseException:
        cur.state = describe_current(progress)  # before the processes are stopped
        if cur.gen is not None:
            cur.gen.stopping.set()
        raise
    finally:
        r.stop()
    progress.current = None
    sent = sum(s.stored + s.heartbeats for s in sims)
    stored = sum(s.stored for s in sims)
    minutes = clusters * seconds / 60  # each cluster lives `seconds`
    pages = [t for times in reader.times.values() for t in times]
    return {
        "replicas": n_replicas,
        "clusters": clusters,
        "seconds": wall,
        "messages": sent,
        "stored": stored,
        "msg_s": sent / wall,
        "live_msg_s": gen.kept_up,
        "posts_s": gen.posts / wall,
        "posts_per_cluster_minute": gen.posts / minutes,
        "messages_per_cluster_minute": sent / minutes,
        "p50": pct(gen.latencies, 50),
        "p99": pct(gen.latencies, 99),
        "wait_p99": pct(gen.waits, 99),
        "lag_p99": pct(gen.lags, 99),
        "pages": len(pages),
        "page_p50": pct(pages, 50),
        "page_p99": pct(pages, 99),
        "page_failures": reader.failures,
        "by_page": {k: (len(v), pct(v, 50), pct(v, 99)) for k, v in reader.times.items()},
        "retries": gen.retries,
        "failures": dict(gen.failures),
        "backlog": gen.backlog,
        "drain": gen.drain,
        "bytes_per_cluster_hour": {
            t: (size1[t] - size0.get(t, 0)) / (clusters * seconds / 3600) for t in size1
        },
        "cores": cores,
        "logged": logged,
    }


PROBLEM_WORDS = ("WARNING", "ERROR", "CRITICAL", "Traceback", "[ALERT]")


def log_problems(r: Replicas) -> list[str]:
    """The replicas' and HAProxy's log lines that warn or err (the replicas say nothing
    of a request that went well)."""
    found = []
    for name, s in r.servers.items():
        found += [f"{name}: {line.rstrip()}" for line in list(s.output)]
    with contextlib.suppress(OSError):
        found += [f"haproxy: {line}" for line in r.balancer.log.read_text().splitlines()]
    return [line for line in found if any(w in line for w in PROBLEM_WORDS)]


def query(db: str, sql: str) -> list[tuple]:
    import sqlalchemy as sa

    from dask_analytics_lab.store.engine import make_engine

    engine = make_engine(db)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def database_size(db: str) -> dict[str, int]:
    """Bytes of the whole database ("all") and of each table with its indexes, a
    partitioned table's partitions (store/partitions.py) summed into it."""
    sizes = dict(
        query(
            db,
            "SELECT COALESCE(pg_partition_root(relid)::text, relname::text), "
            "sum(pg_total_relation_size(relid))::bigint FROM pg_stat_user_tables GROUP BY 1",
        )
    )
    sizes["all"] = query(db, "SELECT pg_database_size(current_database())")[0][0]
    return sizes


def check_stored_once(db: str, sims: list[SimCluster]) -> None:
    """Each cluster's seqs 1..n once in `ingested`, and the row tables hold exactly the
    rows sent: nothing lost, nothing doubled by a retried batch."""
    got = {
        cid: rest
        for cid, *rest in query(
            db,
            "SELECT cluster_id, count(*), count(DISTINCT seq), min(seq), max(seq) "
            "FROM ingested GROUP BY cluster_id",
        )
    }
    wrong = [
        (s.id, s.stored, got.get(s.id))
        for s in sims
        if got.get(s.id) != [s.stored, s.stored, 1, s.stored]
    ]
    if wrong:
        raise RunFailed(
            f"{len(wrong)} clusters' messages not stored exactly once, e.g. {wrong[:3]}"
        )
    ids = ", ".join(f"'{s.id}'" for s in sims)
    for table in ("cluster_samples", "worker_samples", "events", "task_stream"):
        ((n,),) = query(db, f"SELECT count(*) FROM {table} WHERE cluster_id IN ({ids})")
        sent = sum(s.rows[table] for s in sims)
        if n != sent:
            raise RunFailed(f"{table}: {n} rows stored, {sent} sent")


def settings_line(db: str) -> str:
    got = [
        f"{name} {query(db, f'SHOW {name}')[0][0]}"
        for name in ("fsync", "synchronous_commit", "full_page_writes", "max_connections")
    ]
    version = query(db, "SHOW server_version")[0][0]
    return f"PostgreSQL {version}: " + ", ".join(got)


# --- the model against a real recorder ----------------------------------------------------
def check_model(progress: Progress, minutes: float) -> None:
    """A real recorder (a LocalCluster recording into a real server, each POST counted)
    and the simulated cluster over the same span, per cluster-minute."""
    posts = recorder_traffic.record_real(minutes * 60)
    times = [m["time"] for batch in posts for m in batch]
    span = max(times) - min(times)  # the loop ends on a minute's boundary, then flushes
    real = recorder_traffic.figures(posts, span / 60)
    model = recorder_traffic.figures(recorder_traffic.simulate(span), span / 60)
    progress.check = {"minutes": span / 60, "real": real, "simulated": model}
    show_check(progress.check)
    ratio = model["POSTs"] / real["POSTs"]
    if abs(ratio - 1) > TOLERANCE:
        progress.warn(
            f"the simulated cluster sends {model['POSTs']:.1f} POSTs a cluster-minute, a real "
            f"recorder {real['POSTs']:.1f} in this run ({ratio:.2f}x, over the "
            f"{TOLERANCE:.0%} allowed): the load below is not a real fleet's"
        )


def off_model(progress: Progress, r: dict) -> None:
    """A loud warning when a configuration's generator sent POSTs off the real
    recorder's (beyond TOLERANCE): its offered load is not a real fleet's."""
    real = real_posts(progress)
    if not real:
        return
    ratio = r["posts_per_cluster_minute"] / real
    if abs(ratio - 1) > TOLERANCE:
        slow = (
            f" (its p99 ingest {r['p99'] * 1e3:.0f} ms: while the server is slow, batches "
            "merge, as a real shipper's would)"
            if r["p99"] >= GOAL
            else ""
        )
        progress.warn(
            f"{r['replicas']} replica(s), {r['clusters']:,} clusters: the generator sent "
            f"{r['posts_per_cluster_minute']:.1f} POSTs a cluster-minute, the real recorder "
            f"{real:.1f} in this run ({ratio:.2f}x){slow}"
        )


def crowded(progress: Progress, r: dict) -> None:
    """A warning when other jobs ran on the server's cores (a shared machine): the
    figures per server core are then not the server's alone."""
    others = r["cores"]["others on server cores"]
    if others > 0.1 * len(progress.cores.server):
        progress.warn(
            f"{r['replicas']} replica(s), {r['clusters']:,} clusters: other processes kept "
            f"{others:.2f} of the {len(progress.cores.server)} server core(s) busy "
            f"({r['cores']['others']:.2f} cores of the machine): its latencies and capacity "
            "are not the server's alone"
        )


# --- the report -------------------------------------------------------------------------
def show_check(check: dict) -> None:
    real, model = check["real"], check["simulated"]
    print(
        f"\nthe model against a real recorder (this run, {check['minutes']:.2f} min each), "
        "per cluster-minute"
    )
    print(f"  {'':<16} {'real':>8} {'simulated':>10} {'ratio':>6}")
    for key in dict.fromkeys([*real, *model]):
        a, b = real.get(key, 0.0), model.get(key, 0.0)
        print(f"  {key:<16} {a:>8.1f} {b:>10.1f} {b / a if a else float('nan'):>6.2f}")
    print(
        "  (the real recorder runs inside this script: its `code` messages carry this "
        "benchmark's own files, hence its kB)"
    )
    sys.stdout.flush()


def real_posts(progress: Progress) -> float | None:
    return progress.check["real"]["POSTs"] if progress.check else None


def show(results: list[dict], progress: Progress) -> None:
    base = results[0]
    real = real_posts(progress)
    real_msgs = progress.check["real"]["messages"] if progress.check else None
    print(
        f"\n{'replicas':>8} {'clusters':>8} {'messages':>9} {'msg/s':>6} {'live':>6} {'POST/s':>6} "
        f"{'POST/cl-min':>11} {'p50 ms':>7} {'p99 ms':>7} {'wait p99':>8} {'lag p99':>7} "
        f"{'pages':>5} {'page p50':>8} {'page p99':>8} {'retries':>7} {'backlog':>7} "
        f"{'drain':>6} {'MiB/cl-h':>8} {'MiB/cl-day':>10}  stored once"
    )
    for r in results:
        ratio = f"{r['posts_per_cluster_minute'] / real:.2f}x" if real else "?"
        print(
            f"{r['replicas']:>8} {r['clusters']:>8,} {r['messages']:>9,} {r['msg_s']:>6,.0f} "
            f"{r['live_msg_s']:>6,.0f} {r['posts_s']:>6,.0f} "
            f"{r['posts_per_cluster_minute']:>5.1f} {ratio:>5} "
            f"{r['p50'] * 1e3:>7.1f} {r['p99'] * 1e3:>7.1f} {r['wait_p99']:>7.2f}s "
            f"{r['lag_p99']:>6.2f}s {r['pages']:>5} "
            f"{r['page_p50'] * 1e3:>6.0f}ms {r['page_p99'] * 1e3:>6.0f}ms {r['retries']:>7} "
            f"{r['backlog']:>7,} {r['drain']:>5.1f}s "
            f"{r['bytes_per_cluster_hour']['all'] / 2**20:>8.2f} "
            f"{r['bytes_per_cluster_hour']['all'] * 24 / 2**20:>10.1f}  yes ({r['stored']:,})"
        )
    print(
        "msg/s: messages sent (heartbeats included) over the whole run, drain included; live: "
        "stored a second while the clusters ran;\nPOST/cl-min: POSTs a cluster-minute, and "
        f"against the real recorder's in this run ({real:.1f})"
        if real
        else "msg/s: messages sent (heartbeats included) over the whole run, drain included; "
        "live: stored a second while the clusters ran;\nPOST/cl-min: POSTs a cluster-minute "
        "(no real recorder checked in this run)"
    )
    print(
        "wait: from a message's put to stored (the 200 ms linger included); lag: how late the "
        "generator's own timeline ran;\nbacklog: queued in the senders when the clusters' time "
        "was up; drain: from the last stop to all stored"
    )
    print(
        "messages a cluster-minute: "
        + ", ".join(f"{r['messages_per_cluster_minute']:.1f}" for r in results)
        + (f" (the real recorder: {real_msgs:.1f})" if real_msgs else "")
    )
    print("\nteam page load, ms (p50 / p99, loads):")
    for r in results:
        print(
            f"  {r['replicas']} replica(s), {r['clusters']:,} clusters: "
            + ", ".join(
                f"{k} {p50 * 1e3:.0f} / {p99 * 1e3:.0f} ({n})"
                for k, (n, p50, p99) in r["by_page"].items()
            )
            + (f"; {r['page_failures']} failed" if r["page_failures"] else "")
        )
    names = {
        "generator": "generator", "replicas": "replicas", "postgres": "postgres",
        "haproxy": "haproxy", "others": "others", "machine": "machine",
        "server cores": "server cores", "others on server cores": "others there",
        "gen. cores": "gen. cores",
    }  # fmt: skip
    cores = progress.cores
    print(
        "\nCPU, cores busy on average (others: the rest of the machine, e.g. other jobs; "
        f"server cores {cores.server}, generator cores {cores.generator}: whoever ran there; "
        "others there: on the server cores, not the server)"
    )
    print(f"{'replicas':>8} {'clusters':>8} " + " ".join(f"{n:>12}" for n in names.values()))
    for r in results:
        print(
            f"{r['replicas']:>8} {r['clusters']:>8,} "
            + " ".join(
                f"{r['cores'][n]:>12.2f}" if n in r["cores"] else f"{'n/a':>12}" for n in names
            )
        )
    print("\nreplicas' CPU per stored message, ms (all replicas, team page reads included)")
    for r in results:
        print(
            f"  {r['replicas']} replica(s), {r['clusters']:,} clusters: "
            f"{r['cores']['replicas'] / r['msg_s'] * 1e3:.2f}"
        )
    growth = base["bytes_per_cluster_hour"]
    tables = sorted((t for t in growth if t != "all"), key=growth.get, reverse=True)[:6]
    print(
        "\ndatabase growth, MiB a cluster-hour (a cluster-day), by table with its indexes "
        "(first configuration; a short run's includes its fixed start-up)"
    )
    print(
        f"  all {growth['all'] / 2**20:.2f} ({growth['all'] * 24 / 2**20:.1f}); "
        + ", ".join(f"{t} {growth[t] / 2**20:.2f} ({growth[t] * 24 / 2**20:.1f})" for t in tables)
    )
    print(
        "\nwarnings or errors in the replicas' and HAProxy's logs: "
        + ", ".join(str(len(r["logged"])) for r in results)
    )
    for r in results:
        for line in r["logged"][:8]:
            print(f"  {r['replicas']} replica(s), {r['clusters']:,} clusters: {line[:300]}")
    failed = {why: n for r in results for why, n in r["failures"].items()}
    if failed:
        print("\nfailed writes (each retried):")
        for why, n in sorted(failed.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {n:,} x {why}")
    same = [r for r in results[1:] if r["clusters"] == base["clusters"]]
    if same:
        print("\nscale-out, against the first configuration (the offered load is the same):")
        for r in same:
            print(
                f"  {r['replicas']} replica(s) against {base['replicas']}: p50 ingest "
                f"{r['p50'] / base['p50']:.2f}x, p99 {r['p99'] / base['p99']:.2f}x, "
                f"message wait p99 {r['wait_p99'] / base['wait_p99']:.2f}x, "
                f"page p99 {r['page_p99'] / base['page_p99']:.2f}x, "
                f"throughput {r['msg_s'] / base['msg_s']:.2f}x"
            )
    sys.stdout.flush()


def show_steps(progress: Progress) -> None:
    print(
        f"\n--find-capacity, {progress.args.minutes:g} min a step (goal p99 < {GOAL * 1e3:.0f} ms)"
    )
    print(
        f"  {'clusters':>8} {'p50 ms':>7} {'p99 ms':>7} {'wait p99':>8} {'lag p99':>7} "
        f"{'replica cores':>13} {'postgres cores':>14} {'server cores':>12} {'others there':>12} "
        f"{'gen. cores':>10} "
        f"{'POST/cl-min':>11}  {'stored once':<18} verdict"
    )
    for r in progress.steps:
        c = r["cores"]
        print(
            f"  {r['clusters']:>8,} {r['p50'] * 1e3:>7.1f} {r['p99'] * 1e3:>7.1f} "
            f"{r['wait_p99']:>7.2f}s {r['lag_p99']:>6.2f}s {c['replicas']:>13.2f} "
            f"{c.get('postgres', float('nan')):>14.2f} {c['server cores']:>12.2f} "
            f"{c['others on server cores']:>12.2f} "
            f"{c['gen. cores']:>10.2f} {r['posts_per_cluster_minute']:>11.1f}  "
            f"{'yes (' + format(r['stored'], ',') + ')':<18} {r['verdict']}"
        )
    sys.stdout.flush()


# --- the capacity ------------------------------------------------------------------------
def verdict(r: dict) -> tuple[bool | None, str]:
    """(True: the goal met, False: missed, None: the generator limited the step)."""
    if r["lag_p99"] > LAG_LIMIT:
        return None, f"generator-limited (its timeline {r['lag_p99']:.2f} s late, p99)"
    if r["p99"] < GOAL:
        return True, "met"
    return False, "missed"


def find_capacity(progress: Progress, new_db: Callable[[], str], pg, tmp: Path, n: int) -> None:
    args = progress.args
    good: int | None = None
    bad: int | None = None
    clusters, bisections, limited = args.clusters, 0, False
    for step in range(args.max_steps):
        print(f"\nstep {step + 1}: {n} replica(s), {clusters:,} clusters, {args.minutes:g} min ...")
        sys.stdout.flush()
        r = run(progress, new_db(), pg, tmp / f"s{step}", n, clusters, args.minutes * 60)
        ok, r["verdict"] = verdict(r)
        progress.steps.append(r)
        off_model(progress, r)
        crowded(progress, r)
        show_steps(progress)
        if ok is None:
            limited = True
            break
        if ok:
            good = max(good or 0, clusters)
        else:
            bad = min(bad or clusters, clusters)
        if bad is None:
            nxt = math.ceil(clusters * GROWTH)
        elif good is None:
            nxt = max(1, math.floor(clusters / GROWTH))
            if nxt == clusters:
                break
        else:
            if bisections >= args.bisect:
                break
            nxt = (good + bad) // 2
            bisections += 1
            if nxt in (good, bad):
                break
        clusters = nxt
    else:
        progress.warn(f"--find-capacity stopped after --max-steps {args.max_steps} steps")
    c = len(progress.cores.server)
    where = f"(PostgreSQL, {n} replica(s), {c} server core(s): {progress.cores.server})"
    if good is None:
        line = (
            f"clusters per server core at p99 < {GOAL * 1e3:.0f} ms: none found, the "
            f"smallest step ({min(s['clusters'] for s in progress.steps):,}) missed {where}"
        )
    else:
        line = (
            f"clusters per server core at p99 < {GOAL * 1e3:.0f} ms: {good / c:,.0f} {where}; "
            f"{good:,} clusters met it"
            + (f", {bad:,} missed" if bad is not None else ", none missed (go higher)")
        )
    if limited:
        line += "; the generator limited the last step: a lower bound"
    if progress.cores.shared:
        line += "; ONE core only: the generator shared it"
    progress.capacity.append("\n" + line)
    print("\n" + line)
    sys.stdout.flush()


# --- the run ------------------------------------------------------------------------------
def default_deadline(args: argparse.Namespace, configurations: int) -> float:
    """Seconds the whole run may take: PostgreSQL's start, the model's check, and for each
    configuration its replicas' start, the clusters' lives and ramp, a drain as long as
    the flush allows, and the checks."""
    check = args.check_minutes * 60 + 60 + 120 if args.check_minutes > 0 else 0
    seconds = args.minutes * 60
    per = 90 + seconds + RAMP + max(120.0, seconds) + 90
    return 120 + check + per * configurations


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument(
        "--replicas",
        default="3,1",
        help="replica counts to run in turn, comma-separated; the first is the baseline "
        "(--find-capacity: the first only)",
    )
    p.add_argument("--threads", type=int, default=128, help="sender threads for all clusters")
    p.add_argument(
        "--postgres",
        metavar="URL",
        help="a PostgreSQL database to write into (default: start a server here with "
        "PostgreSQL's defaults and make a fresh database per configuration); its CPU is "
        "then not measured, nor is it pinned",
    )
    p.add_argument(
        "--server-cores",
        metavar="LIST",
        help="cores for the replicas, HAProxy and PostgreSQL, e.g. 1 or 2-3 (default: the "
        "last half of this machine's); the generator gets the others",
    )
    p.add_argument(
        "--check-minutes",
        type=float,
        default=1.0,
        help="minutes a real recorder runs first, to check the simulated cluster's POSTs "
        "against (0: no check)",
    )
    p.add_argument(
        "--find-capacity",
        action="store_true",
        help="step the cluster count from --clusters (x1.4 while p99 ingest < 200 ms, then "
        "--bisect halvings), --minutes each, and print clusters per server core",
    )
    p.add_argument("--bisect", type=int, default=2, help="--find-capacity's halvings")
    p.add_argument("--max-steps", type=int, default=10, help="--find-capacity's steps at most")
    p.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="the whole run's hard stop (default: derived from the other arguments)",
    )
    args = p.parse_args()
    counts = [int(n) for n in args.replicas.split(",")]
    if args.find_capacity:
        counts = counts[:1]
    configurations = args.max_steps if args.find_capacity else len(counts)
    deadline = args.deadline or default_deadline(args, configurations)
    cores = Cores.split(args.server_cores)
    progress = Progress(args, cores)

    pg = None

    def cleanup() -> None:
        cur = progress.current
        if cur is not None and cur.replicas is not None:
            with contextlib.suppress(Exception):
                cur.replicas.stop()
        if pg is not None:
            with contextlib.suppress(Exception):
                pg.stop()

    stop_watch = watchdog(progress, deadline, cleanup)
    try:
        progress.header = [
            f"team_scale: {' '.join(sys.argv[1:]) or '(defaults)'}",
            f"{psutil.cpu_count()} cores; server cores {cores.server} (replicas, HAProxy, "
            f"PostgreSQL), generator cores {cores.generator}"
            + (" -- ONE core: nothing apart" if cores.shared else "")
            + f"; nice {os.nice(0)}; deadline {deadline:.0f} s",
        ]
        print("\n".join(progress.header), flush=True)
        if args.check_minutes > 0:
            print(f"\nthe model's check: a real recorder for {args.check_minutes:g} min ...")
            sys.stdout.flush()
            progress.current = Current("the model's check (a real recorder)")
            progress.current.phase = "recording a real LocalCluster"
            check_model(progress, args.check_minutes)
            progress.current = None
        else:
            progress.warn("--check-minutes 0: the simulated cluster was not checked in this run")
        pin_process(os.getpid(), cores.generator)  # this process, every thread, from now on
        with tempfile.TemporaryDirectory() as tmp:
            from tests.postgres_server import PostgresServer

            if not args.postgres:
                with spawning_on(cores.server):  # the postmaster, and so its backends
                    pg = PostgresServer(settings=[]).start()  # PostgreSQL's durable defaults
                progress.pg = pg
                pin_tree(postmaster(pg), cores.server)  # its auxiliary processes: be sure

            def new_db() -> str:
                return pg.url(pg.create_database("scale")) if pg else args.postgres

            first = new_db()
            settings = settings_line(first)
            progress.header.append(
                settings + ("" if pg else f" (--postgres, not pinned: {args.postgres})")
            )
            print(progress.header[-1], flush=True)
            if pg is not None and query(first, "SHOW fsync")[0][0] != "on":
                progress.warn("PostgreSQL runs with fsync off: not a deployment's figures")
            if args.find_capacity:
                find_capacity(progress, new_db, pg, Path(tmp), counts[0])
            else:
                for k, n in enumerate(counts):
                    print(
                        f"\n{n} replica(s), {args.clusters:,} clusters, {args.minutes:g} min ...",
                        flush=True,
                    )
                    db = first if k == 0 else new_db()
                    seconds = args.minutes * 60
                    r = run(progress, db, pg, Path(tmp) / f"r{k}", n, args.clusters, seconds)
                    progress.results.append(r)
                    off_model(progress, r)
                    crowded(progress, r)
                    if k != len(counts) - 1:  # what is measured so far
                        show(progress.results, progress)
                        print("\n", flush=True)
            stop_watch.set()
            if pg is not None:
                pg.stop()
                pg = None
    except BaseException as e:  # a failure, ^C, SystemExit: the report, then out
        if isinstance(e, RunFailed | SystemExit | KeyboardInterrupt):
            reason = f"{type(e).__name__}: {e}"
        else:
            reason = "".join(traceback.format_exception(e)).rstrip()
        end_run(progress, reason, 1, cleanup)
    stop_watch.set()
    print("\n\nTHE REPORT")
    report(progress, None)


if __name__ == "__main__":
    main()
