"""An unnamed cluster is recorded under the notebook or script that made it and its start time."""

from __future__ import annotations

import re
import sys
import time

import dask
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab import config
from dask_analytics_lab.api import close_readers

from ..cluster_helpers import FAST

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d"


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    close_readers()


def test_default_name_parts(monkeypatch):
    t = time.mktime((2026, 11, 23, 14, 5, 30, 0, 0, -1))
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/ann/work/analysis.ipynb")
    assert config.default_cluster_name(t) == "analysis.ipynb 2026-11-23 14:05"
    monkeypatch.delenv("JPY_SESSION_NAME")
    monkeypatch.setattr(sys, "argv", ["/opt/jobs/nightly_etl.py", "--full"])
    assert config.default_cluster_name(t) == "nightly_etl.py 2026-11-23 14:05"
    for argv in (["-c"], [""], []):
        monkeypatch.setattr(sys, "argv", argv)
        assert config.default_cluster_name(t) == "python 2026-11-23 14:05"


def test_random_cluster_names_count_as_none():
    assert config.is_unnamed(None) and config.is_unnamed("") and config.is_unnamed("3f9a0c1e")
    assert not config.is_unnamed("nightly-etl") and not config.is_unnamed("3F9A0C1E-prod")


def recorded_name(
    store: str, *, cluster_name: str | None = None, settings: dict | None = None
) -> tuple[str, float]:
    kwargs = {"name": cluster_name} if cluster_name else {}
    with dask.config.set({**FAST, **(settings or {})}):
        with (
            LocalCluster(
                n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0", **kwargs
            ) as cluster,
            Client(cluster) as client,
        ):
            info = dal.register(client, store=store)
            dal.flush(client)
            started = cluster.scheduler.time_started
    return dal.get_cluster(info["cluster_id"], store=store)["name"], started


def test_unnamed_local_cluster_gets_the_notebook_and_start_time(sqlite_url, monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", "notebooks/analysis.ipynb")
    name, started = recorded_name(sqlite_url)
    assert name == "analysis.ipynb " + time.strftime("%Y-%m-%d %H:%M", time.localtime(started))


def test_script_name_outside_jupyter(sqlite_url, monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(sys, "argv", ["/srv/jobs/train_model.py"])
    name, _ = recorded_name(sqlite_url)
    assert re.fullmatch("train_model.py " + STAMP, name)


def test_real_cluster_name_and_analytics_name_win(sqlite_url, monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", "analysis.ipynb")
    assert recorded_name(sqlite_url, cluster_name="nightly-etl")[0] == "nightly-etl"
    assert (
        recorded_name(
            sqlite_url, cluster_name="nightly-etl", settings={"analytics.name": "team-x"}
        )[0]
        == "team-x"
    )


def test_preloaded_scheduler_gets_a_readable_name(tmp_path, monkeypatch):
    store = str(tmp_path / "analytics.db")
    monkeypatch.setenv("JPY_SESSION_NAME", "etl.ipynb")
    with dask.config.set({**FAST, "analytics.store": store}):
        with (
            LocalCluster(
                n_workers=1,
                threads_per_worker=1,
                processes=False,
                dashboard_address=":0",
                scheduler_kwargs={"preload": ["dask_analytics_lab"]},
            ) as cluster,
            Client(cluster) as client,
        ):
            dal.flush(client)
            cluster_id = cluster.scheduler.id
    assert re.fullmatch("etl.ipynb " + STAMP, dal.get_cluster(cluster_id, store=store)["name"])
