"""Each computation's share of Dask's fine performance metrics.

Workers send their fine performance metrics with each heartbeat, keyed
`(context, prefix, activity, unit)` for task execution
(`("execute", "read_parquet", "thread-cpu", "seconds")`) and `(context, activity, unit)`
elsewhere (`("gather-dep", "network", "seconds")`, `("get-data", "memory-read", "bytes")`;
`memory-monitor` and `p2p` keys may hold more parts).  Dask also keeps plain-string keys
(`"latency"`): not metrics of work, skipped.

`execute` and `p2p` metrics come with the span id of the task they were measured for,
and Dask's spans extension sums them per span.  Each computation's tasks leave with a
span id of its own (collect/run_spans.py says how, and why Dask sees no difference), and
each heartbeat's span-keyed metrics go to the computation owning the id (the next tick
folds each heartbeat in, before it lets go of any id).  A computation's figures are exactly what Dask attributed to its spans,
however late a worker's heartbeat comes.  Splitting Dask's cluster-wide sums in time
cannot be exact: a heartbeat that lands after run 2 started still carries run 1's last
tasks (run 1 showed 2.0 s of CPU where Dask measured 3.0 s, run 2 3.0 s where it
measured 2.0 s).

The other ways, and why not:
- Per task on the scheduler: `task-finished` carries `startstops` (wall time, already
  in TaskGroup durations) and `metadata`, not fine metrics; and reading anything per
  task there is the per-task work the collector avoids.
- A WorkerPlugin tagging each task's metrics with its computation: every worker would
  need this package and an always-on plugin, a per-task hook, and O(workers) messages
  per computation; and a worker knows no computation, only the span id the scheduler
  sends it.  Dask's spans already carry that id to the scheduler.

Metrics with no span (transfers, spilling: no task, no prefix) are still split in time:
each tick takes their change in the scheduler's `cumulative_worker_metrics` and gives it
to the newest computation (Dask makes a new Computation only when the cluster is idle,
so it is the one running, or the one that just ran and whose last heartbeat this is).

Rows sent are the computation's cumulative values (the store upserts them), only the
ones that changed.  Costs: per heartbeat, O(its span-keyed keys), as Dask's own, in the
tick after it (with its deadline: a heartbeat's keys at 4,000 prefixes are tens of
thousands); per tick, O(metric keys without a span) plus O(rows changed) plus O(keys the scheduler
added since the last tick); per task, the O(1) check in run_spans.
Nothing here raises into the scheduler: the plugin guards each call, and the heartbeat
and transition paths guard themselves.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from operator import length_hint
from typing import Any

from distributed.spans import CONTEXTS_WITH_SPAN_ID

from .run_spans import MetricKey, RunSpans, SpanMetrics, tap

logger = logging.getLogger("dask_analytics_lab")

Emit = Callable[[str, dict[str, Any]], None]
# (prefix, context, activity, unit): one row of a computation's metrics
Split = tuple[str | None, str, str, str]
# The scheduler's cumulative_worker_metrics: MetricKey keys, and some plain strings.
Cumulative = dict[Any, float]

CHUNK = 5000  # rows per message
FOLD_EVERY = 512  # heartbeat keys a tick with a deadline folds in between two looks at the clock
_MAX_PENDING = 1_000_000  # heartbeat keys held for the next tick; past this, folded as they land
SEND_CHUNK = 250  # rows a tick with a deadline sends between two looks at the clock
_NAME = 200  # characters of a prefix, context or activity kept (a key in the store)
_MAX_ROWS = 10_000  # rows one computation holds; past this new keys are counted, not kept
_MAX_KEYS = 100_000  # heartbeat keys whose split is kept (span ids of old computations go)


def _text(part: Any) -> str:
    if part.__class__ is str and len(part) <= _NAME and part.isascii() and "\x00" not in part:
        return part  # what the lines below leave as it is, without their copies
    text = part if part.__class__ is str else str(part)
    # What the messages' contract takes for a name: no NUL, no lone surrogate.
    return text[:_NAME].replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def split_key(key: Any) -> Split | None:
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


def _run_spans(scheduler: Any, recorder: MetricsRecorder) -> RunSpans | None:
    """Each computation's span ids (None without Dask's spans extension), with the
    extension's heartbeats tapped for `recorder`."""
    ext = scheduler.extensions.get("spans")
    if ext is None:
        logger.warning(
            "dask-analytics: the scheduler has no spans extension; task metrics "
            "(execute, p2p) are not recorded per computation"
        )
        return None
    spans = RunSpans(scheduler, ext)
    tap(scheduler, ext, spans, recorder._heartbeat, recorder)
    return spans


class MetricsRecorder:
    """Turns Dask's fine performance metrics into `metrics` messages, one computation's
    cumulative rows each."""

    def __init__(self, emit: Emit, scheduler: Any):
        self._emit = emit
        # computation id -> {(prefix, context, activity, unit): its value so far}
        self._totals: dict[str, dict[Split, float]] = {}
        self._changed: dict[str, set[Split]] = {}
        self._split: dict[MetricKey, Split | None] = {}
        # A heartbeat's whole keys (with their span id) -> (computation id, split name):
        # a span id's computation changes only when Dask lets go of it (_forget clears it).
        self._routes: dict[MetricKey, tuple[str, Split | None]] = {}
        # Keys without a span: their last value (the scheduler's when recording started:
        # what came before is no computation's).
        self._plain: dict[MetricKey, float] = {}
        # Heartbeats not folded in yet: an iterator over each one's items.
        self._pending: deque[Iterator[tuple[Any, float]]] = deque()
        self._pending_keys = 0
        self._keys = 0  # len(cumulative) when its keys were last looked through
        self._newest: Any = None  # computations[-1] at the last tick
        self._live: set[str] = set()  # ids of the computations Dask holds
        self.keys_seen = 0  # keys compared, over all ticks and heartbeats
        self.dropped = 0  # values no computation could take (or over _MAX_ROWS)
        self.sent = 0  # rows sent
        self.seconds = 0.0  # CPU time of the event loop's thread spent here
        self.heartbeat_seconds = 0.0  # ... of it in heartbeats (the rest is in the plugin's ticks)
        self.behind = False  # the last tick left rows to send: tick again soon
        self.spans = _run_spans(scheduler, self)
        self._look_through(scheduler.cumulative_worker_metrics, baseline=True)

    # --- what Dask attributed to a span: each heartbeat, folded in by the next tick ------
    def _heartbeat(self, data: SpanMetrics) -> None:
        """One worker's `{(context, span id, *rest): value}`, before Dask adds it to its
        spans: held for the next tick (Dask only reads it).  A heartbeat holds a value per
        prefix, activity and unit of each span: at 4,000 prefixes, tens of thousands of
        keys, and folding them in as it lands held the loop ~8 ms; the tick folds them in
        with its deadline.  A span id's computation changes only when the tick lets go of
        it (`_forget`), after the fold: the figures are the same."""
        if self.spans is None or not data:  # tapped only where there are spans
            return
        self._pending.append(iter(data.items()))
        self._pending_keys += len(data)
        self.keys_seen += len(data)
        if self._pending_keys > _MAX_PENDING:  # no tick for a long while: bounded anyway
            cpu = time.thread_time()
            try:
                self._fold(None)
            finally:
                spent = time.thread_time() - cpu
                self.seconds += spent
                self.heartbeat_seconds += spent

    def _fold(self, deadline: float | None) -> bool:
        """Add the held heartbeats' values to their computations' rows; False when the
        deadline (time.perf_counter()) came first (the rest at the next call)."""
        assert self.spans is not None
        owner = self.spans.owner
        routes = self._routes
        pending = self._pending
        while pending:
            if len(routes) > _MAX_KEYS:
                routes.clear()  # span ids of computations long gone
            items = pending[0]
            last_cid: str | None = None
            totals: dict[Split, float] = {}  # last_cid's (set before first use)
            changed: set[Split] | None = None
            # (_add, inline: the loop over every key of every heartbeat.)
            for key, value in islice(items, FOLD_EVERY) if deadline is not None else items:
                route = routes.get(key)
                if route is None:
                    cid = owner.get(key[1]) if len(key) > 2 else None
                    if not cid:
                        self.dropped += bool(value)
                        continue
                    route = routes[key] = (cid, self._split_of(key[:1] + key[2:]))
                cid, split = route
                if not value or split is None:
                    continue
                if cid != last_cid:
                    last_cid, changed = cid, None
                    found = self._totals.get(cid)
                    if found is None:
                        found = self._totals[cid] = {}
                    totals = found
                old = totals.get(split)
                if old is None:
                    if len(totals) >= _MAX_ROWS:
                        self.dropped += 1
                        continue
                    totals[split] = 0 + value  # as _add: the same number, the same type
                else:
                    totals[split] = old + value
                if changed is None:
                    changed = self._changed.get(cid)
                    if changed is None:
                        changed = self._changed[cid] = set()
                changed.add(split)
            if deadline is None or not length_hint(items):
                pending.popleft()
            if deadline is not None and time.perf_counter() > deadline:
                break
        if not pending:
            self._pending_keys = 0
            return True
        return False

    # --- the periodic tick ---------------------------------------------------------------
    def tick(
        self, cumulative: Cumulative, computations: Any, deadline: float | None = None
    ) -> None:
        """Give the change in metrics without a span to the newest computation; send each
        computation's changed rows (with a `deadline`, time.perf_counter(): the rows left
        when it comes at the next tick, `behind` meanwhile)."""
        cpu = time.thread_time()
        try:
            self._tick(cumulative, computations, deadline)
        finally:
            self.seconds += time.thread_time() - cpu

    def _tick(
        self, cumulative: Cumulative, computations: Any, deadline: float | None = None
    ) -> None:
        if self._pending and not self._fold(deadline):
            self.behind = True  # the rest, and what follows, at the next call
            return
        newest = computations[-1] if computations else None
        if newest is not self._newest:
            self._newest = newest
            self._forget({str(c.id) for c in computations})
        if len(cumulative) != self._keys:
            self._look_through(cumulative)
        plain = self._plain
        self.keys_seen += len(plain)
        changed = [(k, v) for k, v in plain.items() if cumulative.get(k, v) != v]
        if changed:
            cid = str(newest.id) if newest is not None else None
            for key, last in changed:
                value = cumulative[key]
                plain[key] = value
                try:
                    split = self._split[key]
                except KeyError:
                    split = self._split[key] = split_key(key)
                if split is None:
                    continue
                if cid is None:
                    self.dropped += 1
                else:
                    self._add(cid, split, value - last)
        self._send(deadline)

    def _look_through(self, cumulative: Cumulative, baseline: bool = False) -> None:
        """Find the keys without a span (new ones start from 0, or from their value when
        recording starts).  Only when the scheduler has keys it did not have."""
        plain = self._plain
        n = len(cumulative)
        items: Iterable[tuple[Any, float]]
        if baseline or n < self._keys:
            items = cumulative.items()
        else:
            # Dask only ever adds keys, at the end: read the new ones, oldest first.
            keys = list(islice(reversed(cumulative), n - self._keys))
            keys.reverse()
            items = ((k, cumulative[k]) for k in keys)
        for key, value in items:
            if (
                key.__class__ is tuple
                and key
                and key[0] not in CONTEXTS_WITH_SPAN_ID
                and key not in plain
            ):
                plain[key] = value if baseline else 0
        self._keys = n

    def _split_of(self, name: MetricKey) -> Split | None:
        try:
            return self._split[name]
        except KeyError:  # a key first seen: rare, each is kept
            split = self._split[name] = split_key(name)
            return split

    def _add(self, cid: str, split: Split, value: float) -> None:
        totals = self._totals.get(cid)
        if totals is None:
            totals = self._totals[cid] = {}
        if split not in totals and len(totals) >= _MAX_ROWS:
            self.dropped += 1
            return
        totals[split] = totals.get(split, 0) + value
        self._changed.setdefault(cid, set()).add(split)

    def _send(self, deadline: float | None = None) -> None:
        """Each computation's changed rows, at their value now."""
        changed = self._changed
        for cid in list(changed):
            keys = changed[cid]
            totals = self._totals.get(cid)
            if totals is None:
                del changed[cid]
                continue
            while deadline is not None and len(keys) > SEND_CHUNK:
                # A part now, the rest later: the store upserts each row.
                part = set(islice(keys, SEND_CHUNK))
                keys -= part
                self._send_rows(cid, totals, part)
                if time.perf_counter() > deadline:
                    self.behind = True
                    return
            del changed[cid]
            self._send_rows(cid, totals, keys)
            if deadline is not None and time.perf_counter() > deadline and changed:
                self.behind = True
                return
        self.behind = False

    def _send_rows(self, cid: str, totals: dict[Split, float], keys: set[Split]) -> None:
        rows = [
            {
                "prefix": prefix,
                "context": context,
                "activity": activity,
                "unit": unit,
                "value": float(totals[(prefix, context, activity, unit)]),
            }
            for prefix, context, activity, unit in sorted(keys, key=lambda k: (k[0] or "", k[1:]))
        ]
        for i in range(0, len(rows), CHUNK):
            self._emit("metrics", {"computation_id": cid, "rows": rows[i : i + CHUNK]})
        self.sent += len(rows)

    def _forget(self, live: set[str]) -> None:
        """Dask let go of some computations (it keeps the last few): nothing more can be
        theirs."""
        gone = {cid for cid in self._live if cid not in live}
        gone.update(cid for cid in self._totals if cid not in live)
        self._live = live
        if gone:
            self._routes.clear()  # their span ids are nobody's now
        for cid in gone:
            self._totals.pop(cid, None)
            self._changed.pop(cid, None)
        if gone and self.spans is not None:
            self.spans.forget(gone)
