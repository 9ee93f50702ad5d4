"""Each computation's own statistical profile, per task prefix, fetched from the
workers while it runs (every LIVE_EVERY seconds, once it has run for a profile cycle)
and once more as it ends.

Workers keep profiles per task prefix in `distributed.worker.profile.cycle` chunks.  A
fetch runs `profile_window.prefix_trees` on each worker, one RPC per worker whatever
the number of prefixes (the scheduler's `get_profile(key=prefix)` makes one per prefix
per worker), and gets every prefix's chunks in that prefix's window (a worker that
cannot run it, with `run` in its blocked-handlers or without this package, is asked
Dask's way, a prefix at a time).  So a computation's profile is, per prefix, that
prefix's window: another computation's functions never enter it, and one group's
profile holds none of another's frames.  Each prefix's tree is its own `profile`
message.

A worker stamps each chunk with its own clock plus its estimate of the scheduler's
(`scheduler_delay`, from its last heartbeat), off by tens of milliseconds on a busy
machine: a chunk stamped after a computation's stop can end before it, and the next
chunk hold its last samples.  So a final fetch's window reaches one cycle past the
stop (SLACK cycles), and waits for that chunk to close.

A chunk can still straddle two runs of the same prefix back to back, and the slack
makes more of them.  For those, the window of a run reaches back to the first run of
the chain and the chain's previous tree is subtracted: each sample is counted once, in
the run whose fetch first saw it, so the cluster-wide profile (the merge of its
computations') counts no sample twice.

A live fetch (while the computation runs) takes the window so far and leaves the
chains alone; the final fetch replaces what it sent.  A computation younger than a
profile cycle gets no live fetch: its samples are still in the workers' cycle in
progress, and its final fetch follows.

One fetch runs at a time, at most one starts per tick, the queue is bounded and a
computation queued twice is fetched once (a final fetch is never replaced by a live
one).  Merging and subtracting trees runs in a thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distributed import profile
from distributed.protocol.pickle import dumps
from distributed.protocol.serialize import Serialize, Serialized, deserialize

from .accounting import CostMeter, metered
from .profile_window import Tree, prefix_trees

logger = logging.getLogger("dask_analytics_lab")

# A chain of runs of one prefix is cut after this long: workers keep only
# `distributed.admin.low-level-log-length` chunks.
MAX_CHAIN = 300.0
# While a computation runs, its profile so far is fetched this often (seconds) ...
LIVE_EVERY = 5.0
# ... for at most this many running computations (the newest).
LIVE_MAX = 2
# A final window ends this many profile cycles after the computation's stop.
SLACK = 1
# A run of a prefix continues the previous run's chain when it starts within this many
# cycles of that run's stop: the previous window's last chunk (the first ending a SLACK
# after its stop, one cycle long, maybe a cycle late) can hold samples of this run.
CHAIN_GAP = SLACK + 2


def subtract(new: Tree, old: Tree) -> Tree:
    """The samples of profile tree `new` that are not in `old` (counts never below 0)."""
    out = {**new, "children": {}}
    out["count"] = max(0, new["count"] - old.get("count", 0))
    stack = [(new, old, out)]
    while stack:
        n, o, dst = stack.pop()
        ochildren = o.get("children", {})
        for ident, child in n["children"].items():
            ochild = ochildren.get(ident, {})
            count = child["count"] - ochild.get("count", 0)
            if count < 0 or (count == 0 and child["count"] > 0):
                continue  # all its samples were counted before; Dask's zero-count frames stay
            c = dst["children"][ident] = {**child, "count": count, "children": {}}
            stack.append((child, ochild, c))
    return out


@dataclass
class _Chain:
    start: float  # window start of the chain's first run
    stop: float  # stop of its latest run
    tree: Tree  # everything fetched for the chain so far


# prefix -> (its window's start, the chain it continues, if any)
_Windows = dict[str, tuple[float, _Chain | None]]


class ProfileFetcher:
    """Queue computations as they end; `tick()` lets the next fetch start."""

    def __init__(
        self,
        scheduler: Any,
        emit: Callable[[str, dict[str, Any]], None],
        *,
        timeout: float,
        cycle: float,
        max_queue: int = 100,
        meter: CostMeter | None = None,
    ):
        self._scheduler = scheduler
        # Each step of a fetch on the event loop is charged to "profiles" (the RPCs' own
        # comm reads run in distributed's tasks and are not seen).
        self._meter = meter or CostMeter()
        self._emit = emit
        self._timeout = timeout
        self._cycle = cycle
        self._max_queue = max_queue
        self._queue: OrderedDict[str, tuple[float, float, list[str], bool]] = OrderedDict()
        self._chains: dict[str, _Chain] = {}
        self._go = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.dropped = 0
        self.fetched = 0
        self.merge_seconds = 0.0  # thread CPU spent merging, reported with the plugin's cost
        self.rpcs = 0  # worker RPCs sent, for the plugin's info: one per worker per fetch
        self._function = dumps(prefix_trees)  # by reference: a few bytes
        self._by_prefix: set[str] = set()  # workers that cannot run prefix_trees
        self._task = asyncio.create_task(self._run())

    def put(
        self,
        computation_id: str,
        start: float,
        stop: float,
        prefixes: list[str],
        *,
        live: bool = False,
    ) -> None:
        """Fetch this computation's profile: live, its window so far; else its final one."""
        if live and stop - start < self._cycle:
            return  # nothing new yet: its samples are in the workers' cycle in progress
        queued = self._queue.get(computation_id)
        if queued is not None:  # coalesce: fetch once, with the latest window
            if live and not queued[3]:
                return  # the final fetch is due: it covers this one
            self._queue.pop(computation_id)
        elif len(self._queue) >= self._max_queue:
            self._queue.popitem(last=False)
            self.dropped += 1
            logger.info(
                "dask-analytics: profile queue full; dropped the oldest computation's profile"
            )
        self._queue[computation_id] = (start, stop, prefixes, live)
        self._idle.clear()

    def tick(self) -> None:
        if self._queue:  # else waking the fetch task would only put it to sleep again
            self._go.set()

    async def join(self, timeout: float) -> None:
        """Wait until everything queued has been fetched (flush)."""
        deadline = time.time() + timeout
        while self._queue or not self._idle.is_set():
            self._go.set()
            try:
                await asyncio.wait_for(self._idle.wait(), max(0.0, deadline - time.time()))
            except TimeoutError:
                return

    def close(self) -> None:
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
            await self._go.wait()
            self._go.clear()
            if not self._queue:
                continue
            self._idle.clear()
            computation_id, (start, stop, prefixes, live) = self._queue.popitem(last=False)
            try:
                # A chunk reaches a worker's history when its cycle ends (a live view
                # takes what is there).
                wait = stop + (SLACK + 1) * self._cycle - time.time()
                if wait > 0 and not live:
                    await asyncio.sleep(wait)
                await metered(
                    self._fetch(computation_id, start, stop, prefixes, live),
                    self._meter,
                    "profiles",
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:
                logger.info("dask-analytics: no profile for computation %s: %r", computation_id, e)

    async def _fetch(
        self,
        computation_id: str,
        start: float,
        stop: float,
        prefixes: list[str],
        live: bool = False,
    ) -> None:
        now = time.time()
        end = stop if live else stop + SLACK * self._cycle
        windows: _Windows = {}
        for prefix in prefixes:
            chain = self._chains.get(prefix)
            if live:
                windows[prefix] = (start, None)
            elif (
                chain is not None
                and start - chain.stop < CHAIN_GAP * self._cycle
                and now - chain.start < MAX_CHAIN
            ):
                windows[prefix] = (chain.start, chain)
            else:
                windows[prefix] = (start, None)
        replies = await asyncio.wait_for(
            self._ask_workers({p: w for p, (w, _) in windows.items()}, end, live),
            # A worker asked a prefix at a time is asked a cycle later (_ask).
            self._timeout + (0.0 if live else self._cycle),
        )
        trees = await asyncio.to_thread(self._combine, windows, replies, stop, live)
        self.fetched += 1
        # Chains that can no longer continue hold memory for nothing.
        for prefix in [
            p for p, c in self._chains.items() if now - c.stop > CHAIN_GAP * self._cycle + 60
        ]:
            del self._chains[prefix]
        for prefix, tree in trees.items():
            if tree.get("count"):
                self._emit(
                    "profile",
                    {
                        "computation_id": computation_id,
                        "prefix": prefix,
                        "tree": tree,
                        "count": tree["count"],
                    },
                )

    async def _ask_workers(self, starts: dict[str, float], stop: float, live: bool) -> list[Any]:
        """Each worker's {prefix: tree} for the windows (maybe still serialised)."""
        workers = list(self._scheduler.workers)
        args = dumps((starts, stop))
        replies = await asyncio.gather(
            *(
                metered(self._ask(w, starts, stop, args, live), self._meter, "profiles")
                for w in workers
            ),
            return_exceptions=True,
        )
        answers = [r for r in replies if not isinstance(r, BaseException)]
        if workers and not answers:
            # The chains stay as they were: a window fetched later starts afresh.
            raise RuntimeError(f"none of {len(workers)} workers answered: {replies[0]!r}")
        return answers

    async def _ask(
        self, worker: str, starts: dict[str, float], stop: float, args: bytes, live: bool
    ) -> Any:
        if worker not in self._by_prefix:
            self.rpcs += 1
            try:
                reply = await self._scheduler.rpc(worker).run(
                    function=self._function, args=args, wait=True
                )
            except (TimeoutError, OSError):
                raise  # a worker on its way out: it gives no samples this time
            except (
                Exception
            ) as e:  # the worker refused: `run` blocked, or this package missing there
                reply = {"status": "error", "exception_text": str(e)}
            if reply.get("status") == "OK":
                return reply["result"]
            if len(self._by_prefix) >= 10_000:
                self._by_prefix.clear()  # workers that left; the rest are asked again
            self._by_prefix.add(worker)
            logger.warning(
                "dask-analytics: worker %s cannot run %s.prefix_trees (%s); its profiles are "
                "fetched one task prefix at a time (one RPC each)",
                worker,
                prefix_trees.__module__,
                reply.get("exception_text"),
            )
        # Dask's own handler: one prefix a call.  It gives nothing for a prefix until a
        # chunk holding it has closed (it leaves the cycle in progress out then), and a
        # worker closes its cycle from a periodic callback on its event loop, late when
        # that loop is busy: a final fetch waits one more cycle for it.
        late = stop + 2 * self._cycle - time.time()
        if not live and late > 0:
            await asyncio.sleep(late)
        self.rpcs += len(starts)
        trees = await asyncio.gather(
            *(
                self._scheduler.rpc(worker).profile(key=prefix, start=start, stop=stop)
                for prefix, start in starts.items()
            )
        )
        return dict(zip(starts, trees))

    def _combine(
        self, windows: _Windows, replies: list[Any], stop: float, live: bool
    ) -> dict[str, Tree]:
        cpu = time.thread_time()
        per_prefix: dict[str, list[Tree]] = {}
        for reply in replies:
            for prefix, tree in _unwrap(reply).items():
                per_prefix.setdefault(prefix, []).append(tree)
        own: dict[str, Tree] = {}
        for prefix, (w_start, chain) in windows.items():
            trees = per_prefix.get(prefix)
            fetched = profile.merge(*trees) if trees else profile.create()
            own[prefix] = subtract(fetched, chain.tree) if chain is not None else fetched
            if not live:
                self._chains[prefix] = _Chain(w_start, stop, fetched)
        self.merge_seconds += time.thread_time() - cpu
        return own


def _unwrap(result: Any) -> dict[str, Tree]:
    """A `run` reply's result: the scheduler does not deserialise what workers send
    (an in-process worker's comes wrapped, not serialised)."""
    trees: dict[str, Tree]  # what prefix_trees returned on the worker
    if isinstance(result, Serialized):
        trees = deserialize(result.header, result.frames)
    elif isinstance(result, Serialize):
        trees = result.data
    else:
        trees = result
    return trees
