"""A finding: what went wrong, the recorded figures it rests on, what to change, and what
it cost (seconds of wall time, an estimate whose sum the evidence spells out)."""

from __future__ import annotations

from ..figures import duration, format_bytes

__all__ = ["finding", "format_bytes", "secs", "short"]


def finding(
    kind: str,
    title: str,
    evidence: str,
    advice: str,
    impact: float,
    *,
    groups: list[str] | None = None,
    workers: list[str] | None = None,
) -> dict:
    return {
        "kind": kind,
        "title": title,
        "evidence": evidence,
        "advice": advice,
        "impact": round(max(0.0, float(impact)), 3),
        "groups": list(groups or []),
        "workers": list(workers or []),
    }


def secs(x: float) -> str:
    """A duration as every table and view prints it (figures.duration: "150 ms",
    "12.5 s", "5m 00s"), so the evidence quotes the figures a reader sees there."""
    return duration(x)


def short(names: list[str], n: int = 3) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")
