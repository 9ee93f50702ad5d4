"""The worker side of a profile fetch: every asked prefix's profile in its window, in
one call.

The scheduler's ProfileFetcher sends `prefix_trees` to each worker through the
worker's `run` handler (as `client.run` does), so a fetch costs one RPC per worker
whatever the number of prefixes; Dask's own `profile` handler answers one prefix per
RPC.  The function is pickled by reference: workers import it from this package.

It runs on the worker's event loop, so it only reads the worker's profile history and
does O(prefixes + chunks in the window x prefixes in a chunk) work besides merging the
trees it returns (what Dask's handler does too).  Only the standard library and
`distributed` are imported here.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import islice
from time import time
from typing import Any

from distributed import profile

# distributed.profile's tree: {count, identifier, description, children: {id: tree}}
Tree = dict[str, Any]


def _end(chunk: tuple[float, dict[str, Tree]]) -> float:
    return chunk[0]


def prefix_trees(
    starts: dict[str, float], stop: float | None, dask_worker: Any = None
) -> dict[str, Tree]:
    """{prefix: tree} from this worker's per-prefix profile chunks (each stamped with the
    time its cycle ended, in the scheduler's clock): those that end at or after the
    prefix's start, up to and including the first that ends at or after `stop` (it holds
    the samples up to `stop`), and the cycle in progress when none has ended since
    `stop` (or `stop` is None).  Prefixes without samples are left out."""
    history = dask_worker.profile_keys_history  # deque of (cycle end, {prefix: tree})
    n = len(history)
    # Dask's handler takes the first chunk after `stop` among those holding the prefix,
    # which can be a later run's; the first chunk after `stop` is the one holding `stop`.
    after = n if stop is None else bisect_left(history, stop, key=_end)
    last = min(after + 1, n)
    firsts = {prefix: bisect_left(history, start, key=_end) for prefix, start in starts.items()}
    found: dict[str, list[Tree]] = {}
    lo = min(firsts.values(), default=last)
    for i, (_, trees) in enumerate(islice(history, lo, last), lo):
        if len(trees) <= len(firsts):
            pairs = (
                (prefix, tree) for prefix, tree in trees.items() if firsts.get(prefix, last) <= i
            )
        else:
            pairs = (
                (prefix, trees[prefix])
                for prefix, first in firsts.items()
                if first <= i and prefix in trees
            )
        for prefix, tree in pairs:
            found.setdefault(prefix, []).append(tree)
    if after >= n:
        now = time() + dask_worker.scheduler_delay
        # .get: profile_keys is a defaultdict, and this must not add to it.
        recent = dask_worker.profile_keys
        for prefix, start in starts.items():
            tree = recent.get(prefix)
            if tree is not None and start < now:
                found.setdefault(prefix, []).append(tree)
    # merge() makes new trees: the cycle in progress keeps changing after this returns.
    return {
        prefix: merged
        for prefix, trees in found.items()
        if (merged := profile.merge(*trees))["count"]
    }
