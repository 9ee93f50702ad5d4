"""Messages for tests: one cluster's messages of every kind, task groups, profile trees.

Wire-form dicts (messages.make), as a collector sends them; tests that check refusals
change a field of one.
"""

from __future__ import annotations

import itertools
import uuid

from dask_analytics_lab.messages import make

T0 = 1_700_000_000.0


def tree(*frames: str, count: int = 1) -> dict:
    """A Dask profile tree with one stack of `frames` (outermost first)."""
    node = {
        "count": count,
        "identifier": "root",
        "children": {},
        "description": {"filename": "", "name": "", "line_number": 0, "line": ""},
    }
    root = node
    for i, name in enumerate(frames):
        ident = f"{name};file.py;{i}"
        child = {
            "count": count,
            "identifier": ident,
            "children": {},
            "description": {
                "filename": "file.py",
                "name": name,
                "line_number": i,
                "line": f"{name}()",
            },
        }
        node["children"][ident] = child
        node = child
    return root


_FRAMES = object()  # "the default" for Cluster.computation's frames=
_LABEL = object()
_LINE = object()


class Cluster:
    """Makes the messages of one cluster, with increasing seq and time."""

    def __init__(self, cluster_id: str | None = None, account: str = "default", t0: float = T0):
        self.id = cluster_id or f"tcp-scheduler-{uuid.uuid4().hex[:10]}"
        self.account = account
        self._seq = itertools.count()
        self.t = t0

    def msg(self, kind: str, data: dict, time: float | None = None) -> dict:
        self.t += 1.0
        return make(self.id, next(self._seq), kind, self.t if time is None else time, data)

    def cluster(self, **kw) -> dict:
        data = {
            "name": "LocalCluster-1",
            "address": "tcp://127.0.0.1:8786",
            "user": "ann",
            "account": self.account,
            "started": T0,
            "price_per_core_hour": 0.05,
            "versions": {"python": "3.11.7", "dask": "2026.8.0", "distributed": "2026.8.0"},
            "platform": {
                "arch": "x86_64",
                "os": "Linux",
                "python": "3.11.7",
                "python_executable": "/usr/bin/python3",
                "hostname": "box",
            },
            "settings": {
                "interval": 1.0,
                "code_transmit": True,
                "profile_transmit": True,
                "events_allow": ["worker-fail-hard"],
            },
        }
        return self.msg("cluster", {**data, **kw})

    def sample(self, *, at: float | None = None, **kw) -> dict:
        """A cluster_sample (a heartbeat); at: the message's time (default: the next second)."""
        data = {
            "n_workers": 2,
            "n_threads": 4,
            "memory_used": 2**31,
            "memory_total": 2**34,
            "processing": 3,
            "worker_seconds": 10.0,
            "core_seconds": 20.0,
            "cost": 0.0003,
            "idle_since": None,
            "last_activity": self.t,
            "dropped_messages": 0,
        }
        return self.msg("cluster_sample", {**data, **kw}, time=at)

    def stop(self, **kw) -> dict:
        return self.msg(
            "cluster_stop",
            {"stopped": self.t + 1, "reason": "closed", "idle_shutdown": False, **kw},
        )

    def computation(
        self,
        comp_id: str,
        *,
        state: str = "finished",
        groups: list | None = None,
        code: list | None = None,
        start: float | None = None,
        frames: list | None = _FRAMES,
        label: str | None = _LABEL,
        code_line: str | None = _LINE,
        fingerprint: str | None = None,
        stop: float | None = None,
        **totals,
    ) -> dict:
        """frames: code_frames (default: line 12 / 3 of each snippet in `code`; None: sent by
        a collector from before code_frames); label: default, the groups' prefixes;
        code_line: default, a line when there is code; fingerprint: none by default (as
        a collector from before fingerprints); stop: default half a second after now."""
        groups = (
            groups
            if groups is not None
            else [group("sum-aggregate", n_tasks=4), group("ones", n_tasks=16)]
        )
        t = {
            "n_tasks": sum(g["n_tasks"] for g in groups),
            "n_groups": len(groups),
            "n_done": sum(g["n_done"] for g in groups),
            "n_erred": sum(g["n_erred"] for g in groups),
            "n_not_run": sum(g["n_not_run"] for g in groups),
            "compute": sum(g["compute"] for g in groups),
            "transfer": 0.1,
            "disk": 0.0,
            "nbytes": sum(g["nbytes"] for g in groups),
            **totals,
        }
        if frames is _FRAMES:
            frames = [{"hash": h, "lineno_frame": 12, "lineno_relative": 3} for h in code or []]
        if code_line is _LINE:
            code_line = "x.sum().compute()" if code else None
        if label is _LABEL:
            label = " → ".join(dict.fromkeys(g["prefix"] for g in groups))
        if stop is None and state != "running":
            stop = self.t + 0.5
        return self.msg(
            "computation",
            {
                "id": comp_id,
                "start": start if start is not None else self.t,
                "stop": stop,
                "state": state,
                "code": code or [],
                "code_frames": frames,
                "code_line": code_line,
                "label": label,
                "fingerprint": fingerprint,
                "totals": t,
                "groups": groups,
            },
        )

    def code(self, h: str, text: str = "x.sum().compute()") -> dict:
        return self.msg(
            "code",
            {
                "hash": h,
                "text": text,
                "filename": "/home/ann/nb.py",
                "lineno_frame": 12,
                "lineno_relative": 3,
            },
        )

    def exception(
        self, comp_id: str | None, group_name: str | None, h: str = "e1", count: int = 1, **kw
    ) -> dict:
        return self.msg(
            "exception",
            {
                "computation_id": comp_id,
                "group": group_name,
                "hash": h,
                "exception_text": "ValueError('bad value 1')",
                "traceback_text": 'File "nb.py", line 3, in boom\n    raise ValueError(x)\n',
                "key": "('boom-abc', 3)",
                "count": count,
                "first_time": self.t,
                "last_time": self.t,
                "exc_type": "ValueError",
                "location": "nb.py:3 in boom",
                "pattern": "bad value <int>",
                "examples": ["ValueError('bad value 1')"],
                "workers": ["tcp://127.0.0.1:4001"],
                **kw,
            },
        )

    def event(self, topic: str = "worker-fail-hard", msg=None) -> dict:
        return self.msg(
            "event",
            {
                "topic": topic,
                "time": self.t,
                "msg": msg if msg is not None else {"worker": "tcp://w1"},
            },
        )

    def profile(self, comp_id: str | None, t: dict) -> dict:
        return self.msg("profile", {"computation_id": comp_id, "tree": t, "count": t["count"]})

    def metrics(self, comp_id: str, rows: list | None = None) -> dict:
        """Fine performance metrics: default, a CPU-bound `ones` and a sleeping `sleepy`."""
        rows = (
            rows
            if rows is not None
            else [
                {
                    "prefix": "ones",
                    "context": "execute",
                    "activity": "thread-cpu",
                    "unit": "seconds",
                    "value": 4.0,
                },
                {
                    "prefix": "ones",
                    "context": "execute",
                    "activity": "thread-noncpu",
                    "unit": "seconds",
                    "value": 0.1,
                },
                {
                    "prefix": "sleepy",
                    "context": "execute",
                    "activity": "thread-noncpu",
                    "unit": "seconds",
                    "value": 3.0,
                },
                {"context": "gather-dep", "activity": "network", "unit": "seconds", "value": 0.2},
            ]
        )
        return self.msg("metrics", {"computation_id": comp_id, "rows": rows})

    def workers(self, n: int = 2, *, at: float | None = None, **kw) -> dict:
        """One sample of `n` workers."""
        t = self.t + 1 if at is None else at
        return self.msg(
            "worker_samples",
            {
                "samples": [
                    {
                        "worker": f"tcp://10.0.0.{i + 1}:4000",
                        "time": t,
                        "name": str(i),
                        "host": f"10.0.0.{i + 1}",
                        "nthreads": 2,
                        "memory_limit": 8 * 2**30,
                        "managed": 2**30 * (i + 1),
                        "unmanaged": 2**28,
                        "spilled": 0,
                        "cpu": 95.0,
                        "processing": 2,
                        **kw,
                    }
                    for i in range(n)
                ]
            },
            time=at,
        )

    def tasks(self, comp_id: str, rows: list | None = None, *, replace: bool = False) -> dict:
        """Task stream rows: default, four tasks of `ones` on two workers."""
        t = self.t
        rows = (
            rows
            if rows is not None
            else [
                {
                    "worker": f"tcp://10.0.0.{i % 2 + 1}:4000",
                    "thread": 140000 + i % 2,
                    "prefix": "ones",
                    "task_group": "ones-abc",
                    "state": "memory",
                    "start": t + i * 0.1,
                    "stop": t + i * 0.1 + 0.05,
                }
                for i in range(4)
            ]
        )
        return self.msg(
            "task_stream", {"computation_id": comp_id, "rows": rows, "replace": replace}
        )

    def gpu(
        self,
        n: int = 2,
        *,
        worker: str = "tcp://10.0.0.5:4000",
        host: str = "gpu-host-1",
        monitor_id: str = "m1",
    ) -> dict:
        samples = [
            {
                "timestamp": self.t + i,
                "time": self.t + i,
                "gpu_uuid": f"GPU-{g}",
                "gpu_index": g,
                "gpu_name": "NVIDIA H100",
                "mem_used": 2**30 * (g + 1),
                "mem_total": 80 * 2**30,
                "mem_util": 10.0,
                "compute_util": 55.5,
                "power_w": 300.0,
                "temperature_c": 60.0,
                "job": "train",
                "dag": "dag-1",
                "task_groups": ["train-step"],
            }
            for i in range(n)
            for g in range(2)
        ]
        return self.msg(
            "gpu_samples",
            {"worker": worker, "host": host, "monitor_id": monitor_id, "samples": samples},
        )


def group(name: str, **kw) -> dict:
    """A task group; all its tasks done unless n_erred / n_not_run say otherwise."""
    n = kw.pop("n_tasks", 4)
    erred, not_run = kw.pop("n_erred", 0), kw.pop("n_not_run", 0)
    return {
        "name": name,
        "prefix": name.split("-")[0],
        "states": {"memory": n},
        "n_tasks": n,
        "n_done": n - erred - not_run,
        "n_erred": erred,
        "n_not_run": not_run,
        "compute": 0.5 * n,
        "transfer": 0.01,
        "disk_read": 0.0,
        "disk_write": 0.0,
        "nbytes": 8000 * n,
        "start": T0 + 1,
        "stop": T0 + 2,
        "dependencies": [],
        **kw,
    }


def every_table(c: Cluster, comp: str, code: list[str], *, stop: bool = True) -> list[dict]:
    """One cluster's messages, with a row in every table that hangs off a cluster."""
    msgs = [c.cluster(started=c.t), c.sample()]
    msgs += [c.code(h) for h in code]
    msgs += [
        c.computation(comp, code=code, groups=[group("ones-1"), group("sum-2")]),
        c.exception(comp, "ones-1"),
        c.event(),
        c.profile(comp, tree("f", "g")),
        c.profile(None, tree("h")),
        c.metrics(comp),
        c.workers(2),
        c.tasks(comp),
        c.gpu(1),
    ]
    if stop:
        msgs.append(c.stop())
    return msgs


def straggling(c: Cluster, comp_id: str, name: str = "load-abc") -> list[dict]:
    """A computation of 8 `load` tasks (group `name`) on 2 workers of 2 threads, one of
    them 50x the others."""
    t = c.t + 1
    rows = [
        {
            "worker": f"tcp://10.0.0.{i % 2 + 1}:4000",
            "thread": 140000 + i % 4,
            "prefix": "load",
            "task_group": name,
            "state": "memory",
            "start": t + (i // 4) * 0.1,
            "stop": t + (i // 4) * 0.1 + (5.0 if i == 5 else 0.1),
        }
        for i in range(8)
    ]
    return [
        c.workers(2, at=t),
        c.computation(
            comp_id,
            start=t,
            stop=t + 5.1,
            groups=[group(name, n_tasks=8, compute=5.7, start=t, stop=t + 5.1)],
        ),
        c.tasks(comp_id, rows),
    ]
