"""A report's JSON twin, made from the store's rows: the one kind of twin every report
holds, whoever made it (the Share buttons, the team server's share endpoint,
`performance_report`).  Its page is made from it by twin_page.py, wherever it renders.

    build_twin(reader, computation_ids, account=None, block=None) -> twin

reader: a Store (a team server's own, with `account` the caller's scope) or whatever
readers.open_reader gave (an embedded Store, an HttpReader).  block: what a
`performance_report` knows of its `with` block that the store does not ({"start",
"stop", "code", "frame"}); without it the twin covers the computations given.

A twin: {"v": 2, "summary": {...}, "cluster": row or None, "computations": [rows],
"task_groups", "task_stream", "exceptions" (each row with its computation_id),
"code" (snippets), "samples", "gpu", "worker_samples",
"worker_events" (the cluster's, over the computations' window), and of the main
computation (summary.computation_id) "profile", "profiles" (per task prefix),
"findings" (None while it ran), "runs" (against earlier runs of its code),
"metrics" (its fine performance metrics); the other computations' own under
"by_computation": {id: {"profile", "profiles", "findings", "runs", "metrics"}}}.

It honours the privacy switches of this process and of the cluster's recorded
settings (privacy.recorded_switches): with code off no snippet and no code line, with
the profile off empty trees; `summary.recorded` says which were kept.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..display import WORKER_TOPICS, clean, gpu_series, label_of, stream_rows, worker_peaks
from .privacy import privacy_switches, recorded_switches

TWIN_VERSION = 2
WORKERS_MARGIN = 60.0  # seconds of worker samples kept either side of the computations
MAX_WORKER_POINTS = 300  # per worker
CODE_FIELDS = ("code", "code_line", "code_frames", "code_hashes")
# The collector bounds a computation's task stream (rows, then bins); this bounds a report
# (the rows of all its computations together, each at least MIN_STREAM_ROWS).
STREAM_ROWS = 50_000
MIN_STREAM_ROWS = 1_000
GPU_ROWS = 200_000  # GPU samples of the window read (all GPUs), before thinning
WORKER_ROWS = 100_000  # worker samples of the window read, before thinning
GPU_POINTS = 600  # per GPU: about one per pixel of a chart
MAX_PREFIX_PROFILES = 50  # per-prefix profiles a report carries (the picker's choices)
MAX_COMPUTATIONS = 50  # computations one performance report's window carries


def computation_duration(row: dict, now: float) -> float | None:
    """Seconds it ran: to its stop; to `now` only while it runs (js/common/lifecycle.ts
    says the same for the views)."""
    start, stop = row.get("start"), row.get("stop")
    if not start:
        return None
    if stop and stop >= start:
        return float(stop - start)
    if row.get("state") in (None, "running"):
        return max(now - start, 0.0)
    updated = row.get("updated")
    return float(updated - start) if updated and updated >= start else None


class _Reads:
    """The reader's calls, confined to `account` when one is given (a team server reads
    its own Store for a caller, in the caller's scope only)."""

    def __init__(self, reader: Any, account: str | None):
        self.reader = reader
        self.scope = {} if account is None else {"account": account}
        self.account = account

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.reader, name)(*args, **kwargs, **self.scope)

    def findings(self, computation_id: str) -> list[dict]:
        if hasattr(self.reader, "explain"):  # a Store computes them, a server itself
            found: list[dict] = self("explain", computation_id)
            return found
        from ..findings import explain

        return explain(self.reader, computation_id, account=self.account)


def _computation(reads: _Reads, computation_id: str, recorded: dict, stream_rows_most: int) -> dict:
    """One computation's own rows: {"detail", "groups", "metrics", "code", "exceptions",
    "stream", "profile", "profiles", "findings", "runs"}."""
    from distributed import profile as dask_profile

    from ..store.dynamic_code import as_recorded

    detail = clean(reads("get_computation", computation_id))
    groups = detail.pop("groups", None) or []
    metrics = detail.pop("metrics", None) or []
    code = (
        [c for c in (detail.pop("code", None) or []) if c.get("text")] if recorded["code"] else []
    )
    if not recorded["code"]:
        for field in CODE_FIELDS:
            detail.pop(field, None)
    exceptions = clean(reads("list_exceptions", computation_id=computation_id, limit=200))
    if not recorded["code"]:
        # A frame placed from a snippet carries its source line: code the report may not hold.
        exceptions = [as_recorded(e) for e in exceptions]
    profile = (
        reads("get_profile", computation_id=computation_id)
        if recorded["profile"]
        else dask_profile.create()
    )
    # The flamegraph's group picker works offline: each prefix's profile travels with it.
    prefixes = (
        sorted({g.get("prefix") or g["name"] for g in groups})[:MAX_PREFIX_PROFILES]
        if recorded["profile"]
        else []
    )
    by_prefix = {p: reads("get_profile", computation_id=computation_id, prefix=p) for p in prefixes}
    stream = stream_rows(reads("list_task_stream", computation_id, limit=stream_rows_most))
    ended = detail.get("state") not in (None, "running")
    # Made now, as the monitor makes them once a computation ends: a running one's record
    # is partial, so its report has none (the Findings tab then says it was still running).
    found = clean(reads.findings(computation_id)) if ended else None
    runs = clean(reads("run_summary", computation_id)) if ended else {}
    label = detail.get("label") or label_of(groups) or computation_id
    return {
        "detail": dict(detail, label=label),
        "groups": [dict(g, computation_id=computation_id) for g in groups],
        "metrics": metrics,
        "code": code,
        "exceptions": [dict(e, computation_id=computation_id) for e in exceptions],
        "stream": [dict(r, computation_id=computation_id) for r in stream],
        "profile": profile,
        "profiles": {p: tree for p, tree in by_prefix.items() if tree.get("count")},
        "findings": found,
        "runs": dict(runs, computation_id=computation_id) if runs else {},
    }


def _wall(part: dict, now: float) -> float:
    return computation_duration(part["detail"], now) or 0.0


def _cluster_rows(reads: _Reads, cluster_id: str, lo: float, hi: float) -> dict:
    """The cluster's series over [lo, hi], cut in the store: a report of an early
    computation of a long-lived cluster reads its own stretch, not the newest."""
    samples = [
        s
        for s in clean(reads("list_cluster_samples", cluster_id, limit=10_000))
        if lo - 5 <= s["time"] <= hi + 5
    ]
    gpu = clean(
        gpu_series(
            reads(
                "list_gpu_metrics",
                cluster_id=cluster_id,
                limit=GPU_ROWS,
                since=lo - 5,
                until=hi + 5,
            ),
            GPU_POINTS,
        )
    )
    # Each worker around the computations (the Cluster tab's Workers): a margin either side
    # shows the memory it started from and what became of the workers after.
    wlo, whi = lo - WORKERS_MARGIN, hi + WORKERS_MARGIN
    workers = worker_peaks(
        clean(reads("list_worker_samples", cluster_id, limit=WORKER_ROWS, since=wlo, until=whi)),
        MAX_WORKER_POINTS,
    )
    events = sorted(
        (
            e
            for topic in WORKER_TOPICS
            for e in clean(
                reads(
                    "list_events",
                    cluster_id=cluster_id,
                    topic=topic,
                    limit=5000,
                    since=wlo,
                    until=whi,
                )
            )
        ),
        key=lambda e: e["time"],
    )
    return {"samples": samples, "gpu": gpu, "worker_samples": workers, "worker_events": events}


def _summed(parts: list[dict], key: str) -> float | None:
    values = [p["detail"].get(key) for p in parts if p["detail"].get(key) is not None]
    return sum(values) if values else None


def build_twin(
    reader: Any,
    computation_ids: Sequence[str],
    *,
    account: str | None = None,
    block: dict | None = None,
    cluster_id: str | None = None,
    now: float | None = None,
) -> dict:
    """The twin of `computation_ids` (of one cluster), from the store's rows (see the
    module's doc).  cluster_id: the cluster of a performance report's block, for a
    block that ran no computation the store kept.  Raises store_errors.NotFound for an
    id the reader does not see."""
    now = time.time() if now is None else now
    reads = _Reads(reader, account)
    ids = list(dict.fromkeys(computation_ids))[:MAX_COMPUTATIONS]
    cluster = None
    if ids:
        first = clean(reads("get_computation", ids[0]))
        cluster_id = first["cluster_id"]
    if cluster_id is not None:
        cluster = clean(reads("get_cluster", cluster_id))
    recorded = recorded_switches(cluster) if cluster is not None else privacy_switches()
    # A window of many computations shares one bound on task stream rows (the twin's size).
    most = max(STREAM_ROWS // max(len(ids), 1), MIN_STREAM_ROWS)
    parts = [_computation(reads, cid, recorded, most) for cid in ids]
    parts.sort(key=lambda p: p["detail"].get("start") or 0)
    # The computation a reader is shown first: the one that took longest.
    main = max(parts, key=lambda p: _wall(p, now), default=None)
    details = [p["detail"] for p in parts]
    block = block or {}
    start = block.get("start") or min((d["start"] for d in details if d.get("start")), default=None)
    stop = block.get("stop") or max(
        ((d.get("stop") or now) for d in details if d.get("start")), default=None
    )
    series = (
        _cluster_rows(reads, cluster_id, start or now, stop or now)
        if cluster is not None and cluster_id is not None
        else {"samples": [], "gpu": [], "worker_samples": [], "worker_events": []}
    )
    snippets: dict[Any, dict] = {}
    for p in parts:
        for c in p["code"]:
            snippets.setdefault(c.get("hash") or c.get("text"), c)
    code = list(snippets.values())
    block_code = block.get("code") if recorded["code"] else None
    states = {d.get("state") for d in details}
    state = main["detail"].get("state") if main is not None else None
    if len(details) > 1:  # a window: an erred or running one says what the window was
        state = next((s for s in ("erred", "running") if s in states), state)
    summary = {
        "computation_id": main["detail"]["computation_id"] if main else None,
        "computation_ids": [d["computation_id"] for d in details],
        "cluster_id": cluster_id,
        "label": main["detail"]["label"] if main else None,
        "start": start,
        "stop": stop,
        "duration": (stop - start)
        if block and start and stop
        else computation_duration(main["detail"], now)
        if main
        else None,
        "state": state,
        "n_tasks": _summed(parts, "n_tasks"),
        "n_erred": _summed(parts, "n_erred"),
        "compute": _summed(parts, "compute"),
        "transfer": _summed(parts, "transfer"),
        "nbytes": _summed(parts, "nbytes"),
        "n_workers": (cluster or {}).get("n_workers"),
        # The block's own code when there is one; else the snippet that called compute
        # (they come outermost first: the script, then the functions called).
        "code": block_code if block_code is not None else (code[-1]["text"] if code else None),
        "recorded": dict(recorded),
        "made": now,
        "block": bool(block),
    }
    if block.get("frame") and recorded["code"]:
        summary["frame"] = block["frame"]
    twin: dict[str, Any] = {
        "v": TWIN_VERSION,
        "summary": summary,
        "cluster": cluster,
        "computations": details,
        "task_groups": [g for p in parts for g in p["groups"]],
        "task_stream": [r for p in parts for r in p["stream"]],
        "metrics": main["metrics"] if main else [],
        "exceptions": [e for p in parts for e in p["exceptions"]],
        "code": code,
        **series,
        "profile": main["profile"] if main else _empty_profile(),
        "profiles": main["profiles"] if main else {},
        "findings": main["findings"] if main else None,
        "runs": main["runs"] if main else {},
        "by_computation": {
            p["detail"]["computation_id"]: {
                k: p[k] for k in ("profile", "profiles", "findings", "runs", "metrics")
            }
            for p in parts
            if p is not main
        },
    }
    return twin


def _empty_profile() -> dict:
    from distributed import profile as dask_profile

    return dask_profile.create()
