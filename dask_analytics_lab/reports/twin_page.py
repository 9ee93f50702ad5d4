"""A stored report's page, rendered from its JSON twin: the page the team server shows
on its own origin instead of the uploaded HTML (which is whatever its uploader sent).

Two kinds of twin are stored: the Share button's (render.py: the views' rows of one
stored computation, its cluster, profiles ...) and `performance_report`'s (record.py:
summary, task groups, task stream, profile of what ran inside the block).  Both become
the state the report page's views take (render.report_page); only what the twin holds
is shown (a performance report's twin has no worker samples, so no such charts).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from dask.utils import key_split

from .render import report_page


def _rows(value: Any) -> list:
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _share_state(twin: dict, snapshot: float) -> dict:
    summary = _dict(twin.get("summary"))
    [detail, *_] = _rows(twin.get("computations")) or [{}]
    label = summary.get("label") or detail.get("label") or summary.get("computation_id") or ""
    profiles = _dict(twin.get("profiles"))
    return {
        "cluster": _dict(twin.get("cluster")),
        "computation": detail,
        "computation_id": summary.get("computation_id") or detail.get("computation_id"),
        "computations": [dict(detail, label=label)],
        "groups": [
            {k: v for k, v in g.items() if k != "computation_id"}
            for g in _rows(twin.get("task_groups"))
        ],
        "stream": _rows(twin.get("task_stream")),
        "label": label,
        "profiles": profiles,
        "exceptions": _rows(twin.get("exceptions")),
        "code": _rows(twin.get("code")),
        "metrics": _rows(twin.get("metrics")),
        "gpu": _rows(twin.get("gpu")),
        "workers": _rows(twin.get("worker_samples")),
        "worker_events": _rows(twin.get("worker_events")),
    }


def _performance_report_state(twin: dict, title: str) -> dict:
    """distributed's performance report covers a `with` block: one row for the block."""
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
    # Only compute intervals, as the collector records them (collect/task_stream.py).
    stream = [
        {
            "id": i,
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
    code = summary.get("code")
    return {
        "cluster": {"name": title},
        "computation": block,
        "computation_id": "report",
        "computations": [block],
        "groups": [{k: v for k, v in g.items() if k != "computation_id"} for g in groups],
        "stream": stream,
        "label": title,
        "profiles": {},
        "exceptions": [],
        "metrics": [],
        "gpu": [],
        "workers": [],
        "worker_events": [],
        "code": [{"hash": "report", "text": code, "filename": "", "lineno_frame": None}]
        if isinstance(code, str)
        else [],
    }


def twin_state(twin: dict, meta: dict) -> dict:
    """The report page's state from a stored twin and its row (title, created)."""
    title = meta.get("title") or meta.get("filename") or "Dask performance report"
    snapshot = meta.get("created") or time.time()
    share = isinstance(twin.get("cluster"), dict) and "computation_id" in _dict(twin.get("summary"))
    parts = _share_state(twin, snapshot) if share else _performance_report_state(twin, title)
    profile = _dict(twin.get("profile"))
    return {
        "title": title,
        "where": "",
        "snapshot_time": snapshot,
        "cluster": parts["cluster"],
        "computation_id": parts["computation_id"],
        "follow": False,
        "tab": "groups",
        "computation": parts["computation"],
        "exceptions": parts["exceptions"],
        "code": parts["code"],
        "metrics": parts["metrics"],
        "stream_base": {"v": 0, "rows": parts["stream"]},
        "profile": profile,
        "profile_title": parts["label"],
        "profiles": parts["profiles"],
        "profile_prefixes": sorted(parts["profiles"]),
        "profile_prefix": "",
        "computations_base": {"v": 0, "rows": parts["computations"]},
        "groups_base": {"v": 0, "rows": parts["groups"]},
        "samples_base": {"v": 0, "rows": []},
        "gpu_base": {"v": 0, "rows": parts["gpu"]},
        "workers_base": {"v": 0, "rows": parts["workers"]},
        "worker_events": parts["worker_events"],
    }


def twin_report_page(twin: dict, meta: dict, *, links: Sequence[tuple[str, str]] = ()) -> str:
    """The whole page of a stored report, from its twin (see the module's doc)."""
    state = twin_state(twin, meta)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state["snapshot_time"]))
    subtitle = f"{meta.get('filename') or 'report'} · stored {when}"
    return report_page(state["title"], subtitle, state, links=links)
