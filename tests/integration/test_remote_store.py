"""A SQLite store is a file on the client's machine: a scheduler that cannot see that file
must be refused at register(), with the fix (a `dask-analytics server`), not left to
record into a file of its own that nobody reads.

The scheduler that "runs elsewhere" is a real `dask scheduler` process in its own mount
namespace (unshare -m), with an empty tmpfs mounted over the store's folder: the same
path, another file system, as on another machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed import Client

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers

pytestmark = pytest.mark.timeout(120)


def _can_unshare() -> bool:
    try:
        return (
            subprocess.run(
                ["unshare", "-m", "--propagation", "private", "true"],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


@pytest.fixture
def scheduler_process(tmp_path):
    started: list[subprocess.Popen] = []

    def start(hide: Path | None = None, cwd: Path | None = None) -> str:
        """A `dask scheduler` subprocess; with `hide`, it sees an empty folder there."""
        sched_file = tmp_path / f"scheduler-{len(started)}.json"
        cmd = [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(sched_file),
        ]
        if hide is not None:
            cmd = [
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                'mount -t tmpfs dask-analytics-test "$0" && exec "$@"',
                str(hide),
                *cmd,
            ]
        log = (tmp_path / f"scheduler-{len(started)}.log").open("w")
        started.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd))
        deadline = time.monotonic() + 60
        while not sched_file.exists() or not sched_file.read_text().strip():
            if started[-1].poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    "the scheduler did not start: " + Path(log.name).read_text()[-2000:]
                )
            time.sleep(0.1)
        return json.loads(sched_file.read_text())["address"]

    yield start
    for p in started:
        p.terminate()
    for p in started:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()


def test_scheduler_that_cannot_see_the_sqlite_file_is_refused(tmp_path, scheduler_process):
    if not _can_unshare():
        pytest.skip(
            "this machine does not allow mount namespaces (unshare -m): a scheduler with "
            "another view of the disk cannot be made here"
        )
    folder = tmp_path / "store"
    folder.mkdir()
    store = folder / "analytics.db"
    address = scheduler_process(hide=folder)
    with Client(address) as client:
        with pytest.raises(dal.ConfigError) as err:
            dal.register(client, store=str(store))
        text = str(err.value)
        assert address in text and str(store) in text
        assert "dask-analytics server" in text and "analytics.store" in text
        assert "dask-analytics-lab" not in client.run_on_scheduler(
            lambda dask_scheduler: list(dask_scheduler.plugins)
        )
    assert not list(folder.glob(".dask-analytics-probe-*"))  # the probe is cleaned up


def test_scheduler_process_on_the_same_disk_records(tmp_path, scheduler_process):
    store = tmp_path / "store" / "analytics.db"
    with Client(scheduler_process()) as client:
        info = dal.register(client, store=str(store))
        assert dal.flush(client)["flushed"]
    assert dal.get_cluster(info["cluster_id"], store=str(store))["cluster_id"] == info["cluster_id"]
    assert not list(store.parent.glob(".dask-analytics-probe-*"))


def test_relative_store_path_from_another_working_directory_is_refused(
    tmp_path, scheduler_process, monkeypatch
):
    # The scheduler resolves a relative path against its own working directory: another
    # file than the one this client reads.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    with Client(scheduler_process(cwd=elsewhere)) as client:
        with pytest.raises(dal.ConfigError, match="relative"):
            dal.register(client, store="sqlite:///rel/analytics.db")
    with Client(scheduler_process(cwd=tmp_path)) as client:  # the same folder: the same file
        info = dal.register(client, store="sqlite:///rel/analytics.db")
        assert dal.flush(client)["flushed"]
    assert dal.get_cluster(info["cluster_id"], store=str(tmp_path / "rel" / "analytics.db"))
    assert not (elsewhere / "rel").exists()
