"""Why a computation was slow, and what to change: findings from its record.

    explain(reader, computation_id)  ->  [{"kind", "title", "why", "evidence",
                                           "advice", "impact", "groups", "workers"}, ...]

Every rule reads only the store (through a reader's read methods, record.py), so it
works for clusters long gone and on a team server.  Each rule's docstring states the
rule and how its impact (seconds of wall time lost, an estimate) is counted; the
thresholds are `analytics.findings.*` (analytics.yaml).  Findings that cost less than
`min-impact`, or less than `min-share` of the wall time, are not shown: a healthy
computation gets none.  Most costly first.

Modules: record (the reads), tasks (how work was cut and spread), time_spent (fine
metrics and the host's CPU: GIL, a busy machine, transfers, serialization), memory
(spilling, kills), history (failures, earlier runs, idle cluster), gpu (GPU samples: an
underused GPU).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import sqlalchemy as sa

from .. import config
from ..figures import duration
from ..filters import FINDING_KINDS
from ..store_errors import StoreUnavailable
from . import gpu, history, kept, memory, tasks, time_spent
from .record import read

logger = logging.getLogger("dask_analytics_lab")

KINDS = FINDING_KINDS

RULES = (
    tasks.small_tasks,
    tasks.straggler,
    tasks.imbalance,
    memory.spilling,
    memory.memory_kill,
    time_spent.gil_contention,
    time_spent.cpu_starved,
    time_spent.transfer_bound,
    time_spent.serialization,
    tasks.too_few_tasks,
    history.failures,
    history.slower_than_before,
    history.idle_cluster,
    gpu.gpu_underused,
)

# Their cost is not a share of the wall time: an erred computation is never healthy, and
# an idle cluster costs beside it.
_NOT_BY_SHARE = ("idle-cluster",)


def stands_apart(f: dict, comp: dict) -> bool:
    """Not one of the causes that share the wall time: an idle cluster costs beside it,
    slower-than-before (a comparison with earlier runs) and cpu-starved (the machine's
    other work) overlap every cause by nature, and an erred computation's failures claim
    all of it (it is never healthy)."""
    return f["kind"] in ("idle-cluster", "slower-than-before", "cpu-starved") or (
        f["kind"] in ("failures", "memory-kill") and comp["state"] == "erred"
    )


def _folded(found: list[dict]) -> list[dict]:
    """A finding another one explains is folded into it: work piled on the worker that
    ran a straggler is that straggler (imbalance already leaves the straggler's excess
    out; what is left on that worker is the straggler's wait), and work piled on one
    worker of a graph too narrow for the threads (too-few-tasks: a chain, one chunk) had
    nowhere else to go; and work piled on the others while a worker killed for its memory
    restarted is that kill."""
    slow = {w for f in found if f["kind"] == "straggler" for w in f["workers"]}
    killed = {w for f in found if f["kind"] == "memory-kill" for w in f["workers"]}
    narrow = any(f["kind"] == "too-few-tasks" for f in found)
    return [
        f
        for f in found
        if not (
            f["kind"] == "imbalance"
            and (narrow or f["workers"][0] in slow or killed.intersection(f["workers"][1:]))
        )
    ]


def _within_wall(found: list[dict], rec: Any) -> list[dict]:
    """Together the findings cannot save more than the wall time less the ideal time
    (`Record.ideal`): most costly first, each keeps what is left of that budget.  Their
    estimates overlap (the GIL and a busy machine both explain the same waiting): what
    one claims, the next cannot claim again."""
    left = max(0.0, rec.wall - rec.ideal)
    for f in sorted(found, key=lambda f: -f["impact"]):
        if stands_apart(f, rec.comp):
            continue
        if f["impact"] > left:
            f["evidence"] += (
                f" (cut from {duration(f['impact'])}: with the findings above it, no more than "
                f"the wall time less the ideal time can be saved)"
            )
            f["impact"] = round(left, 3)
        left -= f["impact"]
    return found


def _shown(f: dict, wall: float, comp: dict, st: dict) -> bool:
    if f["kind"] == "failures" and comp["state"] == "erred":
        return True
    if f["impact"] < st["min_impact"]:
        return False
    return f["kind"] in _NOT_BY_SHARE or f["impact"] >= st["min_share"] * wall


def explain(
    reader: Any, computation_id: str, *, account: str | None = None, settings: dict | None = None
) -> list[dict]:
    """The findings of one computation, most costly first.

    reader: a Store (or anything with its read methods); account: the caller's scope
    (a team server's); settings: config.findings_settings() (default: from Dask's
    config here).  NotFound for an id the caller may not see."""
    st = settings or config.findings_settings()
    if not hasattr(reader, "snapshot"):
        return _explain(read(reader, computation_id, account=account, settings=st))
    # A Store: what was kept answers; else every read in one transaction, and what it
    # gave is kept (kept.py).
    key = kept.settings_key(st)
    found = kept.recall(reader, computation_id, account, key)
    if found is not None:
        return found
    with reader.snapshot() as snap:
        rec = read(snap, computation_id, account=account, settings=st)
    # As the store gives it back: the first answer reads as every later one.
    found = json.loads(json.dumps(_explain(rec)))
    try:
        kept.keep(reader, rec, key, found)
    except (StoreUnavailable, sa.exc.SQLAlchemyError) as e:
        # A store this process may read and not write (a read-only file, a reporting
        # role): the answer stands, it is explained again next time.
        logger.info("dask-analytics: findings of %s not kept: %s", rec.comp["computation_id"], e)
    return found


def _explain(rec: Any) -> list[dict]:
    """The findings of a record read for it, most costly first."""
    computation_id = rec.comp["computation_id"]
    out = []
    for rule in RULES:
        try:
            found = rule(rec)
        except (AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError):
            # A record with a figure missing (an older release, a cut-short stream), or a
            # free-form value (an event's msg) of a shape no release sends, loses that one
            # rule, not the others: never an answer.
            logger.warning(
                "dask-analytics: finding rule %s failed on %s",
                rule.__name__,
                computation_id,
                exc_info=True,
            )
            continue
        out += found
    st = rec.settings
    out = [f for f in _within_wall(_folded(out), rec) if _shown(f, rec.wall, rec.comp, st)]
    out.sort(key=lambda f: -f["impact"])
    return out


def explain_from(reader: Any, computation_id: str) -> list[dict]:
    """`reader.explain(computation_id)`: whatever reader a store URL opened, a Store
    computes them here and a team server itself, with its own thresholds and the token's
    scope."""
    return reader.explain(computation_id)
