"""Findings across computations, from those kept with each (kept.py): which
computations (list_computations' `finding=`) or clusters (list_clusters') had a finding
of a kind, and a cluster's findings summed (the `cluster_findings` read).

`prepare_list` and `prepare_clusters` are those lists' `keeps` step (reads.py): before a
list filtered by `finding=` runs its query, every computation in the filter's scope whose
findings are not kept and final is explained, and so kept (the first such list after new
thresholds explains what it covers, once; later ones only the few whose record could
still change).
"""

from __future__ import annotations

import time
from typing import Any

from .. import config
from ..store_errors import NotFound
from . import explain
from .kept import SETTLE, settings_key

_SCOPE = ("account", "user", "state", "since", "until", "text")


def prepare_list(store: Any, args: dict[str, Any]) -> None:
    """list_computations' step before its query: with `finding=`, explain (and keep)
    every computation in the filter's scope whose findings are not kept and final."""
    if args.get("finding") is not None:
        _explain_unkept(store, args, config.findings_settings())


def prepare_clusters(store: Any, args: dict[str, Any]) -> None:
    """list_clusters' step before its query: with `finding=`, the same for every
    computation of the clusters in the filter's scope."""
    if args.get("finding") is not None:
        _explain_unkept(store, args, config.findings_settings(), clusters=True)


def _explain_unkept(
    store: Any, scope: dict[str, Any], settings: dict, *, clusters: bool = False
) -> None:
    from ..store import queries

    key = settings_key(settings)
    # One whose record may still change is explained again at most every SETTLE seconds
    # (a sidebar polling a filtered list would explain the newest at every poll).
    recent = time.time() - SETTLE
    with store.reading() as conn:
        if clusters:
            filters = {k: scope.get(k) for k in _SCOPE}
            ids = queries.cluster_computations_to_explain(conn, key, recent, **filters)
        else:
            filters = {k: scope.get(k) for k in ("cluster_id", *_SCOPE)}
            ids = queries.computations_to_explain(conn, key, recent, **filters)
    for computation_id in ids:
        try:
            explain(store, computation_id, account=scope.get("account"), settings=settings)
        except NotFound:
            continue  # pruned since it was listed: nothing to keep


# A cluster's computations are read this many at a time; its summary names at most TOP
# computations a kind.
PAGE = 10_000
TOP = 10


def cluster_findings(
    reader: Any, cluster_id: str, *, account: str | None = None
) -> list[dict[str, Any]]:
    """The `cluster_findings` read (reads.py): each kind's findings over the cluster's
    computations, summed, the costliest kind first."""
    settings = config.findings_settings()
    labels: dict[str, str | None] = {}
    full = cluster_id  # the cluster's full id, as its computations' rows give it
    before = None
    while True:
        page = reader.list_computations(cluster_id, account=account, before=before, limit=PAGE)
        labels.update((c["computation_id"], c.get("label")) for c in page)
        full = page[0]["cluster_id"] if page else full
        if len(page) < PAGE:
            break
        before = page[-1]["cursor"]
    found: dict[str, list[dict]] = {}
    if hasattr(reader, "snapshot") and labels:
        # A Store: explain what is not kept yet, then read what is, in one query.
        from ..store import kept

        _explain_unkept(reader, {"cluster_id": full, "account": account}, settings)
        with reader.reading() as conn:
            for row in kept.of_cluster(conn, full):
                found.setdefault(row["computation_id"], []).append(row["body"])
    else:
        for computation_id in labels:
            found[computation_id] = explain(
                reader, computation_id, account=account, settings=settings
            )
    return summarise(found, labels)


def summarise(found: dict[str, list[dict]], labels: dict[str, str | None]) -> list[dict[str, Any]]:
    """Per kind: its computations, their impacts summed, the most costly first."""
    kinds: dict[str, dict[str, Any]] = {}
    for computation_id, findings in found.items():
        mine: dict[str, dict[str, Any]] = {}
        for f in findings:
            entry = mine.get(f["kind"])
            if entry is None:
                mine[f["kind"]] = {
                    "computation_id": computation_id,
                    "label": labels.get(computation_id),
                    "impact": f["impact"],
                    "title": f["title"],
                    "advice": f["advice"],
                    "why": f.get("why", ""),
                }
            else:  # a second finding of a kind (two stragglers): one computation
                entry["impact"] += f["impact"]
        for kind, entry in mine.items():
            k = kinds.setdefault(
                kind, {"kind": kind, "why": entry["why"], "n_computations": 0, "impact": 0.0}
            )
            k["n_computations"] += 1
            k["impact"] += entry["impact"]
            k.setdefault("all", []).append(entry)
    out = []
    for k in sorted(kinds.values(), key=lambda k: -k["impact"]):
        entries = sorted(k.pop("all"), key=lambda e: -e["impact"])
        k["advice"] = entries[0]["advice"]
        k["computations"] = [
            {key: e[key] for key in ("computation_id", "label", "impact", "title")}
            for e in entries[:TOP]
        ]
        out.append(k)
    return out
