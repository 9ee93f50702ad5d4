"""The `analytics` namespace of Dask's config: defaults, validation, defaults' paths.

Configuration is read on the client (where users set things) and sent to the
scheduler with the plugin, already validated, as a plain dict.
"""
from __future__ import annotations

import copy
import getpass
import os
from pathlib import Path
from typing import Any

import dask.config
import yaml
from dask.utils import parse_timedelta

_DEFAULTS_FILE = Path(__file__).with_name("analytics.yaml")
with _DEFAULTS_FILE.open() as f:
    DEFAULTS: dict = yaml.safe_load(f)

dask.config.update_defaults(DEFAULTS)


class ConfigError(ValueError):
    """An `analytics.*` config value is invalid; the message names key, value and fix."""


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    env = "DASK_" + key.upper().replace(".", "__").replace("-", "_")
    return ConfigError(
        f"analytics config: {key} = {value!r} is not valid; expected {allowed}. "
        f"Set it with dask.config.set({{{key!r}: ...}}), the {env} environment "
        f"variable, or a YAML file in ~/.config/dask/."
    )


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
        raise _fail(key, value, "a SQLite file path, a sqlite:/// or postgresql:// URL, or an http(s):// server URL")
    value = value.strip()
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if not scheme:
        return "sqlite:///" + str(Path(value).expanduser().absolute())
    if scheme in {"sqlite", "http", "https"} or scheme.startswith("sqlite+"):
        return value
    if scheme in {"postgresql", "postgres"} or scheme.startswith("postgresql+"):
        if scheme == "postgres":
            value = "postgresql" + value[len("postgres"):]
        return value
    raise _fail(
        key, value,
        "a SQLite file path, a sqlite:/// or postgresql:// URL, or an http(s):// server URL",
    )


def resolve(overrides: dict | None = None) -> dict:
    """Read and validate `analytics.*` from Dask's config into a flat plain dict.

    Raises ConfigError naming the key, the value and what is allowed.
    """
    with dask.config.set(overrides or {}):
        # A copy: leaving the `with` restores the config's nested dicts in place.
        raw = copy.deepcopy(dask.config.get("analytics"))

    def get(path: str) -> Any:
        node: Any = raw
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    allow = get("events.allow")
    if isinstance(allow, str):
        allow = [t.strip() for t in allow.split(",") if t.strip()]
    if not isinstance(allow, (list, tuple)) or not all(isinstance(t, str) for t in allow):
        raise _fail("analytics.events.allow", allow, "a list of event topic names")

    price = get("cost.per-core-hour")
    try:
        price = float(price)
        if price < 0:
            raise ValueError
    except (TypeError, ValueError):
        raise _fail("analytics.cost.per-core-hour", price, "a number >= 0") from None

    nframes = get("computation.code.nframes")
    code = _bool("analytics.computation.code.transmit", get("computation.code.transmit"))

    min_delay = _duration("analytics.retry.min-delay", get("retry.min-delay"))
    max_delay = _duration("analytics.retry.max-delay", get("retry.max-delay"))
    if max_delay < min_delay:
        raise _fail("analytics.retry.max-delay", get("retry.max-delay"),
                    f"a duration no shorter than analytics.retry.min-delay ({get('retry.min-delay')!r})")

    return {
        "store": validate_store(get("store")),
        "token": _optional_str("analytics.token", get("token")),
        "ca_file": _optional_str("analytics.ca-file", get("ca-file")),
        "interval": _duration("analytics.interval", get("interval")),
        "user": _optional_str("analytics.user", get("user")) or getpass.getuser(),
        "account": _optional_str("analytics.account", get("account")) or "default",
        "name": _optional_str("analytics.name", get("name")),
        "price_per_core_hour": price,
        "code_transmit": code,
        "code_nframes": _positive_int("analytics.computation.code.nframes", nframes),
        "profile_transmit": _bool("analytics.profile.transmit", get("profile.transmit")),
        "profile_timeout": _duration("analytics.profile.timeout", get("profile.timeout")),
        "events_allow": sorted(set(allow)),
        "idle_timeout": _duration("analytics.idle.timeout", get("idle.timeout"), allow_none=True),
        "buffer_max_messages": _positive_int("analytics.buffer.max-messages", get("buffer.max-messages")),
        "retry_min_delay": min_delay,
        "retry_max_delay": max_delay,
    }
