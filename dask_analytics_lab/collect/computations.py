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
  when the scheduler is idle, so nothing of the older one is still running then.

Work here is O(groups of the computations that changed), never O(tasks).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..messages import code_hash, fingerprint

# A task in one of these states has not finished.
NOT_DONE = frozenset({"waiting", "processing", "no-worker", "queued"})
# Counts a computation's summary sums over its groups.
_TOTALS = ("n_tasks", "n_done", "n_erred", "n_not_run", "n_cancelled")

Emit = Callable[[str, dict], None]


class GroupCounts:
    """What happened to one TaskGroup object's tasks, counted as it happened."""

    __slots__ = ("done", "raised", "cancelled", "cancelled_running", "cancelled_at", "lost_waiting", "first",
                 "last")

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


def _cumulative(tg: Any, counts: GroupCounts, new_tasks: int = 0) -> tuple:
    """The group's cumulative figures, less `new_tasks` just added by a submission."""
    d = tg.all_durations
    return (sum(tg.states.values()) - new_tasks, counts.done + counts.lost_waiting, counts.raised, counts.cancelled,
            counts.cancelled_running, d.get("compute", 0.0), d.get("transfer", 0.0), d.get("disk-read", 0.0),
            d.get("disk-write", 0.0), tg.nbytes_total)


_ZERO = (0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0)


@dataclass(eq=False)
class _Claim:
    tg: Any
    base: tuple = _ZERO
    frozen: dict | None = None  # final summary once a newer computation took the group
    signature: tuple = ()
    summary: dict | None = None  # as of `signature`


@dataclass(eq=False)
class _Tracked:
    cid: str
    start: float
    claims: list[_Claim] = field(default_factory=list)
    claimed: set = field(default_factory=set)
    # Claims whose group the scheduler still holds: only these can change once it ended.
    live: list[_Claim] = field(default_factory=list)
    labelled: int = 0  # claims the label was made from
    seen_groups: int = 0  # len(comp.groups) when last looked at
    code_seen: int = 0
    code: list[str] = field(default_factory=list)
    frames: list[dict] = field(default_factory=list)
    code_line: str | None = None
    label: str | None = None
    fingerprint: str | None = None
    state: str = ""
    stop: float | None = None
    final: bool = False  # after a restart: nothing of it runs any more
    summaries: dict[str, dict] = field(default_factory=dict)
    sent_totals: dict = field(default_factory=dict)


class ComputationTracker:
    """Turns Computation objects into `computation` and `code` messages."""

    def __init__(self, emit: Emit, *, code_transmit: bool):
        self._emit = emit
        self._code_transmit = code_transmit
        self._tracked: dict[str, _Tracked] = {}
        self._code_sent: set[str] = set()
        # Filled by the transition hook; keyed by the TaskGroup object, not its name.
        self.counts: dict[Any, GroupCounts] = {}
        self._owner: dict[Any, _Tracked] = {}
        self._gone: set[str] = set()

    # --- attribution -------------------------------------------------------------
    def counts_for(self, tg: Any) -> GroupCounts:
        c = self.counts.get(tg)
        if c is None:
            c = self.counts[tg] = GroupCounts()
        return c

    def owner_id(self, tg: Any, computations: Iterable[Any]) -> str:
        """The id of the computation a group's tasks belong to now ("" if none is known)."""
        record = self._owner.get(tg)
        if record is None:
            for comp in reversed(computations):
                if tg in comp.groups:
                    record = self._claim_all(comp)
                    break
        return record.cid if record is not None else ""

    def observe_graph(self, comp: Any, tasks: dict, keys: Iterable[Any]) -> None:
        """A graph was submitted to `comp` (the plugin's update_graph hook, before any of
        its tasks moved): claim the groups its tasks are in, while baselines are exact.

        Dask adds a re-run's tasks to a live group of the same name without listing that
        group on the new Computation: only the submitted keys say where they went.  One
        pass over them, in C-speed steps, once per submission (not per transition)."""
        record = self._record(comp)
        groups: dict[Any, None] = {}
        last = None
        for key in keys:
            ts = tasks.get(key)
            if ts is not None and ts.group is not last:
                last = ts.group
                groups[last] = None
        new = [tg for tg in groups if tg not in record.claimed]
        new += [tg for tg in comp.groups if tg not in record.claimed and tg not in groups]
        if not new:
            return
        new_in: dict[Any, int] = {}
        shared = {tg for tg in new if self._owner.get(tg) not in (None, record)}
        if shared:
            # Their baselines must leave out the tasks this submission just added (still
            # "released"): a second pass, for submissions into an earlier run's group only.
            for key in keys:
                ts = tasks.get(key)
                if ts is not None and ts.group in shared and ts.state == "released":
                    new_in[ts.group] = new_in.get(ts.group, 0) + 1
        for tg in new:
            self._claim(record, tg, new_in.get(tg, 0))

    def _record(self, comp: Any) -> _Tracked:
        cid = str(comp.id)
        record = self._tracked.get(cid)
        if record is None:
            record = self._tracked[cid] = _Tracked(cid, comp.start)
        return record

    def _claim_all(self, comp: Any) -> _Tracked:
        record = self._record(comp)
        for tg in comp.groups:
            if tg not in record.claimed:
                self._claim(record, tg, 0)
        record.seen_groups = len(comp.groups)
        return record

    def _claim(self, record: _Tracked, tg: Any, new_tasks: int) -> None:
        previous = self._owner.get(tg)
        counts = self.counts_for(tg)
        claim = _Claim(tg)
        if previous is not None and previous is not record:
            claim.base = _cumulative(tg, counts, new_tasks)
            for old in previous.claims:
                if old.tg is tg and old.frozen is None:
                    old.frozen = self._summarise(old, now=time.time(), final=True, new_tasks=new_tasks)
            # Timing is the new owner's own from here.
            counts.first = counts.last = 0.0
        self._owner[tg] = record
        record.claims.append(claim)
        record.claimed.add(tg)
        record.live.append(claim)

    # --- the periodic poll ----------------------------------------------------------
    def poll(self, computations: Iterable[Any], task_groups: dict, *, changed: bool,
             now: float | None = None) -> list[tuple]:
        """Emit what changed; return (id, start, stop, prefixes) of computations that just
        ended.  `changed`: whether any transition happened since the last poll;
        `task_groups`: the scheduler's live groups (a group it dropped cannot change)."""
        now = time.time() if now is None else now
        ended = []
        live = set()
        for comp in computations:
            cid = str(comp.id)
            live.add(cid)
            record = self._tracked.get(cid)
            if record is not None and record.seen_groups == len(comp.groups) \
                    and len(comp.code) == record.code_seen:
                if not changed:
                    continue
                if record.state not in ("", "running"):
                    record.live = [c for c in record.live
                                   if c.frozen is None and task_groups.get(c.tg.name) is c.tg]
                    if all(c.signature == _signature(c, self.counts.get(c.tg)) for c in record.live):
                        continue
            if not comp.groups and (record is None or not record.claims):
                continue
            if record is None or record.seen_groups != len(comp.groups):
                record = self._claim_all(comp)
            if self._update(record, comp, now):
                ended.append((cid, record.start, record.stop, sorted({c.tg.prefix.name for c in record.claims})))
        gone = self._tracked.keys() - live
        for cid in gone:
            self._drop(self._tracked.pop(cid))
        if len(self.counts) > 2 * len(self._owner) + 1000:
            self._prune_counts(task_groups)
        return ended

    def _prune_counts(self, task_groups: dict) -> None:
        """Counts of groups no computation claims and the scheduler dropped (scattered
        data, say) can never be read: let them go, so a long-lived cluster stays bounded."""
        for tg in [tg for tg in self.counts if tg not in self._owner and task_groups.get(tg.name) is not tg]:
            del self.counts[tg]

    def running(self) -> list[tuple[str, float, list[str]]]:
        """(id, start, prefixes) of the computations running now, newest first."""
        return [(r.cid, r.start, sorted({c.tg.prefix.name for c in r.claims}))
                for r in reversed(self._tracked.values()) if r.state == "running" and r.claims]

    def forget_gone(self) -> set[str]:
        """Ids dropped by the last polls (for the error counter); emptied on read."""
        gone, self._gone = self._gone, set()
        return gone

    def _drop(self, record: _Tracked) -> None:
        self._gone.add(record.cid)
        for claim in record.claims:
            if self._owner.get(claim.tg) is record:
                del self._owner[claim.tg]
                self.counts.pop(claim.tg, None)

    def finalize(self, now: float) -> None:
        """The scheduler restarted and forgot every task: send each computation's last
        figures (what had not run never will) and start afresh."""
        for record in self._tracked.values():
            record.final = True
            self._update(record, None, now)
        self._tracked.clear()
        self._owner.clear()
        self.counts.clear()

    def closing(self, now: float) -> None:
        """The scheduler closes: what is still running never finishes.  Send each such
        computation's last figures (stopped now, what had not run never will)."""
        for record in self._tracked.values():
            if record.state == "running":
                record.final = True
                self._update(record, None, now)

    def _summarise(self, claim: _Claim, *, now: float, final: bool = False, new_tasks: int = 0) -> dict:
        if claim.frozen is not None:
            return claim.frozen
        tg = claim.tg
        counts = self.counts_for(tg)
        cur = _cumulative(tg, counts, new_tasks)
        total, done, raised, cancelled, cancelled_running, compute, transfer, dread, dwrite, nbytes = (
            a - b for a, b in zip(cur, claim.base))
        pending = 0 if final else max(0, sum(tg.states.get(s, 0) for s in NOT_DONE) - counts.lost_waiting)
        n_erred = max(raised, 0)
        n_done = max(0, min(done, total - n_erred - pending))
        n_cancelled = max(0, min(cancelled_running, total - n_done - n_erred - pending))
        shared = claim.base is not _ZERO
        start = (None if shared else tg.start) or counts.first or None
        stop = (None if shared else tg.stop) or counts.last or None
        if cancelled and counts.cancelled_at > (stop or 0.0):
            stop = counts.cancelled_at  # its work ended at the cancel, not at its last task
        return {
            "name": tg.name,
            "prefix": tg.prefix.name,
            "states": {state: n for state, n in tg.states.items() if n},
            "n_tasks": total,
            "n_done": n_done,
            "n_erred": n_erred,
            "n_not_run": max(0, total - n_done - n_erred - n_cancelled - pending),
            "n_cancelled": n_cancelled,
            "pending": pending,
            "cancelled": cancelled,
            "compute": float(compute),
            "transfer": float(transfer),
            "disk_read": float(dread),
            "disk_write": float(dwrite),
            "nbytes": int(nbytes),
            "start": start,
            "stop": stop,
            "dependencies": sorted(dep.name for dep in tg.dependencies),
        }

    def _update(self, record: _Tracked, comp: Any, now: float) -> bool:
        """Emit a message if anything changed; True when the computation just ended."""
        changed_groups: dict[str, dict] = {}
        by_name: dict[str, list[dict]] = {}
        for claim in record.claims:
            tg = claim.tg
            signature = _signature(claim, self.counts.get(tg))
            # Only a group whose signature moved is summarised again: a tick's work is
            # O(groups that changed), plus one cheap signature per group.
            if signature != claim.signature or record.final or claim.summary is None:
                claim.signature = signature
                claim.summary = self._summarise(claim, now=now, final=record.final)
                changed_groups[tg.name] = claim.summary
            by_name.setdefault(tg.name, []).append(claim.summary)
        for name in changed_groups:
            record.summaries[name] = _combine(by_name[name])
        summaries = record.summaries.values()
        pending = sum(g["pending"] for g in summaries)
        running = pending > 0 and not record.final
        totals = {k: sum(g[k] for g in summaries) for k in _TOTALS}
        cancelled = sum(g["cancelled"] for g in summaries)

        new_code = comp is not None and self._take_code(comp, record)
        was_running = record.state in ("", "running")
        if running:
            state = "running"
        elif totals["n_erred"]:
            state = "erred"
        elif cancelled or (record.final and record.state == "running"):
            state = "cancelled"
        else:
            state = "finished"
        if running:
            record.stop = None
        elif record.final and record.state == "running":
            record.stop = now  # stopped by the restart, not by its last task
        elif record.stop is None or changed_groups:
            stops = [g["stop"] for g in summaries if g["stop"]]
            record.stop = max(stops) if stops else now
        if record.labelled != len(record.claims) or new_code:
            record.labelled = len(record.claims)
            record.label = _label(record.claims)
            record.fingerprint = fingerprint(record.code_line, (c.tg.prefix.name for c in record.claims))
        message_totals = {
            **totals,
            "n_groups": len(record.summaries),
            "compute": sum(g["compute"] for g in summaries),
            "transfer": sum(g["transfer"] for g in summaries),
            "disk": sum(g["disk_read"] + g["disk_write"] for g in summaries),
            "nbytes": sum(g["nbytes"] for g in summaries),
        }
        state_changed = state != record.state
        if not (changed_groups or new_code or state_changed or message_totals != record.sent_totals):
            return False
        record.state = state
        record.sent_totals = message_totals
        self._emit("computation", {
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
            "groups": [{k: v for k, v in record.summaries[name].items() if k not in ("pending", "cancelled")}
                       for name in changed_groups],
        })
        return state_changed and was_running and state != "running"

    def _take_code(self, comp: Any, record: _Tracked) -> bool:
        if not self._code_transmit or len(comp.code) == record.code_seen:
            return False
        blocks = list(comp.code)
        record.code_seen = len(blocks)
        for frames in blocks:
            for source in frames:
                digest = code_hash(source.filename, source.code)
                frame = {"hash": digest, "lineno_frame": source.lineno_frame,
                         "lineno_relative": source.lineno_relative}
                if frame in record.frames:
                    continue
                record.frames.append(frame)
                if digest not in record.code:
                    record.code.append(digest)
                if record.code_line is None:
                    record.code_line = _line(source.code, source.lineno_relative)
                if digest not in self._code_sent:
                    if len(self._code_sent) >= 10_000:
                        self._code_sent.clear()  # re-sending a snippet is harmless: stored once by hash
                    self._code_sent.add(digest)
                    self._emit("code", {
                        "hash": digest,
                        "text": source.code,
                        "filename": source.filename,
                        "lineno_frame": source.lineno_frame,
                        "lineno_relative": source.lineno_relative,
                    })
        return True


def _signature(claim: _Claim, counts: GroupCounts | None) -> tuple:
    # Cheap to build and compare; changes whenever the claim's summary would
    # (cancelled_running and cancelled_at only move with cancelled).
    tg = claim.tg
    return (claim.frozen is not None, tuple(tg.states.values()), tg.nbytes_total, tg.duration,
            tg.stop, counts and (counts.done, counts.raised, counts.cancelled, counts.lost_waiting))


def _combine(summaries: list[dict]) -> dict:
    """One row for several TaskGroup objects of one name in one computation (a group
    Dask forgot and made again while the computation ran)."""
    if len(summaries) == 1:
        return summaries[0]
    out = dict(summaries[-1])
    for k in ("n_tasks", "n_done", "n_erred", "n_not_run", "n_cancelled", "pending", "cancelled", "compute",
              "transfer", "disk_read", "disk_write", "nbytes"):
        out[k] = sum(s[k] for s in summaries)
    starts = [s["start"] for s in summaries if s["start"]]
    stops = [s["stop"] for s in summaries if s["stop"]]
    out["start"] = min(starts) if starts else None
    out["stop"] = max(stops) if stops else None
    return out


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
        # Iterative longest path from a root over this computation's groups; a group
        # being visited is skipped, so a cycle (a group feeding itself) ends.
        visiting = {tg}
        stack = [tg]
        while stack:
            g = stack[-1]
            deps = [d for d in g.dependencies if d in groups and d not in depth and d not in visiting]
            if deps:
                visiting.update(deps)
                stack.extend(deps)
                continue
            stack.pop()
            depth[g] = 1 + max((depth.get(d, -1) for d in g.dependencies if d in groups and d is not g),
                               default=-1)
        return depth[tg]

    ordered = sorted(groups, key=lambda g: (level(g), g.start or 0.0, g.name))
    prefixes: list[str] = []
    for g in ordered:
        if g.prefix.name not in prefixes:
            prefixes.append(g.prefix.name)
    if len(prefixes) > 4:
        prefixes = prefixes[:2] + ["…", prefixes[-1]]
    return " → ".join(prefixes)
