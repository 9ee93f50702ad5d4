"""The collector's model of a computation: what each of Dask's Computation objects did
with its own tasks, summarised per task group.

Dask forgets a task once its client releases it, and a TaskGroup is named by its
key's prefix, so a re-run of `f` can land in the same TaskGroup object as the run
before it.  Two things keep the record true:

- `GroupCounts`, one per TaskGroup object, counted by the transition hook as tasks
  finish, raise or are released: what Dask forgets, we have counted.
- A *claim* ties a TaskGroup to one computation from the moment that computation
  first submits to it, with a baseline of the group's cumulative figures then.  A
  computation's figures are "now minus its baseline"; when a newer computation claims
  the group, the older one's figures are frozen.  Dask makes a new Computation only
  when the scheduler is idle, so nothing of the older one is still running then.  A
  group that did not move since the older claim was last summarised needs no reading
  then: that summary is its final one.

Work here is O(groups of the computations that changed), never O(tasks).
"""

from __future__ import annotations

import heapq
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Sequence, Sized
from dataclasses import dataclass, field
from itertools import compress, islice, repeat
from operator import attrgetter, eq
from typing import Any

from ..messages import code_hash, fingerprint
from . import host_cpu

# A task in one of these states has not finished.
NOT_DONE = frozenset({"waiting", "processing", "no-worker", "queued"})

Emit = Callable[[str, dict[str, Any]], None]
# A group's cumulative figures: (n_tasks, done, raised, cancelled, cancelled while
# running, compute, transfer, disk-read and disk-write seconds, nbytes)
_Figures = tuple[int, int, int, int, int, float, float, float, float, int]
# A claim's final figures, captured when a newer computation takes its group: (figures,
# states, lost_waiting, first, last, cancelled_at, the group's start, stop, dependencies)
_Closed = tuple[
    _Figures, dict[str, int], int, float, float, float, float | None, float | None, tuple[Any, ...]
]
# (group row: the data of one messages.TaskGroup, pending, cancelled)
_Summary = tuple[dict[str, Any], int, int]
# A group update_graph gave a computation, its claim not built yet (see _settle): None
# (no computation had it), the computation it was taken from (the group did not move
# since that one's claim was last summarised: that summary is its final one), a reading
# of it to finish ([that computation, its counts, its states, tasks just added]: see
# _take_over), or, once read, (that computation, the new claim's baseline, the old
# claim's final figures).
_Taken = tuple[Any, _Figures, _Closed]
_Unsettled = dict[Any, Any]  # TaskGroup -> None, a _Tracked, a reading or a _Taken


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


def _cumulative(tg: Any, counts: GroupCounts, new_tasks: int = 0) -> _Figures:
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


_ZERO: _Figures = (0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0)


class _Claim:
    """One computation's hold on one TaskGroup object, from its first submission to it."""

    __slots__ = ("tg", "index", "base", "closed", "frozen", "signature", "summary", "cur")

    def __init__(self, tg: Any, index: int, base: _Figures = _ZERO):
        self.tg = tg
        self.index = index  # its place in the computation's claims: the order groups are sent in
        self.base = base
        # What the final summary is made of, taken when a newer computation took the
        # group (the summary itself is built at the next tick, off the submission's path).
        self.closed: _Closed | tuple[()] | None = None  # (): its summary is built
        self.frozen: _Summary | None = None  # that final summary, once built
        self.signature: tuple[Any, ...] = ()
        self.summary: _Summary | None = None  # as of `signature`
        self.cur: _Figures = _ZERO  # the group's cumulative figures `summary` was made from


class _Row:
    """One task-group name of one computation: its claims' summaries combined."""

    __slots__ = ("claims", "pos", "summary", "pending", "cancelled")

    def __init__(self, pos: int):
        self.claims: list[_Claim] = []
        self.pos = pos  # its place in the computation's columns (first summarised first)
        self.summary: dict[str, Any] | None = None
        self.pending = 0
        self.cancelled = 0


# Figures a computation's totals add up over its groups, kept as running sums: integers,
# so adding and taking away a group's old value is exact.
_INT_TOTALS = ("n_tasks", "n_done", "n_erred", "n_not_run", "n_cancelled", "nbytes")


@dataclass(eq=False)
class _Tracked:
    cid: str
    start: float
    claims: list[_Claim] = field(default_factory=list)
    claim_of: dict[Any, _Claim] = field(default_factory=dict)  # TaskGroup -> its claim here
    listed: int = 0  # claims of groups that the Computation lists (comp.groups)
    # Groups update_graph gave it, their claims not built yet -> what _build needs.
    unsettled: _Unsettled = field(default_factory=dict)
    names: dict[str, _Row] = field(
        default_factory=dict
    )  # by group name, in the order first summarised
    prefixes: dict[str, None] = field(default_factory=dict)
    sorted_prefixes: list[str] | None = None
    # Claims whose group moved since they were last summarised (marked by the hook).
    dirty: set[_Claim] = field(default_factory=set)
    # Of those, once the computation ended, the ones that can no longer change it on
    # their own (taken by a newer computation, or dropped by the scheduler): summarised
    # with the rest when a live group of it moves.
    parked: set[_Claim] = field(default_factory=set)
    # Names summarised again since the last message -> the lowest claim index among them.
    changed: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_INT_TOTALS, 0))
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


_GROUP = attrgetter("group")
# observe_graph counts a first graph's tasks in its listed groups only where it has this
# many times more tasks than groups: each group's len() is a call into Python, about as
# dear as a key's lookup, and where they are few the count saves little.
_LISTED_ONLY = 4
_STATE = attrgetter("state")
_STATES = attrgetter("states")
# Claims update_graph left are built this many groups at a time between looks at the clock.
_SETTLE_EVERY = 128
# Summaries made between two looks at the clock while a tick has a deadline.
_CLOCK_EVERY = 32


class ComputationTracker:
    """Turns Computation objects into `computation` and `code` messages.

    Every step is O(what changed): the transition hook marks the groups it sees move
    (`touched`), a tick summarises only those, adds each changed group's figures to its
    computation's totals, and with a deadline stops and resumes at the next call
    (`behind`) without sending a computation's message half made."""

    def __init__(self, emit: Emit, *, code_transmit: bool):
        self._emit = emit
        self._code_transmit = code_transmit
        self._tracked: dict[str, _Tracked] = {}
        self._code_sent: set[str] = set()
        # Filled by the transition hook; keyed by the TaskGroup object, not its name.
        self.counts: dict[Any, GroupCounts] = {}
        # TaskGroups a transition moved since the last poll: the hook adds to this set.
        self.touched: set[Any] = set()
        # The transition hook's [group, its counts] of its last counted transition (most
        # come group by group): emptied whenever counts are let go of, so it never holds
        # counts that are no longer the group's.
        self.last: list[Any] = [None, None]
        self._owner: dict[Any, _Tracked] = {}
        # (computation, {group: what _build needs}) of each update_graph whose claims are
        # not built yet, oldest first: they are built in that order.
        self._unsettled: deque[tuple[_Tracked, _Unsettled]] = deque()
        # Groups taken from another computation whose figures are still to be read for its
        # old claim (see _take_over) -> that reading (also in its _unsettled batch).
        self._unread: dict[Any, list[Any]] = {}
        self._gone: set[str] = set()
        self.behind = False  # the last poll ran out of time: call again soon
        self.summarised = 0  # group summaries built, over all polls (a measure of the work)

    # --- attribution -------------------------------------------------------------
    @property
    def owners(self) -> dict[Any, Any]:
        """TaskGroup -> the record of the computation that claimed it last (its `cid`);
        the transition hook reads it (owner_id for a group not claimed yet)."""
        return self._owner

    def counts_for(self, tg: Any, touched: bool = False) -> GroupCounts:
        """The group's counts, for the transition hook to move: the group is marked as
        moved (`touched`: it is already)."""
        if not touched:
            self.touched.add(tg)
        c = self.counts.get(tg)
        if c is None:
            reading = self._unread.pop(tg, None) if self._unread else None
            if reading is not None:  # the new owner's first count: its old claim's figures first
                self._read(tg, reading)
            c = self.counts[tg] = GroupCounts()
        return c

    def owner_id(self, tg: Any, computations: Sequence[Any]) -> str:
        """The id of the computation a group's tasks belong to now ("" if none is known)."""
        record = self._owner.get(tg)
        if record is None:
            for comp in reversed(computations):
                if tg in comp.groups:
                    record = self._claim_all(comp)
                    break
        return record.cid if record is not None else ""

    def observe_graph(
        self, comp: Any, tasks: dict[Any, Any], keys: Iterable[Any], *, lost: bool = False
    ) -> None:
        """A graph was submitted to `comp` (the plugin's update_graph hook, before any of
        its tasks moved): the groups its tasks are in become its own.  `lost`: tasks
        done once are waiting to run again (collect/lost.py): read every group taken
        from another computation now.

        Dask adds a re-run's tasks to a live group of the same name without listing that
        group on the new Computation: only the submitted keys say where they went.  This
        runs inside Dask's update_graph, and a re-run takes 4,000 live groups at once, so
        only passes in C are made over the groups here (see _take_over for what is kept
        of a group taken from another computation), and the claims are built by the
        next polls (_settle), a slice at a time."""
        record = self._record(comp)
        claim_of, unsettled = record.claim_of, record.unsettled
        listed = comp.groups
        if (
            listed
            and not (claim_of or unsettled or record.listed)
            and isinstance(keys, Sized)
            and _LISTED_ONLY * len(listed) < len(keys)
            and sum(map(len, listed)) == len(keys)
        ):
            # A computation's first graph whose every task is new, in a group Dask made
            # for it (those are listed, and hold nothing else yet: no task has moved),
            # takes no live group: no pass over the keys (O(tasks): 60 ms at 100,000).
            made = dict.fromkeys(listed)
            self._settle_later(record, made, len(made))
            self.touched.update(made)
            return
        found = list(filter(None, map(tasks.get, keys)))
        groups = dict.fromkeys(map(_GROUP, found))
        if self._unread:
            unread = self._unread.keys() & groups
            if unread:
                # More tasks in a group not read yet: read it first, without them.
                new_in = _released_in(found, unread)
                for tg in unread:
                    self._read(tg, self._unread.pop(tg), new_in[tg])
        if claim_of or unsettled:
            new = [tg for tg in groups if tg not in claim_of and tg not in unsettled]
        else:  # its first submission
            new = list(groups)
        # A re-run into live groups has none listed.
        n_listed = sum(map(listed.__contains__, new)) if listed else 0
        # A group Dask made for this computation but no submitted task is in: found by
        # the count of listed groups, without a pass over them when there is none.
        if len(listed) != record.listed + n_listed:
            more = [
                tg
                for tg in listed
                if tg not in claim_of and tg not in unsettled and tg not in groups
            ]
            new += more
            n_listed += len(more)
        if new:
            batch = dict(zip(new, map(self._owner.get, new)))
            owners = set(batch.values())  # none is `record`: those are claimed or unsettled
            if owners != {None}:
                self._take_over(batch, owners, found, lost)
            self._settle_later(record, batch, n_listed)
        # Their new tasks were added without a transition: their states moved.
        self.touched.update(groups)

    def _settle_later(self, record: _Tracked, batch: dict[Any, Any], n_listed: int) -> None:
        # The groups are `record`'s from now on; their claims are built by the next polls.
        self._owner.update(dict.fromkeys(batch, record))
        record.unsettled.update(batch)
        record.listed += n_listed
        self._unsettled.append((record, batch))
        self.behind = True

    def _take_over(
        self, batch: dict[Any, Any], owners: set[_Tracked | None], found: list[Any], lost: bool
    ) -> None:
        """Groups of `batch` taken from the computations in `owners` (None: not owned
        before).  A group whose old claim's last summary is what it is now needs nothing
        more: that summary is the old claim's final one.  The others' old claims need
        their figures as of now; Dask made this Computation because every group was
        done, so until one of the re-run's tasks starts only their states can move:
        those are copied here, the rest is read before the new owner's first count
        (`counts_for`) or when the claim is built, whichever comes first.  Either way
        the counts start afresh (the old ones stay with the old claim).  With tasks
        `lost` (their counts must go on), every group is read here."""
        taken = set(batch) if None not in owners else set(compress(batch, batch.values()))
        if lost:
            self._read_now(batch, taken, _released_in(found, taken))
            return
        moving = taken.intersection(self.touched)
        for p in owners:
            if p is None:
                continue
            moving.update(taken.intersection(p.unsettled))
            moving.update(taken.intersection([c.tg for c in p.dirty]))
            moving.update(taken.intersection([c.tg for c in p.parked]))
        quiet = taken - moving if moving else taken
        counts_pop = self.counts.pop
        if quiet:
            deque(map(counts_pop, quiet, repeat(None)), maxlen=0)
        if moving:
            groups = list(moving)
            new_in = _released_in(found, moving)
            # [taken from, its counts, its states, tasks this submission added] a group:
            # lists made in C, read into _Taken by _read.
            reading = list(
                map(
                    list,
                    zip(
                        map(batch.__getitem__, groups),
                        map(counts_pop, groups, repeat(None)),
                        map(dict, map(_STATES, groups)),
                        map(new_in.get, groups, repeat(0)),
                    ),
                )
            )
            batch.update(zip(groups, reading))
            self._unread.update(zip(groups, reading))
        self.last[:] = (None, None)

    def _read_now(self, batch: dict[Any, Any], groups: set[Any], new_in: Counter[Any]) -> None:
        """Each group's figures now, for its old claim's final ones; counts go on, their
        timing the new owner's own from here."""
        all_counts = self.counts
        for tg in groups:
            counts = all_counts.get(tg)
            if counts is None:
                counts = all_counts[tg] = GroupCounts()
            added = new_in[tg]
            base = _cumulative(tg, counts, added)
            batch[tg] = (batch[tg], base, _closed(tg, base, dict(tg.states), added, counts))
            counts.first = counts.last = 0.0

    def _read(self, tg: Any, reading: list[Any], added_since: int = 0) -> None:
        """Turn a group's `reading` (see _take_over) into its _Taken, in place, before any
        of the re-run's tasks changed the group's figures.  `added_since`: tasks a later
        submission added to it meanwhile."""
        previous, counts, states, added = reading
        if counts is None:
            counts = GroupCounts()
        cur = _cumulative(tg, counts, added + added_since)
        reading[:] = (previous, _afresh(cur), _closed(tg, cur, states, added, counts))

    def _record(self, comp: Any) -> _Tracked:
        cid = str(comp.id)
        record = self._tracked.get(cid)
        if record is None:
            record = self._tracked[cid] = _Tracked(cid, comp.start)
        return record

    def _claim_all(self, comp: Any) -> _Tracked:
        record = self._record(comp)
        if len(comp.groups) != record.listed:
            claim_of, unsettled = record.claim_of, record.unsettled
            groups = [tg for tg in comp.groups if tg not in claim_of and tg not in unsettled]
            # The claims update_graph left first: a group taken twice is closed in order.
            self._settle(None)
            batch = dict(zip(groups, map(self._owner.get, groups)))
            owners = set(batch.values())
            if owners != {None}:
                self._take_over(batch, owners, [], True)
            self._owner.update(dict.fromkeys(groups, record))
            record.listed += len(groups)
            self._build(record, list(batch.items()))
        record.seen_groups = len(comp.groups)
        return record

    def _settle(self, deadline: float | None) -> bool:
        """Build the claims update_graph left, oldest submission first (a group taken
        twice is closed in its first claim before the second is made); False when
        `deadline` (time.perf_counter()) came first: the next call goes on."""
        queue = self._unsettled
        while queue:
            record, batch = queue[0]
            if deadline is None:
                items = list(batch.items())
                batch.clear()
            else:
                items = list(islice(batch.items(), _SETTLE_EVERY))
                for tg, _ in items:
                    del batch[tg]
            if not batch:
                queue.popleft()
            self._build(record, items)
            if deadline is not None and queue and time.perf_counter() > deadline:
                return False
        return True

    def _build(self, record: _Tracked, items: list[tuple[Any, Any]]) -> None:
        """Claims of these groups for `record` (it owns them already), with what
        update_graph found out (`_Taken`).  O(1) a group."""
        claims, claim_of, dirty, names = record.claims, record.claim_of, record.dirty, record.names
        unsettled, prefixes = record.unsettled, record.prefixes
        n_before = len(claims)
        columns = len(record.compute)  # the next new row's place
        made: list[_Claim] = []
        for i, (tg, taken) in enumerate(items, n_before):
            unsettled.pop(tg, None)
            if taken is None:
                claim = _Claim(tg, i)
            elif isinstance(taken, (tuple, list)):
                if isinstance(taken, list) and len(taken) == 4:
                    # Not read yet: nothing of the re-run changed its figures so far.
                    del self._unread[tg]
                    self._read(tg, taken)
                previous, base, closed = taken
                claim = _Claim(tg, i, base)
                old = previous.claim_of.get(tg)
                if old is not None and old.closed is None:
                    old.closed = closed
                    previous.dirty.add(old)
            else:
                # It did not move since the old claim's last summary: that summary is
                # its final one, and the figures it was made from the new baseline
                # (the counts started afresh).
                old = taken.claim_of[tg]
                claim = _Claim(tg, i, _afresh(old.cur))
                if old.closed is None:
                    old.frozen = _finalised(old)
                    old.closed = _CLOSED
                    taken.dirty.add(old)
            claim_of[tg] = claim
            made.append(claim)
            name = tg.name
            row = names.get(name)
            if row is None:
                # Rows and their columns in claim order: the order Dask's groups were first seen.
                row = names[name] = _Row(columns)
                columns += 1
            row.claims.append(claim)
            prefix = tg.prefix.name
            if prefix not in prefixes:
                prefixes[prefix] = None
                record.sorted_prefixes = None
        claims += made
        dirty.update(made)
        more = columns - len(record.compute)
        if more:
            record.compute += [0.0] * more
            record.transfer += [0.0] * more
            record.disk += [0.0] * more
            record.stops += [None] * more

    # --- the periodic poll ----------------------------------------------------------
    def poll(
        self,
        computations: Iterable[Any],
        task_groups: dict[str, Any],
        *,
        changed: bool,
        now: float | None = None,
        deadline: float | None = None,
    ) -> list[tuple[str, float, float, list[str]]]:
        """Emit what changed; return (id, start, stop, prefixes) of computations that just
        ended.  `changed`: whether any transition happened since the last poll;
        `task_groups`: the scheduler's live groups (a group it dropped cannot change);
        `deadline` (time.perf_counter()): summarise no more after it, set `behind`, and
        go on from there at the next poll."""
        now = time.time() if now is None else now
        if self._unsettled and not self._settle(deadline):
            self.behind = True
            return []  # the claims first: a computation's figures wait for all of them
        self._take_touched()
        ended: list[tuple[str, float, float, list[str]]] = []
        live: set[str] = set()
        late = False
        for comp in computations:
            cid = str(comp.id)
            live.add(cid)
            record = self._tracked.get(cid)
            if (
                record is not None
                and record.seen_groups == len(comp.groups)
                and len(comp.code) == record.code_seen
            ):
                if not (record.dirty or record.changed):
                    continue
                if (
                    not record.changed
                    and record.state not in ("", "running")
                    and not self._live_moved(record, task_groups)
                ):
                    continue  # only groups that can no longer change moved: wait for a live one
            if not comp.groups and (record is None or not record.claims):
                continue
            if late:
                continue  # out of time: the next poll
            if record is None or record.seen_groups != len(comp.groups):
                record = self._claim_all(comp)
            result = self._update(record, comp, now, deadline)
            if result is None:
                late = True
            elif result:
                assert record.stop is not None  # an ended computation has its stop
                ended.append((cid, record.start, record.stop, record.sorted_prefix_names()))
        self.behind = late
        gone = self._tracked.keys() - live
        for cid in gone:
            record = self._tracked.pop(cid)
            if (
                record.changed
                or record.dirty
                and (record.state in ("", "running") or self._live_moved(record, task_groups))
            ):
                # Dask let go of it while a deadline held its last message back: send it.
                self._update(record, None, now, None)
            self._drop(record)
        if len(self.counts) > 2 * len(self._owner) + 1000:
            self._prune_counts(task_groups)
        return ended

    def _take_touched(self) -> None:
        """Hand the groups the hook saw move to the claims that own them now."""
        if not self.touched:
            return
        touched = list(self.touched)
        self.touched.clear()
        owner = self._owner
        for tg in touched:
            record = owner.get(tg)
            if record is not None:
                claim = record.claim_of.get(tg)
                if claim is not None:  # else not built yet: it is marked when it is
                    record.dirty.add(claim)

    def _live_moved(self, record: _Tracked, task_groups: dict[str, Any]) -> bool:
        """An ended computation changes only through a group still its own and still
        held by the scheduler: did one of those move?  (The others are parked: a claim
        that is not live never is again.)"""
        counts = self.counts
        moved = False
        for c in list(record.dirty):
            if c.closed is not None or task_groups.get(c.tg.name) is not c.tg:
                record.dirty.discard(c)
                record.parked.add(c)
            elif c.signature != _signature(c, counts.get(c.tg)):
                moved = True
        return moved

    def _prune_counts(self, task_groups: dict[str, Any]) -> None:
        """Counts of groups no computation claims and the scheduler dropped (scattered
        data, say) can never be read: let them go, so a long-lived cluster stays bounded."""
        for tg in [
            tg for tg in self.counts if tg not in self._owner and task_groups.get(tg.name) is not tg
        ]:
            del self.counts[tg]
            self.last[:] = (None, None)

    def running(self) -> list[tuple[str, float, list[str]]]:
        """(id, start, prefixes) of the computations running now, newest first."""
        return [
            (r.cid, r.start, r.sorted_prefix_names())
            for r in reversed(self._tracked.values())
            if r.state == "running" and (r.claims or r.unsettled)
        ]

    def forget_gone(self) -> set[str]:
        """Ids dropped by the last polls (for the error counter); emptied on read."""
        gone, self._gone = self._gone, set()
        return gone

    def _drop(self, record: _Tracked) -> None:
        self._gone.add(record.cid)
        for tg in [claim.tg for claim in record.claims] + list(record.unsettled):
            if self._owner.get(tg) is record:
                del self._owner[tg]
                self.counts.pop(tg, None)
                self.last[:] = (None, None)

    def finalize(self, now: float) -> None:
        """The scheduler restarted and forgot every task: send each computation's last
        figures (what had not run never will) and start afresh."""
        self._settle(None)
        for record in self._tracked.values():
            self._final(record, now)
        self._tracked.clear()
        self._owner.clear()
        self._unread.clear()
        self.counts.clear()
        self.last[:] = (None, None)
        self.touched.clear()

    def closing(self, now: float) -> None:
        """The scheduler closes: what is still running never finishes.  Send each such
        computation's last figures (stopped now, what had not run never will)."""
        self._settle(None)
        for record in self._tracked.values():
            if record.state == "running":
                self._final(record, now)

    def _final(self, record: _Tracked, now: float) -> None:
        record.final = True
        record.dirty.update(record.claims)
        self._update(record, None, now, None)

    def _summarise(self, claim: _Claim, *, final: bool = False) -> _Summary:
        """(group row, pending, cancelled) of one claim."""
        if claim.frozen is not None:
            return claim.frozen
        tg = claim.tg
        closed = claim.closed
        if closed:  # captured, its summary not built yet (it is () once built: frozen)
            claim.frozen = _figures(tg, claim.base, *closed, final=True)
            claim.closed = _CLOSED  # built: the capture can go
            return claim.frozen
        counts = self.counts.get(tg)
        if counts is None:
            counts = self.counts[tg] = GroupCounts()
        claim.cur = cur = _cumulative(tg, counts)
        return _figures(
            tg,
            claim.base,
            cur,
            tg.states,
            counts.lost_waiting,
            counts.first,
            counts.last,
            counts.cancelled_at,
            tg.start,
            tg.stop,
            tg.dependencies,
            final=final,
        )

    def _update(
        self, record: _Tracked, comp: Any, now: float, deadline: float | None
    ) -> bool | None:
        """Summarise the claims that moved and emit a message if anything changed: True
        when the computation just ended, None when `deadline` came first (nothing is sent
        then; the next call goes on)."""
        made = 0
        if record.parked:  # whatever calls for a new message: they go in it too
            record.dirty |= record.parked
            record.parked.clear()
        if record.dirty:
            # In any order: rows and their columns are in claim order, the message's
            # groups are sorted at the end.
            todo = list(record.dirty)
            record.dirty.clear()
            counts = self.counts
            final = record.final
            for i, claim in enumerate(todo):
                # Some work at every call, whatever came before it: a backlog always shrinks.
                if (
                    deadline is not None
                    and i
                    and not i % _CLOCK_EVERY
                    and time.perf_counter() > deadline
                ):
                    record.dirty.update(todo[i:])
                    return None
                signature = _signature(claim, counts.get(claim.tg))
                # Only a group whose signature moved is summarised again.
                if signature != claim.signature or final or claim.summary is None:
                    claim.signature = signature
                    summary = claim.summary = self._summarise(claim, final=final)
                    made += 1
                    self._fold_in(record, claim, summary)
            self.summarised += made
        new_set = record.labelled != len(record.claims)
        if deadline is not None:
            # A new group set's fingerprint and label are O(groups): each in a turn of the
            # loop of its own (at most three turns' wait, so a busy computation still gets
            # its message); the message at the next call, with whatever moved meanwhile.
            if made and (time.perf_counter() > deadline or (new_set and record.waits < 2)):
                record.waits += 1
                return None
            if record.fingerprinted != len(record.claims):
                self._fingerprint(record)
                if new_set and record.waits < 2:
                    record.waits += 1
                    return None
            if new_set:
                self._relabel(record)
                if record.waits < 3:
                    record.waits += 1
                    return None
        elif record.fingerprinted != len(record.claims):
            self._fingerprint(record)
        record.waits = 0
        return self._send(record, comp, now)

    @staticmethod
    def _relabel(record: _Tracked) -> None:
        record.labelled = len(record.claims)
        record.label = _label(record.claims)

    @staticmethod
    def _fingerprint(record: _Tracked) -> None:
        # Its prefixes and its line only: made where a new group set is seen.
        record.fingerprinted = len(record.claims)
        record.fingerprint = fingerprint(record.code_line, record.prefixes)

    def _fold_in(self, record: _Tracked, claim: _Claim, own: _Summary) -> None:
        """The claim's summary (`own`) into its name's row and the computation's totals."""
        name = claim.tg.name
        row = record.names[name]
        claims = row.claims
        summary, pending, cancelled = (
            own
            if len(claims) == 1
            else _combine([c.summary for c in claims if c.summary is not None])
        )
        totals = record.totals
        old = row.summary
        if old is not None:
            for k in _INT_TOTALS:
                totals[k] -= old[k]
            record.pending -= row.pending
            record.cancelled -= row.cancelled
        for k in _INT_TOTALS:
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

    def _send(self, record: _Tracked, comp: Any, now: float) -> bool:
        changed_groups = sorted(record.changed, key=record.changed.__getitem__)
        record.changed.clear()
        running = record.pending > 0 and not record.final
        totals = record.totals

        new_code = comp is not None and self._take_code(comp, record)
        was_running = record.state in ("", "running")
        # Ended by a close or a restart with work left undone (one no tick has sent yet
        # too: a restart right after its submission).  One whose last tasks ended before
        # the last tick could say so is finished, not cancelled.
        cut_short = (
            record.final
            and was_running
            and totals["n_done"] + totals["n_erred"] < totals["n_tasks"]
        )
        if running:
            state = "running"
        elif totals["n_erred"]:
            state = "erred"
        elif record.cancelled or cut_short:
            state = "cancelled"
        else:
            state = "finished"
        if not running and was_running:
            record.host_cpu = host_cpu.busy_percent(record.host_since)
        if running:
            record.stop = None
        elif cut_short:
            record.stop = now  # stopped by the restart, not by its last task
            if record.cancelled:
                # Unless a cancel came first that no tick had time to send (a with-block's
                # Ctrl-C: the client lets go, then the cluster closes): it stopped then.
                record.stop = min(now, max(filter(None, record.stops), default=now))
        elif record.stop is None or changed_groups:
            record.stop = max(filter(None, record.stops), default=None) or now
        if record.labelled != len(record.claims) or new_code:
            self._relabel(record)
        if new_code:
            record.fingerprint = fingerprint(record.code_line, record.prefixes)
        message_totals = {
            "n_tasks": totals["n_tasks"],
            "n_done": totals["n_done"],
            "n_erred": totals["n_erred"],
            "n_not_run": totals["n_not_run"],
            "n_cancelled": totals["n_cancelled"],
            "n_groups": len(record.names),
            "compute": sum(record.compute),
            "transfer": sum(record.transfer),
            "disk": sum(record.disk),
            "nbytes": totals["nbytes"],
            "host_cpu": record.host_cpu,
            "host_cores": host_cpu.CORES,
        }
        state_changed = state != record.state
        if not (
            changed_groups or new_code or state_changed or message_totals != record.sent_totals
        ):
            return False
        record.state = state
        record.sent_totals = message_totals
        names = record.names
        self._emit(
            "computation",
            {
                "id": record.cid,
                "start": record.start,
                "stop": record.stop,
                "state": state,
                "label": record.label,
                "code": list(record.code),
                "code_frames": list(record.frames),
                "code_line": record.code_line,
                "fingerprint": record.fingerprint,
                "totals": message_totals,
                # Rows are never changed once made (a new summary is a new dict): sent as they are.
                "groups": [names[name].summary for name in changed_groups],
            },
        )
        return state_changed and was_running and state != "running"

    def _take_code(self, comp: Any, record: _Tracked) -> bool:
        if not self._code_transmit or len(comp.code) == record.code_seen:
            return False
        blocks = list(comp.code)
        record.code_seen = len(blocks)
        for frames in blocks:
            if record.code_line is None and frames:
                # Dask lists a call's frames outermost first: compute was called in the last.
                made_by = frames[-1]
                record.code_line = _line(made_by.code, made_by.lineno_relative)
            for source in frames:
                digest = code_hash(source.filename, source.code)
                frame = {
                    "hash": digest,
                    "lineno_frame": source.lineno_frame,
                    "lineno_relative": source.lineno_relative,
                }
                if frame in record.frames:
                    continue
                record.frames.append(frame)
                if digest not in record.code:
                    record.code.append(digest)
                if digest not in self._code_sent:
                    if len(self._code_sent) >= 10_000:
                        self._code_sent.clear()  # re-sending a snippet is harmless: stored once by hash
                    self._code_sent.add(digest)
                    self._emit(
                        "code",
                        {
                            "hash": digest,
                            "text": source.code,
                            "filename": source.filename,
                            "lineno_frame": source.lineno_frame,
                            "lineno_relative": source.lineno_relative,
                        },
                    )
        return True


_CLOSED: tuple[()] = ()  # a closed claim whose final summary is built


def _afresh(cur: _Figures) -> _Figures:
    """A new owner's baseline from a group's cumulative figures, its counts started afresh."""
    return (cur[0], 0, 0, 0, 0, cur[5], cur[6], cur[7], cur[8], cur[9])


def _released_in(found: list[Any], groups: Collection[Any]) -> Counter[Any]:
    """Tasks of `found` in `groups` still "released" (just submitted), by group: in C
    (a task's state is a property: read for those tasks only)."""
    mine = list(compress(found, map(groups.__contains__, map(_GROUP, found))))
    return Counter(map(_GROUP, compress(mine, map(eq, map(_STATE, mine), repeat("released")))))


def _closed(
    tg: Any, cur: _Figures, states: dict[str, int], added: int, counts: GroupCounts
) -> _Closed:
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


def _figures(
    tg: Any,
    base: _Figures,
    cur: _Figures,
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
) -> _Summary:
    """(group row, pending, cancelled): a claim's figures from the group's as given."""
    total, done, raised, cancelled, cancelled_running = (a - b for a, b in zip(cur[:5], base[:5]))
    compute, transfer, dread, dwrite = (a - b for a, b in zip(cur[5:9], base[5:9]))
    nbytes = cur[9] - base[9]
    pending = 0 if final else max(0, sum(states.get(s, 0) for s in NOT_DONE) - lost_waiting)
    n_done, n_erred, n_cancelled, n_not_run = _outcome(
        total, done, raised, cancelled_running, pending
    )
    shared = base is not _ZERO
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


def _outcome(
    total: int, done: int, raised: int, cancelled_running: int, pending: int
) -> tuple[int, int, int, int]:
    """(n_done, n_erred, n_cancelled, n_not_run) of a claim's `total` tasks."""
    n_erred = max(raised, 0)
    n_done = max(0, min(done, total - n_erred - pending))
    n_cancelled = max(0, min(cancelled_running, total - n_done - n_erred - pending))
    return n_done, n_erred, n_cancelled, max(0, total - n_done - n_erred - n_cancelled - pending)


def _finalised(claim: _Claim) -> _Summary:
    """A claim's last summary as a final one (nothing of it runs any more), for a claim
    whose group did not move since it was made."""
    assert claim.summary is not None
    row, _, cancelled = claim.summary
    cur, base = claim.cur, claim.base
    n_done, n_erred, n_cancelled, n_not_run = _outcome(
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


def _signature(claim: _Claim, counts: GroupCounts | None) -> tuple[Any, ...]:
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
_SUMMED = (
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


def _combine(summaries: list[_Summary]) -> _Summary:
    """One row for several TaskGroup objects of one name in one computation (a group
    Dask forgot and made again while the computation ran)."""
    if len(summaries) == 1:
        return summaries[0]
    rows = [s[0] for s in summaries]
    out = dict(rows[-1])
    for k in _SUMMED:
        out[k] = sum(r[k] for r in rows)
    starts = [r["start"] for r in rows if r["start"]]
    stops = [r["stop"] for r in rows if r["stop"]]
    out["start"] = min(starts) if starts else None
    out["stop"] = max(stops) if stops else None
    return out, sum(s[1] for s in summaries), sum(s[2] for s in summaries)


def _line(text: str, lineno_relative: int) -> str | None:
    """The line that made the computation: distributed's lineno_relative counts from 0."""
    lines = text.splitlines()
    if 0 <= lineno_relative < len(lines):
        return lines[lineno_relative].strip()[:500] or None
    return None


def _label(claims: list[_Claim]) -> str:
    """Its task-group prefixes from inputs to outputs: `read_parquet → groupby-agg`."""
    depth: dict[Any, int] = {}
    groups = {c.tg for c in claims}

    def level(tg: Any) -> int:
        # Longest path from a root over this computation's groups, by an iterative
        # depth-first walk: a group on the current path is skipped, so a cycle (a group
        # feeding itself) ends; a group only waiting on the stack is not (it was, and a
        # group depending on a sibling of its own got the wrong level).  Each group's
        # level is worked out once (the walk of an earlier group may have), and each
        # dependency looked at once: a frame keeps the highest level among its group's
        # dependencies so far, and a group's level goes to its parent's frame as it is
        # known.
        known = depth.get(tg)
        if known is not None:
            return known
        path = {tg}
        stack: list[list[Any]] = [[tg, iter(tg.dependencies), -1]]
        while stack:
            frame = stack[-1]
            for d in frame[1]:
                found = depth.get(d)
                if found is not None:
                    if found > frame[2]:
                        frame[2] = found
                elif d in groups and d not in path:
                    path.add(d)
                    stack.append([d, iter(d.dependencies), -1])
                    break
            else:
                stack.pop()
                path.discard(frame[0])
                found = depth[frame[0]] = frame[2] + 1
                if stack and found > stack[-1][2]:
                    stack[-1][2] = found
        return depth[tg]

    # The prefixes in the order of their first group by (level, start, name): each
    # prefix's least key, in one pass, and of those only the two least and the greatest
    # when there are more than four (no sort of every group: a new set of 4,000 groups
    # is labelled in a turn of the loop of its own).  A root is at level 0 without the
    # walk (the walk gives it the same); `i` orders equal keys as a stable sort would.
    first: dict[str, tuple[int, float, str, int]] = {}
    for i, g in enumerate(groups):
        key = (level(g) if g.dependencies else 0, g.start or 0.0, g.name, i)
        prefix = g.prefix.name
        least = first.get(prefix)
        if least is None or key < least:
            first[prefix] = key
    if len(first) <= 4:
        return " → ".join(sorted(first, key=first.__getitem__))
    two = heapq.nsmallest(2, first, key=first.__getitem__)
    return " → ".join([*two, "…", max(first, key=first.__getitem__)])
