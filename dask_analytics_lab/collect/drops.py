"""What the shipper's full buffer dropped: counted by kind, said once per reason and
outage (which messages go first, and which setting keeps more), and summed up when
the store is reachable again.  The shipper holds its lock around every call here."""

from __future__ import annotations

import logging
from typing import Any

from dask.utils import format_bytes

from .buffer import DETAILS, SAMPLES

logger = logging.getLogger("dask_analytics_lab")

BYTES_KEY = "analytics.buffer.max-bytes"
MESSAGES_KEY = "analytics.buffer.max-messages"


class DropLog:
    """Drops of one shipper's buffer (`describe`: its store, for the log)."""

    def __init__(self, describe: str):
        self._describe = describe
        self.dropped = 0  # messages pushed out of a full buffer, all kinds
        self.by_kind: dict[str, int] = {}
        # Dropped from the batch in flight: lost only if that write fails.
        self.unsure: list[tuple[str, int, str]] = []
        # Drops by kind when the store was last reachable again: what the next recovery reports.
        self._before: dict[str, int] = {}
        # Why drops were logged (a tier, or "too-large") since the store was last reachable again.
        self._warned: set[int | str] = set()

    def count(self, kind: str, why: int | str, key: str, buffer: Any) -> None:
        """One `kind` message dropped, for `why` (its tier, or "too-large") at the bound
        `key` of `buffer`; said once per reason until the store is reachable again."""
        self.dropped += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if why in self._warned:
            return
        self._warned.add(why)
        if why == "too-large":
            logger.warning(
                "dask-analytics: dropped a %s message larger than the whole buffer (%s = %s). "
                "Raise %s to keep such messages",
                kind,
                key,
                format_bytes(buffer.max_bytes),
                key,
            )
            return
        full = (
            f"{key} = {format_bytes(buffer.max_bytes) if key == BYTES_KEY else buffer.max_messages}"
        )
        logger.warning(
            "dask-analytics: the buffer is full (%s) while %s is unreachable or slow; dropping %s "
            "(now a %s message). Raise %s to keep more",
            full,
            self._describe,
            _what_goes(why),
            kind,
            key,
        )

    def unsure_lost(self, buffer: Any) -> None:
        """The write in flight failed: what was dropped from it is lost after all."""
        for kind, tier, key in self.unsure:
            self.count(kind, tier, key, buffer)
        self.unsure.clear()

    def recovered(self) -> dict[str, int]:
        """The store is reachable again: what was dropped since the last time, by kind."""
        self._warned.clear()
        lost = {k: n - self._before.get(k, 0) for k, n in self.by_kind.items()}
        self._before = dict(self.by_kind)
        return {k: n for k, n in lost.items() if n}


def _what_goes(tier: int | str) -> str:
    if tier == SAMPLES:
        return (
            "the oldest samples first (worker_samples, cluster_sample, gpu_samples, heartbeat), "
            "computations and failures last"
        )
    if tier == DETAILS:
        return "the oldest profiles, metrics and task streams, as no samples are left to drop"
    return (
        "the oldest computations, failures, events and code, as nothing else is left to drop: "
        "the cluster's record will miss them"
    )
