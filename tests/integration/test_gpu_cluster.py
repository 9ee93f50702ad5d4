"""End to end: real worker processes, the real pynvml ctypes path, the compiled fake
libnvidia-ml.so.1 loaded through LD_LIBRARY_PATH.

One cluster, four workers:
  A  LocalCluster worker: 4 GPUs (a utilisation series, NotSupported power and
     temperature, a MIG-enabled GPU with a MIG device, a GPU that vanishes mid-run)
  B  joins while the monitor runs: 1 GPU
  C  library present, kernel driver not loaded
  D  no NVML library at all
"""

from __future__ import annotations

import csv
import ctypes.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pynvml  # noqa: F401,E402  (a test extra: a missing one fails the run)
import pytest
from distributed import Client, LocalCluster, worker_client
from distributed.diagnostics.plugin import SchedulerPlugin

from dask_analytics_lab import messages
from dask_analytics_lab.gpu import Monitor, NoGPUWarning

sys.path.insert(0, str(Path(__file__).parents[1]))
import fake_nvml  # noqa: E402

from ..waiting import wait_for

pytestmark = pytest.mark.timeout(180)

GiB = 1 << 30
REAL_NVML = ctypes.util.find_library("nvidia-ml") is not None


class Recorder(SchedulerPlugin):
    """Stands in for the analytics plugin (same name and emit) to see what would be shipped."""

    name = "dask-analytics-lab"

    def __init__(self):
        self.messages = []
        self.cluster_id = "test-cluster"

    def emit(self, kind, data):
        msg = messages.make(self.cluster_id, len(self.messages) + 1, kind, time.time(), data)
        messages.check(msg)  # what ingest would refuse (types, sizes) fails here
        self.messages.append(msg)


def start_worker(address: str, env: dict, log: Path) -> subprocess.Popen:
    """A real worker process with an environment of its own (LD_LIBRARY_PATH is read at exec)."""
    env = {k: v for k, v in env.items() if k not in ("LD_LIBRARY_PATH", "FAKE_NVML_CONFIG")} | {
        k: v for k, v in env.items() if k in ("LD_LIBRARY_PATH", "FAKE_NVML_CONFIG") and v
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            address,
            "--nthreads",
            "1",
            "--no-nanny",
            "--no-dashboard",
            "--memory-limit",
            "0",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )


# The tasks' sleeps are their work: the GPU sampler tags the samples taken while they run.
def gpu_child(i):
    time.sleep(0.4)
    return i


def parent(address):
    time.sleep(0.2)
    with worker_client() as c:  # this task submits tasks: they stay in its job
        return sum(c.gather(c.map(gpu_child, range(2), workers=[address], pure=False)))


def step_two(seconds):
    time.sleep(seconds)
    return seconds


def sampling_threads() -> list[str]:
    """The GPU sampler's threads alive in this process (a worker's, through client.run)."""
    import threading

    return [t.name for t in threading.enumerate() if t.name.startswith("dask-analytics-gpu-")]


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        p.terminate()
    for p in started:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


def test_monitor_end_to_end(tmp_path, monkeypatch, procs, capfd):
    lib = fake_nvml.build()
    gone = tmp_path / "gpu-eeee-gone"
    conf_a = fake_nvml.write_config(
        tmp_path / "a.conf",
        [
            fake_nvml.device(
                "GPU-aaaa-0000",
                name="Fake A100",
                total="40G",
                used=["1G", "2G", "3G"],
                util=[10, 50, 90],
                power=[250, 300],
                temp=[60],
                step_ms=60,
            ),
            fake_nvml.device(
                "GPU-bbbb-1111", total="16G", used="4G", unsupported="power,temperature"
            ),
            fake_nvml.device("GPU-cccc-2222", total="80G", used="8G", mig=1),
            fake_nvml.mig(2, "MIG-dddd-3333", name="Fake A100 MIG 1g.10gb", total="10G", used="1G"),
            fake_nvml.device("GPU-eeee-4444", total="16G", used="2G", lost_flag=str(gone)),
        ],
    )
    conf_b = fake_nvml.write_config(
        tmp_path / "b.conf", [fake_nvml.device("GPU-ffff-5555", total="24G", used="5G")]
    )
    conf_c = fake_nvml.write_config(tmp_path / "c.conf", ["init_error 9"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for k, v in fake_nvml.env(conf_a, lib).items():
        monkeypatch.setenv(k, v)  # worker A's process inherits these at spawn
    base = dict(os.environ)

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        recorder = Recorder()
        cluster.scheduler.add_plugin(recorder)
        (a,) = client.scheduler_info()["workers"]
        procs.append(
            start_worker(
                cluster.scheduler_address, base | fake_nvml.env(conf_c, lib), tmp_path / "c.log"
            )
        )
        if not REAL_NVML:  # on a GPU machine a worker with no library cannot be made this way
            procs.append(
                start_worker(
                    cluster.scheduler_address,
                    base | {"LD_LIBRARY_PATH": "", "FAKE_NVML_CONFIG": ""},
                    tmp_path / "d.log",
                )
            )
        client.wait_for_workers(1 + len(procs), timeout=60)
        no_gpu_workers = set(client.scheduler_info()["workers"]) - {a}

        monitor = Monitor(client, interval="50ms")
        with pytest.warns(NoGPUWarning) as warned:
            gpus = monitor.attach(["total-mem", "mem-util", "compute-util", "power"])
        assert set(gpus) == {a}
        assert [g["uuid"] for g in gpus[a]] == [
            "GPU-aaaa-0000",
            "GPU-bbbb-1111",
            "GPU-cccc-2222",
            "MIG-dddd-3333",
            "GPU-eeee-4444",
        ]
        assert [g["mig"] for g in gpus[a]] == [False, False, False, True, False]
        text = str(warned[0].message)
        assert (
            f"No NVIDIA GPU/driver found on {len(no_gpu_workers)} of {len(no_gpu_workers) + 1} workers"
            in text
        )
        assert set(monitor.no_gpu) == no_gpu_workers
        assert all(w in text for w in no_gpu_workers)
        assert "kernel driver is not loaded" in text
        if not REAL_NVML:
            assert "libnvidia-ml.so.1 is not installed" in text

        with pytest.warns(NoGPUWarning):
            monitor_id = monitor.start()
        gpu_plugin = cluster.scheduler.plugins["dask-analytics-lab-gpu"]
        run = gpu_plugin.active
        assert run.id == monitor_id

        # job 1: a task that submits tasks; job 2: a plain map once the cluster was idle.
        assert client.submit(parent, a, workers=[a], pure=False).result() == 1
        # job 2: two submissions of one function (one task group), the second while the first runs.
        first = client.submit(step_two, 0.7, workers=[a], pure=False)
        wait_for(
            lambda: client.run(lambda dask_worker: len(dask_worker.state.executing), workers=[a])[
                a
            ],
            what="the first step running",
        )
        second = client.submit(step_two, 0.3, workers=[a], pure=False)
        assert client.gather([first, second]) == [0.7, 0.3]

        # B joins while the monitor runs and starts sampling by itself.
        procs.append(
            start_worker(
                cluster.scheduler_address, base | fake_nvml.env(conf_b, lib), tmp_path / "b.log"
            )
        )
        client.wait_for_workers(2 + len(no_gpu_workers), timeout=60)
        (b,) = set(client.scheduler_info()["workers"]) - no_gpu_workers - {a}
        wait_for(
            lambda: len(run.rows.get(b, ())) >= 3, what="samples from the worker that joined late"
        )

        # GPU-eeee falls off the bus: A drops it and goes on with the others.
        gone.touch()
        t_gone = time.time()
        wait_for(
            lambda: sum(1 for r in run.rows[a] if r[1] > t_gone + 0.3) >= 8,
            what="samples after the loss",
        )

        # A second client, connected later, finds the monitor on the cluster and stops it.
        with Client(cluster.scheduler_address) as client2:
            other = Monitor(client2)
            with pytest.raises(RuntimeError, match="already running"):
                other.start()
            summary = other.stop()
            assert other.stop() is None
        assert summary["monitor_id"] == monitor_id and not summary["running"]
        assert summary["dropped_rows"] == 0
        assert summary["n_rows"] == sum(len(m["data"]["samples"]) for m in recorder.messages)
        assert summary["sampler_cpu"][a]["samples"] > 10
        # Stopped means stopped: no worker samples any more (and what they sent has all
        # arrived: the rows above).
        assert not any(client.run(sampling_threads).values())

        # --- read back: CSV per worker -------------------------------------------------
        paths = monitor.to_csv(tmp_path / "csv")
        assert len(paths) == 2 + len(no_gpu_workers)
        rows = {}
        for p in paths:
            with p.open() as f:
                reader = csv.DictReader(f)
                assert reader.fieldnames == [
                    "timestamp",
                    "job",
                    "dag",
                    "host",
                    "gpu_index",
                    "gpu_uuid",
                    "gpu_name",
                    "total-mem",
                    "mem-util",
                    "compute-util",
                    "power",
                    "task_groups",
                    "waiting",
                    "shared_by",
                ]
                rows[p.stem] = list(reader)
        by_worker = {
            w: rows[next(k for k in rows if k.endswith(w.rsplit(":", 1)[1]))]
            for w in [a, b, *no_gpu_workers]
        }
        for w in no_gpu_workers:
            assert by_worker[w] == []  # header only: nothing sampled, nothing broke
        ra = by_worker[a]
        times = [float(r["timestamp"]) for r in ra]
        assert times == sorted(times) and times[0] >= -0.05

        def gpu(uuid):
            return [r for r in ra if r["gpu_uuid"] == uuid]

        assert {float(r["compute-util"]) for r in gpu("GPU-aaaa-0000")} == {10.0, 50.0, 90.0}
        assert {int(r["total-mem"]) for r in gpu("GPU-aaaa-0000")} == {1 * GiB, 2 * GiB, 3 * GiB}
        assert {r["power"] for r in gpu("GPU-aaaa-0000")} <= {"250.0", "300.0"}
        assert {r["power"] for r in gpu("GPU-bbbb-1111")} == {""}  # NotSupported -> empty
        assert {r["mem-util"] for r in gpu("GPU-bbbb-1111")} == {"25.0"}
        mig = gpu("MIG-dddd-3333")
        assert mig and {(r["gpu_index"], r["compute-util"], r["total-mem"]) for r in mig} == {
            ("2", "", str(GiB))
        }
        assert {r["host"] for r in ra} == {summary["hosts"][a]}
        lost = [float(r["timestamp"]) for r in gpu("GPU-eeee-4444")]
        assert lost and max(lost) < t_gone - summary["started"] + 0.2
        assert len(gpu("GPU-aaaa-0000")) > len(gpu("GPU-eeee-4444"))
        assert "GPU-eeee-4444" in capfd.readouterr().err  # the one log line, from worker A

        # job and dag: the children stay in the parent's job, as its second submission.
        def tagged(group):
            return {(r["job"], r["dag"]) for r in ra if group in r["task_groups"].split(";")}

        parent_only = {(r["job"], r["dag"]) for r in ra if r["task_groups"] == "parent"}
        children = tagged("gpu_child")
        job2_rows = tagged("step_two")
        assert len(parent_only) == 1 and len(children) == 1
        (job1, dag0), (job1_again, dag1) = *parent_only, *children
        assert job1 and job1 == job1_again and (dag0, dag1) == ("0", "1")
        (job2,) = {j for j, _d in job2_rows}
        assert job2 and job2 != job1 and {d for _j, d in job2_rows} == {"0", "1"}
        # A sample with no task running is tied to a job only while one ran on the
        # cluster; then it says what the worker waited on.
        idle = [r for r in ra if not r["task_groups"]]
        assert idle and all(r["waiting"] in ("inputs", "memory", "nothing") for r in idle)
        assert any(r["job"] == "" and r["dag"] == "" for r in idle)
        assert all(r["waiting"] == "" for r in ra if r["task_groups"])

        assert {r["gpu_uuid"] for r in by_worker[b]} == {"GPU-ffff-5555"}

        # --- peak memory, per worker (by address) per GPU (by index) ---------------------
        peaks = dict(zip(sorted([a, b, *no_gpu_workers]), monitor.peak_memory()))
        assert peaks[a] == [3 * GiB, 4 * GiB, 8 * GiB, GiB, 2 * GiB]
        assert peaks[b] == [5 * GiB]
        assert all(peaks[w] == [] for w in no_gpu_workers)

        # --- what went to the store: the gpu_samples contract ----------------------------
        assert {m["kind"] for m in recorder.messages} == {"gpu_samples"}
        shipped = [
            (m["data"]["worker"], m["data"]["host"], s)
            for m in recorder.messages
            for s in m["data"]["samples"]
        ]
        assert all(host and s["gpu_uuid"] for _w, host, s in shipped)  # keyed by host + uuid
        assert {m["data"]["monitor_id"] for m in recorder.messages} == {monitor_id}
        assert {s["gpu_uuid"] for w, _h, s in shipped if w == a} == {
            "GPU-aaaa-0000",
            "GPU-bbbb-1111",
            "GPU-cccc-2222",
            "MIG-dddd-3333",
            "GPU-eeee-4444",
        }

        # Distributed's own heartbeat GPU metrics read the same fake GPU 0.
        wait_for(
            lambda: (
                cluster.scheduler.workers[a].metrics.get("gpu_memory_used")
                in (GiB, 2 * GiB, 3 * GiB)
            ),
            what="heartbeat gpu metrics",
        )

        # And the cluster goes on as before.
        assert client.submit(lambda x: x + 1, 1).result() == 2


def test_no_library_anywhere(tmp_path, monkeypatch):
    if REAL_NVML:
        pytest.skip("this machine has a real libnvidia-ml: 'no library' cannot be arranged")
    monkeypatch.delenv("FAKE_NVML_CONFIG", raising=False)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        monitor = Monitor(client, interval="20ms")
        with pytest.warns(NoGPUWarning, match="No NVIDIA GPU/driver found on any of the 1 workers"):
            assert monitor.attach() == {}
        with pytest.warns(NoGPUWarning):
            monitor.start()
        assert client.submit(sum, [1, 2]).result() == 3
        summary = monitor.stop()
        assert summary["n_rows"] == 0
        assert monitor.peak_memory() == [[]]
        (path,) = monitor.to_csv(tmp_path)
        assert path.read_text().splitlines()[0].startswith("timestamp,job,dag,host")
        with pytest.raises(ValueError, match="unknown GPU metric"):
            monitor.attach(["gpu-mem"])
