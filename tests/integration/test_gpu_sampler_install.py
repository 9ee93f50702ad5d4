"""Issue 14, part A: registering analytics leaves the workers alone; the GPU sampler goes
onto the workers when a Monitor starts (and onto workers that join during the run,
through the scheduler's worker-plugin registry), and comes off when it stops.

Real worker processes, the real pynvml path, the compiled fake libnvidia-ml.so.1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dask
import pynvml  # noqa: F401,E402  (a test extra: a missing one fails the run)
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.gpu_sampler import PLUGIN_NAME as SAMPLER
from dask_analytics_lab.gpu import Monitor

from ..cluster_helpers import FAST
from ..waiting import wait_for

sys.path.insert(0, str(Path(__file__).parents[1]))
import fake_nvml  # noqa: E402

pytestmark = pytest.mark.timeout(180)


def plugins_on_workers(client: Client) -> dict[str, list[str]]:
    return client.run(lambda dask_worker: sorted(dask_worker.plugins))


def with_sampler(client: Client) -> set[str]:
    return {w for w, names in plugins_on_workers(client).items() if SAMPLER in names}


def test_sampler_is_on_the_workers_only_while_a_monitor_runs(tmp_path, monkeypatch):
    lib = fake_nvml.build()
    conf = fake_nvml.write_config(
        tmp_path / "gpu.conf", [fake_nvml.device("GPU-aaaa-0000", total="16G", used="1G")]
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for k, v in fake_nvml.env(conf, lib).items():
        monkeypatch.setenv(k, v)  # worker processes inherit these at spawn
    store = "sqlite:///" + str(tmp_path / "analytics.db")
    try:
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            with dask.config.set(FAST):
                dal.register(client, store=store)
            scheduler = cluster.scheduler
            # Neither side is there before a Monitor: a scheduler plugin costs Dask a
            # call for every transition.
            assert "dask-analytics-lab-gpu" not in scheduler.plugins
            assert with_sampler(client) == set() and SAMPLER not in scheduler.worker_plugins

            monitor = Monitor(client, interval="50ms")
            assert "dask-analytics-lab-gpu" in scheduler.plugins  # the scheduler side, now
            gpus = monitor.attach()  # looks at the GPUs, installs nothing
            assert set(gpus) == set(scheduler.workers)
            assert with_sampler(client) == set()

            monitor_id = monitor.start()
            assert with_sampler(client) == set(scheduler.workers)
            assert SAMPLER in scheduler.worker_plugins
            run = scheduler.plugins["dask-analytics-lab-gpu"].active

            # A worker that joins during the run gets the sampler and samples, by itself.
            before = set(scheduler.workers)
            cluster.scale(3)
            client.wait_for_workers(3, timeout=60)
            (late,) = set(scheduler.workers) - before
            wait_for(lambda: late in with_sampler(client), what="the sampler on the late worker")
            # Every worker here shares the one fake GPU: its rows come from one worker,
            # and the others' samples arrive all the same (`recent`, merged into them).
            wait_for(
                lambda: len(run.recent.get(late, ())) >= 3, what="samples from the late worker"
            )

            summary = monitor.stop()
            assert summary["monitor_id"] == monitor_id and summary["workers"][late]["ok"]
            assert with_sampler(client) == set() and SAMPLER not in scheduler.worker_plugins

            # After the run, workers that join get nothing either.
            cluster.scale(4)
            client.wait_for_workers(4, timeout=60)
            assert with_sampler(client) == set()

            # A second run installs it again, with its own settings.
            second = monitor.start()
            assert second != monitor_id and with_sampler(client) == set(scheduler.workers)
            wait_for(
                lambda: all(
                    len(scheduler.plugins["dask-analytics-lab-gpu"].active.recent.get(w, ())) >= 2
                    for w in scheduler.workers
                ),
                what="samples from every worker in the second run",
            )
            monitor.stop()
            assert with_sampler(client) == set()
    finally:
        close_readers()
