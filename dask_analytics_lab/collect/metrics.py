"""Each computation's share of Dask's fine performance metrics.

Workers send their fine performance metrics with each heartbeat; the scheduler sums
them in `cumulative_worker_metrics`, keyed `(context, prefix, activity, unit)` for
task execution (`("execute", "read_parquet", "thread-cpu", "seconds")`) and
`(context, activity, unit)` elsewhere (`("gather-dep", "network", "seconds")`,
`("get-data", "memory-read", "bytes")`; `memory-monitor` and `p2p` keys may hold
more parts).  Dask also keeps plain-string keys there (`"latency"`): not metrics of
work, skipped.

Every computation shares Dask's default span, so the cluster-wide sums are all there
is.  Each tick takes the change since the last one and gives it to a computation:

- an `execute` key to the newest computation holding a task group of its prefix
  (a re-run of a prefix belongs to the re-run; a heartbeat's worth that a finished
  run reports after its re-run started goes with the re-run too);
- any other key (transfers, spilling: no prefix) to the newest computation: Dask
  makes a new Computation only when the cluster is idle, so it is the one running,
  or the one that just ran and whose last heartbeat this is.

Rows sent are the computation's cumulative values (the store upserts them), only the
ones that changed.  A tick's work is one pass over the scheduler's keys comparing
numbers (Dask's own dashboard does as much), plus O(keys changed); the prefix → owner
index grows with the groups of new computations only.  Nothing here raises into the
scheduler: the plugin guards each call.
"""
from __future__ import annotations

import time
from typing import Any, Callable

Emit = Callable[[str, dict], None]

CHUNK = 5000  # rows per message
_NAME = 200  # characters of a prefix, context or activity kept (a key in the store)
_MAX_ROWS = 10_000  # rows one computation holds; past this new keys are counted, not kept


def _text(part: Any) -> str:
    text = part if part.__class__ is str else str(part)
    # What the messages' contract takes for a name: no NUL, no lone surrogate.
    return text[:_NAME].replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def split_key(key: Any) -> tuple[str | None, str, str, str] | None:
    """`(prefix, context, activity, unit)` of a `cumulative_worker_metrics` key, or None
    for keys that are not a metric of work (plain strings, too short, an empty part)."""
    if not isinstance(key, tuple) or len(key) < 3:
        return None
    context, unit = _text(key[0]), _text(key[-1])
    prefix = None
    if context == "execute" and len(key) >= 4:
        # A custom metric's label may itself be a tuple: its parts joined.
        prefix, activity = _text(key[1]) or None, "/".join(_text(p) for p in key[2:-1])
    else:
        activity = "/".join(_text(p) for p in key[1:-1])
    if not (context and activity and unit):
        return None
    return prefix, context, activity[:_NAME], unit


class MetricsRecorder:
    """Turns the scheduler's cumulative fine performance metrics into `metrics`
    messages, one computation's cumulative rows each."""

    def __init__(self, emit: Emit, cumulative: dict):
        self._emit = emit
        # The scheduler's sums when recording started: what came before is no computation's.
        self._last: dict = dict(cumulative)
        # computation id -> {(prefix, context, activity, unit): its value so far}
        self._totals: dict[str, dict[tuple, float]] = {}
        self._changed: dict[str, set] = {}
        self._split: dict[Any, tuple | None] = {}
        # prefix -> the newest computation with a group of that prefix
        self._owner: dict[str, str] = {}
        self._indexed: dict[str, int] = {}  # computation id -> its groups indexed
        self.keys_seen = 0  # scheduler keys compared, over all ticks
        self.dropped = 0  # changes no computation could take (or over _MAX_ROWS)
        self.sent = 0  # rows sent
        self.seconds = 0.0  # CPU time of the event loop's thread spent here

    def tick(self, cumulative: dict, computations: Any) -> None:
        """Attribute what changed since the last tick; send each computation's changed rows."""
        cpu = time.thread_time()
        try:
            self._tick(cumulative, computations)
        finally:
            self.seconds += time.thread_time() - cpu

    def _tick(self, cumulative: dict, computations: Any) -> None:
        last = self._last
        self.keys_seen += len(cumulative)
        changed = [(k, v) for k, v in cumulative.items() if last.get(k) != v]
        if not changed:
            return
        newest = str(computations[-1].id) if computations else None
        self._index(computations)
        for key, value in changed:
            delta = value - last.get(key, 0)
            last[key] = value
            split = self._split.get(key, False)
            if split is False:
                split = self._split[key] = split_key(key)
            if split is None or not delta:
                continue
            prefix = split[0]
            owner = self._owner.get(prefix, newest) if prefix is not None else newest
            if owner is None:
                self.dropped += 1
                continue
            totals = self._totals.setdefault(owner, {})
            if split not in totals and len(totals) >= _MAX_ROWS:
                self.dropped += 1
                continue
            totals[split] = totals.get(split, 0) + delta
            self._changed.setdefault(owner, set()).add(split)
        self._send()

    def _index(self, computations: Any) -> None:
        """Point each prefix at its newest computation.  Only the newest computation
        gains groups (Dask adds a graph to it while the cluster is busy), so the walk
        from the newest back stops at the first one already indexed in full."""
        fresh = []
        for comp in reversed(computations):
            cid = str(comp.id)
            if self._indexed.get(cid) == len(comp.groups):
                break
            fresh.append((cid, comp))
        if self._indexed and any(cid not in self._indexed for cid, _ in fresh):
            # A new computation: Dask may have let go of its oldest (it keeps a few).
            self._forget({str(c.id) for c in computations})
        for cid, comp in reversed(fresh):  # oldest first: the newer one wins a prefix
            for tg in list(comp.groups):
                self._owner[tg.prefix.name] = cid
            self._indexed[cid] = len(comp.groups)

    def _send(self) -> None:
        for cid, keys in self._changed.items():
            totals = self._totals[cid]
            rows = [{"prefix": prefix, "context": context, "activity": activity, "unit": unit,
                     "value": float(totals[(prefix, context, activity, unit)])}
                    for prefix, context, activity, unit in sorted(keys, key=lambda k: (k[0] or "", k[1:]))]
            for i in range(0, len(rows), CHUNK):
                self._emit("metrics", {"computation_id": cid, "rows": rows[i:i + CHUNK]})
            self.sent += len(rows)
        self._changed.clear()

    def _forget(self, live: set[str]) -> None:
        """Dask let go of some computations (it keeps the last few): no change can be
        theirs any more, and a prefix of theirs goes to the newest computation."""
        for cid in [c for c in self._indexed if c not in live]:
            del self._indexed[cid]
            self._totals.pop(cid, None)
        self._owner = {p: cid for p, cid in self._owner.items() if cid in live}
