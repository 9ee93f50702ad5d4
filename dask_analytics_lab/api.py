"""The public functions users call: register a cluster, and read what was recorded.

Readers take `store=` (a path or URL) and default to `analytics.store` from Dask's
config.  Rows are plain dicts; times are seconds since the epoch.  The read functions
come from their declarations (reads.py, written out in api_reads.py).
"""

from __future__ import annotations

import logging
import os
import secrets
import warnings
from pathlib import Path
from typing import Any

import dask.config

from . import config
from .api_reads import *  # noqa: F403  (the read functions: reads.py declares them)
from .api_reads import __all__ as _reads
from .collect.endings import install_sigterm_handler
from .collect.plugin import PLUGIN_NAME, AnalyticsPlugin
from .readers import close_readers, open_reader
from .urls import mask_url

logger = logging.getLogger("dask_analytics_lab")

__all__ = [
    *_reads,
    "close_readers",
    "dask_setup",
    "flush",
    "is_recording",
    "open_reader",
    "register",
    "scheduler_sees_file",
    "status",
    "where",
]


def _client(client: Any = None) -> Any:
    if client is not None:
        return client
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        raise ValueError(
            "dask-analytics: no Dask client found; pass one (register(client)) or create one first "
            "(from dask.distributed import Client; client = Client())"
        ) from None


def register(
    client: Any = None, *, store: str | None = None, config_overrides: dict | None = None
) -> dict:
    """Record the client's cluster from now on.  Returns {"cluster_id", "store", ...}.

    Reads `analytics.*` here, on the client, validates it (ConfigError names the
    bad key), and sends it to the scheduler with the plugin.  Registering twice on
    one cluster keeps the first registration.  A SQLite store must be a file the
    scheduler can open too: a scheduler on another machine fails here (ConfigError)
    with how to run a `dask-analytics server` instead.
    """
    client = _client(client)
    overrides = dict(config_overrides or {})
    if store is not None:
        overrides["analytics.store"] = store
    settings = config.resolve(overrides)
    if settings["name"] is None:
        cluster = getattr(client, "cluster", None)
        name = getattr(cluster, "name", None) if cluster is not None else None
        settings["name"] = (
            name if not config.is_unnamed(name) else config.default_cluster_name(_started(client))
        )
    if settings["code_transmit"]:
        # The client sends code snippets only when nframes > 0.
        dask.config.set({"distributed.diagnostics.computations.nframes": settings["code_nframes"]})
    _warn_if_unreachable(settings)
    _check_scheduler_sees_store(client, settings["store"])
    # A LocalCluster's scheduler dies with this process: on SIGTERM (a kernel restart
    # ends with one), end its recording first.  Only the main thread may; %load_ext
    # installs it from there for the Clients its preload registers in a thread.
    install_sigterm_handler()
    readers = _readers_plugin(settings, overrides)  # a bad analytics.alerts fails here
    try:
        # The GPU monitor's scheduler side is registered by the first Monitor: a plugin
        # costs Dask a call of its transition hook for every transition of every task.
        client.register_plugin(AnalyticsPlugin(settings))
        if readers is not None:
            client.register_plugin(readers)  # after: it hooks into the analytics plugin
    except (ModuleNotFoundError, ImportError) as e:
        raise RuntimeError(
            f"dask-analytics: the scheduler could not load the analytics plugin ({e}); "
            "install dask-analytics-lab in the scheduler's environment too"
        ) from e
    info = client.sync(client.scheduler.analytics_info)
    logger.info("dask-analytics: recording cluster %s into %s", info["cluster_id"], info["store"])
    return info


def _readers_plugin(settings: dict, overrides: dict | None = None) -> Any:
    """The plugin of alerts, trace export and the findings keeper (written_readers.py)
    when analytics.alerts (rules and webhooks, a store that is no team server),
    analytics.otel or analytics.findings.keep (a store that is no team server) is on;
    else None.  One plugin for all: each plugin is a call on every transition of every
    task."""
    if not settings.get("otel"):
        with dask.config.set(overrides or {}):
            if not (
                config.get("analytics.alerts.rules") and config.get("analytics.alerts.webhooks")
            ) and not (
                config.get("analytics.findings.keep")
                and not settings["store"].startswith(("http://", "https://"))
            ):
                return None  # written_readers.py (and alerts/, otel/) not even imported
    from .written_readers import plugin_for

    return plugin_for(settings, overrides)


def _started(client: Any) -> float | None:
    """When the client's scheduler started (seconds since the epoch), if it says."""
    try:
        return client.scheduler_info(n_workers=0).get("started")
    except Exception:
        return None


def is_recording(dask_scheduler: Any) -> bool:
    """Runs on the scheduler (client.run_on_scheduler): has it the recorder?"""
    return PLUGIN_NAME in dask_scheduler.plugins


def scheduler_sees_file(path: str, token: str) -> bool:
    """Runs on the scheduler (client.run_on_scheduler): is the probe file the client
    wrote at `path` there, with the client's random `token` in it?  A module-level
    function, so it travels by reference."""
    try:
        with open(path) as f:
            return f.read() == token
    except OSError:
        return False


def _check_scheduler_sees_store(client: Any, url: str) -> None:
    """A SQLite store is a file on this machine: make sure the scheduler, which does
    the writing, opens the same file, rather than recording into a file of its own
    that nobody here will read."""
    if not url.startswith("sqlite"):
        return
    from .store.engine import is_memory, parse

    u = parse(url)
    database = u.database
    if is_memory(u) or database is None:  # (None is in memory too)
        return
    # As given (relative paths too): the scheduler resolves the URL the same way.
    probe = Path(database).expanduser().parent / f".dask-analytics-probe-{secrets.token_hex(8)}"
    token = secrets.token_hex(16)
    try:
        probe.write_text(token)
    except OSError as e:
        # The store is not usable from here either; _warn_if_unreachable has said so.
        logger.info("dask-analytics: cannot check that the scheduler sees %s (%s)", probe.parent, e)
        return
    try:
        seen = client.run_on_scheduler(scheduler_sees_file, str(probe), token)
    except Exception as e:  # e.g. distributed.scheduler.pickle: false
        logger.warning(
            "dask-analytics: could not check that the scheduler sees the store %s (%s: %s); "
            "registering anyway",
            mask_url(url),
            type(e).__name__,
            e,
        )
        return
    finally:
        probe.unlink(missing_ok=True)
    if not seen:
        address = getattr(getattr(client, "scheduler", None), "address", "?")
        where_ = (
            "it runs on another machine or in another container"
            if os.path.isabs(database)
            else "it runs elsewhere, or in another working directory: the path is relative"
        )
        raise config.ConfigError(
            f"dask-analytics: the scheduler at {address} cannot see the SQLite store {u.database} of this "
            f"machine ({where_}), so it cannot record into it. "
            f"Run `dask-analytics server --db {mask_url(url)}` on this machine (or on one both can reach) "
            "and set analytics.store to that server's URL, e.g. "
            "dask.config.set({'analytics.store': 'http://<this-host>:8765'}) or "
            "DASK_ANALYTICS__STORE=http://<this-host>:8765, then register() again."
        )


def _warn_if_unreachable(settings: dict) -> None:
    url = settings["store"]
    if url.startswith(("http://", "https://")):
        return
    from .store import StoreUnavailable

    try:
        open_reader(url)
    except StoreUnavailable as e:
        warnings.warn(
            f"dask-analytics: {e} The scheduler will keep up to {settings['buffer_max_messages']} "
            "messages and retry until it can write.",
            stacklevel=3,
        )


def flush(client: Any = None, timeout: float = 10.0) -> dict:
    """Ask the scheduler to snapshot now and wait until the store has everything.

    Returns the plugin's counters: pending, stored, dropped, flushed (bool).
    """
    client = _client(client)
    return client.sync(client.scheduler.analytics_flush, timeout=timeout)


def status(client: Any = None) -> dict:
    """The plugin's counters on the client's cluster (cluster_id, store, pending, dropped ...)."""
    client = _client(client)
    # The trace exporter's counts come from its plugin, there only with analytics.otel on.
    return {
        "otel_exported": 0,
        "otel_dropped": 0,
        "otel_findings_failed": 0,
        **client.sync(client.scheduler.analytics_info),
    }


def where(store: str | None = None) -> str:
    """The store URL readers and `register()` use (password masked)."""
    return mask_url(
        config.validate_store(store if store is not None else config.get("analytics.store"))
    )


def dask_setup(scheduler: Any) -> None:
    """`dask scheduler --preload dask_analytics_lab`: record this scheduler.

    The config is this process's own (with the shipped defaults for whatever it
    lacks).  The scheduler starts the plugins itself: calling start() here too
    would start them twice.  With DASK_ANALYTICS_SETUP_COUNT_FILE set, appends
    one line per scheduler set up (scripts/run_distributed_tests.py counts them).
    """
    if PLUGIN_NAME not in scheduler.plugins:
        settings = config.resolve()
        if settings["name"] is None:
            settings["name"] = config.default_cluster_name(getattr(scheduler, "time_started", None))
        scheduler.add_plugin(AnalyticsPlugin(settings))
        readers = _readers_plugin(settings)
        if readers is not None:
            scheduler.add_plugin(readers)  # started after the analytics plugin
    count_file = os.environ.get("DASK_ANALYTICS_SETUP_COUNT_FILE")
    if count_file:
        # One write with O_APPEND: lines from concurrent processes do not mix.
        fd = os.open(count_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{os.getpid()} {scheduler.id}\n".encode())
        finally:
            os.close(fd)
