"""`analytics.alerts.*`: the webhooks and rules, read and checked.

The schema (analytics-schema.yaml) says `webhooks` and `rules` are lists of objects;
what each object may hold is checked here, so that a bad value names its place
(`analytics.alerts.rules[1].ratio`), the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import config
from ..config_schema import FORMATS as FORMATS_READ
from ..config_schema import ConfigError

FORMATS = ("json", "slack")
EVENTS = ("failed", "finding", "idle", "slower", "cost")
# What each rule takes besides `on` and `webhook` (and, for a finding, what it may).
_NEEDS = {
    "failed": (),
    "finding": (),
    "idle": ("minutes",),
    "slower": ("ratio",),
    "cost": ("budget",),
}
_MAY = {"finding": ("kind", "min-impact")}


@dataclasses.dataclass(frozen=True)
class Webhook:
    name: str
    url: str
    format: str = "json"  # "json": our own body; "slack": Slack's incoming-webhook body


@dataclasses.dataclass(frozen=True)
class Rule:
    on: str
    kind: str | None = None
    min_impact: float | None = None  # seconds
    minutes: float | None = None
    ratio: float | None = None
    budget: float | None = None
    webhook: str | None = None  # a webhook's name; None: every webhook

    @property
    def key(self) -> str:
        """The rule's identity in the record of fired alerts: the same settings give the
        same key on every replica and in every release, so a subject fires once."""
        parts = [
            f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
            for name, value in (
                ("kind", self.kind),
                ("min-impact", self.min_impact),
                ("minutes", self.minutes),
                ("ratio", self.ratio),
                ("budget", self.budget),
            )
            if value is not None
        ]
        return self.on + (":" + ",".join(parts) if parts else "")


@dataclasses.dataclass(frozen=True)
class AlertSettings:
    webhooks: tuple[Webhook, ...] = ()
    rules: tuple[Rule, ...] = ()
    max_attempts: int = 6
    timeout: float = 10.0
    check_every: float = 60.0
    link_base: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.webhooks and self.rules)

    def webhooks_for(self, rule: Rule) -> list[Webhook]:
        return [w for w in self.webhooks if rule.webhook in (None, w.name)]


def _bad(key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(
        f"analytics config: {key} = {value!r} is not valid; expected {allowed}. "
        "Set analytics.alerts in a YAML file in ~/.config/dask/ or with dask.config.set."
    )


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(key, value, "a non-empty string")
    return value.strip()


def _number(key: str, value: Any, *, duration: bool = False) -> float:
    if duration:
        try:
            seconds = FORMATS_READ["duration"][0](value)
        except ValueError:
            seconds = 0.0
        if not seconds > 0:
            raise _bad(key, value, "a positive duration such as '1s' or '5 minutes'")
        return float(seconds)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise _bad(key, value, "a number > 0")
    return float(value)


def _webhook(i: int, raw: Any) -> Webhook:
    key = f"analytics.alerts.webhooks[{i}]"
    if not isinstance(raw, dict):
        raise _bad(key, raw, "a mapping {url, format: json|slack, name}")
    unknown = set(raw) - {"url", "format", "name"}
    if unknown:
        raise _bad(
            f"{key}.{sorted(unknown)[0]}",
            raw[sorted(unknown)[0]],
            "no such key (url, format, name)",
        )
    url = _text(f"{key}.url", raw.get("url"))
    if not url.startswith(("http://", "https://")):
        raise _bad(f"{key}.url", url, "an http:// or https:// URL")
    fmt = raw.get("format", "json")
    if fmt not in FORMATS:
        raise _bad(f"{key}.format", fmt, "one of " + ", ".join(repr(f) for f in FORMATS))
    name = _text(f"{key}.name", raw["name"]) if raw.get("name") is not None else f"webhook-{i}"
    return Webhook(name=name, url=url, format=fmt)


def _rule(i: int, raw: Any, names: set[str]) -> Rule:
    key = f"analytics.alerts.rules[{i}]"
    if not isinstance(raw, dict):
        raise _bad(key, raw, "a mapping {on: failed|finding|idle|slower|cost, ...}")
    # YAML 1.1 reads a bare `on` key as True.
    raw = {("on" if k is True else k): v for k, v in raw.items()}
    on = raw.get("on")
    if on not in EVENTS:
        raise _bad(f"{key}.on", on, "one of " + ", ".join(repr(e) for e in EVENTS))
    allowed = {"on", "webhook", *_NEEDS[on], *_MAY.get(on, ())}
    unknown = sorted(str(k) for k in set(raw) - allowed)
    if unknown:
        raise _bad(
            f"{key}.{unknown[0]}",
            raw.get(unknown[0]),
            f"no such key for on: {on} (allowed: {', '.join(sorted(allowed))})",
        )
    for need in _NEEDS[on]:
        if raw.get(need) is None:
            raise _bad(f"{key}.{need}", None, f"a number > 0 (on: {on} needs it)")
    webhook = raw.get("webhook")
    if webhook is not None and webhook not in names:
        raise _bad(
            f"{key}.webhook",
            webhook,
            "the name of a webhook in analytics.alerts.webhooks (" + ", ".join(sorted(names)) + ")",
        )
    return Rule(
        on=on,
        kind=_text(f"{key}.kind", raw["kind"]) if raw.get("kind") is not None else None,
        min_impact=(
            _number(f"{key}.min-impact", raw["min-impact"], duration=True)
            if raw.get("min-impact") is not None
            else None
        ),
        minutes=_number(f"{key}.minutes", raw["minutes"]) if on == "idle" else None,
        ratio=_number(f"{key}.ratio", raw["ratio"]) if on == "slower" else None,
        budget=_number(f"{key}.budget", raw["budget"]) if on == "cost" else None,
        webhook=webhook,
    )


def parse(
    webhooks: Any,
    rules: Any,
    *,
    max_attempts: Any = 6,
    timeout: Any = "10s",
    check_every: Any = "60s",
    link_base: Any = None,
) -> AlertSettings:
    """AlertSettings from the raw values; ConfigError naming the first bad one."""
    hooks = tuple(_webhook(i, w) for i, w in enumerate(webhooks or ()))
    names = [w.name for w in hooks]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise _bad("analytics.alerts.webhooks", dup, "webhooks with different names")
    return AlertSettings(
        webhooks=hooks,
        rules=tuple(_rule(i, r, set(names)) for i, r in enumerate(rules or ())),
        max_attempts=config.check("analytics.alerts.max-attempts", max_attempts),
        timeout=config.check("analytics.alerts.timeout", timeout),
        check_every=config.check("analytics.alerts.check-every", check_every),
        link_base=(
            config.check("analytics.alerts.link-base", link_base).rstrip("/") if link_base else None
        ),
    )


def from_config(overrides: dict | None = None) -> AlertSettings:
    """`analytics.alerts.*` of Dask's config here (with `overrides`), checked."""
    import dask.config

    with dask.config.set(overrides or {}):
        return parse(
            config.value("analytics.alerts.webhooks"),
            config.value("analytics.alerts.rules"),
            max_attempts=config.get("analytics.alerts.max-attempts"),
            timeout=config.get("analytics.alerts.timeout"),
            check_every=config.get("analytics.alerts.check-every"),
            link_base=config.get("analytics.alerts.link-base")
            or config.get("analytics.reports.base-url"),
        )
