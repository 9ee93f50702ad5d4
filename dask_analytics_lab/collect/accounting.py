"""What analytics costs the scheduler, counted inside it: CPU seconds on the event loop's
thread, by part, as a share of that thread's own CPU over the same time.

A with/without comparison cannot resolve one point of loop CPU on a small machine (the
noise is several points), so the cost is accounted where it is spent:

- hooks: the transition hook runs ~6 times a task and costs under a microsecond, less
  than reading a thread's CPU clock twice (a system call) would add.  The scheduler
  counts the calls (`transition_counter`); the hook (collect/hook.py) times one call in
  SAMPLE_EVERY, at random gaps of a countdown (the transitions of a regular graph come
  in cycles), by the wall clock (read in user space).  A timed call calls the hook once
  more, with Dask's keyword arguments, between two readings of the clock.  Two in three
  timed calls, chosen at random, time something else in its place (then the hook runs,
  untimed): the hook called the same way for no task (it returns before any lookup), or
  nothing.  Measured in place, all three carry what the moment adds (two readings of the
  clock take ~0.5 us there, 0.08 us in a tight loop), so their differences are what the
  calls cost there: the call for no task less the clock is Dask's cost of calling one
  more plugin's hook, `dispatch` (a new dict of its keyword arguments, none for most
  transitions, eight for a task that finished: what any plugin with a hook pays, however
  little the hook does), and the timed calls less the call for no task are the hook's
  own work.  (Until 2026-11-27 the clock and Dask's call were timed once at start, in a
  tight loop: the in-place part of both was counted as the hook's work, and dispatch at
  about half the in-place figure.  Seen from outside, `scheduler_overhead.py
  --dispatch`, one more plugin costs about that half: the README has both.) A wall clock
  also runs while the thread is descheduled, which on a busy machine adds about as much
  as the call costs: a sample over OUTLIER is left out (and counted), and the
  collections that ran inside timed calls are taken out of the samples and added back,
  scaled by calls over timed calls.
- update_graph, ticks, the other hooks (events, workers joining and leaving), profile
  fetches (each step of their coroutines on the loop: `metered`) and fine-metrics
  heartbeats: timed per call.
- the garbage collector: a collection runs in the thread whose allocation crossed the
  threshold, so one that starts while analytics code runs on the loop was triggered by
  its allocations (an unbiased share of the young collections).  Its time is already in
  the part that was running (a timed call's clock runs through it); `gc` says how much
  of the total it was.  The cost that analytics' long-lived objects add to every full
  collection is not seen this way: benchmarks/scheduler_overhead.py --gc measures it.
- threads (the shipper's writer, retention): their CPU, read from their own clocks.
  While they hold the GIL the loop may wait; that wait is not measured.

`longest_call` is the longest single timed callback on the loop (a sampled transition
call, update_graph, a tick, an event, a profile-fetch step), less the collections that
ran inside it: a full collection walks every object of the scheduler's heap (a 100,000-task
graph's: tens of milliseconds) and would have run at Dask's next allocation had ours not
crossed the threshold.  `longest_gc` is the longest such collection, shown beside it.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Awaitable, Generator
from typing import Any, TypeVar

T = TypeVar("T")

SAMPLE_EVERY = 64  # transitions per timed hook call, on average
# What a timed hook call timed: the hook, the hook for no task, or nothing.
SAMPLED, NO_OP, CLOCK = 0, 1, 2
OUTLIER = 50e-6  # a sampled hook call this long was descheduled, not working
PARTS = ("hooks", "graph", "ticks", "events", "profiles", "metrics")
# What `enter` hands to `leave`: (part, the part it interrupted, thread CPU at entry).
Token = tuple[str, str | None, float, float]
THREAD_PREFIX = "dask-analytics"  # our threads' names start so


def _thread_cpu(ident: int | None) -> float:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))  # type: ignore[arg-type]
    except (AttributeError, OSError, TypeError, ValueError):  # not Linux/Unix, or the thread ended
        return 0.0


class CostMeter:
    """Counts analytics' CPU on the thread that made it (the scheduler's event loop)."""

    def __init__(self, *, watch_gc: bool = False, hooks_timed: bool = True) -> None:
        # Whether the transition hook is timed (analytics.accounting): off, `hooks` and
        # `dispatch` read 0 and the report says they were not counted.
        self.hooks_timed = hooks_timed
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.longest_call = 0.0
        self.longest_part = ""
        self.longest_gc = 0.0  # the longest collection that started inside a part
        self._gc_all = 0.0  # collections inside any part, all together
        # The part whose code runs on the loop now (for the GC callback), or None.
        self.inside: str | None = None
        self.transition_calls = 0
        # Our other scheduler plugins (the GPU monitor's): Dask calls their (empty)
        # transition hooks too, each call a dispatch.
        self.other_plugins = 0
        self._gc_inside = dict.fromkeys(PARTS, 0.0)
        self.outliers = 0  # sampled calls left out: over OUTLIER
        self._gc_mark = 0.0
        # [seconds, calls] of the timed calls: the hook (SAMPLED) and its baselines (see
        # the module doc), the hook for no task (NO_OP) and the clock alone (CLOCK).
        self._timed = {SAMPLED: [0.0, 0], NO_OP: [0.0, 0], CLOCK: [0.0, 0]}
        self._loop_thread = threading.get_ident()
        self._loop_cpu0 = time.thread_time()
        self._gc_start = 0.0
        self._started = time.time()
        self._watch_gc = watch_gc
        if watch_gc:
            gc.callbacks.append(self._gc)

    def close(self) -> None:
        if self._watch_gc:
            self._watch_gc = False
            try:
                gc.callbacks.remove(self._gc)
            except ValueError:
                pass

    # --- charging ----------------------------------------------------------------
    def charge(self, part: str, seconds: float, gc_seconds: float = 0.0) -> None:
        """A call of `part` took `seconds`, `gc_seconds` of it in collections."""
        self.seconds[part] += seconds
        if seconds - gc_seconds > self.longest_call:
            self.longest_call, self.longest_part = seconds - gc_seconds, part

    def enter(self, part: str) -> Token:
        """Start timing a callback of `part`; hand what it returns to `leave`."""
        outer, self.inside = self.inside, part
        return part, outer, time.thread_time(), self._gc_all

    def leave(self, token: Token) -> None:
        part, outer, t0, gc0 = token
        self.inside = outer
        self.charge(part, time.thread_time() - t0, self._gc_all - gc0)

    def begin_sample(self) -> None:
        self.inside = "hooks"
        self._gc_mark = self._gc_inside["hooks"]

    def end_sample(self, seconds: float, what: int = SAMPLED) -> None:
        """A timed call of the hook (SAMPLED), of the hook for no task (NO_OP) or of
        nothing (CLOCK) took `seconds` (wall clock)."""
        self.inside = None
        collected = self._gc_inside["hooks"] - self._gc_mark
        seconds -= collected
        if what != SAMPLED:
            # Set off by our measurement's own allocation, not the hook's: not counted.
            self._gc_inside["hooks"] = self._gc_mark
            if seconds <= OUTLIER:
                baseline = self._timed[what]
                baseline[0] += seconds
                baseline[1] += 1
            return
        # The collections are counted whole, in hooks_seconds.
        if seconds > OUTLIER:
            self.outliers += 1
            return
        sampled = self._timed[SAMPLED]
        sampled[0] += seconds
        sampled[1] += 1
        if seconds > self.longest_call:
            self.longest_call, self.longest_part = seconds, "hooks"

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        part = self.inside
        if part is None or threading.get_ident() != self._loop_thread:
            return
        if phase == "start":
            self._gc_start = time.thread_time()
        elif self._gc_start:
            seconds = time.thread_time() - self._gc_start
            self._gc_inside[part] += seconds
            self._gc_all += seconds
            self.longest_gc = max(self.longest_gc, seconds)
            self._gc_start = 0.0

    # --- reading -------------------------------------------------------------------
    def hook_sums(self) -> dict[str, Any]:
        """What the hooks' cost is made of (`hook_seconds` turns it into seconds): sums,
        so that the cost of an interval is that of the difference of two readings."""
        return {
            "calls": self.transition_calls,
            "plugins": 1 + self.other_plugins,
            "hook": list(self._timed[SAMPLED]),
            "no_op": list(self._timed[NO_OP]),
            "clock": list(self._timed[CLOCK]),
            "gc": self._gc_inside["hooks"],
            "watched": self._timed[SAMPLED][1] + self.outliers,
        }

    def hooks_seconds(self) -> float:
        return hook_seconds(self.hook_sums())[0]

    def dispatch_seconds(self) -> float:
        """Of hooks_seconds, Dask's own cost of calling the hooks: what any plugin with a
        transition hook pays, however little the hook does."""
        return hook_seconds(self.hook_sums())[1]

    def report(
        self, extra: dict[str, float] | None = None, threads: dict[str, float] | None = None
    ) -> dict[str, Any]:
        """Must run on the loop's thread (it reads that thread's CPU clock).  `extra`: loop
        CPU counted elsewhere, by part; `threads`: CPU of work done in shared threads."""
        sums = self.hook_sums()
        hooks, dispatch = hook_seconds(sums)
        parts = dict(self.seconds)
        parts["hooks"] += hooks
        gc_seconds = _hooks_gc(sums) + sum(s for p, s in self._gc_inside.items() if p != "hooks")
        for name, seconds in (extra or {}).items():
            parts[name] = parts.get(name, 0.0) + seconds
        loop_cpu = time.thread_time() - self._loop_cpu0
        total = sum(parts.values())
        threads = {
            **(threads or {}),
            **{
                t.name: _thread_cpu(t.ident)
                for t in threading.enumerate()
                if t.name.startswith(THREAD_PREFIX)
            },
        }
        wall = max(time.time() - self._started, 1e-9)
        return {
            "parts": parts,
            "seconds": total,
            "loop_cpu_seconds": loop_cpu,
            "share": total / loop_cpu if loop_cpu > 0 else 0.0,
            "transition_calls": self.transition_calls,
            "dispatch_seconds": dispatch,  # inside parts["hooks"]
            "transition_us": 1e6 * hooks / self.transition_calls if self.transition_calls else 0.0,
            "longest_call_ms": 1e3 * self.longest_call,
            "longest_part": self.longest_part,
            "longest_gc_ms": 1e3 * self.longest_gc,
            "gc_seconds": gc_seconds,
            "hooks_timed": self.hooks_timed,
            "hook_samples": self._timed[SAMPLED][1],
            "hook_baselines": self._timed[NO_OP][1] + self._timed[CLOCK][1],
            "hook_sums": sums,
            "dispatch_us": 1e6 * _dispatch_per_call(sums),
            "hook_outliers": self.outliers,
            "threads": threads,
            "threads_share_of_a_core": sum(threads.values()) / wall,
            "since": self._started,
        }


def hook_seconds(sums: dict[str, Any]) -> tuple[float, float]:
    """(the hooks' seconds, of it Dask's dispatch) for `sums` (CostMeter.hook_sums, or
    the difference of two: `sums_between`): each call is charged the timed calls'
    mean less the clock, the collections inside timed calls stand for all calls'."""
    calls, (seconds, n) = sums["calls"], sums["hook"]
    # Before the first baselines, the whole timed call is the hook's: more, never less.
    per_call = max(0.0, seconds / n - _mean(sums["clock"])) if n else 0.0
    dispatch = _dispatch_per_call(sums)
    body = max(0.0, per_call - dispatch)
    dispatched = calls * dispatch * sums["plugins"]  # our other plugins' calls too
    return calls * body + dispatched + _hooks_gc(sums), dispatched


def sums_between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The hook sums of the interval between two readings of `hook_sums` (a benchmark's
    row: its own timed calls, not the means of all before it)."""
    between: dict[str, Any] = {}
    for k, v in after.items():
        if k == "plugins":  # a count of plugins, not a sum
            between[k] = v
        elif isinstance(v, (list, tuple)):  # [seconds, calls] (a tuple once sent by RPC)
            between[k] = [a - b for a, b in zip(v, before[k])]
        else:
            between[k] = v - before[k]
    return between


def _mean(pair: list[float]) -> float:
    seconds, calls = pair
    return seconds / calls if calls else 0.0


def _dispatch_per_call(sums: dict[str, Any]) -> float:
    if not sums["no_op"][1]:
        return 0.0
    return max(0.0, _mean(sums["no_op"]) - _mean(sums["clock"]))


def _hooks_gc(sums: dict[str, Any]) -> float:
    # The collections that started in timed hook calls stand for those of all calls.
    watched = sums["watched"]
    return sums["gc"] * (sums["calls"] / watched) if watched else 0.0


def metered(awaitable: Awaitable[T], meter: CostMeter, part: str) -> Awaitable[T]:
    """The awaitable, with the loop CPU of each of its steps charged to `part`."""
    return _Metered(awaitable, meter, part)


class _Metered:
    __slots__ = ("_coro", "_meter", "_part")

    def __init__(self, coro: Any, meter: CostMeter, part: str):
        self._coro, self._meter, self._part = coro, meter, part

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._coro.__await__()
        send: Any = None
        throw: BaseException | None = None
        meter = self._meter
        while True:
            t0, gc0 = time.thread_time(), meter._gc_all
            outer, meter.inside = meter.inside, self._part
            try:
                yielded = inner.throw(throw) if throw is not None else inner.send(send)
            except StopIteration as done:
                return done.value
            finally:
                meter.inside = outer
                meter.charge(self._part, time.thread_time() - t0, meter._gc_all - gc0)
            try:
                send, throw = (yield yielded), None
            except BaseException as e:  # noqa: BLE001 (handed on to the coroutine, as await does)
                send, throw = None, e
