"""The schema of `analytics.*` (analytics-schema.yaml) is the one source of each key's
type, range and description: it and analytics.yaml name the same keys, the defaults pass
it (our validator and jsonschema's), every bad value fails naming the key and what the
schema allows, and the README's configuration table is the one generated from it."""

from __future__ import annotations

import runpy
from pathlib import Path

import dask
import jsonschema
import pytest

from dask_analytics_lab import config, config_schema
from dask_analytics_lab.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = config_schema.entries()


def leaf_keys(tree: dict, prefix: str = "") -> list[str]:
    keys = []
    for name, value in tree.items():
        if isinstance(value, dict):
            keys.extend(leaf_keys(value, prefix + name + "."))
        else:
            keys.append(prefix + name)
    return keys


def test_the_schema_and_the_defaults_name_the_same_keys():
    in_defaults = set(leaf_keys(config.DEFAULTS))
    in_schema = set(ENTRIES)
    assert sorted(in_defaults - in_schema) == [], "keys of analytics.yaml the schema lacks"
    assert sorted(in_schema - in_defaults) == [], "keys of the schema analytics.yaml lacks"
    assert [key for key, s in ENTRIES.items() if not s.get("description", "").strip()] == []


def test_the_defaults_pass_the_schema():
    for key in ENTRIES:
        config_schema.check(key, config._default(key))
    jsonschema.Draft202012Validator.check_schema(config_schema.SCHEMA)
    jsonschema.Draft202012Validator(config_schema.SCHEMA).validate(config.DEFAULTS)


SAMPLES = [None, True, False, 0, 1, -1, 0.5, 1.0, 2.5, 5000, "", " ", "x", "1s", "0s"]
SAMPLES += ["2h", "64 MiB", "90 days", "-1d", [], ["a"], ["a", ""], [1], {}, {"a": 1}]


@pytest.mark.parametrize("key", list(ENTRIES))
def test_the_validator_agrees_with_jsonschema(key):
    """It implements the JSON Schema keywords the file uses: without a format it accepts
    exactly what jsonschema accepts; with one it never accepts more (the format reads the
    string, and the bounds apply to what it read)."""
    schema = ENTRIES[key]
    reference = jsonschema.Draft202012Validator(schema)
    for value in SAMPLES:
        ours, theirs = config_schema._valid(value, schema)[0], reference.is_valid(value)
        if "format" in schema:
            assert theirs or not ours, (key, value)
        else:
            assert ours == theirs, (key, value, ours, theirs)


@pytest.mark.parametrize("key", list(ENTRIES))
def test_a_bad_value_names_the_key_and_what_the_schema_allows(key):
    with pytest.raises(ConfigError) as err:
        config_schema.check(key, {"not": "a setting"})
    text = str(err.value)
    assert key in text and config_schema.expected(ENTRIES[key]) in text
    assert "DASK_" + key.upper().replace(".", "__").replace("-", "_") in text


def test_ranges_come_from_the_schema():
    assert config_schema.check("analytics.gpu.interval", "20ms") == 0.02
    with pytest.raises(ConfigError, match=r"analytics\.gpu\.interval = '2h'.*<= 3600"):
        config_schema.check("analytics.gpu.interval", "2h")
    with pytest.raises(ConfigError, match="a number > 0 and <= 1"):
        config_schema.check("analytics.findings.min-share", 1.5)
    # Zero would switch the scheduler's idle timeout off, not close it at once.
    with pytest.raises(ConfigError, match="a positive duration .* or null"):
        config_schema.check("analytics.idle.timeout", 0)


def test_strings_from_environment_variables_are_read_as_the_schema_asks():
    check = config_schema.check
    assert check("analytics.profile.transmit", "no") is False
    assert check("analytics.cost.per-core-hour", "0.1") == 0.1
    assert check("analytics.task-stream.max-tasks", "500") == 500
    assert check("analytics.events.allow", "a, b") == ["a", "b"]
    assert check("analytics.buffer.max-bytes", "1 KiB") == 1024
    assert check("analytics.store", "postgres://u@h/db") == "postgresql://u@h/db"


def test_settings_read_outside_resolve_are_validated_too():
    with dask.config.set({"analytics.gpu.keep-rows": "lots"}):
        with pytest.raises(ConfigError, match=r"analytics\.gpu\.keep-rows.*positive whole"):
            config.value("analytics.gpu.keep-rows")
    with dask.config.set({"analytics.reports.base-url": " "}):
        with pytest.raises(ConfigError, match="a non-empty string or null"):
            config.value("analytics.reports.base-url")
    assert config.value("analytics.gpu.interval") == 0.1


def test_the_readme_table_is_generated_from_the_schema():
    script = runpy.run_path(str(ROOT / "scripts" / "config_table.py"))
    in_readme = script["readme_table"]((ROOT / "README.md").read_text())
    assert in_readme == script["table"](), "run: python scripts/config_table.py"
