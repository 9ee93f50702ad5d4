"""End to end into the store: samples from real worker processes (fake libnvidia-ml.so.1)
go through the analytics plugin's shipper into SQLite and come back from
`dal.list_gpu_metrics`, also after the cluster is gone.  Runs once the analytics
plugin and the store exist (they are written alongside this module)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pynvml  # noqa: F401,E402  (a test extra: a missing one fails the run)
import pytest
from distributed import Client, LocalCluster  # noqa: E402

import dask_analytics_lab as dal  # noqa: E402
from dask_analytics_lab.gpu import Monitor  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1]))
import fake_nvml  # noqa: E402

pytestmark = pytest.mark.timeout(180)


def busy(i):
    time.sleep(0.3)  # the task's work: long enough for GPU samples to be taken while it runs
    return i


def test_samples_reach_the_store_and_outlive_the_cluster(tmp_path, monkeypatch):
    conf = fake_nvml.write_config(
        tmp_path / "nvml.conf",
        [
            fake_nvml.device(
                "GPU-aaaa-0000", name="Fake A100", total="40G", used=["1G", "3G"], util=[20, 80]
            ),
            fake_nvml.device("GPU-bbbb-1111", total="16G", used="2G", unsupported="power"),
        ],
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for k, v in fake_nvml.env(conf).items():
        monkeypatch.setenv(k, v)
    url = f"sqlite:///{tmp_path / 'analytics.db'}"

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        info = dal.register(client, store=url)
        cluster_id = info["cluster_id"]
        monitor = Monitor(client, interval="50ms")
        monitor.attach(["total-mem", "compute-util"])
        monitor_id = monitor.start()
        assert client.gather(client.map(busy, range(2), pure=False)) == [0, 1]
        summary = monitor.stop()
        (worker,) = summary["workers"]
        flushed = dal.flush(client)
        assert flushed["flushed"] and not flushed["rejected"], flushed

    rows = dal.list_gpu_metrics(cluster_id=cluster_id, store=url)
    assert len(rows) == summary["n_rows"] > 0
    assert {(r["host"], r["gpu_uuid"]) for r in rows} == {
        (summary["hosts"][worker], "GPU-aaaa-0000"),
        (summary["hosts"][worker], "GPU-bbbb-1111"),
    }
    assert {r["monitor_id"] for r in rows} == {monitor_id} and {r["worker"] for r in rows} == {
        worker
    }
    a = [r for r in rows if r["gpu_uuid"] == "GPU-aaaa-0000"]
    assert {r["compute_util"] for r in a} <= {20.0, 80.0} and {r["mem_used"] for r in a} <= {
        1 << 30,
        3 << 30,
    }
    assert all(r["power_w"] is None for r in rows)
    busy_rows = [r for r in rows if r["task_groups"]]
    assert busy_rows and {tuple(r["task_groups"]) for r in busy_rows} == {("busy",)}
    assert all(r["job"] and r["dag"] == "0" for r in busy_rows)
    computations = {
        c["computation_id"] for c in dal.list_computations(cluster_id=cluster_id, store=url)
    }
    assert {r["job"] for r in busy_rows} <= computations  # job joins the computations table
    assert dal.list_gpu_metrics(monitor_id=monitor_id, worker=worker, store=url) == rows
