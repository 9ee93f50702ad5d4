"""The `analytics` namespace of Dask's config: defaults, validation, aliases, defaults' paths.

Configuration is read on the client (where users set things) and sent to the
scheduler with the plugin, already validated, as a plain dict.  Every read of an
`analytics.*` key goes through `get()`, which falls back to the shipped defaults
(analytics.yaml) and reads Coiled's `coiled.analytics.*` names as aliases.
"""

from __future__ import annotations

import copy
import getpass
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Literal, overload

import dask.config
import yaml
from dask.utils import parse_bytes, parse_timedelta

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


class ConfigError(ValueError):
    """An `analytics.*` config value is invalid; the message names key, value and fix."""


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    env = "DASK_" + key.upper().replace(".", "__").replace("-", "_")
    return ConfigError(
        f"analytics config: {key} = {value!r} is not valid; expected {allowed}. "
        f"Set it with dask.config.set({{{key!r}: ...}}), the {env} environment "
        f"variable, or a YAML file in ~/.config/dask/."
    )


@overload
def _duration(key: str, value: Any, *, allow_none: Literal[False] = False) -> float: ...
@overload
def _duration(key: str, value: Any, *, allow_none: bool) -> float | None: ...
def _duration(key: str, value: Any, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    try:
        seconds = parse_timedelta(value, default="s")
    except (TypeError, ValueError, KeyError):
        seconds = None
    if seconds is None or seconds < 0 or (seconds == 0 and not allow_none):
        allowed = "a positive duration such as '1s' or '500ms'"
        raise _fail(key, value, allowed + (" or null" if allow_none else ""))
    return float(seconds)


def parse_age(value: Any, *, what: str = "age") -> float:
    """Seconds in a retention age: "90d", "90 days", "12h", or a plain number of days."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{what} must be a duration such as '90d' or '12h', got {value!r}")
    try:
        seconds = parse_timedelta(value.strip() if isinstance(value, str) else value, default="d")
    except (TypeError, ValueError, KeyError, IndexError):  # IndexError: dask on ""
        seconds = None
    if seconds is None or seconds <= 0:
        raise ValueError(
            f"{what} must be a positive duration such as '90d' or '12h', got {value!r}"
        )
    return float(seconds)


def retention(value: Any) -> float | None:
    """analytics.retention in seconds; None (the default): keep everything."""
    if value is None:
        return None
    try:
        return parse_age(value)
    except ValueError:
        raise _fail(
            "analytics.retention",
            value,
            "a duration such as '90 days' or '90d' (a plain number is "
            "days), or null to keep everything",
        ) from None


def _positive_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _fail(key, value, "a positive whole number")
    try:
        n = int(value)
    except ValueError:
        raise _fail(key, value, "a positive whole number") from None
    if n <= 0:
        raise _fail(key, value, "a positive whole number")
    return n


def _size(key: str, value: Any) -> int:
    """Bytes in a size such as "64 MiB" or "500 MB"; a plain number is bytes."""
    allowed = "a positive size such as '64 MiB' or '500 MB' (a plain number is bytes)"
    # parse_bytes reads "MB" as a megabyte and "" as a byte: a size starts with its number.
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, str))
        or (isinstance(value, str) and not value.strip()[:1].isdigit())
    ):
        raise _fail(key, value, allowed)
    try:
        n = parse_bytes(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise _fail(key, value, allowed) from None
    if n <= 0:
        raise _fail(key, value, allowed)
    return int(n)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false", "1", "0", "yes", "no"}:
        return value.lower() in {"true", "1", "yes"}
    raise _fail(key, value, "true or false")


def _optional_str(key: str, value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    raise _fail(key, value, "a non-empty string or null")


def default_store_path() -> Path:
    """The SQLite file used when `analytics.store` is null."""
    import platformdirs

    return Path(platformdirs.user_data_dir("dask-analytics")) / "analytics.db"


def validate_store(value: Any, key: str = "analytics.store") -> str:
    """Normalise a store setting into a URL: sqlite:///..., postgresql://..., http(s)://..."""
    if value is None:
        return "sqlite:///" + str(default_store_path())
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise _fail(
            key,
            value,
            "a SQLite file path, a sqlite:/// or postgresql:// URL, or an http(s):// server URL",
        )
    value = value.strip()
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if not scheme:
        return "sqlite:///" + str(Path(value).expanduser().absolute())
    if scheme in {"sqlite", "http", "https"} or scheme.startswith("sqlite+"):
        return value
    if scheme in {"postgresql", "postgres"} or scheme.startswith("postgresql+"):
        if scheme == "postgres":
            value = "postgresql" + value[len("postgres") :]
        return value
    raise _fail(
        key,
        value,
        "a SQLite file path, a sqlite:/// or postgresql:// URL, or an http(s):// server URL",
    )


def resolve(overrides: dict | None = None) -> dict:
    """Read and validate `analytics.*` from Dask's config into a flat plain dict.

    Raises ConfigError naming the key, the value and what is allowed.
    """
    with dask.config.set(overrides or {}):
        raw = {key: get("analytics." + key) for key in _leaf_keys(DEFAULTS["analytics"])}
    setting = raw.__getitem__

    allow = setting("events.allow")
    if isinstance(allow, str):
        allow = [t.strip() for t in allow.split(",") if t.strip()]
    if not isinstance(allow, (list, tuple)) or not all(isinstance(t, str) for t in allow):
        raise _fail("analytics.events.allow", allow, "a list of event topic names")

    price = setting("cost.per-core-hour")
    try:
        price = float(price)
        if price < 0:
            raise ValueError
    except (TypeError, ValueError):
        raise _fail("analytics.cost.per-core-hour", price, "a number >= 0") from None

    nframes = setting("computation.code.nframes")
    code = _bool("analytics.computation.code.transmit", setting("computation.code.transmit"))

    min_delay = _duration("analytics.retry.min-delay", setting("retry.min-delay"))
    max_delay = _duration("analytics.retry.max-delay", setting("retry.max-delay"))
    if max_delay < min_delay:
        raise _fail(
            "analytics.retry.max-delay",
            setting("retry.max-delay"),
            f"a duration no shorter than analytics.retry.min-delay ({setting('retry.min-delay')!r})",
        )

    return {
        "store": validate_store(setting("store")),
        "token": _optional_str("analytics.token", setting("token")),
        "ca_file": _optional_str("analytics.ca-file", setting("ca-file")),
        "interval": _duration("analytics.interval", setting("interval")),
        "user": _optional_str("analytics.user", setting("user")) or getpass.getuser(),
        "account": _optional_str("analytics.account", setting("account")) or "default",
        "name": _optional_str("analytics.name", setting("name")),
        "price_per_core_hour": price,
        "code_transmit": code,
        "code_nframes": _positive_int("analytics.computation.code.nframes", nframes),
        "profile_transmit": _bool("analytics.profile.transmit", setting("profile.transmit")),
        "profile_timeout": _duration("analytics.profile.timeout", setting("profile.timeout")),
        "events_allow": sorted(set(allow)),
        "task_stream_transmit": _bool(
            "analytics.task-stream.transmit", setting("task-stream.transmit")
        ),
        "task_stream_max_tasks": _positive_int(
            "analytics.task-stream.max-tasks", setting("task-stream.max-tasks")
        ),
        "task_stream_max_bins": _positive_int(
            "analytics.task-stream.max-bins", setting("task-stream.max-bins")
        ),
        "metrics_transmit": _bool("analytics.metrics.transmit", setting("metrics.transmit")),
        "workers_transmit": _bool("analytics.workers.transmit", setting("workers.transmit")),
        "workers_interval": _duration("analytics.workers.interval", setting("workers.interval")),
        "idle_timeout": _duration(
            "analytics.idle.timeout", setting("idle.timeout"), allow_none=True
        ),
        "buffer_max_messages": _positive_int(
            "analytics.buffer.max-messages", setting("buffer.max-messages")
        ),
        "buffer_max_bytes": _size("analytics.buffer.max-bytes", setting("buffer.max-bytes")),
        "retry_min_delay": min_delay,
        "retry_max_delay": max_delay,
        "retention": retention(setting("retention")),
    }


def _positive_number(key: str, value: Any, *, most: float | None = None) -> float:
    allowed = "a number > 0" + (f" and <= {most:g}" if most is not None else "")
    try:
        n = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        n = float("nan")
    if not n > 0 or (most is not None and n > most):
        raise _fail(key, value, allowed)
    return n


# analytics.findings.*: (kind of value, its flat name in findings_settings()).
_FINDINGS = {
    "min-impact": "duration",
    "min-share": "share",
    "task-overhead": "duration",
    "small-tasks-min": "count",
    "target-task": "duration",
    "straggler-ratio": "number",
    "straggler-min-tasks": "count",
    "imbalance-ratio": "number",
    "too-few-share": "share",
    "gil-wait-share": "share",
    "gil-min-cpu": "number",
    "gil-max-cpu": "number",
    "transfer-share": "share",
    "serialization-share": "share",
    "slower-ratio": "number",
    "idle-min": "duration",
}


def findings_settings(overrides: dict | None = None) -> dict:
    """The thresholds of `analytics.findings.*`, validated: {"min_impact": 1.0, ...}
    (durations in seconds).  Read where findings are computed (a reader's process, or
    a team server's), not sent to the scheduler.  Raises ConfigError naming the key."""
    out = {}
    with dask.config.set(overrides or {}):
        for name, kind in _FINDINGS.items():
            key = f"analytics.findings.{name}"
            value = get(key)
            if kind == "duration":
                out[name.replace("-", "_")] = _duration(key, value)
            elif kind == "count":
                out[name.replace("-", "_")] = _positive_int(key, value)
            else:
                out[name.replace("-", "_")] = _positive_number(
                    key, value, most=1.0 if kind == "share" else None
                )
    return out


def _leaf_keys(tree: dict, prefix: str = "") -> list[str]:
    keys = []
    for name, value in tree.items():
        if isinstance(value, dict) and value:
            keys.extend(_leaf_keys(value, prefix + name + "."))
        else:
            keys.append(prefix + name)
    return keys


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
