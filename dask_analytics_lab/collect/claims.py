"""Which computation each TaskGroup object belongs to, and its figures when it changed
hands.

Dask adds a re-run's tasks to a live group of the same name without listing that group
on the new Computation: only the submitted keys say where they went.  `observe_graph`
runs inside Dask's update_graph, and a re-run takes 4,000 live groups at once, so only
passes in C are made over the groups there; what it found goes to the claim queue
(claim_queue.py), whose claims the next ticks build.  Dask makes a new Computation only
when the scheduler is idle, so nothing of the older one is still running when a group
is taken from it.  Work here is O(groups of the computations that changed), never
O(tasks).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Collection, Iterable, Sequence, Sized
from itertools import compress, repeat
from operator import attrgetter, eq
from typing import Any

from .claim_queue import ClaimQueue
from .computation_record import Tracked
from .group_figures import GroupCounts, closed_figures, cumulative, read_taken

_GROUP = attrgetter("group")
_STATE = attrgetter("state")
_STATES = attrgetter("states")
# observe_graph counts a first graph's tasks in its listed groups only where it has this
# many times more tasks than groups: each group's len() is a call into Python, about as
# dear as a key's lookup, and where they are few the count saves little.
_LISTED_ONLY = 4


class Claims:
    """Computation records by id, the owner of each TaskGroup object, and the hook's
    counts of each."""

    def __init__(self) -> None:
        self.records: dict[str, Tracked] = {}
        # Filled by the transition hook; keyed by the TaskGroup object, not its name.
        self.counts: dict[Any, GroupCounts] = {}
        # TaskGroups a transition moved since the last poll: the hook adds to this set.
        self.touched: set[Any] = set()
        # The transition hook's [group, its counts] of its last counted transition (most
        # come group by group): emptied whenever counts are let go of, so it never holds
        # counts that are no longer the group's.
        self.last: list[Any] = [None, None]
        # TaskGroup -> the record of the computation that claimed it last (its `cid`).
        self.owner: dict[Any, Tracked] = {}
        # Groups taken from another computation whose figures are still to be read for its
        # old claim (see _take_over) -> that reading (also in its queued batch).
        self.unread: dict[Any, list[Any]] = {}
        self.queue = ClaimQueue(self.unread)

    def counts_for(self, tg: Any, touched: bool = False) -> GroupCounts:
        """The group's counts, for the transition hook to move: the group is marked as
        moved (`touched`: it is already)."""
        if not touched:
            self.touched.add(tg)
        c = self.counts.get(tg)
        if c is None:
            reading = self.unread.pop(tg, None) if self.unread else None
            if reading is not None:  # the new owner's first count: its old claim's figures first
                read_taken(tg, reading)
            c = self.counts[tg] = GroupCounts()
        return c

    def owner_id(self, tg: Any, computations: Sequence[Any]) -> str:
        """The id of the computation a group's tasks belong to now ("" if none is known)."""
        record = self.owner.get(tg)
        if record is None:
            for comp in reversed(computations):
                if tg in comp.groups:
                    record = self.claim_all(comp)
                    break
        return record.cid if record is not None else ""

    def observe_graph(
        self, comp: Any, tasks: dict[Any, Any], keys: Iterable[Any], *, lost: bool = False
    ) -> None:
        """A graph was submitted to `comp` (the plugin's update_graph hook, before any of
        its tasks moved): the groups its tasks are in become its own.  `lost`: tasks
        done once are waiting to run again (collect/lost.py): read every group taken
        from another computation now."""
        record = self.record(comp)
        claim_of, unsettled = record.claim_of, record.unsettled
        listed = comp.groups
        if self._all_new(record, listed, keys):
            # A computation's first graph whose every task is new, in a group Dask made
            # for it (those are listed, and hold nothing else yet: no task has moved),
            # takes no live group: no pass over the keys (O(tasks): 60 ms at 100,000).
            made = dict.fromkeys(listed)
            self._settle_later(record, made, len(made))
            self.touched.update(made)
            return
        found = list(filter(None, map(tasks.get, keys)))
        groups = dict.fromkeys(map(_GROUP, found))
        if self.unread:
            unread = self.unread.keys() & groups
            if unread:
                # More tasks in a group not read yet: read it first, without them.
                new_in = released_in(found, unread)
                for tg in unread:
                    read_taken(tg, self.unread.pop(tg), new_in[tg])
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
            batch = dict(zip(new, map(self.owner.get, new)))
            owners = set(batch.values())  # none is `record`: those are claimed or unsettled
            if owners != {None}:
                self._take_over(batch, owners, found, lost)
            self._settle_later(record, batch, n_listed)
        # Their new tasks were added without a transition: their states moved.
        self.touched.update(groups)

    @staticmethod
    def _all_new(record: Tracked, listed: Any, keys: Iterable[Any]) -> bool:
        return bool(
            listed
            and not (record.claim_of or record.unsettled or record.listed)
            and isinstance(keys, Sized)
            and _LISTED_ONLY * len(listed) < len(keys)
            and sum(map(len, listed)) == len(keys)
        )

    def _settle_later(self, record: Tracked, batch: dict[Any, Any], n_listed: int) -> None:
        # The groups are `record`'s from now on; their claims are built by the next polls.
        self.owner.update(dict.fromkeys(batch, record))
        record.unsettled.update(batch)
        record.listed += n_listed
        self.queue.add(record, batch)

    def _take_over(
        self, batch: dict[Any, Any], owners: set[Tracked | None], found: list[Any], lost: bool
    ) -> None:
        """Groups of `batch` taken from the computations in `owners` (None: not owned
        before).  A group whose old claim's last summary is what it is now needs nothing
        more: that summary is the old claim's final one.  The others' old claims need
        their figures as of now; until one of the re-run's tasks starts only their
        states can move: those are copied here, the rest is read before the new owner's
        first count (`counts_for`) or when the claim is built, whichever comes first.
        Either way the counts start afresh (the old ones stay with the old claim).  With
        tasks `lost` (their counts must go on), every group is read here."""
        taken = set(batch) if None not in owners else set(compress(batch, batch.values()))
        if lost:
            self._read_now(batch, taken, released_in(found, taken))
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
            new_in = released_in(found, moving)
            # [taken from, its counts, its states, tasks this submission added] a group:
            # lists made in C, read into a Taken by read_taken.
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
            self.unread.update(zip(groups, reading))
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
            base = cumulative(tg, counts, added)
            batch[tg] = (batch[tg], base, closed_figures(tg, base, dict(tg.states), added, counts))
            counts.first = counts.last = 0.0

    def record(self, comp: Any) -> Tracked:
        """The record of Dask's Computation `comp`, made at its first sight."""
        cid = str(comp.id)
        record = self.records.get(cid)
        if record is None:
            record = self.records[cid] = Tracked(cid, comp.start)
        return record

    def claim_all(self, comp: Any) -> Tracked:
        """`comp`'s record with a built claim of every group Dask lists on it."""
        record = self.record(comp)
        if len(comp.groups) != record.listed:
            claim_of, unsettled = record.claim_of, record.unsettled
            groups = [tg for tg in comp.groups if tg not in claim_of and tg not in unsettled]
            # The claims update_graph left first: a group taken twice is closed in order.
            self.queue.settle(None)
            batch = dict(zip(groups, map(self.owner.get, groups)))
            owners = set(batch.values())
            if owners != {None}:
                self._take_over(batch, owners, [], True)
            self.owner.update(dict.fromkeys(groups, record))
            record.listed += len(groups)
            self.queue.build(record, list(batch.items()))
        record.seen_groups = len(comp.groups)
        return record

    def take_touched(self) -> None:
        """Hand the groups the hook saw move to the claims that own them now."""
        if not self.touched:
            return
        touched = list(self.touched)
        self.touched.clear()
        owner = self.owner
        for tg in touched:
            record = owner.get(tg)
            if record is not None:
                claim = record.claim_of.get(tg)
                if claim is not None:  # else not built yet: it is marked when it is
                    record.dirty.add(claim)

    def prune_counts(self, task_groups: dict[str, Any]) -> None:
        """Counts of groups no computation claims and the scheduler dropped (scattered
        data, say) can never be read: let them go, so a long-lived cluster stays bounded."""
        if len(self.counts) <= 2 * len(self.owner) + 1000:
            return
        for tg in [
            tg for tg in self.counts if tg not in self.owner and task_groups.get(tg.name) is not tg
        ]:
            del self.counts[tg]
            self.last[:] = (None, None)

    def drop(self, record: Tracked) -> None:
        """Let go of a record Dask let go of, and of the counts of the groups it owned."""
        for tg in [claim.tg for claim in record.claims] + list(record.unsettled):
            if self.owner.get(tg) is record:
                del self.owner[tg]
                self.counts.pop(tg, None)
                self.last[:] = (None, None)

    def clear(self) -> None:
        """The scheduler restarted and forgot every task: start afresh."""
        self.records.clear()
        self.owner.clear()
        self.unread.clear()
        self.queue.clear()
        self.counts.clear()
        self.last[:] = (None, None)
        self.touched.clear()


def released_in(found: list[Any], groups: Collection[Any]) -> Counter[Any]:
    """Tasks of `found` in `groups` still "released" (just submitted), by group: in C
    (a task's state is a property: read for those tasks only)."""
    mine = list(compress(found, map(groups.__contains__, map(_GROUP, found))))
    return Counter(map(_GROUP, compress(mine, map(eq, map(_STATE, mine), repeat("released")))))
