"""What a valid `analytics.*` value is: the schema (analytics-schema.yaml) and the one
validator every setting goes through.

The validator implements the part of JSON Schema that the file uses (listed at its top)
and reads Dask-style values ("1s", "64 MiB", "90 days", store paths) through `format`.
A bad value fails with the key, the value and what is allowed, in words made from the
same schema entry.  It is ours rather than jsonschema's: the bare package (scheduler
and worker images) does not depend on jsonschema, and its errors would speak of schema
paths rather than of `dask.config.set`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from dask.utils import parse_bytes, parse_timedelta

SCHEMA_FILE = Path(__file__).with_name("analytics-schema.yaml")
with SCHEMA_FILE.open() as f:
    SCHEMA: dict = yaml.safe_load(f)


class ConfigError(ValueError):
    """An `analytics.*` config value is invalid; the message names key, value and fix."""


def fail(key: str, value: Any, allowed: str) -> ConfigError:
    env = "DASK_" + key.upper().replace(".", "__").replace("-", "_")
    return ConfigError(
        f"analytics config: {key} = {value!r} is not valid; expected {allowed}. "
        f"Set it with dask.config.set({{{key!r}: ...}}), the {env} environment "
        f"variable, or a YAML file in ~/.config/dask/."
    )


def entries(node: dict | None = None, prefix: str = "") -> dict[str, dict]:
    """{"analytics.store": its schema, ...}: every setting (a leaf), in the file's order."""
    node = SCHEMA if node is None else node
    found: dict[str, dict] = {}
    for name, sub in node.get("properties", {}).items():
        key = prefix + name
        if sub.get("type") == "object" and "properties" in sub:
            found.update(entries(sub, key + "."))
        else:
            found[key] = sub
    return found


_ENTRIES = entries()


def entry(key: str) -> dict:
    """The schema of one setting; KeyError for a key the schema does not define."""
    # Dask treats "-" and "_" in key names as the same; the schema uses "-".
    try:
        return _ENTRIES[key.replace("_", "-")]
    except KeyError:
        raise KeyError(
            f"{key} is not an analytics setting (see dask_analytics_lab/analytics-schema.yaml)"
        ) from None


# --- formats: a value read the way Dask reads it ------------------------------------------
def _duration(value: Any) -> float:
    """Seconds in "1s", "500ms", "5 minutes" or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError(value)
    try:
        seconds = parse_timedelta(value.strip() if isinstance(value, str) else value, default="s")
    except (TypeError, KeyError, IndexError) as e:  # IndexError: dask on ""
        raise ValueError(value) from e
    if seconds is None:
        raise ValueError(value)
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


def _size(value: Any) -> int:
    """Bytes in "64 MiB" or "500 MB"; a plain number is bytes."""
    # parse_bytes reads "MB" as a megabyte and "" as a byte: a size starts with its number.
    if isinstance(value, bool) or (isinstance(value, str) and not value.strip()[:1].isdigit()):
        raise ValueError(value)
    try:
        return int(parse_bytes(value.strip() if isinstance(value, str) else value))
    except (TypeError, OverflowError) as e:
        raise ValueError(value) from e


def default_store_path() -> Path:
    """The SQLite file used when `analytics.store` is null."""
    import platformdirs

    return Path(platformdirs.user_data_dir("dask-analytics")) / "analytics.db"


def _store_url(value: Any) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(value)
    value = value.strip()
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if not scheme:
        return "sqlite:///" + str(Path(value).expanduser().absolute())
    if scheme in {"sqlite", "http", "https"} or scheme.startswith("sqlite+"):
        return value
    if scheme == "postgres":
        return "postgresql" + value[len("postgres") :]
    if scheme == "postgresql" or scheme.startswith("postgresql+"):
        return value
    raise ValueError(value)


def validate_store(value: Any, key: str = "analytics.store") -> str:
    """Normalise a store setting into a URL: sqlite:///..., postgresql://..., http(s)://...
    None: the default SQLite file."""
    if value is None:
        return "sqlite:///" + str(default_store_path())
    try:
        return _store_url(value)
    except ValueError:
        raise fail(key, value, expected(entry("analytics.store"), null=False)) from None


# format -> (reader: value -> seconds, bytes or URL; what it reads, in words; the unit of
# what it reads, which the schema's bounds are in).
FORMATS: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    "duration": (_duration, "a duration such as '1s' or '500ms'", "seconds"),
    "age": (parse_age, "a duration such as '90 days' or '90d' (a plain number is days)", "seconds"),
    "size": (_size, "a size such as '64 MiB' or '500 MB' (a plain number is bytes)", "bytes"),
    "store": (
        _store_url,
        "a SQLite file path, a sqlite:/// or postgresql:// URL, or an http(s):// server URL",
        "",
    ),
}


# --- the validator ------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (
        isinstance(v, float) and v.is_integer()
    )


_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": _is_int,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, (list, tuple)),
    "object": lambda v: isinstance(v, dict),
}
_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def _types(schema: dict) -> list[str]:
    t = schema.get("type", [])
    return [t] if isinstance(t, str) else list(t)


def _from_text(value: Any, types: list[str]) -> Any:
    """A string where the schema asks for another type (an environment variable, which
    Dask leaves a string unless it reads as a Python literal) as that type."""
    if not isinstance(value, str) or "string" in types:
        return value
    text = value.strip()
    if "boolean" in types and text.lower() in _WORDS:
        return _WORDS[text.lower()]
    for name, read in (("integer", int), ("number", float)):
        if name in types:
            try:
                return read(text)
            except ValueError:
                pass
    if "array" in types:
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


def _within(n: float, schema: dict) -> bool:
    return not (
        ("minimum" in schema and n < schema["minimum"])
        or ("exclusiveMinimum" in schema and n <= schema["exclusiveMinimum"])
        or ("maximum" in schema and n > schema["maximum"])
        or ("exclusiveMaximum" in schema and n >= schema["exclusiveMaximum"])
    )


def _valid(value: Any, schema: dict) -> tuple[bool, Any]:
    """(whether value fits schema, the value as read: seconds, bytes, URL, int...)."""
    types = _types(schema)
    if types and not any(_TYPES[t](value) for t in types):
        return False, value
    if value is None:
        return True, None
    if "enum" in schema and value not in schema["enum"]:
        return False, value
    if "format" in schema:
        try:
            value = FORMATS[schema["format"]][0](value)
        except ValueError:
            return False, value
    elif "pattern" in schema and isinstance(value, str):
        if not re.search(schema["pattern"], value):
            return False, value
    if isinstance(value, (list, tuple)):
        items = [_valid(item, schema.get("items", {})) for item in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True, value
    if not _within(value, schema):
        return False, value
    if "format" in schema:
        return True, value
    return True, int(value) if "integer" in types and _is_int(value) else float(value)


def check(key: str, value: Any) -> Any:
    """`value` of setting `key` as read: a duration in seconds, a size in bytes, a store
    as a URL, a number, a list...; ConfigError naming the key when it is not valid."""
    schema = entry(key)
    ok, read = _valid(_from_text(value, _types(schema)), schema)
    if not ok:
        raise fail(key, value, expected(schema))
    return read


# --- what is allowed, in words --------------------------------------------------------------
def _bounds(schema: dict) -> list[str]:
    words = []
    for keyword, sign in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if keyword in schema:
            words.append(f"{sign} {schema[keyword]:g}")
    return words


def _positive(schema: dict) -> bool:
    """Only a bound that says "more than zero"."""
    return (
        set(schema) & {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}
        == {"exclusiveMinimum"}
        and schema["exclusiveMinimum"] == 0
    )


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _words(kind: str, schema: dict) -> str:
    bounds = " and ".join(_bounds(schema))
    if kind == "boolean":
        return "true or false"
    if kind == "integer":
        if schema.get("minimum") == 1 and len(_bounds(schema)) == 1:
            return "a positive whole number"
        return ("a whole number " + bounds).strip()
    if kind == "number":
        return ("a number " + bounds).strip()
    if kind == "string":
        return "a non-empty string" if schema.get("pattern") == r"\S" else "a string"
    if kind == "array":
        title = schema.get("items", {}).get("title", "string")
        return f"a list of {title}{'es' if title.endswith('s') else 's'}"
    return f"a{'n' if kind[0] in 'aeiou' else ''} {kind}"


def expected(schema: dict, *, null: bool = True) -> str:
    """What the schema allows, in words: "a positive whole number", "a duration such as
    '1s' or '500ms' or null"..."""
    types = _types(schema)
    if "enum" in schema:
        words = ["one of " + ", ".join(repr(v) for v in schema["enum"])]
    elif "format" in schema:
        _, phrase, unit = FORMATS[schema["format"]]
        if _positive(schema):
            phrase = "a positive " + phrase.removeprefix("a ")
        elif _bounds(schema):
            phrase += f" (in {unit}: " + " and ".join(_bounds(schema)) + ")"
        words = [phrase]
    else:
        words = [_words(t, schema) for t in types if t != "null"]
    if null and "null" in types:
        words.append("null")
    return _join(words)
