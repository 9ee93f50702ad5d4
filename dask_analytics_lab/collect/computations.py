"""The collector's model of a computation: what each of Dask's Computation objects did
with its own tasks, summarised per task group, sent as `computation` messages.

Dask forgets a task once its client releases it, and a TaskGroup is named by its key's
prefix, so a re-run of `f` can land in the same TaskGroup object as the run before it.
The parts that keep the record true, each in a module of its own:

- group_figures.py: a group's counts (what the transition hook counted of what Dask
  forgets) and a computation's claim of the group, with the baseline its figures are
  measured from: pure functions, free of Dask.
- claims.py: which computation owns each group, taken over at update_graph.
- claim_queue.py: the claims update_graph left, built by ticks a slice at a time.
- computation_record.py: one computation's claims, rows and running totals.
- computation_message.py and labels.py: its message, label and code.

This tracker runs the ticks: it summarises the claims whose groups moved, folds them
into their computations' totals, and sends what changed.  Every step is O(what
changed), and with a deadline it stops and resumes at the next call (`behind`) without
sending a computation's message half made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from . import labels
from .claims import Claims
from .computation_message import ComputationMessages
from .computation_record import Tracked, fold_in
from .group_figures import NOT_DONE, GroupCounts, claim_signature, summarise

__all__ = ["NOT_DONE", "ComputationTracker"]

Emit = Callable[[str, dict[str, Any]], None]
# Summaries made between two looks at the clock while a tick has a deadline.
_CLOCK_EVERY = 32


class ComputationTracker:
    """Turns Computation objects into `computation` and `code` messages."""

    def __init__(self, emit: Emit, *, code_transmit: bool):
        self._messages = ComputationMessages(emit, code_transmit=code_transmit)
        self.claims = claims = Claims()
        self._tracked = claims.records
        # What the transition hook and update_graph move (collect/hook.py, plugin.py).
        self.counts: dict[Any, GroupCounts] = claims.counts
        self.touched: set[Any] = claims.touched
        self.last: list[Any] = claims.last
        self.owners: dict[Any, Tracked] = claims.owner
        self.counts_for = claims.counts_for
        self.owner_id = claims.owner_id
        self.observe_graph = claims.observe_graph
        self._gone: set[str] = set()
        self._late = False  # the last poll ran out of time
        self.summarised = 0  # group summaries built, over all polls (a measure of the work)

    @property
    def behind(self) -> bool:
        """Call again soon: the last poll ran out of time, or claims wait to be built."""
        return self._late or bool(self.claims.queue)

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
        if self.claims.queue and not self.claims.queue.settle(deadline):
            self._late = True
            return []  # the claims first: a computation's figures wait for all of them
        self.claims.take_touched()
        ended: list[tuple[str, float, float, list[str]]] = []
        live: set[str] = set()
        late = False
        for comp in computations:
            cid = str(comp.id)
            live.add(cid)
            record = self._tracked.get(cid)
            if not self._moved(record, comp, task_groups):
                continue
            if late:
                continue  # out of time: the next poll
            if record is None or record.seen_groups != len(comp.groups):
                record = self.claims.claim_all(comp)
            result = self._update(record, comp, now, deadline)
            if result is None:
                late = True
            elif result:
                assert record.stop is not None  # an ended computation has its stop
                ended.append((cid, record.start, record.stop, record.sorted_prefix_names()))
        self._late = late
        self._let_go(self._tracked.keys() - live, task_groups, now)
        self.claims.prune_counts(task_groups)
        return ended

    def _moved(self, record: Tracked | None, comp: Any, task_groups: dict[str, Any]) -> bool:
        """Whether `comp` (its record so far) has anything new to summarise or send."""
        if (
            record is not None
            and record.seen_groups == len(comp.groups)
            and len(comp.code) == record.code_seen
        ):
            if not (record.dirty or record.changed):
                return False
            if (
                not record.changed
                and record.state not in ("", "running")
                and not self._live_moved(record, task_groups)
            ):
                return False  # only groups that can no longer change moved: wait for a live one
        return bool(comp.groups or (record is not None and record.claims))

    def _let_go(self, gone: set[str], task_groups: dict[str, Any], now: float) -> None:
        """Records of computations Dask let go of: their last message, then nothing."""
        for cid in gone:
            record = self._tracked.pop(cid)
            if (
                record.changed
                or record.dirty
                and (record.state in ("", "running") or self._live_moved(record, task_groups))
            ):
                # Dask let go of it while a deadline held its last message back: send it.
                self._update(record, None, now, None)
            self._gone.add(record.cid)
            self.claims.drop(record)

    def _live_moved(self, record: Tracked, task_groups: dict[str, Any]) -> bool:
        """An ended computation changes only through a group still its own and still
        held by the scheduler: did one of those move?  (The others are parked: a claim
        that is not live never is again.)"""
        counts = self.counts
        moved = False
        for c in list(record.dirty):
            if c.closed is not None or task_groups.get(c.tg.name) is not c.tg:
                record.dirty.discard(c)
                record.parked.add(c)
            elif c.signature != claim_signature(c, counts.get(c.tg)):
                moved = True
        return moved

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

    def finalize(self, now: float) -> None:
        """The scheduler restarted and forgot every task: send each computation's last
        figures (what had not run never will) and start afresh."""
        self.claims.queue.settle(None)
        for record in self._tracked.values():
            self._final(record, now)
        self.claims.clear()

    def closing(self, now: float) -> None:
        """The scheduler closes: what is still running never finishes.  Send each such
        computation's last figures (stopped now, what had not run never will)."""
        self.claims.queue.settle(None)
        for record in self._tracked.values():
            if record.state == "running":
                self._final(record, now)

    def _final(self, record: Tracked, now: float) -> None:
        record.final = True
        record.dirty.update(record.claims)
        self._update(record, None, now, None)

    def _update(
        self, record: Tracked, comp: Any, now: float, deadline: float | None
    ) -> bool | None:
        """Summarise the claims that moved and emit a message if anything changed: True
        when the computation just ended, None when `deadline` came first (nothing is sent
        then; the next call goes on)."""
        made = self._summarise_moved(record, deadline)
        if made is None:
            return None
        new_set = record.labelled != len(record.claims)
        if deadline is not None:
            # A new group set's fingerprint and label are O(groups): each in a turn of the
            # loop of its own (at most three turns' wait, so a busy computation still gets
            # its message); the message at the next call, with whatever moved meanwhile.
            if made and (time.perf_counter() > deadline or (new_set and record.waits < 2)):
                record.waits += 1
                return None
            if record.fingerprinted != len(record.claims):
                labels.refingerprint(record)
                if new_set and record.waits < 2:
                    record.waits += 1
                    return None
            if new_set:
                labels.relabel(record)
                if record.waits < 3:
                    record.waits += 1
                    return None
        elif record.fingerprinted != len(record.claims):
            labels.refingerprint(record)
        record.waits = 0
        return self._messages.send(record, comp, now)

    def _summarise_moved(self, record: Tracked, deadline: float | None) -> int | None:
        """Summarise again the claims whose group moved: how many were; None when
        `deadline` came first (the rest stay marked for the next call)."""
        made = 0
        if record.parked:  # whatever calls for a new message: they go in it too
            record.dirty |= record.parked
            record.parked.clear()
        if not record.dirty:
            return made
        # In any order: rows and their columns are in claim order, the message's groups
        # are sorted at the end.
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
                self.summarised += made
                return None
            signature = claim_signature(claim, counts.get(claim.tg))
            # Only a group whose signature moved is summarised again.
            if signature != claim.signature or final or claim.summary is None:
                claim.signature = signature
                summary = claim.summary = summarise(claim, counts, final=final)
                made += 1
                fold_in(record, claim, summary)
        self.summarised += made
        return made
