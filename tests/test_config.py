"""Bad config fails at register() with a message naming key, value and what is allowed."""
from __future__ import annotations

import dask
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab import config


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("analytics.interval", "soon", "a positive duration"),
        ("analytics.interval", 0, "a positive duration"),
        ("analytics.store", "ftp://example/analytics", "postgresql://"),
        ("analytics.buffer.max-messages", -5, "a positive whole number"),
        ("analytics.cost.per-core-hour", "cheap", "a number >= 0"),
        ("analytics.computation.code.transmit", "maybe", "true or false"),
        ("analytics.events.allow", 42, "a list of event topic names"),
        ("analytics.idle.timeout", "forever", "or null"),
    ],
)
def test_invalid_values_are_named(key, value, words):
    with dask.config.set({key: value}), pytest.raises(dal.ConfigError) as err:
        config.resolve()
    text = str(err.value)
    assert key in text and repr(value) in text and words in text
    assert "DASK_" in text  # says how to set it


def test_register_refuses_bad_config_before_touching_the_cluster():
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, Client(cluster) as client:
        with dask.config.set({"analytics.interval": "never"}), pytest.raises(dal.ConfigError, match="analytics.interval"):
            dal.register(client)
        assert "dask-analytics-lab" not in client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins))


def test_store_paths_become_urls(tmp_path):
    assert config.validate_store(str(tmp_path / "a.db")) == f"sqlite:///{tmp_path}/a.db"
    assert config.validate_store("postgres://u@h/db") == "postgresql://u@h/db"
    assert config.validate_store(None).startswith("sqlite:///")


def test_environment_variables_reach_the_config(monkeypatch):
    monkeypatch.setenv("DASK_ANALYTICS__INTERVAL", "3s")
    dask.config.refresh()
    try:
        assert config.resolve()["interval"] == 3.0
    finally:
        monkeypatch.delenv("DASK_ANALYTICS__INTERVAL")
        dask.config.refresh()
