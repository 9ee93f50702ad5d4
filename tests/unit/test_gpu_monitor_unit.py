"""gpu_monitor: job/dag tracking and sample ingest on the scheduler, with fake scheduler objects."""

from __future__ import annotations

import logging
import time
from collections import deque
from types import SimpleNamespace

import pytest

from dask_analytics_lab import messages
from dask_analytics_lab.collect import gpu_jobs
from dask_analytics_lab.collect.gpu_jobs import JobTracker
from dask_analytics_lab.collect.gpu_monitor import (
    ROW_FIELDS,
    GPUMonitorPlugin,
    MonitorRun,
    validate_metrics,
)


class TG:
    def __init__(self, name):
        self.name = name
        self.stop = 0.0  # the last task's end, as Dask's TaskGroup keeps it
        self.done = False


class Comp:
    def __init__(self, cid, start=None):
        self.id = cid
        self.groups = set()
        self.start = time.time() if start is None else start


class FakeScheduler:
    def __init__(self):
        self.computations = deque(maxlen=100)
        self.is_idle = True
        self.plugins = {}
        self.extensions = {}  # as Dask's: where collect/sources.py keeps a scheduler's source


def submit(sched, tracker, *groups, new_computation=False, tasks=None, start=None):
    """What Scheduler.update_graph does before the hook: groups into the last Computation."""
    if new_computation or not sched.computations:
        sched.computations.append(Comp(f"c{len(sched.computations) + 1}", start))
    comp = sched.computations[-1]
    for g in groups:
        comp.groups.add(TG(g))
    sched.is_idle = False
    tracker.graph_submitted(sched, tasks if tasks is not None else [(g, 0) for g in groups])
    return comp


def test_a_monitor_registered_mid_computation_does_not_invent_dag_indexes():
    """Without the recorder, the monitor counts graphs from its registration: those of
    the computation already running are of unknown index, a new computation's from 0."""
    sched, jobs = FakeScheduler(), JobTracker()
    c1 = submit(sched, JobTracker(), "parent")  # before the monitor existed
    jobs.joined_late(sched)
    jobs.active = True
    submit(sched, jobs, "child")
    assert jobs.lookup(sched, ["child"]) == (str(c1.id), None)
    sched.is_idle = True
    c2 = submit(sched, jobs, "next", new_computation=True)
    assert jobs.lookup(sched, ["next"]) == (str(c2.id), 0)


def test_the_monitor_reads_the_recorders_job_tracker():
    """With the recorder registered (it counts every graph from the scheduler's start),
    the monitor uses its tracker and counts nothing itself."""

    class Recorder:
        jobs = JobTracker()

    plugin = make_plugin()
    plugin._started = True
    plugin.scheduler.plugins["dask-analytics-lab"] = Recorder()
    assert plugin.jobs is Recorder.jobs
    plugin.update_graph(plugin.scheduler, tasks=[("x", 0)])
    assert not plugin._jobs._dags


def test_job_is_the_computation_and_dag_the_submission_index():
    sched, jobs = FakeScheduler(), JobTracker()
    jobs.active = True
    c1 = submit(sched, jobs, "parent")
    submit(sched, jobs, "child")  # submitted by the running parent: same computation
    submit(sched, jobs, "grandchild")
    assert jobs.lookup(sched, ["parent"]) == (str(c1.id), 0)
    assert jobs.lookup(sched, ["child", "parent"]) == (str(c1.id), 1)  # the latest submission wins
    assert jobs.lookup(sched, ["grandchild", "parent", "child"]) == (str(c1.id), 2)
    sched.is_idle = True
    c2 = submit(sched, jobs, "parent", new_computation=True)  # same name, a new TaskGroup
    assert jobs.lookup(sched, ["parent"]) == (str(c2.id), 0)


def test_small_graph_reusing_a_live_group_gets_the_new_dag():
    sched, jobs = FakeScheduler(), JobTracker()
    jobs.active = True
    c = submit(sched, jobs, "inc", tasks=["inc-5f2a3b1c0d9e8f7a6b5c4d3e2f1a0b9c"])
    submit(
        sched, jobs, tasks=["inc-0d9e8f7a6b5c4d3e2f1a0b9c5f2a3b1c"]
    )  # client.submit(inc, ...) again: no new group
    assert jobs.lookup(sched, ["inc"]) == (str(c.id), 1)


def test_keys_tell_apart_submissions_that_share_a_group():
    sched, jobs = FakeScheduler(), JobTracker()
    jobs.active = True
    k0, k1 = "train-5f2a3b1c0d9e8f7a6b5c4d3e2f1a0b9c", "train-0d9e8f7a6b5c4d3e2f1a0b9c5f2a3b1c"
    c = submit(sched, jobs, "train", tasks=[k0])
    submit(sched, jobs, tasks=[k1])  # the same function submitted again: the same group
    assert jobs.lookup(sched, ["train"], [k0]) == (str(c.id), 0)
    assert jobs.lookup(sched, ["train"], [k1]) == (str(c.id), 1)
    assert jobs.lookup(sched, ["train"], [k0, k1]) == (str(c.id), 1)
    assert jobs.lookup(sched, ["train"]) == (str(c.id), 1)  # groups only: the latest
    assert jobs.lookup(sched, ["train"], ["unknown-key"]) == (str(c.id), 1)


def test_busy_worker_with_unknown_groups_gets_the_running_job_and_no_dag():
    sched, jobs = FakeScheduler(), JobTracker()
    jobs.active = True
    c = submit(sched, jobs, "a")
    assert jobs.lookup(sched, ["never-seen"]) == (str(c.id), None)
    assert jobs.lookup(sched, []) == (None, None)  # nothing running there
    sched.is_idle = True
    assert jobs.lookup(sched, ["never-seen"]) == (None, None)


def test_dags_are_counted_while_inactive_and_groups_seeded_at_start():
    sched, jobs = FakeScheduler(), JobTracker()
    c = submit(sched, jobs, "early")
    submit(sched, jobs, "early2")
    assert jobs.lookup(sched, ["early"]) == (str(c.id), None)  # not mapped while no monitor runs
    jobs.seed(sched)
    jobs.active = True
    assert jobs.lookup(sched, ["early2"]) == (str(c.id), None)  # job known, its dag not
    submit(sched, jobs, "late")
    assert jobs.lookup(sched, ["late"]) == (str(c.id), 2)  # counted all along


def test_validate_metrics():
    assert validate_metrics(None) == [
        "total-mem",
        "mem-util",
        "compute-util",
        "power",
        "temperature",
    ]
    assert validate_metrics(["compute-util", "total-mem", "compute-util"]) == [
        "compute-util",
        "total-mem",
    ]
    assert validate_metrics("power") == ["power"]
    with pytest.raises(ValueError, match=r"unknown GPU metric\(s\) \['gpu-mem'\]; choose from"):
        validate_metrics(["total-mem", "gpu-mem"])


class Recorder:
    """Stands in for the analytics plugin: the same emit(), building real messages."""

    def __init__(self):
        self.messages = []
        self.cluster_id = "cluster-1"

    def emit(self, kind, data):
        msg = messages.make(self.cluster_id, len(self.messages) + 1, kind, 0.0, data)
        messages.check(msg)  # what ingest would refuse fails here
        self.messages.append(msg)


def make_plugin():
    plugin = GPUMonitorPlugin()
    plugin.scheduler = FakeScheduler()
    plugin._jobs = JobTracker()
    plugin.runs = {}
    plugin.active = None
    return plugin


def batch(t0, n, uuids=("GPU-a", "GPU-b"), groups=("matmul",), used=lambda i: i):
    return [
        {
            "time": t0 + i * 0.1,
            "task_groups": list(groups),
            "gpus": [
                {
                    "gpu_uuid": u,
                    "gpu_index": k,
                    "gpu_name": "Fake",
                    "mem_used": used(i) * (k + 1),
                    "mem_total": 1000,
                    "mem_util": None,
                    "compute_util": 50.0,
                    "power_w": None,
                    "temperature_c": None,
                }
                for k, u in enumerate(uuids)
            ],
        }
        for i in range(n)
    ]


def test_ingest_tags_rows_emits_the_contract_and_tracks_peaks():
    plugin = make_plugin()
    recorder = Recorder()
    plugin.scheduler.plugins["dask-analytics-lab"] = recorder
    run = MonitorRun(metrics=["total-mem"], interval=0.1, keep_rows=1000, client=None)
    plugin.runs[run.id] = run
    plugin.jobs.active = True
    comp = submit(plugin.scheduler, plugin.jobs, "matmul")

    plugin._on_samples(
        worker="tcp://w1:1", monitor_id=run.id, host="node1", samples=batch(run.started, 3)
    )
    plugin._on_samples(
        worker="tcp://w1:1",
        monitor_id=run.id,
        host="node1",
        samples=batch(run.started + 1, 2, used=lambda i: 7 - i),
    )
    assert run.batches == {"tcp://w1:1": 2} and run.n_rows == 10

    assert len(recorder.messages) == 2
    msg = recorder.messages[0]
    assert msg["kind"] == "gpu_samples"
    data = msg["data"]
    assert (
        data["worker"] == "tcp://w1:1" and data["host"] == "node1" and data["monitor_id"] == run.id
    )
    row = data["samples"][1]
    assert set(row) == {
        "timestamp",
        "time",
        "gpu_uuid",
        "gpu_index",
        "gpu_name",
        "mem_used",
        "mem_total",
        "mem_util",
        "compute_util",
        "power_w",
        "temperature_c",
        "job",
        "dag",
        "task_groups",
        "waiting",
        "jobs",
        "shared_by",
    }
    assert row["gpu_uuid"] == "GPU-b" and row["job"] == comp.id and row["dag"] == "0"
    assert row["task_groups"] == ["matmul"] and row["timestamp"] == pytest.approx(0.0)

    peaks = plugin.get_peaks(run.id)["workers"]["tcp://w1:1"]
    assert [(p["uuid"], p["peak"]) for p in peaks] == [("GPU-a", 7), ("GPU-b", 14)]


def test_ingest_works_without_the_analytics_plugin_and_ignores_unknown_runs(caplog):
    plugin = make_plugin()
    run = MonitorRun(metrics=["total-mem"], interval=0.1, keep_rows=1000, client=None)
    plugin.runs[run.id] = run
    plugin._on_samples(worker="w", monitor_id=run.id, host="h", samples=batch(run.started, 1))
    assert run.n_rows == 2
    plugin._on_samples(worker="w", monitor_id="unknown", host="h", samples=batch(0, 1))
    assert run.n_rows == 2
    with caplog.at_level(logging.ERROR):
        plugin._on_samples(worker="w", monitor_id=run.id, samples=[{"no-time": 1}])  # never raises
    assert any("bad GPU sample batch" in r.getMessage() for r in caplog.records)


def test_rows_kept_on_the_scheduler_are_bounded_fairly():
    plugin = make_plugin()
    run = MonitorRun(metrics=["total-mem"], interval=0.1, keep_rows=100, client=None)
    plugin.runs[run.id] = run
    for i in range(20):
        for w in ("w1", "w2"):  # on two hosts: two GPUs each
            plugin._on_samples(
                worker=w, monitor_id=run.id, host=f"h-{w}", samples=batch(run.started + i, 5)
            )
    assert run.n_rows == 400
    assert run.kept <= 100 and run.dropped_rows == 400 - run.kept
    assert abs(len(run.rows["w1"]) - len(run.rows["w2"])) <= 10
    newest = max(r[1] for r in run.rows["w1"])
    assert newest == pytest.approx(run.started + 19.4)  # the newest rows are the ones kept
    # Peaks are exact however many rows were dropped.
    assert plugin.get_peaks(run.id)["workers"]["w1"][1]["peak"] == 8


def idle_batch(t0, n, waiting="inputs", uuids=("GPU-a",), util=10.0):
    """Samples of a worker that ran no task: what its sampler sends then."""
    rows = batch(t0, n, uuids=uuids, groups=())
    for r in rows:
        r["waiting"] = waiting
        for g in r["gpus"]:
            g["compute_util"] = util
    return rows


def test_every_sample_taken_while_a_computation_runs_carries_its_job(monkeypatch):
    """A worker waiting for its inputs runs no task: its samples still belong to the
    computation running on the cluster, and say what it waited on; once the computation
    ended (its last task's stop), samples are untied, also those that arrive late."""
    clock = [1000.0]
    monkeypatch.setattr(gpu_jobs, "time", SimpleNamespace(time=lambda: clock[0]))
    plugin = make_plugin()
    run = MonitorRun(metrics=["total-mem"], interval=0.1, keep_rows=10_000, client=None)
    plugin.runs[run.id] = run
    run.started = t0 = clock[0]
    plugin.jobs.active = True
    before = idle_batch(t0 - 5, 3, waiting="nothing")  # taken before anything ran
    comp = submit(plugin.scheduler, plugin.jobs, "fetch-and-matmul", start=t0)
    clock[0] = t0 + 0.5
    plugin._on_samples(worker="w1", monitor_id=run.id, host="h", samples=before)
    plugin._on_samples(worker="w1", monitor_id=run.id, host="h", samples=idle_batch(t0, 5))
    # A second graph into the same computation while it runs: dag 1 from then on.
    t1 = clock[0] = t0 + 1
    submit(plugin.scheduler, plugin.jobs, "second")
    clock[0] = t1 + 0.2  # still running when this batch came
    plugin._on_samples(worker="w1", monitor_id=run.id, host="h", samples=idle_batch(t1, 3))
    # It ends: its last task stopped at t1 + 0.25, seen by the scheduler a little later.
    for tg in comp.groups:
        tg.done, tg.stop = True, t1 + 0.25
    plugin.scheduler.is_idle = True
    # The next computation starts before the late samples of the first arrive.
    clock[0] = t1 + 5
    comp2 = submit(plugin.scheduler, plugin.jobs, "other", new_computation=True, start=t1 + 5)
    clock[0] = t1 + 6
    plugin._on_samples(worker="w1", monitor_id=run.id, host="h", samples=idle_batch(t1 + 0.3, 5))
    plugin._on_samples(worker="w1", monitor_id=run.id, host="h", samples=idle_batch(t1 + 5, 2))

    rows = [dict(zip(ROW_FIELDS, r)) for r in run.rows["w1"]]
    inside = [r for r in rows if t0 <= r["time"] <= t1 + 0.25]
    assert len(inside) == 8
    assert all(r["job"] == comp.id and r["waiting"] == "inputs" for r in inside)
    assert {r["dag"] for r in inside if r["time"] < t1} == {"0"}
    assert {r["dag"] for r in inside if r["time"] >= t1} == {"1"}
    outside = [r for r in rows if r["time"] < t0 or t1 + 0.25 < r["time"] < t1 + 5]
    assert outside and all(r["job"] is None and r["dag"] is None for r in outside)
    assert {r["waiting"] for r in outside if r["time"] < t0} == {"nothing"}
    assert {r["job"] for r in rows if r["time"] >= t1 + 5} == {comp2.id}


def test_a_gpu_two_workers_share_is_one_device():
    """Two workers on one host see the same GPU UUID: its rows come from one of them,
    carry both workers' task groups and name both; its peak is counted once."""
    plugin = make_plugin()
    run = MonitorRun(metrics=["total-mem"], interval=0.1, keep_rows=10_000, client=None)
    plugin.runs[run.id] = run
    t0 = run.started
    both = ("GPU-shared",)
    plugin._on_samples(
        worker="w1", monitor_id=run.id, host="h", samples=batch(t0, 5, uuids=both, groups=("a",))
    )
    plugin._on_samples(
        worker="w2",
        monitor_id=run.id,
        host="h",
        samples=batch(t0 + 0.01, 5, uuids=both, groups=("b",), used=lambda i: 9),
    )
    plugin._on_samples(
        worker="w1", monitor_id=run.id, host="h", samples=batch(t0 + 0.5, 5, uuids=both, groups=())
    )
    # Another host's GPU with the same UUID is another device.
    plugin._on_samples(worker="w3", monitor_id=run.id, host="h2", samples=batch(t0, 2, uuids=both))

    assert "w2" not in run.rows or not run.rows["w2"]  # no second copy of the device
    rows = [dict(zip(ROW_FIELDS, r)) for r in run.rows["w1"]]
    assert len(rows) == 10  # one row per sample of the device, not per worker
    late = [r for r in rows if r["time"] >= t0 + 0.5]
    assert all(r["shared_by"] == ["w1", "w2"] for r in late)
    assert any("b" in r["task_groups"] for r in late)  # w2's tasks, sampled near then
    assert [s["workers"] for s in run.info()["shared"]] == [["w1", "w2"]]
    peaks = plugin.get_peaks(run.id)["workers"]
    assert [(p["uuid"], p["host"], p["shared_by"]) for p in peaks["w1"]] == [
        ("GPU-shared", "h", ["w1", "w2"])
    ]
    assert peaks.get("w2", []) == []
    assert [p["host"] for p in peaks["w3"]] == ["h2"]

    # The owner goes silent (it left): the other worker's samples make the rows now.
    plugin._on_samples(
        worker="w2", monitor_id=run.id, host="h", samples=batch(t0 + 30, 3, uuids=both)
    )
    assert len(run.rows["w2"]) == 3
