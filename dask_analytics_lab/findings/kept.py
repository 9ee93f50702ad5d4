"""Findings kept with their computation in the store, so questions across computations
("which computations spilled this week", a cluster's findings summed) are queries, not
an explain of every computation each time.

`explain` (findings/__init__.py) answers through here on a Store: a computation whose
findings were kept under the same thresholds, once its record could no longer change,
is answered from the store; any other is explained and what it gave kept (`final` once
`settled`), so every view - widget, Lab, CLI, HTTP, a list's filter - reads one answer.
Other thresholds (or another release of the rules) make another `settings_key`: those
computations are explained again when next asked.

across.py reads them across computations: a list filtered by finding kind, a
cluster's findings summed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from .record import EVENT_SLACK, Record

# Seconds after a computation's stop before its record is taken as complete: the events
# about it land up to EVENT_SLACK after it, its profile and task stream sooner.
SETTLE = EVENT_SLACK
# The findings that a later computation on the cluster takes away (history.idle_cluster:
# the idle time after a cluster's last computation).  No other rule reads `Record.later`
# or anything past the computation's stop + SETTLE, so once the cluster moves on, these
# are the only part of a settled record's findings that moves.
LAST_ONLY = ("idle-cluster",)


@functools.cache
def _rules() -> str:
    """The rules' own fingerprint: their source (a release, or a fix in a checkout)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def settings_key(settings: dict) -> str:
    """The fingerprint of these thresholds and these rules."""
    text = json.dumps({"settings": settings, "rules": _rules()}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def settled(rec: Record, now: float | None = None) -> bool:
    """Whether the computation's findings can no longer change: it ended SETTLE ago,
    and its cluster moved on - a later computation started, or the cluster ended (the
    idle-cluster finding reads the idle time after a cluster's last computation)."""
    now = time.time() if now is None else now
    stop = rec.comp.get("stop")
    if rec.comp.get("state") == "running" or stop is None or now < stop + SETTLE:
        return False
    return bool(rec.later) or rec.cluster.get("status") in ("stopped", "lost")


def recall(store: Any, computation_id: str, account: str | None, key: str) -> list[dict] | None:
    """The kept final findings of this computation under `key`; None: explain it.
    NotFound for an id the account may not see, as every read."""
    from ..store import kept, queries

    with store.reading() as conn:
        full = queries.computation_id(conn, computation_id, account)
        return kept.recall(conn, full, key)


def keep(store: Any, rec: Record, key: str, found: list[dict]) -> None:
    """Keep `found` as the findings of `rec`'s computation (final when settled)."""
    from ..store import kept

    with store.transaction() as conn:
        kept.keep(
            conn,
            cluster_id=rec.comp["cluster_id"],
            computation_id=rec.comp["computation_id"],
            settings=key,
            final=settled(rec),
            found=found,
            now=time.time(),
        )


def moved_on(store: Any, cluster_id: str, key: str) -> list[str]:
    """The cluster started a later computation: its computations kept provisional under
    `key` after they settled are final now, as a new explain would give them (their
    LAST_ONLY findings taken out), without explaining them again.  Returns those that
    must still be explained (kept before they settled, or under other thresholds)."""
    from ..store import kept

    with store.transaction() as conn:
        return kept.finish_moved_on(conn, cluster_id, key, SETTLE, LAST_ONLY)
