"""Config: bad values fail at register() naming key, value and what is allowed; the shipped
defaults stand in for a missing `analytics` namespace; Coiled's names are aliases."""

from __future__ import annotations

import time

import dask
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab import config
from dask_analytics_lab.api import close_readers


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
    with (
        LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        with (
            dask.config.set({"analytics.interval": "never"}),
            pytest.raises(dal.ConfigError, match="analytics.interval"),
        ):
            dal.register(client)
        assert "dask-analytics-lab" not in client.run_on_scheduler(
            lambda dask_scheduler: list(dask_scheduler.plugins)
        )


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


# --- a config without the `analytics` namespace (issue 8, item 10) ------------------------


@pytest.fixture
def no_analytics_namespace():
    """What distributed.utils_test leaves: the config as it was before this package
    added its defaults."""
    saved = dask.config.config.pop("analytics")
    try:
        yield
    finally:
        dask.config.config["analytics"] = saved


def test_resolve_falls_back_to_the_shipped_defaults(no_analytics_namespace):
    settings = config.resolve()
    assert settings["interval"] == 1.0 and settings["buffer_max_messages"] == 10_000
    assert "worker-fail-hard" in settings["events_allow"]
    assert config.get("analytics.gpu.interval") == "100ms"
    assert dal.where().startswith("sqlite:///")
    # A key set while the namespace is missing is read, the rest still defaults.
    with dask.config.set({"analytics.interval": "3s"}):
        assert config.resolve()["interval"] == 3.0
        assert config.get("analytics.profile.timeout") == "5s"


def test_unknown_key_is_refused():
    with pytest.raises(KeyError, match="not an analytics setting"):
        config.get("analytics.no-such-thing")


def wait_for(cond, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_scheduler_preload_records_without_the_namespace(
    no_analytics_namespace, tmp_path, monkeypatch
):
    # The default store lives under the user data directory: point that at tmp_path.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    store = str(config.default_store_path())
    assert store.startswith(str(tmp_path))
    try:
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
            assert "dask-analytics-lab" in cluster.scheduler.plugins
            assert client.submit(sum, [1, 2]).result() == 3
            assert dal.flush(client)["flushed"]
            cluster_id = cluster.scheduler.id
        wait_for(
            lambda: dal.list_computations(cluster_id, store=store),
            what="the computation in the store",
        )
        (row,) = [c for c in dal.list_clusters(store=store) if c["cluster_id"] == cluster_id]
        assert row["stopped"] is not None
    finally:
        close_readers()


# --- Coiled's names (issue 8, item 11) ------------------------------------------------------


@pytest.mark.parametrize(
    "key, coiled_value, setting, expected",
    [
        ("computation.code.transmit", False, "code_transmit", False),
        ("profile.transmit", False, "profile_transmit", False),
        ("events.allow", ["my-topic"], "events_allow", ["my-topic"]),
        ("idle.timeout", "30 minutes", "idle_timeout", 1800.0),
    ],
)
def test_coiled_names_are_aliases(key, coiled_value, setting, expected):
    with dask.config.set({"coiled.analytics." + key: coiled_value}):
        assert config.resolve()[setting] == expected
        assert config.get("analytics." + key) == coiled_value
    assert config.get("analytics." + key) == config._default("analytics." + key)


def test_explicit_analytics_value_wins_over_coiled():
    with dask.config.set(
        {
            "coiled.analytics.idle.timeout": "30 minutes",
            "analytics.idle.timeout": "1h",
            "coiled.analytics.events.allow": ["a"],
            "analytics.events.allow": ["b"],
        }
    ):
        settings = config.resolve()
    assert settings["idle_timeout"] == 3600.0 and settings["events_allow"] == ["b"]


def test_value_equal_to_the_shipped_default_does_not_hide_the_alias():
    with dask.config.set(
        {"analytics.profile.transmit": True, "coiled.analytics.profile.transmit": False}
    ):
        assert config.resolve()["profile_transmit"] is False
    with dask.config.set(
        {"analytics.profile.transmit": False, "coiled.analytics.profile.transmit": True}
    ):
        assert config.resolve()["profile_transmit"] is False


def test_coiled_environment_variables(monkeypatch, no_analytics_namespace):
    monkeypatch.setenv("DASK_COILED__ANALYTICS__IDLE__TIMEOUT", "2 minutes")
    dask.config.refresh()
    try:
        assert config.resolve()["idle_timeout"] == 120.0
    finally:
        monkeypatch.delenv("DASK_COILED__ANALYTICS__IDLE__TIMEOUT")
        dask.config.refresh()


def test_coiled_value_is_validated_under_its_key():
    with (
        dask.config.set({"coiled.analytics.idle.timeout": "whenever"}),
        pytest.raises(dal.ConfigError, match="analytics.idle.timeout"),
    ):
        config.resolve()


def test_default_events_include_the_plugins_own_topics():
    allow = config.resolve()["events_allow"]
    assert {"analytics-idle-shutdown", "analytics-worker-lost", "analytics-killed-worker"} <= set(
        allow
    )
