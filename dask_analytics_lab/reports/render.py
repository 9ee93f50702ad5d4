"""A stored computation as a report: one self-contained page and its twin.

distributed's `performance_report` records what happens inside a `with` block, so it
cannot describe a computation that already ran.  The share button instead renders the
computation from the store: the monitor's own views (task groups, time breakdown, task
stream, profile flamegraph, code, cluster with its workers over time, GPU, findings)
over the stored rows, in one HTML file with its JavaScript inlined, plus the
machine-readable twin (the same rows as JSON); share.py stores them through
publish.py like any other performance report (the "Share report" buttons).

It honours the privacy switches of both this process's config and the cluster's
recorded settings: with code off it holds no snippet and no code line, with the
profile off no profile (an empty tree); `summary.recorded` says which were kept.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..display import WORKER_TOPICS, clean, gpu_series, label_of, stream_rows, worker_peaks
from ..findings import explain_from
from ..readers import open_reader
from ..store.dynamic_code import as_recorded
from .privacy import recorded_switches

# The views' bundle for a report page, built from js/ into the package's static folder.
REPORT_SCRIPT = Path(__file__).resolve().parent.parent / "static" / "report-page.js"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
<style>
  body {{ margin: 0; padding: 28px 20px 40px; background: #f3f4f6; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }}
  .wrap {{ max-width: 1280px; margin: 0 auto; }}
  h1 {{ font-size: 18px; font-weight: 650; margin: 0 0 4px; color: #1f2328; }}
  .sub {{ color: #59636e; font-size: 13px; margin-bottom: 16px; }}
  .foot {{ color: #8c959f; font-size: 12px; margin-top: 14px; }}
  #app .dal-side, #app .dal-pane {{ max-height: none; }}
</style></head>
<body><div class="wrap">
<h1>{title}</h1>
<div class="sub">{subtitle}</div>{links}
<div id="app"></div>
<div class="foot">Recorded by dask-analytics-lab; the data behind this page is its JSON twin
(this link with <code>.json</code> at the end).</div>
</div>
<script type="application/json" id="dal-state">{state}</script>
<script>{script}</script>
<script>{boot}</script>
</body></html>
"""
# The page's second script: the same on every page, so a policy can name it by its hash.
BOOT = """
  DaskAnalyticsReport.render(document.getElementById("app"),
    JSON.parse(document.getElementById("dal-state").textContent));
"""


@functools.cache
def _bundle() -> tuple[str, str]:
    """The views' bundle as the page inlines it, and the page's stylesheet."""
    script = REPORT_SCRIPT.read_text().replace("</script", "<\\/script")
    return script, (REPORT_SCRIPT.parent / "style.css").read_text()


def page_script_sources() -> str:
    """The page's two scripts as CSP sources ('sha256-...'): they are the same on every
    report page, so a page rendered once can be served to every reader under a policy
    that runs these and nothing else (a per-request nonce would need a render a request)."""
    return " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"
        for text in (_bundle()[0], BOOT)
    )


def _script_json(value: Any) -> str:
    # Inside <script>, "</script" would end the element early and "<!--" can make it swallow
    # what follows: no "<" at all (JSON reads \u003c as "<").
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def report_page(
    title: str,
    subtitle: str,
    state: dict,
    *,
    links: Sequence[tuple[str, str]] = (),
) -> str:
    """One self-contained report page: the views' bundle over `state`.  Every recorded
    string reaches the page as escaped text or inside the JSON state (which the views
    put in the DOM as text); its two scripts are page_script_sources(), for a policy
    that runs no other; `links` are (text, URL) shown under the title."""
    script, css = _bundle()
    shown = "".join(
        f' <a class="dal-report-link" href="{html.escape(url, quote=True)}">{html.escape(text)}</a>'
        for text, url in links
    )
    return PAGE.format(
        title=html.escape(title),
        subtitle=html.escape(subtitle),
        state=_script_json(state),
        css=css,
        script=script,
        boot=BOOT,
        links=f'<div class="sub">{shown}</div>' if shown else "",
    )


def computation_duration(row: dict, now: float) -> float | None:
    """Seconds it ran: to its stop; to `now` only while it runs (js/common/lifecycle.ts
    says the same for the views)."""
    start, stop = row.get("start"), row.get("stop")
    if not start:
        return None
    if stop and stop >= start:
        return stop - start
    if row.get("state") in (None, "running"):
        return max(now - start, 0.0)
    updated = row.get("updated")
    return updated - start if updated and updated >= start else None


WORKERS_MARGIN = 60.0  # seconds of worker samples kept either side of the computation
MAX_WORKER_POINTS = 300  # per worker

CODE_FIELDS = ("code", "code_line", "code_frames", "code_hashes")
# The collector bounds a computation's task stream (rows, then bins); this bounds a report.
STREAM_ROWS = 50_000
GPU_ROWS = 200_000  # GPU samples of the computation's window read (all GPUs), before thinning
WORKER_ROWS = 100_000  # worker samples of the window read, before thinning
GPU_POINTS = 600  # per GPU: about one per pixel of a chart
MAX_PREFIX_PROFILES = 50  # per-prefix profiles a report carries (the picker's choices)


def computation_report(computation_id: str, *, store: str | None = None) -> tuple[str, dict, dict]:
    """(html, twin, meta) of one stored computation."""
    from distributed import profile as dask_profile

    now = time.time()
    reader = open_reader(store)
    detail = clean(reader.get_computation(computation_id))
    groups = detail.pop("groups", None) or []
    metrics = detail.pop("metrics", None) or []
    cluster = clean(reader.get_cluster(detail["cluster_id"]))
    recorded = recorded_switches(cluster)
    code = (
        [c for c in (detail.pop("code", None) or []) if c.get("text")] if recorded["code"] else []
    )
    if not recorded["code"]:
        for field in CODE_FIELDS:
            detail.pop(field, None)
    exceptions = clean(reader.list_exceptions(computation_id=computation_id, limit=200))
    if not recorded["code"]:
        # A frame placed from a snippet carries its source line: code the report may not hold.
        exceptions = [as_recorded(e) for e in exceptions]
    profile = (
        reader.get_profile(computation_id=computation_id)
        if recorded["profile"]
        else dask_profile.create()
    )
    samples = [
        s
        for s in clean(reader.list_cluster_samples(detail["cluster_id"], limit=10_000))
        if detail["start"] - 5 <= s["time"] <= (detail.get("stop") or now) + 5
    ]
    # The flamegraph's group picker works offline: each prefix's profile travels with it.
    prefixes = (
        sorted({g.get("prefix") or g["name"] for g in groups})[:MAX_PREFIX_PROFILES]
        if recorded["profile"]
        else []
    )
    by_prefix = {p: reader.get_profile(computation_id=computation_id, prefix=p) for p in prefixes}
    by_prefix = {p: tree for p, tree in by_prefix.items() if tree.get("count")}
    stream = stream_rows(reader.list_task_stream(computation_id, limit=STREAM_ROWS))
    # The cluster's series are cut to the computation's window in the store: a report of
    # an early computation of a long-lived cluster reads its own stretch, not the newest.
    cid, end = detail["cluster_id"], detail.get("stop") or now
    gpu = clean(
        gpu_series(
            reader.list_gpu_metrics(
                cluster_id=cid, limit=GPU_ROWS, since=detail["start"] - 5, until=end + 5
            ),
            GPU_POINTS,
        )
    )
    # Each worker around the computation (the Cluster tab's Workers): a margin either side
    # shows the memory it started from and what became of the workers after.
    lo, hi = detail["start"] - WORKERS_MARGIN, end + WORKERS_MARGIN
    workers = worker_peaks(
        clean(reader.list_worker_samples(cid, limit=WORKER_ROWS, since=lo, until=hi)),
        MAX_WORKER_POINTS,
    )
    worker_events = sorted(
        (
            e
            for topic in WORKER_TOPICS
            for e in clean(
                reader.list_events(cluster_id=cid, topic=topic, limit=5000, since=lo, until=hi)
            )
        ),
        key=lambda e: e["time"],
    )
    label = detail.get("label") or label_of(groups) or computation_id
    row = dict(detail, label=label)
    # Made now, as the monitor makes them once a computation ends: a running one's record
    # is partial, so its report has none (the Findings tab then says it was still running).
    found = (
        None
        if detail.get("state") in (None, "running")
        else clean(explain_from(reader, computation_id))
    )
    state = {
        "title": cluster.get("name") or cluster["cluster_id"],
        "where": "",
        "snapshot_time": now,
        "cluster": cluster,
        "computation_id": computation_id,
        "follow": False,
        "tab": "groups",
        "computation": detail,
        "exceptions": exceptions,
        "code": code,
        "metrics": metrics,
        "stream_base": {"v": 0, "rows": stream},
        "profile": profile,
        "profile_title": label,
        "profiles": by_prefix,
        "profile_prefixes": sorted(by_prefix),
        "profile_prefix": "",
        "computations_base": {"v": 0, "rows": [row]},
        "groups_base": {"v": 0, "rows": groups},
        "samples_base": {"v": 0, "rows": samples},
        "gpu_base": {"v": 0, "rows": gpu},
        "workers_base": {"v": 0, "rows": workers},
        "worker_events": worker_events,
    }
    if found is not None:
        state["findings"] = {"computation_id": computation_id, "findings": found}
    duration = computation_duration(detail, now)
    title = f"{label} — Dask performance report"
    subtitle = (
        f"{cluster.get('name') or cluster['cluster_id']} · {detail.get('state')} · "
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(detail['start']))} · {'?' if duration is None else f'{duration:.1f}'} s · "
        f"{detail.get('n_tasks') or 0} tasks"
    )
    page = report_page(title, subtitle, state)
    twin = {
        "summary": {
            "computation_id": computation_id,
            "cluster_id": detail["cluster_id"],
            "label": label,
            "start": detail["start"],
            "stop": detail.get("stop"),
            "duration": duration,
            "state": detail.get("state"),
            "n_tasks": detail.get("n_tasks"),
            "n_erred": detail.get("n_erred"),
            "compute": detail.get("compute"),
            "transfer": detail.get("transfer"),
            "nbytes": detail.get("nbytes"),
            # Snippets come outermost first (the script, then the functions called): the
            # last is the one that called compute.
            "code": code[-1]["text"] if code else None,
            "recorded": recorded,
        },
        "computations": [detail],
        "task_groups": [dict(g, computation_id=computation_id) for g in groups],
        "task_stream": stream,
        "gpu": gpu,
        "metrics": metrics,
        "worker_samples": workers,
        "worker_events": worker_events,
        "exceptions": exceptions,
        "code": code,
        "cluster": cluster,
        "profile": profile,
        "profiles": by_prefix,
        "findings": found,
    }
    return page, twin, {"title": title, "label": label}
