"""The claims update_graph left, built by the next ticks a slice at a time: the
collector's deadline-bounded work queue.  update_graph runs inside Dask's, and a re-run
takes 4,000 live groups at once: it only says which groups are whose, and a tick with a
deadline builds their claims, oldest submission first."""

from __future__ import annotations

import time
from collections import deque
from itertools import islice
from typing import Any

from .computation_record import Row, Tracked, Unsettled
from .group_figures import CLOSED, Claim, afresh, finalised, read_taken

# Claims update_graph left are built this many groups at a time between looks at the clock.
_SETTLE_EVERY = 128


class ClaimQueue:
    """(computation, {group: what `build` needs}) of each update_graph whose claims are
    not built yet, oldest first."""

    def __init__(self, unread: dict[Any, list[Any]]):
        # Groups taken from another computation whose figures are still to be read for
        # its old claim (claims.py's _take_over) -> that reading: shared with Claims.
        self._unread = unread
        self._queue: deque[tuple[Tracked, Unsettled]] = deque()

    def __bool__(self) -> bool:
        return bool(self._queue)

    def add(self, record: Tracked, batch: Unsettled) -> None:
        self._queue.append((record, batch))

    def clear(self) -> None:
        self._queue.clear()

    def settle(self, deadline: float | None) -> bool:
        """Build the claims update_graph left, oldest submission first (a group taken
        twice is closed in its first claim before the second is made); False when
        `deadline` (time.perf_counter()) came first: the next call goes on."""
        queue = self._queue
        while queue:
            record, batch = queue[0]
            if deadline is None:
                items = list(batch.items())
                batch.clear()
            else:
                items = list(islice(batch.items(), _SETTLE_EVERY))
                for tg, _ in items:
                    del batch[tg]
            if not batch:
                queue.popleft()
            self.build(record, items)
            if deadline is not None and queue and time.perf_counter() > deadline:
                return False
        return True

    def build(self, record: Tracked, items: list[tuple[Any, Any]]) -> None:
        """Claims of these groups for `record` (it owns them already), with what
        update_graph found out (`Taken`).  O(1) a group."""
        claims, claim_of, dirty, names = record.claims, record.claim_of, record.dirty, record.names
        unsettled, prefixes = record.unsettled, record.prefixes
        n_before = len(claims)
        columns = len(record.compute)  # the next new row's place
        made: list[Claim] = []
        for i, (tg, taken) in enumerate(items, n_before):
            unsettled.pop(tg, None)
            if taken is None:
                claim = Claim(tg, i)
            elif isinstance(taken, (tuple, list)):
                if isinstance(taken, list) and len(taken) == 4:
                    # Not read yet: nothing of the re-run changed its figures so far.
                    del self._unread[tg]
                    read_taken(tg, taken)
                previous, base, closed = taken
                claim = Claim(tg, i, base)
                old = previous.claim_of.get(tg)
                if old is not None and old.closed is None:
                    old.closed = closed
                    previous.dirty.add(old)
            else:
                # It did not move since the old claim's last summary: that summary is
                # its final one, and the figures it was made from the new baseline
                # (the counts started afresh).
                old = taken.claim_of[tg]
                claim = Claim(tg, i, afresh(old.cur))
                if old.closed is None:
                    old.frozen = finalised(old)
                    old.closed = CLOSED
                    taken.dirty.add(old)
            claim_of[tg] = claim
            made.append(claim)
            name = tg.name
            row = names.get(name)
            if row is None:
                # Rows and their columns in claim order: the order Dask's groups were first seen.
                row = names[name] = Row(columns)
                columns += 1
            row.claims.append(claim)
            prefix = tg.prefix.name
            if prefix not in prefixes:
                prefixes[prefix] = None
                record.sorted_prefixes = None
        claims += made
        dirty.update(made)
        more = columns - len(record.compute)
        if more:
            record.compute += [0.0] * more
            record.transfer += [0.0] * more
            record.disk += [0.0] * more
            record.stops += [None] * more
