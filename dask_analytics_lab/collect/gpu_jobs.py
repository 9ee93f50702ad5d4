"""Which job (Computation) and dag (graph submission within it) a GPU sample belongs to.

Counting submissions is O(1) a graph and must see every graph from the scheduler's
start, so the recorder counts them in its own `update_graph` hook when it is
registered, and the GPU monitor, registered only when a Monitor is made, reads its
tracker (a plugin of its own would cost Dask a call of its transition hook for every
transition of every task).  A monitor on a scheduler without the recorder counts from
its own registration: the dag of a computation already running then is unknown (None).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any

from distributed.utils import key_split_group

# Graphs up to this size also map their tasks' groups to the new dag (per-task work,
# so only for small submissions such as client.submit; big graphs map by new groups).
SMALL_GRAPH = 1000


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

    def graph_submitted(self, scheduler: Any, tasks: Collection[Any] | None) -> None:
        comps = getattr(scheduler, "computations", None)
        if not comps:
            return
        comp = comps[-1]
        cid = str(comp.id)  # a uuid.UUID: as text, like the store's computation ids
        previous = self._dags.pop(cid, -1)
        dag = None if previous is None else previous + 1
        self._dags[cid] = dag
        if len(self._dags) > 1000:
            self._dags.popitem(last=False)
        if not self.active:
            return
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
        comps = getattr(scheduler, "computations", None)
        if comps and not scheduler.is_idle:
            self._dags[str(comps[-1].id)] = None

    def seed(self, scheduler: Any) -> None:
        """At monitor start: groups of the computation already running have job, no dag."""
        self._groups.clear()
        self._known.clear()
        self._keys.clear()
        comps = getattr(scheduler, "computations", None)
        if comps and not scheduler.is_idle:
            comp = comps[-1]
            self._known[str(comp.id)] = set(comp.groups)
            for tg in comp.groups:
                self._set(tg.name, str(comp.id), None)

    def _set(self, name: str, job: str, dag: int | None) -> None:
        self._groups.pop(name, None)
        self._groups[name] = (job, dag)
        if len(self._groups) > 100_000:
            self._groups.popitem(last=False)

    def lookup(
        self, scheduler: Any, groups: Sequence[str], keys: Sequence[str] = ()
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
        if best[0] is None and groups:
            comps = getattr(scheduler, "computations", None)
            if comps and not scheduler.is_idle:
                best = (str(comps[-1].id), None)
        return best


def _order(dag: int | None) -> int:
    return -1 if dag is None else dag
