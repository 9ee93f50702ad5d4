"""Follow the scheduler's Computation objects and summarise their task groups.

`scheduler.task_groups` forgets a group as soon as its tasks are released, but
each Computation (kept in a bounded deque) holds its TaskGroup objects with their
final figures.  Work here is O(groups of the computations that changed), never
O(tasks).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

# A group with tasks in any of these states has not finished.
NOT_DONE = frozenset({"waiting", "processing", "no-worker", "queued"})

Emit = Callable[[str, dict], None]


def summarise_group(tg: Any) -> dict:
    durations = tg.all_durations
    states = {state: n for state, n in tg.states.items() if n}
    return {
        "name": tg.name,
        "prefix": tg.prefix.name,
        "states": states,
        "n_tasks": sum(states.values()),
        "compute": float(durations.get("compute", 0.0)),
        "transfer": float(durations.get("transfer", 0.0)),
        "disk_read": float(durations.get("disk-read", 0.0)),
        "disk_write": float(durations.get("disk-write", 0.0)),
        "nbytes": int(tg.nbytes_total),
        "start": tg.start or None,
        "stop": tg.stop or None,
        "dependencies": sorted(dep.name for dep in tg.dependencies),
    }


def _signature(tg: Any) -> tuple:
    # Cheap to build and compare; changes whenever a summary would.
    return (tuple(tg.states.values()), tg.nbytes_total, tg.duration, tg.stop, len(tg.dependencies))


def code_hash(filename: str, text: str) -> str:
    return hashlib.sha256(f"{filename}\0{text}".encode()).hexdigest()[:32]


@dataclass
class _Tracked:
    signatures: dict[str, tuple] = field(default_factory=dict)
    summaries: dict[str, dict] = field(default_factory=dict)
    code_seen: int = 0
    code: list[str] = field(default_factory=list)
    state: str = ""
    n_erred: int = 0
    closed: bool = False
    # Groups of a closed computation the scheduler still holds: only these can change.
    live: list = field(default_factory=list)


class ComputationTracker:
    """Turns Computation objects into `computation` and `code` messages."""

    def __init__(self, emit: Emit, *, code_transmit: bool):
        self._emit = emit
        self._code_transmit = code_transmit
        self._tracked: dict[str, _Tracked] = {}
        self._code_sent: set[str] = set()
        # Group name -> computation id, for errors and GPU samples that name a group.
        self.group_owner: dict[str, str] = {}

    def poll(self, computations: Iterable[Any], task_groups: dict, cancelled_groups: set[str],
             erred_groups: dict[str, int], *, changed: bool) -> list[tuple[str, float]]:
        """Emit what changed; return (id, start) of computations that just ended.

        `changed`: whether any transition happened since the last poll.
        `erred_groups`: tasks that raised, per group, counted as they failed: a group's
        state counts forget them once the client releases the futures.
        `task_groups`: the scheduler's live groups.  Dask adds new tasks to an existing
        group of the same name, and that group stays with the computation that made
        it; a group the scheduler has dropped can never change again.
        """
        ended = []
        live = set()
        for comp in computations:
            cid = str(comp.id)
            live.add(cid)
            tracked = self._tracked.get(cid)
            if tracked is None:
                tracked = self._tracked[cid] = _Tracked()
            elif len(comp.groups) == len(tracked.summaries) and len(comp.code) == tracked.code_seen:
                if not changed:
                    continue
                if tracked.closed:
                    tracked.live = [tg for tg in tracked.live if task_groups.get(tg.name) is tg]
                    if all(tracked.signatures[tg.name] == _signature(tg) for tg in tracked.live):
                        continue
            if not comp.groups:
                continue
            if self._update(cid, comp, tracked, cancelled_groups, erred_groups) and tracked.closed:
                ended.append((cid, comp.start))
        for cid in self._tracked.keys() - live:
            gone = self._tracked.pop(cid)
            for name in gone.summaries:
                if self.group_owner.get(name) == cid:
                    del self.group_owner[name]
                    cancelled_groups.discard(name)
                    erred_groups.pop(name, None)
        return ended

    def _update(self, cid: str, comp: Any, tracked: _Tracked, cancelled_groups: set[str],
                erred_groups: dict[str, int]) -> bool:
        """Emit a message if anything changed; True when the state changed."""
        changed_groups = []
        running = False
        for tg in comp.groups:
            if not running and any(tg.states.get(s) for s in NOT_DONE):
                running = True
            signature = _signature(tg)
            if tracked.signatures.get(tg.name) != signature:
                tracked.signatures[tg.name] = signature
                summary = tracked.summaries[tg.name] = summarise_group(tg)
                changed_groups.append(summary)
                self.group_owner[tg.name] = cid

        new_code = self._take_code(comp, tracked)
        summaries = tracked.summaries.values()
        n_erred = sum(max(g["states"].get("erred", 0), erred_groups.get(g["name"], 0)) for g in summaries)
        if running:
            state = "running"
        elif n_erred:
            state = "erred"
        elif any(name in cancelled_groups for name in tracked.summaries):
            state = "cancelled"
        else:
            state = "finished"
        state_changed = state != tracked.state or n_erred != tracked.n_erred
        if not (changed_groups or new_code or state_changed):
            return False
        tracked.state = state
        tracked.n_erred = n_erred
        tracked.closed = not running
        tracked.live = list(comp.groups) if tracked.closed else []
        self._emit("computation", {
            "id": cid,
            "start": comp.start,
            "stop": None if running else comp.stop,
            "state": state,
            "code": list(tracked.code),
            "totals": {
                "n_tasks": sum(g["n_tasks"] for g in summaries),
                "n_groups": len(tracked.summaries),
                "n_erred": n_erred,
                "compute": sum(g["compute"] for g in summaries),
                "transfer": sum(g["transfer"] for g in summaries),
                "disk": sum(g["disk_read"] + g["disk_write"] for g in summaries),
                "nbytes": sum(g["nbytes"] for g in summaries),
            },
            "groups": changed_groups,
        })
        return state_changed

    def _take_code(self, comp: Any, tracked: _Tracked) -> bool:
        if not self._code_transmit or len(comp.code) == tracked.code_seen:
            return False
        blocks = list(comp.code)[tracked.code_seen:]
        tracked.code_seen = len(comp.code)
        for frames in blocks:
            for source in frames:
                digest = code_hash(source.filename, source.code)
                if digest not in tracked.code:
                    tracked.code.append(digest)
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
