"""The transition hook: Dask calls it for every transition of every task (about six a
task), so it does the least it can, in O(1).

It is a closure over what it moves, built once the plugin has started and set as the
plugin's `transition` attribute: Dask's `plugin.transition(...)` then finds a plain
function (no bound method made per call) whose state is in local cells (no attribute
lookups through the plugin).  It marks the task's group as moved, counts what Dask
forgets (done, raised, cancelled, the group's first start and last finish), hands a
finished task's compute interval to the task stream as one append (the stream reads
the group's names and bins it when a tick folds it in), and gives a task going to waiting its computation's span id.

One call in SAMPLE_EVERY, at random gaps (a regular graph's transitions come in
cycles: a fixed step would time one kind of transition only), is timed for the meter
by the wall clock (a CPU clock is a system call that costs more than the call it
times); two in three of those time the hook's call for no task, or nothing, instead:
the baselines (collect/accounting.py says why).  Nothing is counted on the other
calls (the scheduler counts transitions).
Never raises into the scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .accounting import NO_OP, SAMPLE_EVERY, SAMPLED
from .computations import NOT_DONE

logger = logging.getLogger("dask_analytics_lab")

NO_TASK = object()  # the baseline's key: the hook returns at once

# Stimuli under which a not-yet-finished task being released means the user gave up on it
# (remove-client: its client left, e.g. a `with Client()` block that Ctrl-C ended).
CANCEL_STIMULI = ("cancel-key", "client-releases-keys", "remove-client")


def transition_hook(plugin: Any) -> Callable[..., None]:
    """The started `plugin`'s transition hook (collect/plugin.py's AnalyticsPlugin)."""
    tasks_get = plugin._tasks.get  # emptied in place by Dask, never replaced
    touch = plugin._touched.add
    tracker = plugin._computations
    counts_get = tracker.counts.get
    counts_for = tracker.counts_for
    last = tracker.last  # [group, its counts] of the last counted transition
    owner_get = tracker.owners.get
    owner_id = tracker.owner_id
    computations = plugin.scheduler.computations
    lost = plugin._lost
    lost_keys = lost.keys  # tested without a call: empty unless a worker left with tasks
    suspects = plugin._suspects
    retried = plugin._retries.pending  # tested without a call: empty unless retries= failed
    recovered = plugin._errors.recovered
    stream = plugin._stream
    stream_in = stream.incoming.append if stream is not None else None
    # Fine metrics' span ids (None: metrics off, or no spans extension).
    spans = plugin._metrics.spans if plugin._metrics is not None else None
    meter = plugin._meter
    randint = plugin._random.randint
    now = time.time
    clock = time.perf_counter

    def gap() -> int:
        n: int = randint(1, 2 * SAMPLE_EVERY - 1)  # SAMPLE_EVERY on average
        return n

    left = gap()

    def transition(
        key: Any,
        start: str,
        finish: str,
        *args: Any,
        stimulus_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        nonlocal left
        left -= 1
        if not left:
            if stream is not None:
                stream.bound(meter)  # the tasks it holds between ticks, checked now and then
            what = randint(0, 2)  # SAMPLED, NO_OP or CLOCK, evenly
            if what == SAMPLED:
                # One more than the gap: the timed call below takes one off.
                left = gap() + 1
                meter.begin_sample()
                t0 = clock()
                try:
                    transition(key, start, finish, stimulus_id=stimulus_id, **kwargs)
                finally:
                    meter.end_sample(clock() - t0)
                return
            # A baseline, timed the same way at the same moment: the hook called as Dask
            # calls it, for no task (it returns at once), or nothing; then this call,
            # untimed.
            left = gap() + (what == NO_OP)  # the call below takes one off
            meter.begin_sample()
            t0 = clock()
            try:
                if what == NO_OP:
                    transition(NO_TASK, start, finish, stimulus_id=stimulus_id, **kwargs)
            finally:
                meter.end_sample(clock() - t0, what)
        elif key is NO_TASK:
            # The baseline's call, before the lookup: a key no task has costs more there.
            return
        try:
            ts = tasks_get(key)
            if ts is None:
                return
            tg = ts.group
            # Every transition moves its group's figures (its states at least): a
            # snapshot summarises only the groups marked here.
            touch(tg)
            if finish == "memory":
                if tg is last[0]:
                    counts = last[1]
                else:
                    counts = counts_get(tg)
                    if counts is None:
                        counts = counts_for(tg, touched=True)
                    last[0], last[1] = tg, counts
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
                if start == "processing" and stream_in is not None:
                    # Inline, as _to_stream: this is most tasks' costliest call.
                    startstops = kwargs.get("startstops")
                    if startstops:
                        who = owner_get(tg)
                        if who is None:
                            who = owner_id(tg, computations)
                        worker, thread = kwargs.get("worker"), kwargs.get("thread")
                        for ss in startstops:
                            if ss.get("action") == "compute":
                                stream_in(
                                    (who, tg, finish, worker, thread, ss["start"], ss["stop"])
                                )
            elif finish == "processing":
                if tg is last[0]:
                    counts = last[1]
                else:
                    counts = counts_get(tg)
                    if counts is None:
                        counts = counts_for(tg, touched=True)
                    last[0], last[1] = tg, counts
                if not counts.first:
                    counts.first = now()
                if lost_keys:
                    was = lost.started(key)
                    if was is not None:
                        plugin._rerun(key, tg, was)
            elif finish == "waiting":
                if spans is not None and (
                    tg is not spans.last_group
                    or not computations
                    or computations[-1] is not spans.last_comp
                ):
                    # Before Dask sends the task: it must leave with its computation's span
                    # id (looked up when the group or the newest computation changed).
                    spans.waiting(ts)
                if lost_keys and lost.wanted_again(key):
                    # Done once; pending again only because its one copy went with a worker.
                    counts = counts_get(tg)
                    if counts is None:
                        counts = counts_for(tg, touched=True)
                    counts.done = max(0, counts.done - 1)
                    counts.lost_waiting += 1
                # else: every task waits once; nothing to count
            elif finish == "released":
                if start not in NOT_DONE:
                    return  # a finished task let go (the common release): nothing to count
                counts = counts_get(tg)
                if counts is None:
                    counts = counts_for(tg, touched=True)
                if stimulus_id is not None and stimulus_id.startswith(CANCEL_STIMULI):
                    if lost_keys and lost.let_go(key):
                        # A lost result nobody wants any more (a program ending lets go of
                        # what it held after its workers closed): it was done, no work was
                        # cancelled.
                        counts.lost_waiting = max(0, counts.lost_waiting - 1)
                        counts.done += 1
                        return
                    counts.cancelled += 1
                    counts.cancelled_at = now()
                    if start == "processing":
                        counts.cancelled_running += 1
            elif finish == "erred":
                counts = counts_get(tg)
                if counts is None:
                    counts = counts_for(tg, touched=True)
                if lost_keys:
                    was = lost.finished(key)
                    if was is not None and was.waiting:  # computed again: raised now
                        counts.lost_waiting = max(0, counts.lost_waiting - 1)
                counts.last = now()
                if retried:
                    retried.pop(key, None)  # failed again: its retries ran out
                plugin._erred(key, tg, counts, kwargs)
                if suspects:
                    suspects.pop(key, None)
                if start == "processing" and stream_in is not None:
                    _to_stream(tg, finish, kwargs)
            # any other finish (queued, no-worker, forgotten): only the group moved
        except Exception:
            logger.exception("dask-analytics: transition hook failed for %r", key)

    def _to_stream(tg: Any, finish: str, kwargs: dict[str, Any]) -> None:
        # The computation the group's tasks belong to now (its record: the stream reads
        # its id when it folds the task in; a group no computation claimed yet is
        # looked up, as it always was), and each compute interval, read now: Dask just
        # read them, a tick's fold would find them out of the CPU's caches.
        startstops = kwargs.get("startstops")
        if not startstops:
            return
        who = owner_get(tg)
        if who is None:
            who = owner_id(tg, computations)
        assert stream_in is not None  # called only with a task stream
        worker, thread = kwargs.get("worker"), kwargs.get("thread")
        for ss in startstops:
            if ss.get("action") == "compute":
                stream_in((who, tg, finish, worker, thread, ss["start"], ss["stop"]))

    return transition
