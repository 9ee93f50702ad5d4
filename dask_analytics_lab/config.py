"""The `analytics` namespace of Dask's config: defaults, aliases, the settings sent to
the scheduler.

Configuration is read on the client (where users set things) and sent to the
scheduler with the plugin, already validated, as a plain dict.  Every read of an
`analytics.*` key goes through `get()`, which falls back to the shipped defaults
(analytics.yaml) and reads Coiled's `coiled.analytics.*` names as aliases; every
value is validated against the schema (analytics-schema.yaml, config_schema.py).
"""

from __future__ import annotations

import copy
import getpass
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import dask.config
import yaml

from .config_schema import ConfigError as ConfigError
from .config_schema import check, entries, fail
from .config_schema import default_store_path as default_store_path
from .config_schema import parse_age as parse_age
from .config_schema import validate_store as validate_store

_DEFAULTS_FILE = Path(__file__).with_name("analytics.yaml")
with _DEFAULTS_FILE.open() as f:
    DEFAULTS: dict = yaml.safe_load(f)

dask.config.update_defaults(DEFAULTS)

# Coiled Analytics users already have their settings under `coiled.analytics.*`
# (computation.code.transmit, profile.transmit, events.allow, idle.timeout...).
ALIAS_PREFIX = "coiled."
_MISSING = object()


def _default(key: str) -> Any:
    node: Any = DEFAULTS
    for part in key.split("."):
        if not isinstance(node, dict):
            raise KeyError(key)
        # Dask treats "-" and "_" in key names as the same; analytics.yaml uses "-".
        for name in (part, part.replace("_", "-")):
            if name in node:
                node = node[name]
                break
        else:
            raise KeyError(
                f"{key} is not an analytics setting (see dask_analytics_lab/analytics.yaml)"
            )
    return node


def get(key: str) -> Any:
    """One `analytics.*` setting, e.g. get("analytics.gpu.interval").

    The value set in Dask's config wins; a value equal to the shipped default
    counts as not set, so Coiled's alias `coiled.<key>` comes next; then the
    shipped default.  The defaults also cover a Dask config that lost the
    `analytics` namespace (distributed.utils_test resets the config to a
    snapshot taken before this package added its defaults).
    Raises KeyError for a key analytics.yaml does not define.
    """
    if not key.startswith("analytics."):
        raise KeyError(f"{key!r}: analytics settings are named analytics.*")
    default = _default(key)
    value = dask.config.get(key, _MISSING)
    if value is _MISSING or value == default:
        alias = dask.config.get(ALIAS_PREFIX + key, _MISSING)
        if alias is not _MISSING:
            value = alias
    # A copy: dask.config.set restores its nested values in place on exit.
    return copy.deepcopy(default if value is _MISSING else value)


def value(key: str) -> Any:
    """One `analytics.*` setting, read (get()) and validated against the schema: a
    duration in seconds, a size in bytes, a number...; ConfigError naming the key."""
    return check(key, get(key))


def retention(value: Any) -> float | None:
    """analytics.retention in seconds; None (the default): keep everything."""
    return check("analytics.retention", value)


def resolve(overrides: dict | None = None) -> dict:
    """Read and validate `analytics.*` from Dask's config into a flat plain dict: what
    the scheduler plugin is sent.

    Raises ConfigError naming the key, the value and what is allowed.
    """
    with dask.config.set(overrides or {}):
        raw = {key: get(key) for key in entries()}

    def setting(name: str) -> Any:
        return check("analytics." + name, raw["analytics." + name])

    min_delay, max_delay = setting("retry.min-delay"), setting("retry.max-delay")
    if max_delay < min_delay:
        raise fail(
            "analytics.retry.max-delay",
            raw["analytics.retry.max-delay"],
            "a duration no shorter than analytics.retry.min-delay "
            f"({raw['analytics.retry.min-delay']!r})",
        )
    return {
        "store": validate_store(setting("store")),
        "token": setting("token"),
        "ca_file": setting("ca-file"),
        "interval": setting("interval"),
        "accounting": setting("accounting"),
        "user": setting("user") or getpass.getuser(),
        "account": setting("account") or "default",
        "name": setting("name"),
        "price_per_core_hour": setting("cost.per-core-hour"),
        "computation_source": setting("computation.source"),
        "code_transmit": setting("computation.code.transmit"),
        "code_nframes": setting("computation.code.nframes"),
        "profile_transmit": setting("profile.transmit"),
        "profile_timeout": setting("profile.timeout"),
        "events_allow": sorted(set(setting("events.allow"))),
        "task_stream_transmit": setting("task-stream.transmit"),
        "task_stream_max_tasks": setting("task-stream.max-tasks"),
        "task_stream_max_bins": setting("task-stream.max-bins"),
        "metrics_transmit": setting("metrics.transmit"),
        "workers_transmit": setting("workers.transmit"),
        "workers_interval": setting("workers.interval"),
        "idle_timeout": setting("idle.timeout"),
        "buffer_max_messages": setting("buffer.max-messages"),
        "buffer_max_bytes": setting("buffer.max-bytes"),
        "buffer_linger": setting("buffer.linger"),
        "retry_min_delay": min_delay,
        "retry_max_delay": max_delay,
        "retention": setting("retention"),
        "otel": _otel(setting, raw),
    }


def _otel(setting: Any, raw: dict) -> dict | None:
    """analytics.otel.* as the scheduler's trace exporter takes them (otel/exporter.py);
    None when off, so that a scheduler with it off loads none of it (every key is checked
    either way)."""
    headers = setting("otel.headers")
    if headers is not None:
        # As OTEL_EXPORTER_OTLP_HEADERS: key=value pairs, comma-separated (or listed).
        items = headers.split(",") if isinstance(headers, str) else headers
        pairs = [item.partition("=") for item in items if item.strip()]
        if not all(key.strip() and eq for key, eq, _ in pairs):
            raise fail("analytics.otel.headers", raw["analytics.otel.headers"], _HEADERS)
        headers = {key.strip(): value.strip() for key, _, value in pairs}
    settings = {
        "endpoint": setting("otel.endpoint"),
        "protocol": setting("otel.protocol"),
        "headers": headers or None,
        "service_name": setting("otel.service-name"),
        "timeout": setting("otel.timeout"),
        "delay": setting("otel.delay"),
    }
    return settings if setting("otel.enabled") else None


_HEADERS = "text such as 'key=value,key2=value2', or a list of 'key=value' strings"


def findings_settings(overrides: dict | None = None) -> dict:
    """The thresholds of `analytics.findings.*`, validated: {"min_impact": 1.0, ...}
    (durations in seconds).  Read where findings are computed (a reader's process, or
    a team server's), not sent to the scheduler.  Raises ConfigError naming the key."""
    prefix = "analytics.findings."
    with dask.config.set(overrides or {}):
        return {
            key[len(prefix) :].replace("-", "_"): value(key)
            for key in entries()
            # keep says where findings are kept, not what they claim
            if key.startswith(prefix) and key != prefix + "keep"
        }


# LocalCluster and other deploy.Cluster classes name themselves str(uuid4())[:8].
_RANDOM_NAME = re.compile(r"[0-9a-f]{8}")


def is_unnamed(name: Any) -> bool:
    """True for no name and for the random 8-hex name a Cluster gives itself."""
    return not isinstance(name, str) or not name.strip() or bool(_RANDOM_NAME.fullmatch(name))


def default_cluster_name(started: float | None = None) -> str:
    """A name a person recognises: the notebook or script and the start time,
    e.g. "analysis.ipynb 2026-11-23 14:05" (local time).

    In a Jupyter kernel JPY_SESSION_NAME holds the notebook's path; elsewhere the
    script is sys.argv[0] ("-c" and an interactive session have none: "python").
    """
    source = os.environ.get("JPY_SESSION_NAME", "").strip()
    if not source:
        argv0 = sys.argv[0] if sys.argv else ""
        source = "" if argv0 in ("", "-c", "-") else argv0
    name = os.path.basename(source.rstrip("/\\")) or "python"
    when = time.strftime(
        "%Y-%m-%d %H:%M", time.localtime(started if started is not None else time.time())
    )
    return f"{name} {when}"
