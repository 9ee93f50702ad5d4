"""One computation's record in the collector: its claims, a row per task-group name,
and the running totals its message is made of."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import host_cpu
from .group_figures import Claim, Summary, combine

Unsettled = dict[Any, Any]  # TaskGroup -> None, a Tracked, a reading or a Taken


class Row:
    """One task-group name of one computation: its claims' summaries combined."""

    __slots__ = ("claims", "pos", "summary", "pending", "cancelled")

    def __init__(self, pos: int):
        self.claims: list[Claim] = []
        self.pos = pos  # its place in the computation's columns (first summarised first)
        self.summary: dict[str, Any] | None = None
        self.pending = 0
        self.cancelled = 0


# Figures a computation's totals add up over its groups, kept as running sums: integers,
# so adding and taking away a group's old value is exact.
INT_TOTALS = ("n_tasks", "n_done", "n_erred", "n_not_run", "n_cancelled", "nbytes")


@dataclass(eq=False)
class Tracked:
    """One computation, as the tracker knows it."""

    cid: str
    start: float
    claims: list[Claim] = field(default_factory=list)
    claim_of: dict[Any, Claim] = field(default_factory=dict)  # TaskGroup -> its claim here
    listed: int = 0  # claims of groups that the Computation lists (comp.groups)
    # Groups update_graph gave it, their claims not built yet -> what ClaimQueue.build needs.
    unsettled: Unsettled = field(default_factory=dict)
    names: dict[str, Row] = field(
        default_factory=dict
    )  # by group name, in the order first summarised
    prefixes: dict[str, None] = field(default_factory=dict)
    sorted_prefixes: list[str] | None = None
    # Claims whose group moved since they were last summarised (marked by the hook).
    dirty: set[Claim] = field(default_factory=set)
    # Of those, once the computation ended, the ones that can no longer change it on
    # their own (taken by a newer computation, or dropped by the scheduler): summarised
    # with the rest when a live group of it moves.
    parked: set[Claim] = field(default_factory=set)
    # Names summarised again since the last message -> the lowest claim index among them.
    changed: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(INT_TOTALS, 0))
    pending: int = 0
    cancelled: int = 0
    # Per name, by Row.pos: the float figures, summed in C each message in one fixed order
    # (float addition is not associative: a running sum would drift from the groups' sum).
    compute: list[float] = field(default_factory=list)
    transfer: list[float] = field(default_factory=list)
    disk: list[float] = field(default_factory=list)
    stops: list[float | None] = field(default_factory=list)
    labelled: int = 0  # claims the label was made from
    fingerprinted: int = 0  # claims the fingerprint was made from
    waits: int = 0  # turns of the loop its next message waited for steps O(groups)
    seen_groups: int = 0  # len(comp.groups) when last looked at
    code_seen: int = 0
    code: list[str] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)
    code_line: str | None = None
    label: str | None = None
    fingerprint: str | None = None
    state: str = ""
    stop: float | None = None
    # The host's CPU counters when it began, and how busy the host was while it ran
    # (set when it stops running).
    host_since: tuple[float, float] | None = field(default_factory=host_cpu.reading)
    host_cpu: float | None = None
    final: bool = False  # after a restart: nothing of it runs any more
    sent_totals: dict[str, Any] = field(default_factory=dict)

    def sorted_prefix_names(self) -> list[str]:
        if self.sorted_prefixes is None:
            self.sorted_prefixes = sorted(self.prefixes)
        return self.sorted_prefixes


def fold_in(record: Tracked, claim: Claim, own: Summary) -> None:
    """The claim's summary (`own`) into its name's row and the computation's totals."""
    name = claim.tg.name
    row = record.names[name]
    claims = row.claims
    summary, pending, cancelled = (
        own if len(claims) == 1 else combine([c.summary for c in claims if c.summary is not None])
    )
    totals = record.totals
    old = row.summary
    if old is not None:
        for k in INT_TOTALS:
            totals[k] -= old[k]
        record.pending -= row.pending
        record.cancelled -= row.cancelled
    for k in INT_TOTALS:
        totals[k] += summary[k]
    record.pending += pending
    record.cancelled += cancelled
    row.summary, row.pending, row.cancelled = summary, pending, cancelled
    pos = row.pos
    record.compute[pos] = summary["compute"]
    record.transfer[pos] = summary["transfer"]
    record.disk[pos] = summary["disk_read"] + summary["disk_write"]
    record.stops[pos] = summary["stop"]
    index = record.changed.get(name)
    if index is None or claim.index < index:
        record.changed[name] = claim.index
