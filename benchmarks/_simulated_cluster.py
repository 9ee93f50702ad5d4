"""One simulated cluster for benchmarks/team_scale.py: the messages a real scheduler's
recorder sends at the default settings, built with the message contract's own `make`.

The cadence is the collector's (collect/), at analytics.yaml's defaults:
- a tick every `analytics.interval` (1 s); a `cluster_sample` on each tick whose figures
  changed (every tick while tasks run), else every SAMPLE_EVERY (30 s);
- `worker_samples` of every worker each `analytics.workers.interval` (5 s); on the
  1 s tick that is a gap of 5 s, or 6 when the tick runs a little early (19 of the 32
  gaps in the recording below; a third in an earlier one: it depends on the machine);
- per computation, on each tick while it runs: its `computation` (task groups and
  totals), the `task_stream` rows of the tasks that finished, and its `metrics` (the
  rows that changed); once it ends, one `profile` per task prefix; the `code` of its
  snippet once per cluster;
- `worker-joined` / `worker-left` events as the workers come and go (both in the
  default events.allow), the `cluster` message first and `cluster_stop` last;
- the shipper's `heartbeat`, one with every write and one alone BEAT (2 s) after the
  last write started, and its linger (how messages become POSTs): not here but in
  benchmarks/_shipper_model.py, which both runners follow.

The sizes and the cadence are those of a real recording (benchmarks/recorder_traffic.py,
November 2026, the shipper lingering 200 ms): a LocalCluster of 4 workers x 2 threads
running a 614-task dask.array computation (9 task groups) every minute, recorded
through HttpSink at the defaults for 3 minutes, sent 36 POSTs, 70 messages (36 of them
heartbeats) and 188 kB of JSON (25 kB gzip'd) a minute; each computation ran 3 ticks and
its profiles came 1.5-1.8 s after its end.  team_scale.py checks this model against a
real recorder in the same run.
"""

from __future__ import annotations

import random
import time
import uuid

from dask_analytics_lab.collect.cluster import SAMPLE_EVERY
from dask_analytics_lab.messages import code_hash, fingerprint, make

N_WORKERS = 4
THREADS = 2
COMPUTATION_EVERY = 60.0
BUSY_TICKS = 3  # ticks a computation runs (3 each in the recording; 3-6 in an earlier one)
PROFILES_AFTER = 1.6  # seconds from a computation's end to its profiles (1.46-1.8)
LONG_WORKERS_GAP = 0.6  # the share of 6 s gaps between worker samples (19 of 32)
# (prefix, tasks) of the recorded computation's groups, first to last.
GROUPS = [
    ("slow", 240),
    ("slow-mean_chunk", 16),
    ("mean_chunk", 256),
    ("mean_combine-partial", 64),
    ("mean_agg-aggregate-sum", 16),
    ("sum", 16),
    ("sum-partial", 4),
    ("sum-aggregate", 1),
    ("finalize-hlgfinalizecompute", 1),
]
TASK_GROUP = [(prefix, n) for prefix, n in GROUPS for _ in range(n)]  # task k's group
PROFILED = ["slow", "mean_chunk", "mean_combine-partial", "mean_agg-aggregate-sum"]
# Fine-metric rows per task prefix, and those of no prefix (transfers).
PREFIX_ACTIVITIES = [
    ("executor", "seconds"),
    ("memory-read", "bytes"),
    ("memory-read", "count"),
    ("other", "seconds"),
    ("thread-cpu", "seconds"),
    ("thread-noncpu", "seconds"),
]
OTHER_METRICS = [
    ("gather-dep", "network", "seconds"),
    ("gather-dep", "other", "seconds"),
    ("get-data", "memory-read", "bytes"),
    ("get-data", "memory-read", "count"),
    ("get-data", "network", "seconds"),
]
CELL = (
    "import dask.array as da\n"
    "from dask_ml.preprocessing import StandardScaler\n\n"
    "def slow(x):\n    time.sleep(0.05)\n    return x + 1\n\n"
    + "".join(f"# step {i}: load, clean and summarise the day's partitions\n" for i in range(20))
    + "x = da.ones((4000, 4000), chunks=250)\ny = x.map_blocks(slow, dtype=float)\n"
    "(y + y.T).mean(axis=0).sum().compute()\n"
)
CODE_LINE = "(y + y.T).mean(axis=0).sum().compute()"
VERSIONS = {
    "python": "3.11.7",
    "dask": "2026.8.0",
    "distributed": "2026.8.0",
    "msgpack": "1.2.4",
    "cloudpickle": "3.1.3",
    "tornado": "6.6.1",
    "toolz": "1.2.0",
    "numpy": "2.4.6",
    "pandas": "3.1.1",
}


def _profile_tree(prefix: str, count: int) -> dict:
    """A profile of one prefix: Dask's task-execution frames, then the user's function."""
    frames = [
        ("__call__", "dask/_task_spec.py", 768, "return self.func(*new_argspec)"),
        ("_execute_subgraph", "dask/_task_spec.py", 199, "res = execute_graph(final)"),
        ("execute_graph", "dask/_task_spec.py", 1096, "cache[key] = node(cache)"),
        ("__call__", "dask/_task_spec.py", 768, "return self.func(*new_argspec)"),
        (prefix.replace("-", "_"), "/home/ann/analysis.ipynb", 5, "time.sleep(0.05)"),
    ]
    root = {
        "count": count,
        "identifier": "root",
        "description": {"filename": "", "name": "", "line_number": 0, "line": ""},
        "children": {},
    }
    node = root
    for name, filename, line, text in frames:
        path = f"/opt/conda/lib/python3.11/site-packages/{filename}"
        ident = f"{name};{path};{line - 2}"
        child = {
            "count": count,
            "identifier": ident,
            "description": {
                "filename": path,
                "name": name,
                "line_number": line,
                "line": text + "\n",
            },
            "children": {},
        }
        node["children"][ident] = child
        node = child
    return root


class SimCluster:
    """The messages of one cluster: `start`, then `tick` every interval (and `profiles`
    when `profiles_due` says), then `stop`.  Counts what it sent, by what is stored."""

    def __init__(self, index: int, *, start: float, rng: random.Random):
        self.id = f"Scheduler-{uuid.UUID(int=rng.getrandbits(128))}"
        self.index = index
        self.rng = rng
        self.seq = 0
        self.t0 = start
        self.host = f"10.{index // 250}.{index % 250}"
        self.workers = [f"tcp://{self.host}.{w + 1}:40{w + 1:03d}" for w in range(N_WORKERS)]
        self.tokens = {prefix: uuid.UUID(int=rng.getrandbits(128)).hex for prefix, _ in GROUPS}
        self.code_hash = code_hash("/home/ann/analysis.ipynb", CELL)
        self.code_sent = False
        self.next_computation = start + rng.uniform(0, COMPUTATION_EVERY)
        self.next_workers = start + self._workers_gap()
        self.last_sample = start
        self.computation: dict | None = None  # the one running: id, start, tick, done
        self.profiles_due: float | None = None
        self._just_ended = False  # the next tick's sample follows the figures' change
        self._profiled: str | None = None  # the computation whose profiles are due
        # What was sent: messages stored (not heartbeats), and rows of the row tables.
        self.stored = 0
        self.heartbeats = 0
        self.rows = {"worker_samples": 0, "task_stream": 0, "events": 0, "cluster_samples": 0}

    def _workers_gap(self) -> float:
        return 5.0 + (1.0 if self.rng.random() < LONG_WORKERS_GAP else 0.0)

    def msg(self, kind: str, now: float, data: dict) -> dict:
        self.seq += 1
        self.stored += 1
        return make(self.id, self.seq, kind, now, data)

    def heartbeat(self, now: float) -> dict:
        """The shipper's (one with every write, one alone BEAT after the last write
        started): seq 0, not stored.  The sender counts those written (`heartbeats`)."""
        return make(self.id, 0, "heartbeat", now, {})

    # --- the cluster's life ----------------------------------------------------------
    def start(self, now: float, *, account: str, user: str) -> list[dict]:
        batch = [
            self.msg(
                "cluster",
                now,
                {
                    "name": f"analysis.ipynb {self.index}",
                    "address": f"tcp://{self.host}.0:8786",
                    "user": user,
                    "account": account,
                    "started": now - 0.8,
                    "price_per_core_hour": 0.05,
                    "heartbeat": 5.0,
                    "versions": VERSIONS,
                    "platform": {
                        "arch": "x86_64",
                        "os": "Linux 6.8.0",
                        "python": "3.11.7",
                        "python_executable": "/opt/conda/bin/python",
                        "hostname": f"node-{self.index}",
                    },
                    "settings": {
                        "interval": 1.0,
                        "code_transmit": True,
                        "profile_transmit": True,
                        "events_allow": ["worker-joined", "worker-left", "worker-fail-hard"],
                    },
                },
            )
        ]
        batch += [self._worker_event("worker-joined", w, now) for w in self.workers]
        batch += [self._sample(now), self._worker_samples(now)]
        return batch

    def tick(self, now: float) -> list[dict]:
        """What the plugin's snapshot emits at `now`."""
        batch: list[dict] = []
        c = self.computation
        if c is None and now >= self.next_computation:
            c = self.computation = {
                "id": str(uuid.UUID(int=self.rng.getrandbits(128))),
                "start": now - 0.2,
                "tick": 0,
                "done": 0,
                "compute": 0.0,
            }
            self.next_computation = now + COMPUTATION_EVERY
        if c is not None:
            batch.append(self._sample(now, processing=N_WORKERS * THREADS))
            batch += self._busy_tick(c, now)
        elif self._just_ended or now - self.last_sample >= SAMPLE_EVERY:
            self._just_ended = False
            batch.append(self._sample(now))
        if now >= self.next_workers:
            batch.append(self._worker_samples(now))
            self.next_workers = now + self._workers_gap()
        return batch

    def profiles(self, now: float) -> list[dict]:
        """The ended computation's profiles, one per prefix, as its fetch returns."""
        self.profiles_due = None
        cid = self._profiled
        return [
            self.msg(
                "profile",
                now,
                {
                    "computation_id": cid,
                    "prefix": prefix,
                    "count": count,
                    "tree": _profile_tree(prefix, count),
                },
            )
            for prefix, count in zip(PROFILED, (991, 29, 2, 1))
        ]

    def snapshot(self, now: float) -> list[dict]:
        """A forced snapshot (`dal.flush` ticks once before it flushes): the cluster's
        sample and its workers'."""
        return [self._sample(now), self._worker_samples(now)]

    def stop(self, now: float) -> list[dict]:
        batch = [self._sample(now), self._worker_samples(now)]
        batch += [self._worker_event("worker-left", w, now) for w in self.workers]
        batch.append(
            self.msg(
                "cluster_stop",
                now,
                {"stopped": now, "reason": "closed", "idle_shutdown": False},
            )
        )
        return batch

    # --- the messages ----------------------------------------------------------------
    def _sample(self, now: float, processing: int = 0) -> dict:
        self.last_sample = now
        self.rows["cluster_samples"] += 1
        up = now - self.t0
        return self.msg(
            "cluster_sample",
            now,
            {
                "n_workers": N_WORKERS,
                "n_threads": N_WORKERS * THREADS,
                "memory_used": 525_242_368 + processing * 2**24,
                "memory_total": N_WORKERS * 6_319_128_576,
                "processing": processing,
                "worker_seconds": N_WORKERS * up,
                "core_seconds": N_WORKERS * THREADS * up,
                "cost": N_WORKERS * THREADS * up / 3600 * 0.05,
                "idle_since": None if processing else now - 1,
                "last_activity": now if processing else self.t0,
                "dropped_messages": 0,
            },
        )

    def _worker_samples(self, now: float) -> dict:
        busy = self.computation is not None
        self.rows["worker_samples"] += N_WORKERS
        return self.msg(
            "worker_samples",
            now,
            {
                "samples": [
                    {
                        "worker": w,
                        "time": now,
                        "name": str(i),
                        "host": self.host + f".{i + 1}",
                        "nthreads": THREADS,
                        "memory_limit": 6_319_128_576,
                        "managed": 30_000_000 * busy,
                        "unmanaged": 131_411_968 + i * 4096,
                        "spilled": 0,
                        "cpu": 190.0 if busy else 2.0,
                        "processing": THREADS * busy,
                    }
                    for i, w in enumerate(self.workers)
                ]
            },
        )

    def _worker_event(self, topic: str, worker: str, now: float) -> dict:
        self.rows["events"] += 1
        i = self.workers.index(worker)
        msg = {
            "worker": worker,
            "name": str(i),
            "host": self.host + f".{i + 1}",
            "nthreads": THREADS,
            "memory_limit": 6_319_128_576,
            "time": now,
        }
        if topic == "worker-left":
            msg.update(reason="closed", why="closed: it was told to stop", died=False)
        return self.msg("event", now, {"topic": topic, "time": now, "msg": msg})

    def _busy_tick(self, c: dict, now: float) -> list[dict]:
        c["tick"] += 1
        total = sum(n for _, n in GROUPS)
        last = c["tick"] >= BUSY_TICKS
        done = total if last else total * c["tick"] // BUSY_TICKS
        finished = range(c["done"], done)
        c["done"] = done
        c["compute"] += 0.05 * len(finished)
        batch = []
        if not self.code_sent:
            self.code_sent = True
            batch.append(
                self.msg(
                    "code",
                    now,
                    {
                        "hash": self.code_hash,
                        "text": CELL,
                        "filename": "/home/ann/analysis.ipynb",
                        "lineno_frame": 30,
                        "lineno_relative": 29,
                    },
                )
            )
        batch.append(self._computation(c, now, done, last))
        batch.append(self._task_stream(c, now, finished))
        batch.append(self._metrics(c, now, done, total))
        if last:
            self.computation = None
            self._just_ended, self._profiled = True, c["id"]
            self.profiles_due = now + PROFILES_AFTER  # the workers' answers to the fetch
        return batch

    def _groups(self, c: dict, now: float, done: int) -> list[dict]:
        groups, before = [], 0
        for prefix, n in GROUPS:
            n_done = max(0, min(n, done - before))
            before += n
            name = prefix if n == 1 else f"{prefix}-{self.tokens[prefix]}"
            groups.append(
                {
                    "name": name,
                    "prefix": prefix,
                    "states": {"memory": n_done, "processing": n - n_done}
                    if n_done < n
                    else {"forgotten": n},
                    "n_tasks": n,
                    "n_done": n_done,
                    "n_erred": 0,
                    "n_not_run": 0,
                    "n_cancelled": 0,
                    "compute": 0.05 * n_done,
                    "transfer": 0.001 * n_done,
                    "disk_read": 0.0,
                    "disk_write": 0.0,
                    "nbytes": 500_000 * n_done,
                    "start": c["start"],
                    "stop": now if n_done else None,
                    "dependencies": [g["name"] for g in groups[-1:]],
                }
            )
        return groups

    def _computation(self, c: dict, now: float, done: int, last: bool) -> dict:
        groups = self._groups(c, now, done)
        return self.msg(
            "computation",
            now,
            {
                "id": c["id"],
                "start": c["start"],
                "stop": now if last else None,
                "state": "finished" if last else "running",
                "label": "slow → mean_chunk → … → finalize-hlgfinalizecompute",
                "code": [self.code_hash],
                "code_frames": [
                    {"hash": self.code_hash, "lineno_frame": 30, "lineno_relative": 29}
                ],
                "code_line": CODE_LINE,
                "fingerprint": fingerprint(CODE_LINE, [p for p, _ in GROUPS]),
                "totals": {
                    "n_tasks": sum(g["n_tasks"] for g in groups),
                    "n_groups": len(groups),
                    "n_done": done,
                    "n_erred": 0,
                    "n_not_run": 0,
                    "n_cancelled": 0,
                    "compute": c["compute"],
                    "transfer": 0.001 * done,
                    "disk": 0.0,
                    "nbytes": 500_000 * done,
                },
                "groups": groups,
            },
        )

    def _task_stream(self, c: dict, now: float, finished: range) -> dict:
        rows = []
        jitter = self.rng.random  # real clocks: what gzip makes of the rows depends on it
        for k in finished:
            prefix, n = TASK_GROUP[k]
            start = now - 1 + jitter()
            w = k % N_WORKERS
            rows.append(
                {
                    "start": start,
                    "stop": start + 0.05 + 0.002 * jitter(),
                    "worker": self.workers[w],
                    "thread": 139892754462400 + 16_789_504 * (k % THREADS) + w,
                    "prefix": prefix,
                    "task_group": prefix if n == 1 else f"{prefix}-{self.tokens[prefix]}",
                    "state": "memory",
                }
            )
        self.rows["task_stream"] += len(rows)
        return self.msg("task_stream", now, {"computation_id": c["id"], "rows": rows})

    def _metrics(self, c: dict, now: float, done: int, total: int) -> dict:
        seen = max(1, len(GROUPS) * done // total)
        rows = [
            {"context": ctx, "activity": a, "unit": u, "value": 0.01 * done * self.rng.random()}
            for ctx, a, u in OTHER_METRICS
        ]
        rows += [
            {
                "context": "execute",
                "activity": a,
                "unit": u,
                "value": float(done) if u != "seconds" else 0.05 * done * self.rng.random(),
                "prefix": prefix,
            }
            for prefix, _ in GROUPS[:seen]
            for a, u in PREFIX_ACTIVITIES
        ]
        return self.msg("metrics", now, {"computation_id": c["id"], "rows": rows})


def tick_batches(
    first: int, clusters: int, seconds: int, *, seed: int, account: str, user: str
) -> list[list[dict]]:
    """What clusters first .. first+clusters-1 send over `seconds` one-second ticks that
    ended 10 s ago: their starts, then a batch per cluster per tick that made anything
    (what the shipper's linger gathers into one POST).  For benchmarks that replay the
    same POSTs into stores and servers."""
    rng = random.Random(seed)
    t0 = time.time() - seconds - 10
    sims = [SimCluster(i, start=t0, rng=rng) for i in range(first, first + clusters)]
    batches = [s.start(t0, account=account, user=user) for s in sims]
    for k in range(1, seconds):
        now = t0 + k
        for s in sims:
            batch = s.tick(now)
            if s.profiles_due is not None and now >= s.profiles_due:
                batch += s.profiles(now)
            if batch:
                batches.append(batch)
    return batches
