"""Where the collector's computations come from.

The model (claims, summaries, messages: computations.py and the modules it names), the
task stream, fine metrics and the GPU monitor read one sequence of computations, newest
last, each holding what Dask's `Computation` holds: `id`, `start`, `groups` (the
TaskGroups its graphs made), `code` (its code blocks, tuples of SourceCode, sorted) and
`stop`.  Two sources give it:

- `computation`: Dask's own `scheduler.computations`, while the running distributed has
  it (Dask marks `Computation` deprecated in favour of spans);
- `spans`: the same computations made from Dask's spans extension.  A graph submitted
  while the scheduler is idle begins a new one (Dask's rule for a new `Computation`, and
  the moment it opens a new default span); its groups are the TaskGroups its graphs made
  (first seen then: each keeps its span, `TaskGroup.span_id`); its code, the blocks Dask
  added to their spans (`Span.code`).

A span itself is not taken as the computation: Dask keeps a TaskGroup on the span it
began in, so a re-run into groups still alive lands on the old span, and a `span()`
around several computations is one span; the record would merge computations that
Dask's `Computation` tells apart (tests/integration/test_record_truth.py runs on both).

One source per scheduler (`of`), kept in `scheduler.extensions`, so the analytics plugin
and the GPU monitor read the same computations; each plugin's update_graph calls
`observe_graph` first, and the source acts once per graph.
"""

from __future__ import annotations

import time
import uuid
from bisect import insort
from collections import deque
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import dask

EXTENSION = "dask-analytics-computations"
_GROUP = attrgetter("group")


class SourceUnavailable(RuntimeError):
    """The running distributed offers neither source the setting allows."""


class ComputationSource:
    """Dask's own Computation objects."""

    name = "computation"

    def __init__(self, scheduler: Any):
        self.computations: Sequence[Any] = scheduler.computations

    def observe_graph(self, scheduler: Any, tasks: Any) -> Sequence[Any]:
        """Dask made (or chose) the graph's Computation itself: the computations."""
        return self.computations

    def restart(self) -> None:
        """Dask cleared its computations itself (Scheduler._clear_task_state)."""


class SpanRun:
    """One computation made from spans: what Dask's Computation holds, at its moments."""

    __slots__ = ("id", "start", "groups", "code")

    def __init__(self) -> None:
        self.id = uuid.uuid4()
        self.start = time.time()
        self.groups: set[Any] = set()
        self.code: list[Any] = []  # sorted and each block once, as Computation.code

    @property
    def stop(self) -> float:
        """When its last group's last task ended (-1 without groups), as Computation.stop."""
        return max((tg.stop for tg in self.groups), default=-1)


class SpansSource:
    """Computations made from Dask's spans extension (see the module's docstring)."""

    name = "spans"

    def __init__(self, scheduler: Any, spans: Any):
        self._scheduler = scheduler
        self._spans = spans
        self.computations: deque[SpanRun] = deque(
            maxlen=dask.config.get("distributed.diagnostics.computations.max-history")
        )
        # TaskGroups that existed when a graph came (so no later graph made them); a
        # group Dask drops and makes again by the same name is a new object.
        self._seen: set[Any] = set(scheduler.task_groups.values())
        # Span id -> the code blocks of that span given to a computation.
        self._code: dict[str, set[Any]] = {}
        self._last: Any = None  # the graph observed last (every plugin gets the same list)

    def observe_graph(self, scheduler: Any, tasks: Any) -> Sequence[Any]:
        """A graph was submitted (update_graph; its tasks not moved yet): the computation
        it joins, its new groups and code; returns the computations.  O(the graph's
        tasks), in C, once per graph."""
        if tasks is self._last and tasks is not None:
            return self.computations
        self._last = tasks
        # The graph's tasks are still "released", and a released task is done: the
        # scheduler is idle now exactly when it was before the graph came.
        if not self.computations or _idle(scheduler, self.computations[-1]):
            self.computations.append(SpanRun())
        run = self.computations[-1]
        groups = set(map(_GROUP, filter(None, map(scheduler.tasks.get, tasks or ()))))
        new = groups - self._seen
        run.groups |= new
        self._seen |= new
        self._take_code(run, {tg.span_id for tg in groups})
        if len(self._seen) > 2 * len(scheduler.task_groups) + 1000:
            # Groups the scheduler let go of can never come again (a new one would be a
            # new object): bounded by the live groups, whatever the cluster's age.
            self._seen &= set(scheduler.task_groups.values())
            self._code = {sid: c for sid, c in self._code.items() if sid in self._spans.spans}
        return self.computations

    def restart(self) -> None:
        """The scheduler restarted and forgot every task: Dask lets go of its
        computations then (they could only be summarised again as never run)."""
        self.computations.clear()
        self._seen.clear()
        self._code.clear()
        self._last = None

    def _take_code(self, run: SpanRun, span_ids: set[Any]) -> None:
        """The code blocks Dask added to the graph's spans, into `run`.  A span keeps a
        block once, so a re-run of the same code into its old span adds none: the run
        then takes the span's newest block (the one a re-run submits again, unless
        several snippets share that span)."""
        newest = None
        for sid in span_ids:
            span = self._spans.spans.get(sid) if sid else None
            if span is None:
                continue
            given = self._code.setdefault(sid, set())
            blocks = span.code
            for block in blocks:
                if block not in given:
                    given.add(block)
                    _add(run.code, block)
            if blocks:
                newest = blocks[-1]
        if not run.code and newest is not None:
            _add(run.code, newest)


def _idle(scheduler: Any, newest: SpanRun) -> bool:
    """Dask's `is_idle` (every TaskGroup done), without its pass over every live group
    (3 ms a graph at 4,000 groups, measured: benchmarks/source_cost.py).  A task that is
    not done is queued, without a worker, processing, or waiting; and a task waits only
    on another that is not done, so between two stimuli a waiting task means one of the
    other three somewhere.  So: none queued, none without a worker, no worker processing
    (O(workers), most often the first), and, for a margin, every group of the newest
    computation done."""
    if scheduler.queued or scheduler.unrunnable:
        return False
    if any(ws.processing for ws in scheduler.workers.values()):
        return False
    return all(tg.done for tg in newest.groups)


def _add(code: list[Any], block: Any) -> None:
    if block not in code:
        insort(code, block)


Source = ComputationSource | SpansSource


def of(scheduler: Any, setting: str | None = None) -> Source:
    """The scheduler's source of computations, made at the first call (`setting`:
    analytics.computation.source, read from Dask's config when not given)."""
    source: Source | None = scheduler.extensions.get(EXTENSION)
    if source is None:
        source = scheduler.extensions[EXTENSION] = _make(scheduler, setting)
    return source


def _make(scheduler: Any, setting: str | None) -> Source:
    setting = setting or dask.config.get("analytics.computation.source", "auto")
    has_computations = hasattr(scheduler, "computations")
    if setting == "computation" or (setting == "auto" and has_computations):
        if not has_computations:
            raise SourceUnavailable(
                "analytics.computation.source is 'computation', but this distributed has "
                "no Scheduler.computations: set it to 'spans' or 'auto'"
            )
        return ComputationSource(scheduler)
    spans = scheduler.extensions.get("spans")
    if spans is None:
        raise SourceUnavailable(
            "dask-analytics makes computations from Dask's spans extension here, and this "
            "scheduler has none (distributed.scheduler.extensions without 'spans'?)"
        )
    return SpansSource(scheduler, spans)


def computations(scheduler: Any) -> Sequence[Any]:
    """The scheduler's computations, newest last (none before a source was made)."""
    source: Source | None = scheduler.extensions.get(EXTENSION)
    if source is not None:
        return source.computations
    found: Sequence[Any] = getattr(scheduler, "computations", ())
    return found
