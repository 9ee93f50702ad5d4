"""The transition hook: Dask calls it for every transition of every task (about six a
task), so it does the least it can, in O(1): a dispatch on the finishing state.

It is a closure over what it moves, built once the plugin has started and set as the
plugin's `transition` attribute: Dask's `plugin.transition(...)` then finds a plain
function (no bound method made per call) whose state is in local cells (no attribute
lookups through the plugin).  Every transition marks the task's group as moved (its
states moved: a snapshot summarises only the groups marked).  Then, by where the task
went:

- memory: counted done (a lost task computed again is done once), its compute
  interval handed to the task stream as one append (the stream bins it at a tick);
- processing: the group's first start;
- waiting: its computation's span id, before Dask sends it (fine metrics);
- released before it finished, under a cancel stimulus: counted cancelled;
- erred: counted raised, its exception kept (the plugin's `_erred`).

Any other state (queued, no-worker, forgotten, a finished task let go) only moved the
group.  With `analytics.accounting` on, `metered` wraps the hook to time a sample of
its calls (collect/accounting.py); off, the hook has no timing in it.
Never raises into the scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .accounting import NO_OP, SAMPLE_EVERY, SAMPLED
from .group_figures import NOT_DONE
from .task_stream import MAX_PENDING

logger = logging.getLogger("dask_analytics_lab")

Hook = Callable[..., None]
# A handler of the tasks that reached one state: (key, task, group, start, stimulus, kwargs).
Handler = Callable[[Any, Any, Any, str, Any, dict[str, Any]], None]
NO_TASK = object()  # the baseline's key: no task has it, the hook returns at once

# Stimuli under which a not-yet-finished task being released means the user gave up on it
# (remove-client: its client left, e.g. a `with Client()` block that Ctrl-C ended).
CANCEL_STIMULI = ("cancel-key", "client-releases-keys", "remove-client")


def transition_hook(plugin: Any) -> Hook:
    """The started `plugin`'s transition hook (collect/plugin.py's AnalyticsPlugin),
    metered when its settings turn accounting on."""
    hook = _hook(plugin)
    if plugin.settings.get("accounting"):
        return metered(hook, plugin._meter, plugin._random.randint)
    return hook


class _Parts:
    """What the handlers close over, read from the started plugin once: each handler
    copies what it uses into its own cells (no attribute lookups per call)."""

    def __init__(self, plugin: Any):
        tracker = plugin._computations
        self.plugin = plugin
        self.counts_get = tracker.counts.get
        self.counts_for = tracker.counts_for
        self.last = tracker.last  # [group, its counts] of the last counted transition
        self.owner_get = tracker.owners.get
        self.owner_id = tracker.owner_id
        self.computations = plugin.source.computations
        self.lost = plugin._lost
        self.suspects = plugin._failures.suspects
        self.retried = plugin._retries.pending  # empty unless retries= failed
        self.recovered = plugin._errors.recovered
        self.stream = plugin._stream
        # Fine metrics' span ids (None: metrics off, or no spans extension).
        self.spans = plugin._metrics.spans if plugin._metrics is not None else None


def _hook(plugin: Any) -> Hook:
    parts = _Parts(plugin)
    on_finish = {
        "memory": _memory(parts),
        "processing": _processing(parts),
        "waiting": _waiting(parts),
        "released": _released(parts),
        "erred": _erred(parts),
    }.get
    tasks_get = plugin._tasks.get  # emptied in place by Dask, never replaced
    touch = plugin._touched.add

    def transition(
        key: Any,
        start: str,
        finish: str,
        *args: Any,
        stimulus_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            ts = tasks_get(key)
            if ts is None:
                return
            tg = ts.group
            touch(tg)
            handle = on_finish(finish)
            if handle is not None:
                handle(key, ts, tg, start, stimulus_id, kwargs)
        except Exception:
            logger.exception("dask-analytics: transition hook failed for %r", key)

    return transition


def _counted(parts: _Parts) -> Callable[[Any], Any]:
    counts_get, counts_for, last = parts.counts_get, parts.counts_for, parts.last

    def counted(tg: Any) -> Any:
        # Most transitions come group by group: the last group's counts are at hand.
        if tg is last[0]:
            return last[1]
        counts = counts_get(tg)
        if counts is None:
            counts = counts_for(tg, touched=True)
        last[0], last[1] = tg, counts
        return counts

    return counted


def _to_stream(parts: _Parts) -> Callable[[Any, str, dict[str, Any]], None]:
    owner_get, owner_id, computations = parts.owner_get, parts.owner_id, parts.computations
    stream = parts.stream
    incoming = stream.incoming if stream is not None else None
    meter = parts.plugin._meter

    def to_stream(tg: Any, finish: str, kwargs: dict[str, Any]) -> None:
        # The computation the group's tasks belong to now (a group no computation claimed
        # yet is looked up), and each compute interval, read now: Dask just read them, a
        # tick's fold would find them out of the CPU's caches.
        startstops = kwargs.get("startstops")
        if not startstops or incoming is None:
            return
        who = owner_get(tg)
        if who is None:
            who = owner_id(tg, computations)
        worker, thread = kwargs.get("worker"), kwargs.get("thread")
        for ss in startstops:
            if ss.get("action") == "compute":
                incoming.append((who, tg, finish, worker, thread, ss["start"], ss["stop"]))
        if len(incoming) > MAX_PENDING:
            stream.bound(meter)  # ticks stalled: fold in what they left

    return to_stream


def _memory(parts: _Parts) -> Handler:
    counted, to_stream, lost, suspects = (
        _counted(parts),
        _to_stream(parts),
        parts.lost,
        parts.suspects,
    )
    lost_keys = lost.keys  # tested without a call: empty unless a worker left with tasks
    retried, recovered = parts.retried, parts.recovered
    now = time.time

    def memory(key: Any, ts: Any, tg: Any, start: str, stimulus_id: Any, kw: Any) -> None:
        counts = counted(tg)
        if lost_keys:
            was = lost.finished(key)
            if was is not None and was.waiting:  # computed again: done now
                counts.lost_waiting = max(0, counts.lost_waiting - 1)
        if start != "memory":
            counts.done += 1
            counts.last = now()
        if suspects:
            suspects.pop(key, None)
        if retried:
            row = retried.pop(key, None)
            if row is not None:
                recovered(row)
        if start == "processing":
            to_stream(tg, "memory", kw)

    return memory


def _processing(parts: _Parts) -> Handler:
    counted, lost, rerun = _counted(parts), parts.lost, parts.plugin._failures.rerun
    lost_keys = lost.keys
    now = time.time

    def processing(key: Any, ts: Any, tg: Any, start: str, stimulus_id: Any, kw: Any) -> None:
        counts = counted(tg)
        if not counts.first:
            counts.first = now()
        if lost_keys:
            was = lost.started(key)
            if was is not None:
                rerun(key, tg, was)

    return processing


def _waiting(parts: _Parts) -> Handler:
    counted, lost, spans, computations = (
        _counted(parts),
        parts.lost,
        parts.spans,
        parts.computations,
    )
    lost_keys = lost.keys

    def waiting(key: Any, ts: Any, tg: Any, start: str, stimulus_id: Any, kw: Any) -> None:
        if spans is not None and (
            tg is not spans.last_group
            or not computations
            or computations[-1] is not spans.last_comp
        ):
            # Before Dask sends the task: it must leave with its computation's span id
            # (looked up when the group or the newest computation changed).
            spans.waiting(ts)
        if lost_keys and lost.wanted_again(key):
            # Done once; pending again only because its one copy went with a worker.
            counts = counted(tg)
            counts.done = max(0, counts.done - 1)
            counts.lost_waiting += 1

    return waiting


def _released(parts: _Parts) -> Handler:
    counted, lost = _counted(parts), parts.lost
    lost_keys = lost.keys
    now = time.time

    def released(key: Any, ts: Any, tg: Any, start: str, stimulus_id: Any, kw: Any) -> None:
        if start not in NOT_DONE:
            return  # a finished task let go (the common release): nothing to count
        if stimulus_id is None or not stimulus_id.startswith(CANCEL_STIMULI):
            return
        counts = counted(tg)
        if lost_keys and lost.let_go(key):
            # A lost result nobody wants any more (a program ending lets go of what it
            # held after its workers closed): it was done, no work was cancelled.
            counts.lost_waiting = max(0, counts.lost_waiting - 1)
            counts.done += 1
            return
        counts.cancelled += 1
        counts.cancelled_at = now()
        if start == "processing":
            counts.cancelled_running += 1

    return released


def _erred(parts: _Parts) -> Handler:
    counted, to_stream, lost, suspects = (
        _counted(parts),
        _to_stream(parts),
        parts.lost,
        parts.suspects,
    )
    lost_keys = lost.keys
    retried, erred_row = parts.retried, parts.plugin._failures.erred
    now = time.time

    def erred(key: Any, ts: Any, tg: Any, start: str, stimulus_id: Any, kw: Any) -> None:
        counts = counted(tg)
        if lost_keys:
            was = lost.finished(key)
            if was is not None and was.waiting:  # computed again: raised now
                counts.lost_waiting = max(0, counts.lost_waiting - 1)
        counts.last = now()
        if retried:
            retried.pop(key, None)  # failed again: its retries ran out
        erred_row(key, tg, counts, kw)
        if suspects:
            suspects.pop(key, None)
        if start == "processing":
            to_stream(tg, "erred", kw)

    return erred


def metered(hook: Hook, meter: Any, randint: Callable[[int, int], int]) -> Hook:
    """`hook`, one call in SAMPLE_EVERY (at random gaps: a regular graph's transitions
    come in cycles, a fixed step would time one kind only) timed for `meter` by the wall
    clock (a CPU clock is a system call that costs more than the call it times); two in
    three of those time the hook called for no task, or nothing, instead: the baselines
    (collect/accounting.py says why)."""
    clock = time.perf_counter

    def gap() -> int:
        n: int = randint(1, 2 * SAMPLE_EVERY - 1)  # SAMPLE_EVERY on average
        return n

    left = gap()

    def transition(
        key: Any, start: str, finish: str, *args: Any, stimulus_id: str | None = None, **kwargs: Any
    ) -> None:
        nonlocal left
        left -= 1
        if left:
            hook(key, start, finish, stimulus_id=stimulus_id, **kwargs)
            return
        left = gap()
        what = randint(0, 2)  # SAMPLED, NO_OP or CLOCK, evenly
        meter.begin_sample()
        t0 = clock()
        try:
            if what == SAMPLED:
                hook(key, start, finish, stimulus_id=stimulus_id, **kwargs)
            elif what == NO_OP:
                hook(NO_TASK, start, finish, stimulus_id=stimulus_id, **kwargs)
        finally:
            meter.end_sample(clock() - t0, what)
        if what != SAMPLED:  # a baseline was timed: now the call itself, untimed
            hook(key, start, finish, stimulus_id=stimulus_id, **kwargs)

    return transition
