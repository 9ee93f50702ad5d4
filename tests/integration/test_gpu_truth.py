"""GPU samples tell the truth (issue 39), end to end on the fake libnvidia-ml.so.1: real
worker processes, the recorder writing into a SQLite file, read back after the cluster
is gone.

Three workers: two share GPU 0 (CUDA_VISIBLE_DEVICES=0 each, as a LocalCluster on a
one-GPU machine does), one has GPU 1 to itself.  The computation makes one worker wait
for its inputs (their unpickling is slow) while its GPU idles at low utilisation.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import pynvml  # noqa: F401  (a test extra: a missing one fails the run)
import pytest
from distributed import Client, LocalCluster, Nanny

import dask_analytics_lab as dal
from dask_analytics_lab.findings import KINDS
from dask_analytics_lab.gpu import Monitor

sys.path.insert(0, str(Path(__file__).parents[1]))
import fake_nvml  # noqa: E402

from ..waiting import wait_for  # noqa: E402

pytestmark = pytest.mark.timeout(240)

SHARED, SOLO = "GPU-5a5a-0000", "GPU-5010-1111"


def _restore(value):
    time.sleep(1.5)  # unpickled where it is fetched: that worker waits for its input
    return value


class SlowToFetch:
    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return (_restore, (self.value,))


def produce(seconds):
    time.sleep(seconds)
    return SlowToFetch(seconds)


def consume(x):
    time.sleep(0.2)
    return x


def busy(seconds):
    time.sleep(seconds)
    return seconds


def test_samples_belong_to_the_running_computation_and_a_shared_gpu_counts_once(
    tmp_path, monkeypatch
):
    conf = fake_nvml.write_config(
        tmp_path / "nvml.conf",
        [
            fake_nvml.device(
                SHARED, name="Fake H200", total="140G", used=["4G", "18G"], util=[5, 15]
            ),
            fake_nvml.device(SOLO, name="Fake H200", total="140G", used="2G", util=[10]),
        ],
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for k, v in fake_nvml.env(conf).items():
        monkeypatch.setenv(k, v)
    url = f"sqlite:///{tmp_path / 'analytics.db'}"

    with (
        LocalCluster(n_workers=0, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        for name, visible in (("a", "0"), ("b", "0"), ("c", "1")):
            cluster.worker_spec[name] = {
                "cls": Nanny,
                "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": visible}},
            }
        cluster.scale(3)
        client.wait_for_workers(3, timeout=120)
        by_name = {w["name"]: addr for addr, w in client.scheduler_info()["workers"].items()}
        a, b, c = by_name["a"], by_name["b"], by_name["c"]

        cluster_id = dal.register(client, store=url)["cluster_id"]
        monitor = Monitor(client, interval="50ms")
        gpus = monitor.attach()
        assert {g["uuid"] for g in gpus[a]} == {g["uuid"] for g in gpus[b]} == {SHARED}
        assert {g["uuid"] for g in gpus[c]} == {SOLO}
        monitor_id = monitor.start()

        # One computation: `produce` on a, then c fetches its result (slow to unpickle:
        # c waits for its input, no task running there) and consumes it; b runs a task
        # on the GPU it shares with a.
        made = client.submit(produce, 0.8, workers=[a], pure=False)
        used = client.submit(consume, made, workers=[c], pure=False)
        side = client.submit(busy, 1.0, workers=[b], pure=False)
        assert client.gather([side]) == [1.0]
        assert client.gather(used) == 0.8  # unpickled on c: the value itself
        del made, used, side
        # A second computation once the cluster was idle, then idle time after it.
        assert client.gather(client.map(busy, [0.6, 0.6], pure=False)) == [0.6, 0.6]
        t_idle = time.time()
        wait_for(
            lambda: any(
                r[1] > t_idle + 0.5
                for rows in cluster.scheduler.plugins["dask-analytics-lab-gpu"].active.rows.values()
                for r in rows
            ),
            what="samples after the computations",
        )
        summary = monitor.stop()
        peaks = monitor.peak_memory_by_worker()
        paths = monitor.to_csv(tmp_path / "csv")
        flushed = dal.flush(client)
        assert flushed["flushed"] and not flushed["rejected"], flushed

    # --- read back from the store, after the cluster is gone ---------------------------
    rows = dal.list_gpu_metrics(cluster_id=cluster_id, monitor_id=monitor_id, store=url)
    assert len(rows) == summary["n_rows"] > 0
    comps = [
        comp
        for comp in dal.list_computations(cluster_id=cluster_id, store=url)
        if comp["stop"] and comp["stop"] > summary["started"]
    ]
    assert len(comps) >= 2

    def jobs_of(r):
        return {r["job"]} | {j for j, _d in r["jobs"] or ()}

    # Every sample taken inside a computation's window carries its job, also those of a
    # worker that ran no task then; those say what it waited on.
    for comp in comps:
        inside = [r for r in rows if comp["start"] <= r["time"] <= comp["stop"]]
        assert inside, comp
        assert all(comp["computation_id"] in jobs_of(r) for r in inside), [
            (
                r["time"] - comp["start"],
                comp["stop"] - comp["start"],
                r["worker"],
                r["task_groups"],
                r["waiting"],
            )
            for r in inside
            if r["job"] != comp["computation_id"]
        ]
        assert all(r["dag"] is not None for r in inside)
        untied = [r for r in inside if not r["task_groups"]]
        assert all(r["waiting"] in ("inputs", "memory", "nothing") for r in untied)
    first = min(comps, key=lambda comp: comp["start"])
    waited = [
        r for r in rows if r["gpu_uuid"] == SOLO and first["start"] <= r["time"] <= first["stop"]
    ]
    assert any(r["waiting"] == "inputs" for r in waited)  # c fetching its input
    assert all(r["waiting"] is None for r in rows if r["task_groups"])
    # Outside every computation, nothing is tied.
    outside = [
        r for r in rows if not any(comp["start"] <= r["time"] <= comp["stop"] + 1 for comp in comps)
    ]
    assert outside and all(r["job"] is None for r in outside)

    # A GPU is one device: the shared one's rows come from one worker and name both.
    shared = [r for r in rows if r["gpu_uuid"] == SHARED]
    assert len({r["host"] for r in shared}) == 1
    samples = {w: s["samples"] for w, s in summary["sampler_cpu"].items()}
    assert len(shared) <= max(samples[a], samples[b]) + 5  # not one copy per worker
    assert any(r["shared_by"] == sorted([a, b]) for r in shared)
    assert all(r["shared_by"] is None for r in rows if r["gpu_uuid"] == SOLO)
    # b's task shows on the shared GPU, whichever worker's rows hold it.
    assert any("busy" in (r["task_groups"] or ()) for r in shared)
    assert [s["workers"] for s in summary["shared"]] == [sorted([a, b])]
    listed = [(w, g) for w, gs in peaks.items() for g in gs if g["uuid"] == SHARED]
    assert len(listed) == 1 and listed[0][1]["peak"] == 18 << 30
    assert listed[0][1]["shared_by"] == sorted([a, b])
    in_csv = 0
    for p in paths:
        with p.open() as f:
            in_csv += sum(1 for r in csv.DictReader(f) if r["gpu_uuid"] == SHARED)
    assert in_csv == len(shared)

    # The GPU sat idle while its tasks ran: the finding says so, with a cause.
    assert "gpu-underused" in KINDS
    found = [
        f
        for comp in comps
        for f in dal.explain(comp["computation_id"], store=url)
        if f["kind"] == "gpu-underused"
    ]
    assert found, [dal.explain(comp["computation_id"], store=url) for comp in comps]
    assert all("utilisation averaged" in f["evidence"] and f["advice"] for f in found)
    assert all(f["impact"] > 0 for f in found)
