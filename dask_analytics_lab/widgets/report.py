"""The "Share report" button's report: a stored computation as one self-contained page.

distributed's `performance_report` records what happens inside a `with` block, so it
cannot describe a computation that already ran.  The share button instead renders the
computation from the store: the monitor's own views (task groups, profile flamegraph,
code, cluster) over the stored rows, in one HTML file with its JavaScript inlined,
plus the machine-readable twin (the same rows as JSON), stored through
`dask_analytics_lab.reports.publish` like any other performance report.

It honours the privacy switches of both this process's config and the cluster's
recorded settings: with code off it holds no snippet and no code line, with the
profile off no profile (an empty tree); `summary.recorded` says which were kept.
"""
from __future__ import annotations

import html
import json
import time
from typing import Any

from .. import config

from .. import api
from ._base import STATIC
from ._feed import clean, label_of

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
<div class="sub">{subtitle}</div>
<div id="app"></div>
<div class="foot">Recorded by dask-analytics-lab; the data behind this page is its JSON twin
(this link with <code>.json</code> at the end).</div>
</div>
<script type="application/json" id="dal-state">{state}</script>
<script>{script}</script>
<script>
  DaskAnalyticsReport.render(document.getElementById("app"),
    JSON.parse(document.getElementById("dal-state").textContent));
</script>
</body></html>
"""


def _script_json(value: Any) -> str:
    # Inside <script>, "</" would end the element early.
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


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


CODE_FIELDS = ("code", "code_line", "code_frames", "code_hashes")


def recorded_switches(cluster: dict) -> dict[str, bool]:
    """What a report of this cluster may hold: code and profile each need this process's
    switch on and the cluster not to have recorded with it off."""
    from ..reports import privacy_switches

    settings = cluster.get("settings") if isinstance(cluster.get("settings"), dict) else {}
    mine = privacy_switches()
    return {"code": mine["code"] and settings.get("code_transmit") is not False,
            "profile": mine["profile"] and settings.get("profile_transmit") is not False}


def computation_report(computation_id: str, *, store: str | None = None) -> tuple[str, dict, dict]:
    """(html, twin, meta) of one stored computation."""
    from distributed import profile as dask_profile

    now = time.time()
    detail = clean(api.get_computation(computation_id, store=store))
    groups = detail.pop("groups", None) or []
    cluster = clean(api.get_cluster(detail["cluster_id"], store=store))
    recorded = recorded_switches(cluster)
    code = [c for c in (detail.pop("code", None) or []) if c.get("text")] if recorded["code"] else []
    if not recorded["code"]:
        for field in CODE_FIELDS:
            detail.pop(field, None)
    exceptions = clean(api.list_exceptions(computation_id=computation_id, limit=200, store=store))
    profile = (api.get_profile(computation_id=computation_id, store=store) if recorded["profile"]
               else dask_profile.create())
    samples = [s for s in clean(api.list_cluster_samples(detail["cluster_id"], store=store))
               if detail["start"] - 5 <= s["time"] <= (detail.get("stop") or now) + 5]
    label = detail.get("label") or label_of(groups) or computation_id
    row = dict(detail, label=label)
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
        "profile": profile,
        "profile_title": label,
        "computations_base": {"v": 0, "rows": [row]},
        "groups_base": {"v": 0, "rows": groups},
        "samples_base": {"v": 0, "rows": samples},
        "gpu_base": {"v": 0, "rows": []},
    }
    duration = computation_duration(detail, now)
    title = f"{label} — Dask performance report"
    subtitle = (f"{cluster.get('name') or cluster['cluster_id']} · {detail.get('state')} · "
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(detail['start']))} · {'?' if duration is None else f'{duration:.1f}'} s · "
                f"{detail.get('n_tasks') or 0} tasks")
    script = (STATIC / "report-page.js").read_text()
    css = (STATIC / "style.css").read_text()
    page = PAGE.format(title=html.escape(title), subtitle=html.escape(subtitle), state=_script_json(state),
                       css=css, script=script.replace("</script", "<\\/script"))
    twin = {
        "summary": {
            "computation_id": computation_id, "cluster_id": detail["cluster_id"], "label": label,
            "start": detail["start"], "stop": detail.get("stop"), "duration": duration,
            "state": detail.get("state"), "n_tasks": detail.get("n_tasks"), "n_erred": detail.get("n_erred"),
            "compute": detail.get("compute"), "transfer": detail.get("transfer"), "nbytes": detail.get("nbytes"),
            "code": code[0]["text"] if code else None,
            "recorded": recorded,
        },
        "computations": [detail],
        "task_groups": [dict(g, computation_id=computation_id) for g in groups],
        "task_stream": [],
        "exceptions": exceptions,
        "code": code,
        "cluster": cluster,
        "profile": profile,
    }
    return page, twin, {"title": title, "label": label}


def share_computation(computation_id: str, *, store: str | None = None, private: bool = False) -> dict:
    """Store a report of one computation; its row with "url", "id" and "local"
    (True when the store is embedded, so Jupyter's server extension serves the link)."""
    from ..reports import publish

    page, twin, meta = computation_report(computation_id, store=store)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in meta["label"])[:60].strip("-") or "computation"
    row = publish(page, twin, filename=f"dask-report-{safe}.html", private=private, title=meta["title"], store=store)
    url = store if store is not None else config.get("analytics.store")
    return dict(row, local=not str(url or "").startswith(("http://", "https://")))
