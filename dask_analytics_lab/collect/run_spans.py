"""One span node per computation, so that Dask's own attribution of fine performance
metrics is per computation.

Workers key every `execute` and `p2p` metric by the span id the task came with (the
scheduler sends `TaskGroup.span_id` in `compute-task`) and send them with their next
heartbeat; Dask's spans extension adds them to that span.  The attribution is made
where the task ran, so it stays right however late the heartbeat arrives.  Cluster-wide
sums split by time cannot be: a worker's heartbeat that arrives after run 2 started
still carries run 1's last tasks.

A span is one computation's in the common case: Dask opens a new default span when
every task of the last one is done, the same moment it opens a new Computation (the
scheduler is idle).  Two cases share a span between computations:

- a re-run into a TaskGroup that is still alive.  `futs = client.map(f, other_args)`
  submits before the old `futs` is let go, and `client.gather(client.map(...))` twice
  in a row does too: the group, and with it its span, carries on;
- a user's `span()` around several computations (`with span("sweep"): for p in ...`).

There, the later computation's group moves into a span node of its own: a child of the
span it was in, with the same name, registered in `SpansSchedulerExtension.spans` only
(where heartbeats look span ids up).  Everything Dask shows of a span is the sum over
its subtree (metrics, groups, states, durations, code, start, stop, done), and the
child is in neither `root_spans` nor the by-name and by-tag indexes, so the dashboard,
`merge_all`/`merge_by_tags`, `find_by_tags` and the choice of the next default span
see what they would have seen without it.  Only two things tell: the parent's own
`groups` no longer lists the group (its subtree does), and a progress bar grouped by
span shows it as a second row of the same name.  A span is never made for a
computation that has one of its own already.

The move happens at the task's released -> waiting transition (the plugin's transition
hook, before Dask builds the `compute-task` message): every task passes there before it
runs, and a new Computation exists only once every task of the one before finished, so
no task of the earlier computation can leave with the new id.  The hook's work is O(1):
one identity test while the group and the computation stay the same, a dict lookup
when they change, and a move once per (computation, shared span).

The heartbeat is read where Dask reads it: `SpansSchedulerExtension.heartbeat` is
wrapped on this scheduler's instance, Dask's own method runs first and unchanged, and
the wrapper hands the same data on, O(keys in that heartbeat), as Dask's own work is.
"""
from __future__ import annotations

import logging
import uuid
import weakref
from typing import Any, Callable

from distributed.spans import Span

logger = logging.getLogger("dask_analytics_lab")

# What the wrapper hands each heartbeat's span-keyed metrics to.
Sink = Callable[[dict], None]


class RunSpan(Span):
    """A computation's own node under a span it shares with an earlier computation.
    It speaks for its parent wherever Dask reads a span's identity, so a task spawned
    from inside one of its tasks joins the user's span as it would have."""

    __slots__ = ()

    @property
    def annotation(self) -> dict | None:
        parent = self.parent
        return parent.annotation if parent is not None else None

    @property
    def metadata(self) -> Any:
        parent = self.parent
        return parent.metadata if parent is not None else None

    def add_metadata(self, metadata: Any) -> None:
        parent = self.parent
        if parent is not None:
            parent.add_metadata(metadata)


def tap_heartbeats(ext: Any, sink: Sink, owner: Any) -> None:
    """Hand every heartbeat's span-keyed metrics to `sink` after Dask has taken them.
    The wrapper holds `owner` weakly: once it is gone, only Dask's method runs."""
    original = ext.heartbeat
    ref = weakref.ref(owner)

    def heartbeat(ws: Any, data: dict) -> None:
        original(ws, data)
        if ref() is not None:
            sink(data)

    ext.heartbeat = heartbeat


class RunSpans:
    """Which computation each span node's metrics belong to, and the nodes that make it so."""

    def __init__(self, scheduler: Any, ext: Any):
        self._tasks = scheduler.tasks
        self._computations = scheduler.computations
        self._ext = ext
        # span id -> computation id; "" for nobody's (it ran before recording started,
        # or Dask let go of its computation).
        self.owner: dict[str, str] = dict.fromkeys(ext.spans, "")
        self._nodes: dict[str, list[str]] = {}  # computation id -> its span ids
        self._runs: dict[tuple[str, str], Span] = {}  # (computation id, parent id) -> node
        self._group: Any = None  # the last group seen at the hook, under _comp
        self._comp: Any = None
        self._cid = ""
        self.moved = 0  # groups moved into a computation's own node
        self.failed = 0  # moves that failed: that group's metrics stay with the earlier run

    def waiting(self, key: Any) -> None:
        """A task goes from released to waiting: make sure it will leave with a span id
        that is its computation's own.  Never raises."""
        try:
            ts = self._tasks.get(key)
            if ts is None or not self._computations:
                return
            tg, comp = ts.group, self._computations[-1]
            if tg is self._group and comp is self._comp:
                return
            if comp is not self._comp:
                self._comp, self._cid = comp, str(comp.id)
            self._group = tg
            sid = tg.span_id
            if sid is None:
                return
            owner = self.owner.get(sid)
            if owner is None:  # a span first used now
                self.owner[sid] = self._cid
                self._nodes.setdefault(self._cid, []).append(sid)
            elif owner != self._cid:
                self._move(tg, sid)
        except Exception:
            self.failed += 1
            self._group = None
            logger.exception("dask-analytics: could not give a computation its own span for %r", key)

    def _move(self, tg: Any, sid: str) -> None:
        node = self._ext.spans[sid]
        parent = node.parent if isinstance(node, RunSpan) else node
        run = self._runs.get((self._cid, parent.id))
        if run is None:
            run = RunSpan(parent.name, str(uuid.uuid4()), parent, self._ext.scheduler.total_nthreads_history)
            self._ext.spans[run.id] = run
            parent.children.append(run)
            self._runs[self._cid, parent.id] = run
            self.owner[run.id] = self._cid
            self._nodes.setdefault(self._cid, []).append(run.id)
        node.groups.discard(tg)
        run.groups.add(tg)
        tg.span_id = run.id
        self.moved += 1

    def forget(self, cids: set[str]) -> None:
        """Dask let go of these computations: what still arrives for their spans is nobody's."""
        for cid in cids:
            for sid in self._nodes.pop(cid, ()):
                self.owner[sid] = ""
        self._runs = {k: v for k, v in self._runs.items() if k[0] not in cids}
        if self._cid in cids:
            self._comp, self._group, self._cid = None, None, ""
