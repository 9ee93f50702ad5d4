"""Which job (Computation) and dag (graph submission within it) a GPU sample belongs to.

Counting submissions is O(1) a graph and must see every graph from the scheduler's
start, so the recorder counts them in its own `update_graph` hook when it is
registered, and the GPU monitor, registered only when a Monitor is made, reads its
tracker (a plugin of its own would cost Dask a call of its transition hook for every
transition of every task).  A monitor on a scheduler without the recorder counts from
its own registration: the dag of a computation already running then is unknown (None).

A sample belongs to every computation running on the cluster when it was taken, also
when its worker ran no task then (waiting for inputs, say): dask-metrics' `job` is "the
job that is currently executing".  The tracker keeps each computation's window, opened
at its Computation's start (the store's `start`) by the graph submission that made it,
and closed when `observe` finds it done: Dask makes a new Computation only when the
scheduler is idle, so one that is not the newest has ended, by its groups' last `stop`
at the latest, and the newest has ended once all its groups are done.  `observe` runs
when a batch of samples arrives (about once a second per worker) and costs
O(groups of the running computation); graph submissions add O(1) each.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from itertools import islice
from typing import Any

from distributed.utils import key_split_group

from . import sources

# Graphs up to this size also map their tasks' groups to the new dag (per-task work,
# so only for small submissions such as client.submit; big graphs map by new groups).
SMALL_GRAPH = 1000
# Computation windows kept (closed ones are looked up by samples arriving late), and
# submission times kept per computation (a loop of client.submit makes thousands).
KEEP_WINDOWS = 64
KEEP_DAGS = 64
# Seconds between two looks at the running computation's groups: every worker's batch
# asks, and a look is O(its groups), so without this the cost grew with groups x workers.
OBSERVE_EVERY = 0.5


class Window:
    """When one computation ran on the cluster, and when each of its graphs came."""

    __slots__ = ("job", "comp", "groups", "start", "end", "seen", "dags")

    def __init__(self, comp: Any, start: float):
        self.job = str(comp.id)
        self.comp = comp
        # Its TaskGroups beyond comp.groups: Dask lists there only the groups a graph
        # made, not a live group it added tasks to (a re-run of `f` while earlier
        # futures of `f` are held).
        self.groups: set[Any] = set()
        self.start = start
        self.end: float | None = None  # None: running still
        self.seen = start  # the last time it was seen running
        self.dags: list[tuple[float, int | None]] = []  # (submitted, dag index), in order

    def holds(self, t: float) -> bool:
        return self.start <= t and (self.end is None or t <= self.end)

    def dag_at(self, t: float) -> int | None:
        """The newest graph submitted by `t` (None: unknown, submitted before counting began)."""
        dag = None
        for at, index in self.dags:
            if at > t:
                break
            dag = index
        return dag


def _groups(w: Window) -> set[Any]:
    groups: set[Any] = w.comp.groups
    return w.groups | groups if w.groups else groups


def _stop(w: Window) -> float:
    """When the computation's last task ended (Dask's Computation.stop, -1 without groups)."""
    return max((tg.stop for tg in _groups(w)), default=-1.0)


class JobTracker:
    """Maps task-group names to (job, dag).  O(1) per graph submission when idle;
    O(groups of the computation) per submission while a monitor runs."""

    def __init__(self) -> None:
        self.active = False
        # computation id -> last dag index (None: graphs were submitted before counting began)
        self._dags: OrderedDict[str, int | None] = OrderedDict()
        self._known: OrderedDict[str, set[Any]] = (
            OrderedDict()
        )  # computation id -> TaskGroups mapped
        self._groups: OrderedDict[str, tuple[str, int | None]] = OrderedDict()
        # str(key) -> (job, dag) for tasks of small graphs: tells apart submissions
        # that share a group name (a loop of client.submit(train, cfg): one group "train").
        self._keys: OrderedDict[str, tuple[str, int | None]] = OrderedDict()
        # computation id -> its window, oldest first
        self._windows: OrderedDict[str, Window] = OrderedDict()
        self._observed = float("-inf")

    def _window(self, comp: Any) -> Window:
        cid = str(comp.id)
        w = self._windows.get(cid)
        if w is None:
            start = getattr(comp, "start", None)
            w = self._windows[cid] = Window(comp, float(start) if start else time.time())
            while len(self._windows) > KEEP_WINDOWS:
                self._windows.popitem(last=False)
        return w

    def graph_submitted(self, scheduler: Any, tasks: Collection[Any] | None) -> None:
        comps = sources.computations(scheduler)
        if not comps:
            return
        comp = comps[-1]
        cid = str(comp.id)  # a uuid.UUID: as text, like the store's computation ids
        previous = self._dags.pop(cid, -1)
        dag = None if previous is None else previous + 1
        self._dags[cid] = dag
        if len(self._dags) > 1000:
            self._dags.popitem(last=False)
        window = self._window(comp)
        window.end = None  # a graph added to it: running (again)
        # The first graph made the Computation: its dag holds from the window's start.
        window.dags.append((time.time() if window.dags else window.start, dag))
        if len(window.dags) > KEEP_DAGS:
            del window.dags[0]
        if not self.active:
            return
        if tasks:
            # The groups the graph's tasks went to; a big graph's new groups are in
            # comp.groups already, so a sample of its keys finds the live ones it joined.
            step = max(1, len(tasks) // SMALL_GRAPH)
            known_tasks = getattr(scheduler, "tasks", None) or {}
            for k in islice(tasks, 0, None, step):
                ts = known_tasks.get(k)
                if ts is not None and ts.group not in comp.groups:
                    window.groups.add(ts.group)
        known = self._known.get(cid)
        if known is None:
            known = self._known[cid] = set()
            while len(self._known) > 16:
                self._known.popitem(last=False)
        new = comp.groups - known
        for tg in new:
            self._set(tg.name, cid, dag)
        known |= new
        # A group alive from an earlier submission gets no new TaskGroup object; for
        # small graphs find it by key.
        if tasks and len(tasks) <= SMALL_GRAPH:
            for name in {key_split_group(k) for k in tasks}:
                self._set(name, cid, dag)
            keys = self._keys
            for k in tasks:
                keys[str(k)] = (cid, dag)
            while len(keys) > 100_000:
                keys.popitem(last=False)

    def joined_late(self, scheduler: Any) -> None:
        """Counting starts now: graphs of the computation running now may have come before."""
        comps = sources.computations(scheduler)
        if comps and not scheduler.is_idle:
            self._dags[str(comps[-1].id)] = None

    def seed(self, scheduler: Any) -> None:
        """At monitor start: groups of the computation already running have job, no dag."""
        self._groups.clear()
        self._known.clear()
        self._keys.clear()
        comps = sources.computations(scheduler)
        if comps and not scheduler.is_idle:
            comp = comps[-1]
            self._window(comp)  # submitted before anyone counted: no dag
            self._known[str(comp.id)] = set(comp.groups)
            for tg in comp.groups:
                self._set(tg.name, str(comp.id), None)

    def observe(self, scheduler: Any, now: float | None = None) -> None:
        """Close the windows of computations that ended.  O(groups of the open ones), at
        most every OBSERVE_EVERY seconds, however many workers' batches ask."""
        now = time.time() if now is None else now
        if 0 <= now - self._observed < OBSERVE_EVERY:
            return
        self._observed = now
        comps = sources.computations(scheduler)
        newest = comps[-1] if comps else None
        later_start: float | None = None
        for w in reversed(self._windows.values()):
            if w.end is None:
                if w.comp is newest and not all(tg.done for tg in _groups(w)):
                    w.seen = now
                else:
                    end = max(_stop(w), w.seen, w.start)
                    # A group re-run by a later computation moved its stop past ours.
                    w.end = end if later_start is None else max(w.start, min(end, later_start))
            later_start = w.start

    def running_at(self, t: float) -> list[Window]:
        """The windows holding `t`, newest first (almost always none or one).  Stops at
        the first window that ended before `t`: `observe` closed every older one no
        later than the next one's start."""
        out = []
        for w in reversed(self._windows.values()):
            if w.start > t:
                continue
            if w.end is not None and w.end < t:
                break
            out.append(w)
        return out

    def tag(
        self, scheduler: Any, t: float, groups: Sequence[str], keys: Sequence[str] = ()
    ) -> list[tuple[str, int | None]]:
        """(job, dag) of a sample taken at `t` on a worker running `groups`: first the
        pair its tasks map to, then every other computation running at `t` (the newest
        graph of each).  Empty: nothing ran on the cluster then."""
        out: list[tuple[str, int | None]] = []
        if groups or keys:
            # No guess from the computation running now: the windows know better for
            # a sample that arrives after its computation ended.
            job, dag = self.lookup(scheduler, groups, keys, fallback=False)
            if job is not None:
                out.append((job, dag))
        for w in self.running_at(t):
            if not any(job == w.job for job, _d in out):
                out.append((w.job, w.dag_at(t)))
        return out

    def _set(self, name: str, job: str, dag: int | None) -> None:
        self._groups.pop(name, None)
        self._groups[name] = (job, dag)
        if len(self._groups) > 100_000:
            self._groups.popitem(last=False)

    def lookup(
        self,
        scheduler: Any,
        groups: Sequence[str],
        keys: Sequence[str] = (),
        *,
        fallback: bool = True,
    ) -> tuple[str | None, int | None]:
        best: tuple[str | None, int | None] = (None, None)
        for k in keys:  # exact, where the task came in a small graph
            found = self._keys.get(k)
            if found is not None and (best[0] is None or _order(found[1]) > _order(best[1])):
                best = found
        if best[0] is not None:
            return best
        for name in groups:
            found = self._groups.get(name)
            # Several groups at once (a seceded parent and its children): the latest
            # submission is the one doing the work.
            if found is not None and (best[0] is None or _order(found[1]) > _order(best[1])):
                best = found
        if best[0] is None and groups and fallback:
            comps = sources.computations(scheduler)
            if comps and not scheduler.is_idle:
                best = (str(comps[-1].id), None)
        return best


def _order(dag: int | None) -> int:
    return -1 if dag is None else dag
