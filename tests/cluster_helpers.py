"""Real LocalClusters with analytics registered, for the end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import dask
from distributed import Client, LocalCluster

import dask_analytics_lab as dal

from .waiting import wait_for

FAST = {
    "analytics.interval": "100ms",
    "analytics.retry.min-delay": "50ms",
    "analytics.retry.max-delay": "200ms",
    # A computation's profile is fetched once the workers' cycle in progress has closed
    # (collect/profiles.py): dal.flush() waits that long after a computation ends.
    "distributed.worker.profile.cycle": "250ms",
}


@contextlib.contextmanager
def recorded_cluster(
    store: str,
    *,
    processes: bool = False,
    n_workers: int = 2,
    threads_per_worker: int = 1,
    config: dict | None = None,
    **cluster_kwargs,
) -> Iterator[tuple[Client, dict]]:
    """A LocalCluster whose scheduler records into `store`; yields (client, register info).
    cluster_kwargs: more of LocalCluster's (memory_limit=...)."""
    overrides = {**FAST, **(config or {})}
    with dask.config.set(overrides):
        with (
            LocalCluster(
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                processes=processes,
                dashboard_address=":0",
                **cluster_kwargs,
            ) as cluster,
            Client(cluster) as client,
        ):
            info = dal.register(client, store=store)
            yield client, info


@contextlib.contextmanager
def preloaded_scheduler(tmp_path, url: str, env: dict | None = None):
    """`dask scheduler --preload dask_analytics_lab` and one worker, in their own
    processes; yields (scheduler process, scheduler file)."""
    env = {
        **os.environ,
        "DASK_ANALYTICS__STORE": url,
        "DASK_ANALYTICS__INTERVAL": "100ms",
        **(env or {}),
    }
    scheduler_file = tmp_path / "scheduler.json"
    sched = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--dashboard-address",
            ":0",
            "--preload",
            "dask_analytics_lab",
            "--scheduler-file",
            str(scheduler_file),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        wait_for(scheduler_file.exists, what="the scheduler's file", every=0.2)
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_worker",
                "--scheduler-file",
                str(scheduler_file),
                "--nthreads",
                "1",
                "--no-nanny",
                "--dashboard-address",
                ":0",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        yield sched, scheduler_file
    finally:
        for p in (worker, sched):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(timeout=30)


@contextlib.contextmanager
def cores_taken() -> Iterator[None]:
    """Two processes spinning per core, as other programs on a busy laptop: no core is free."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for p in burners:
            p.kill()
        for p in burners:
            p.wait()


class Scenarios:
    """Runs each scenario on a recorded cluster as its own computation and remembers its
    id by name (`run(name, fn)`; `run.ids[name]`)."""

    def __init__(self, client: Client, store: str, cluster_id: str):
        self.client, self.store, self.cluster_id = client, store, cluster_id
        self.ids: dict[str, str] = {}

    def _known(self) -> set[str]:
        dal.flush(self.client)
        return {
            c["computation_id"]
            for c in dal.list_computations(self.cluster_id, limit=1000, store=self.store)
        }

    def __call__(self, name: str, run: Callable[[], object]) -> None:
        before = self._known()
        try:
            run()
        except Exception:  # a scenario that fails on purpose
            pass

        def new():
            ids = self._known() - before
            return ids if len(ids) == 1 else None

        (self.ids[name],) = wait_for(new, what=f"the computation of {name}")


def executing_everywhere(client: Client) -> bool:
    """Whether every worker is running a task now (not only holding one in its queue)."""
    running = client.run(lambda dask_worker: len(dask_worker.state.executing))
    return bool(running) and all(running.values())


def scheduler_forgot_all(client: Client) -> bool:
    """Whether the scheduler holds no task any more (released futures reached it)."""
    return client.run_on_scheduler(lambda dask_scheduler: not dask_scheduler.tasks)
