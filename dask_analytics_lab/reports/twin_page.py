"""A report's page from its JSON twin: the one place a report page's state is made.

Every report page goes through `twin_page`: the link the team server or the Jupyter
extension serves (from the stored twin), the Share button's stored page, its Download
HTML, and a `performance_report`'s page.  The same twin therefore shows the same tabs
with the same data everywhere: findings, the top finding's line, the comparison with
earlier runs of the same code, the cluster, the workers.

The twin is twin.py's (one kind, `"v": 2`).  Twins stored by earlier releases are read
too: a Share twin of one computation (the same rows, without "v"), and a
`performance_report` twin made on the scheduler (summary.time_per_action, a task
stream of raw start/stop intervals), shown from what it holds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from dask.utils import key_split

from .shell import report_page
from .twin import computation_duration


def _rows(value: Any) -> list:
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _legacy_performance_report(twin: dict, title: str) -> dict:
    """A `performance_report` twin of an earlier release (made on the scheduler) as a
    twin.py twin: the block as one computation, compute intervals as the stream."""
    summary = _dict(twin.get("summary"))
    groups = _rows(twin.get("task_groups"))
    spent = _dict(summary.get("time_per_action"))
    erred = sum(g.get("n_erred") or 0 for g in groups)
    block = {
        "computation_id": "report",
        "label": title,
        "start": summary.get("start"),
        "stop": summary.get("stop"),
        "state": "erred" if erred else "finished",
        "n_tasks": summary.get("n_tasks"),
        "n_erred": erred,
        "compute": spent.get("compute"),
        "transfer": spent.get("transfer"),
    }
    stream = [
        {
            "id": i,
            "computation_id": "report",
            "start": r.get("start"),
            "stop": r.get("stop"),
            "worker": r.get("worker"),
            "thread": r.get("thread"),
            "prefix": key_split(r.get("key") or ""),
            "state": "erred" if r.get("status") == "error" else "memory",
            "n_tasks": 1,
            "busy": None,
            "binned": False,
        }
        for i, r in enumerate(_rows(twin.get("task_stream")))
        if r.get("action") == "compute"
    ]
    cluster_id = summary.get("cluster_id")
    return {
        "summary": dict(summary, computation_id="report", label=title, state=block["state"]),
        "cluster": {"cluster_id": cluster_id, "name": cluster_id} if cluster_id else None,
        "computations": [block],
        "task_groups": [dict(g, computation_id="report") for g in groups],
        "task_stream": stream,
        "profile": _dict(twin.get("profile")),
        "profiles": {},
        # Made on the scheduler, before findings existed: none to show, and the page says so.
        "findings": None,
    }


def current(twin: dict, meta: dict | None = None) -> dict:
    """`twin` in twin.py's form (see the module's doc for the earlier forms)."""
    if twin.get("v") is not None:
        return twin
    summary = _dict(twin.get("summary"))
    if "time_per_action" in summary or not isinstance(twin.get("cluster"), dict):
        meta = meta or {}
        title = meta.get("title") or meta.get("filename") or "Dask performance report"
        return _legacy_performance_report(twin, title)
    return twin


def _of(rows: list[dict], cid: str | None, only: bool) -> list[dict]:
    """The rows of computation `cid`; an earlier twin's rows carry no id: all of the one."""
    return [r for r in rows if r.get("computation_id", cid if only else None) == cid]


def _views(twin: dict, detail: dict, only: bool) -> dict:
    """The views' traits for one computation of the twin."""
    cid = detail.get("computation_id")
    summary = _dict(twin.get("summary"))
    main = cid == summary.get("computation_id") or only
    own = twin if main else _dict(_dict(twin.get("by_computation")).get(cid))
    profiles = _dict(own.get("profiles"))
    groups = [
        {k: v for k, v in g.items() if k != "computation_id"}
        for g in _of(_rows(twin.get("task_groups")), cid, only)
    ]
    hashes = detail.get("code_hashes")
    code = _rows(twin.get("code"))
    if isinstance(hashes, list) and hashes:
        code = [c for c in code if c.get("hash") in hashes] or code
    if not code and isinstance(summary.get("code"), str):
        # A performance_report's block, where the store kept no snippet: where it is when
        # the report knows, else named as the block, read from its first line.
        frame = _dict(summary.get("frame"))
        code = [
            {
                "hash": "block",
                "text": summary["code"],
                "filename": frame.get("filename") or "the report's block",
                "lineno_frame": frame.get("lineno_frame") or 1,
                "lineno_relative": frame.get("lineno_relative") if frame else None,
            }
        ]
    views: dict[str, Any] = {
        "computation_id": cid,
        "computation": detail,
        "exceptions": _of(_rows(twin.get("exceptions")), cid, only),
        "code": code,
        "metrics": _rows(own.get("metrics")),
        "stream_base": {"v": 0, "rows": _of(_rows(twin.get("task_stream")), cid, only)},
        "groups_base": {"v": 0, "rows": groups},
        "profile": _dict(own.get("profile")),
        "profile_title": detail.get("label") or cid,
        "profiles": profiles,
        "profile_prefixes": sorted(profiles),
        "profile_prefix": "",
        "runs": _dict(own.get("runs")),
    }
    found = own.get("findings")
    if isinstance(found, list):
        views["findings"] = {"computation_id": cid, "findings": found}
    return views


def twin_state(twin: dict, meta: dict | None = None) -> dict:
    """The report page's state (the monitor's traits, frozen) from a twin and its row
    (title, filename, created): the one function every report page's state comes from."""
    meta = meta or {}
    twin = current(twin if isinstance(twin, dict) else {}, meta)
    summary = _dict(twin.get("summary"))
    snapshot = summary.get("made") or meta.get("created") or time.time()
    cluster = _dict(twin.get("cluster"))
    details = _rows(twin.get("computations"))
    only = len(details) == 1
    main = next(
        (d for d in details if d.get("computation_id") == summary.get("computation_id")),
        details[0] if details else {},
    )
    per = {d["computation_id"]: _views(twin, d, only) for d in details if d.get("computation_id")}
    rows = [dict(d, label=d.get("label") or d.get("computation_id")) for d in details]
    state: dict[str, Any] = {
        "title": cluster.get("name") or cluster.get("cluster_id") or "",
        "where": "",
        "snapshot_time": snapshot,
        "cluster": cluster,
        "follow": False,
        "tab": "groups",
        "computations_base": {"v": 0, "rows": rows},
        "samples_base": {"v": 0, "rows": _rows(twin.get("samples"))},
        "gpu_base": {"v": 0, "rows": _rows(twin.get("gpu"))},
        "workers_base": {"v": 0, "rows": _rows(twin.get("worker_samples"))},
        "worker_events": _rows(twin.get("worker_events")),
        "computation_id": None,
        "computation": {},
        "exceptions": [],
        "code": [],
        "metrics": [],
        "stream_base": {"v": 0, "rows": []},
        "groups_base": {"v": 0, "rows": []},
        "profile": {},
        "profile_title": "",
        "profiles": {},
        "profile_prefixes": [],
        "profile_prefix": "",
        "runs": {},
        # For js/report/page.ts: each other computation's own traits, applied when it is
        # chosen; whether the report holds a cluster record; a block's code.
        "report": {
            "computations": per,
            "has_record": bool(cluster.get("cluster_id")),
            "block_code": summary.get("code") if isinstance(summary.get("code"), str) else None,
        },
    }
    if main.get("computation_id") in per:
        # Shown first, so its traits are the state's own: not carried twice (page.ts takes
        # them back from the state when it is chosen again).
        state.update(per.pop(main["computation_id"]))
    return state


def _subtitle(twin: dict, state: dict) -> str:
    summary = _dict(current(twin).get("summary"))
    cluster = state["cluster"]
    comp = state["computation"]
    start = summary.get("start") or comp.get("start")
    duration = summary.get("duration")
    if duration is None and comp:
        duration = computation_duration(comp, state["snapshot_time"])
    n = len(state["computations_base"]["rows"])
    parts = [
        cluster.get("name") or cluster.get("cluster_id") or "no cluster record",
        summary.get("state") or comp.get("state") or "",
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start)) if start else "",
        "" if duration is None else f"{duration:.1f} s",
        f"{int(summary.get('n_tasks') or comp.get('n_tasks') or 0)} tasks",
        f"{n} computations" if n > 1 else "",
    ]
    return " · ".join(p for p in parts if p)


def page_title(twin: dict, meta: dict | None = None) -> str:
    """The page's title: the stored row's, else from the twin's main computation, else
    the report's file name (an earlier release's twin names no computation)."""
    meta = meta or {}
    if meta.get("title"):
        return str(meta["title"])
    label = _dict(twin.get("summary")).get("label") if twin.get("v") is not None else None
    if label:
        return f"{label} — Dask performance report"
    return str(meta.get("filename") or "Dask performance report")


def twin_report_page(
    twin: dict, meta: dict | None = None, *, links: Sequence[tuple[str, str]] = ()
) -> str:
    """The whole page of a report, from its twin (see the module's doc)."""
    twin = twin if isinstance(twin, dict) else {}
    state = twin_state(twin, meta)
    return report_page(page_title(twin, meta), _subtitle(twin, state), state, links=links)
