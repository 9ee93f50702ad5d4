"""A task group's figures, and one computation's claim of them: the collector's model,
free of Dask.  Everything here reads plain values, or objects shaped like a TaskGroup
(`name`, `prefix.name`, `states`, `all_durations`, `nbytes_total`, `start`, `stop`,
`duration`, `dependencies`): tests/unit/test_tracker.py runs it with stand-ins.

- `GroupCounts`, one per TaskGroup object, counted by the transition hook as tasks
  finish, raise or are released: what Dask forgets, we have counted.
- A `Claim` ties a TaskGroup to one computation from the moment that computation first
  submits to it, with a baseline of the group's cumulative figures then (`cumulative`).
  A claim's figures are "now minus its baseline" (`figures`); when a newer computation
  takes the group, the older claim's final figures are captured (`closed_figures`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# A task in one of these states has not finished.
NOT_DONE = frozenset({"waiting", "processing", "no-worker", "queued"})


# A group's cumulative figures: (n_tasks, done, raised, cancelled, cancelled while
# running, compute, transfer, disk-read and disk-write seconds, nbytes)
Figures = tuple[int, int, int, int, int, float, float, float, float, int]
# A claim's final figures, captured when a newer computation takes its group: (figures,
# states, lost_waiting, first, last, cancelled_at, the group's start, stop, dependencies)
Closed = tuple[
    Figures, dict[str, int], int, float, float, float, float | None, float | None, tuple[Any, ...]
]
# (group row: the data of one messages.TaskGroup, pending, cancelled)
Summary = tuple[dict[str, Any], int, int]


# A group update_graph gave a computation, its claim not built yet (claim_queue.py): None
# (no computation had it), the computation it was taken from (the group did not move
# since that one's claim was last summarised: that summary is its final one), a reading
# of it to finish ([that computation, its counts, its states, tasks just added]: see
# claims.py's _take_over), or, once read, (that computation, the new claim's baseline, the old
# claim's final figures).
Taken = tuple[Any, Figures, Closed]


class GroupCounts:
    """What happened to one TaskGroup object's tasks, counted as it happened."""

    __slots__ = (
        "done",
        "raised",
        "cancelled",
        "cancelled_running",
        "cancelled_at",
        "lost_waiting",
        "first",
        "last",
    )

    def __init__(self) -> None:
        self.done = 0  # reached memory
        # Done, then their one copy went with a worker, and Dask wants them again: done
        # still, not pending, until Dask runs them again (collect/lost.py).
        self.lost_waiting = 0
        self.raised = 0  # raised an exception, or killed its workers (KilledWorker)
        self.cancelled = 0  # released before finishing, under a cancel stimulus
        self.cancelled_running = 0  # ... of them, running then
        self.cancelled_at = 0.0  # the last cancel: the group's work stopped then
        self.first = 0.0  # a task of the group started processing (scheduler clock)
        self.last = 0.0  # a task finished or failed


def cumulative(tg: Any, counts: GroupCounts, new_tasks: int = 0) -> Figures:
    """The group's cumulative figures, less `new_tasks` just added by a submission."""
    us = getattr(tg, "_all_durations_us", None)
    if us is not None:
        # What TaskGroup.all_durations returns, without the dict it builds at each call
        # (a re-run claims every live group in one update_graph).
        get = us.get
        return (
            sum(tg.states.values()) - new_tasks,
            counts.done + counts.lost_waiting,
            counts.raised,
            counts.cancelled,
            counts.cancelled_running,
            get("compute", 0) / 1e6,
            get("transfer", 0) / 1e6,
            get("disk-read", 0) / 1e6,
            get("disk-write", 0) / 1e6,
            tg.nbytes_total,
        )
    d = tg.all_durations
    return (
        sum(tg.states.values()) - new_tasks,
        counts.done + counts.lost_waiting,
        counts.raised,
        counts.cancelled,
        counts.cancelled_running,
        d.get("compute", 0.0),
        d.get("transfer", 0.0),
        d.get("disk-read", 0.0),
        d.get("disk-write", 0.0),
        tg.nbytes_total,
    )


ZERO: Figures = (0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0)


class Claim:
    """One computation's hold on one TaskGroup object, from its first submission to it."""

    __slots__ = ("tg", "index", "base", "closed", "frozen", "signature", "summary", "cur")

    def __init__(self, tg: Any, index: int, base: Figures = ZERO):
        self.tg = tg
        self.index = index  # its place in the computation's claims: the order groups are sent in
        self.base = base
        # What the final summary is made of, taken when a newer computation took the
        # group (the summary itself is built at the next tick, off the submission's path).
        self.closed: Closed | tuple[()] | None = None  # (): its summary is built
        self.frozen: Summary | None = None  # that final summary, once built
        self.signature: tuple[Any, ...] = ()
        self.summary: Summary | None = None  # as of `signature`
        self.cur: Figures = ZERO  # the group's cumulative figures `summary` was made from


CLOSED: tuple[()] = ()  # a closed claim whose final summary is built


def afresh(cur: Figures) -> Figures:
    """A new owner's baseline from a group's cumulative figures, its counts started afresh."""
    return (cur[0], 0, 0, 0, 0, cur[5], cur[6], cur[7], cur[8], cur[9])


def closed_figures(
    tg: Any, cur: Figures, states: dict[str, int], added: int, counts: GroupCounts
) -> Closed:
    """A claim's final figures: `cur` and `states` less the `added` tasks of the
    submission that took the group, `counts` the claim's own."""
    if added:
        states["released"] -= added
    return (
        cur,
        states,
        counts.lost_waiting,
        counts.first,
        counts.last,
        counts.cancelled_at,
        tg.start,
        tg.stop,
        tuple(tg.dependencies),
    )


def read_taken(tg: Any, reading: list[Any], added_since: int = 0) -> None:
    """Turn a group's `reading` ([the computation it was taken from, its counts, its
    states, tasks the taking submission added]: see claims.py's _take_over) into its
    Taken, in place, before any of the re-run's tasks changed the group's figures.
    `added_since`: tasks a later submission added to it meanwhile."""
    previous, counts, states, added = reading
    if counts is None:
        counts = GroupCounts()
    cur = cumulative(tg, counts, added + added_since)
    reading[:] = (previous, afresh(cur), closed_figures(tg, cur, states, added, counts))


def figures(
    tg: Any,
    base: Figures,
    cur: Figures,
    states: dict[str, int],
    lost_waiting: int,
    first: float,
    last: float,
    cancelled_at: float,
    tg_start: float | None,
    tg_stop: float | None,
    deps: Iterable[Any],
    *,
    final: bool,
) -> Summary:
    """(group row, pending, cancelled): a claim's figures from the group's as given."""
    total, done, raised, cancelled, cancelled_running = (a - b for a, b in zip(cur[:5], base[:5]))
    compute, transfer, dread, dwrite = (a - b for a, b in zip(cur[5:9], base[5:9]))
    nbytes = cur[9] - base[9]
    pending = 0 if final else max(0, sum(states.get(s, 0) for s in NOT_DONE) - lost_waiting)
    n_done, n_erred, n_cancelled, n_not_run = outcome(
        total, done, raised, cancelled_running, pending
    )
    shared = base is not ZERO
    start = (None if shared else tg_start) or first or None
    stop = (None if shared else tg_stop) or last or None
    # Dask's times are a worker's clock plus its estimate of the scheduler's, tens of ms
    # off on a busy machine: no task starts before the scheduler sent the group's first,
    # nor stops after the scheduler heard its last had (a cancel would read as after it).
    if start and first and start < first:
        start = first
    if stop and last and stop > last:
        stop = last
    if start and stop and stop < start:
        stop = start  # a task shorter than the clock's error: none of its time is known
    if cancelled and cancelled_at > (stop or 0.0):
        stop = cancelled_at  # its work ended at the cancel, not at its last task
    return (
        {
            "name": tg.name,
            "prefix": tg.prefix.name,
            "states": {state: n for state, n in states.items() if n},
            "n_tasks": total,
            "n_done": n_done,
            "n_erred": n_erred,
            "n_not_run": n_not_run,
            "n_cancelled": n_cancelled,
            "compute": float(compute),
            "transfer": float(transfer),
            "disk_read": float(dread),
            "disk_write": float(dwrite),
            "nbytes": int(nbytes),
            "start": start,
            "stop": stop,
            "dependencies": sorted(dep.name for dep in deps),
        },
        pending,
        cancelled,
    )


def outcome(
    total: int, done: int, raised: int, cancelled_running: int, pending: int
) -> tuple[int, int, int, int]:
    """(n_done, n_erred, n_cancelled, n_not_run) of a claim's `total` tasks."""
    n_erred = max(raised, 0)
    n_done = max(0, min(done, total - n_erred - pending))
    n_cancelled = max(0, min(cancelled_running, total - n_done - n_erred - pending))
    return n_done, n_erred, n_cancelled, max(0, total - n_done - n_erred - n_cancelled - pending)


def finalised(claim: Claim) -> Summary:
    """A claim's last summary as a final one (nothing of it runs any more), for a claim
    whose group did not move since it was made."""
    assert claim.summary is not None
    row, _, cancelled = claim.summary
    cur, base = claim.cur, claim.base
    n_done, n_erred, n_cancelled, n_not_run = outcome(
        cur[0] - base[0], cur[1] - base[1], cur[2] - base[2], cur[4] - base[4], 0
    )
    final = {
        **row,
        "n_done": n_done,
        "n_erred": n_erred,
        "n_cancelled": n_cancelled,
        "n_not_run": n_not_run,
    }
    return final, 0, cancelled


def claim_signature(claim: Claim, counts: GroupCounts | None) -> tuple[Any, ...]:
    # Cheap to build and compare; changes whenever the claim's summary would
    # (cancelled_running and cancelled_at only move with cancelled).
    tg = claim.tg
    return (
        claim.closed is not None,
        tuple(tg.states.values()),
        tg.nbytes_total,
        tg.duration,
        tg.stop,
        counts and (counts.done, counts.raised, counts.cancelled, counts.lost_waiting),
    )


# Figures of a row that several TaskGroup objects of one name add up to.
SUMMED = (
    "n_tasks",
    "n_done",
    "n_erred",
    "n_not_run",
    "n_cancelled",
    "compute",
    "transfer",
    "disk_read",
    "disk_write",
    "nbytes",
)


def combine(summaries: list[Summary]) -> Summary:
    """One row for several TaskGroup objects of one name in one computation (a group
    Dask forgot and made again while the computation ran)."""
    if len(summaries) == 1:
        return summaries[0]
    rows = [s[0] for s in summaries]
    out = dict(rows[-1])
    for k in SUMMED:
        out[k] = sum(r[k] for r in rows)
    starts = [r["start"] for r in rows if r["start"]]
    stops = [r["stop"] for r in rows if r["stop"]]
    out["start"] = min(starts) if starts else None
    out["stop"] = max(stops) if stops else None
    return out, sum(s[1] for s in summaries), sum(s[2] for s in summaries)


def summarise(claim: Claim, counts: dict[Any, GroupCounts], *, final: bool = False) -> Summary:
    """(group row, pending, cancelled) of one claim; `counts`: the hook's, by group."""
    if claim.frozen is not None:
        return claim.frozen
    tg = claim.tg
    closed = claim.closed
    if closed:  # captured, its summary not built yet (it is () once built: frozen)
        claim.frozen = figures(tg, claim.base, *closed, final=True)
        claim.closed = CLOSED  # built: the capture can go
        return claim.frozen
    group_counts = counts.get(tg)
    if group_counts is None:
        group_counts = counts[tg] = GroupCounts()
    claim.cur = cur = cumulative(tg, group_counts)
    return figures(
        tg,
        claim.base,
        cur,
        tg.states,
        group_counts.lost_waiting,
        group_counts.first,
        group_counts.last,
        group_counts.cancelled_at,
        tg.start,
        tg.stop,
        tg.dependencies,
        final=final,
    )
