"""A span id of its own for each computation, on the wire only, so that Dask's own
attribution of fine performance metrics is per computation.

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

There, the later computation's tasks leave for the workers with a span id of its own
(a "run id": `_task_to_msg` is wrapped on this scheduler to put it in the message), and
the workers key their metrics by it.  As each heartbeat lands, the wrapper around
Dask's `SpansSchedulerExtension.heartbeat` gives each value to its computation, turns
each run id back into the span it stands for, and hands Dask exactly the data it would
have had.  Nothing of Dask's changes: the TaskGroup keeps its span, the span its
groups, Dask's spans sum what they would have summed, and no span is added.  (A worker
uses the span id it is sent for nothing but keying these metrics.)

The run id is chosen at the task's released -> waiting transition (the plugin's
transition hook): every task passes there before it is sent, and a new Computation
exists only once every task of the one before finished, so no task of the earlier
computation can leave with the new id.  The hook's work is O(1): one identity test
while the group and the computation stay the same, a dict lookup when they change.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from . import sources

logger = logging.getLogger("dask_analytics_lab")

# A key of Dask's fine performance metrics: (context, span id or prefix, ..., unit); the
# parts of a custom metric's label may be any hashable.
MetricKey = tuple[Any, ...]
SpanMetrics = dict[MetricKey, float]
# What the wrapper hands each heartbeat's span-keyed metrics to (before Dask has them).
Sink = Callable[[SpanMetrics], None]


def tap(scheduler: Any, ext: Any, spans: RunSpans, sink: Sink, owner: Any) -> None:
    """Send each task with its computation's span id, and give every heartbeat's
    span-keyed metrics to `sink` before Dask takes them (with each run id turned back
    into its span).  Both wrappers hold `owner` weakly: once it is gone, only Dask's
    own methods run."""
    to_msg = scheduler._task_to_msg
    heartbeat = ext.heartbeat
    ref = weakref.ref(owner)
    sent_as = spans.sent_as
    real = spans.real

    def task_to_msg(ts: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        msg: dict[str, Any] = to_msg(ts, *args, **kwargs)
        if sent_as and ref() is not None:
            sid = sent_as.get(ts.group)
            if sid is not None:
                msg["span_id"] = sid
        return msg

    def heartbeat_with_runs(ws: Any, data: SpanMetrics) -> None:
        if ref() is not None:
            sink(data)
        if real:  # also once the recorder is gone: Dask knows no run id
            data = _as_dask_sees_it(data, real)
        heartbeat(ws, data)

    scheduler._task_to_msg = task_to_msg
    ext.heartbeat = heartbeat_with_runs


def _as_dask_sees_it(data: SpanMetrics, real: dict[str, str]) -> SpanMetrics:
    """The heartbeat's data with each run id turned back into the span it stands for."""
    out: SpanMetrics = {}
    for key, value in data.items():
        sid = key[1] if len(key) > 1 else None
        if sid in real:
            key = (key[0], real[sid], *key[2:])
        out[key] = out.get(key, 0) + value
    return out


class RunSpans:
    """Which computation each span id's metrics belong to, and the run ids that make it so."""

    def __init__(self, scheduler: Any, ext: Any):
        self._tasks = scheduler.tasks
        self._computations = sources.computations(scheduler)
        # span id (Dask's, or a run id) -> computation id; "" for nobody's (it ran before
        # recording started, or Dask let go of its computation).
        self.owner: dict[str, str] = dict.fromkeys(ext.spans, "")
        # run id -> the Dask span it stands for.  Kept for the scheduler's life: a worker
        # may still send metrics under a run id, and Dask knows none (one small entry per
        # computation that shared a span).
        self.real: dict[str, str] = {}
        self.sent_as: dict[Any, str] = {}  # TaskGroup -> the run id its tasks leave with
        self._nodes: dict[str, list[str]] = {}  # computation id -> its span and run ids
        self._runs: dict[tuple[str, str], str] = {}  # (computation id, Dask span id) -> run id
        # The last group seen at the hook, under the then newest Computation: the hook
        # calls waiting() only when either changed (collect/hook.py).
        self.last_group: Any = None
        self.last_comp: Any = None
        self._cid = ""
        self.moved = 0  # groups whose tasks left with a run id of their computation
        self.failed = 0  # hook calls that failed: that group's metrics stay with the earlier run

    def waiting(self, ts: Any) -> None:
        """A task (TaskState) goes from released to waiting: make sure it will leave with
        a span id that is its computation's own.  Never raises."""
        try:
            if not self._computations:
                return
            tg, comp = ts.group, self._computations[-1]
            if tg is self.last_group and comp is self.last_comp:
                return
            if comp is not self.last_comp:
                self.last_comp, self._cid = comp, str(comp.id)
            self.last_group = tg
            sid = tg.span_id
            if sid is None:
                return
            owner = self.owner.get(sid)
            if owner is None:  # a span first used now
                self.owner[sid] = self._cid
                self._nodes.setdefault(self._cid, []).append(sid)
                self.sent_as.pop(tg, None)
            elif owner == self._cid:
                self.sent_as.pop(tg, None)
            else:
                self._send_as_run(tg, sid)
        except Exception:
            self.failed += 1
            self.last_group = None
            logger.exception(
                "dask-analytics: could not give a computation its own span id for %r",
                getattr(ts, "key", ts),
            )

    def _send_as_run(self, tg: Any, sid: str) -> None:
        run = self._runs.get((self._cid, sid))
        if run is None:
            run = self._runs[self._cid, sid] = str(uuid.uuid4())
            self.real[run] = sid
            self.owner[run] = self._cid
            self._nodes.setdefault(self._cid, []).append(run)
        if self.sent_as.get(tg) != run:
            self.sent_as[tg] = run
            self.moved += 1

    def forget(self, cids: set[str]) -> None:
        """Dask let go of these computations: what still arrives for their span ids is
        nobody's (a run id still turns back into its span for Dask)."""
        for cid in cids:
            for sid in self._nodes.pop(cid, ()):
                self.owner[sid] = ""
        self._runs = {k: v for k, v in self._runs.items() if k[0] not in cids}
        mine = {run for (cid, _), run in self._runs.items()}
        self.sent_as = _keep(self.sent_as, mine)
        if self._cid in cids:
            self.last_comp, self.last_group, self._cid = None, None, ""


def _keep(sent_as: dict[Any, str], runs: set[str]) -> dict[Any, str]:
    # In place: the message wrapper holds this very dict.
    for tg in [tg for tg, run in sent_as.items() if run not in runs]:
        del sent_as[tg]
    return sent_as
