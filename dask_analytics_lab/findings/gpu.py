"""Rules read from the GPU samples a Monitor recorded: gpu-underused.

A sample belongs to the computation running when it was taken (its `job`, or one of its
`jobs`), also when its workers ran no task then; such a sample says what they waited on
(`waiting`: inputs, memory, nothing).  A GPU is (host, uuid): workers that share one
make one series of rows (collect/gpu_monitor.py), so nothing here counts a GPU twice.
"""

from __future__ import annotations

import statistics

from .finding import finding, secs, short
from .record import Record

# The cause each kind of sample points to, and what to change for it.
_INPUTS, _MEMORY, _NOTHING, _HOST = "inputs", "memory", "nothing", "host"
_CAUSES = {
    _INPUTS: (
        "its workers waited for inputs",
        "Keep the data with the GPU that uses it: make or load the inputs on the GPU "
        "workers (e.g. a CuPy-backed dask.array built there) and persist them where "
        "they are used; use larger chunks so each transfer carries more compute; between "
        "GPUs, use dask-cuda with UCX (NVLink) rather than TCP",
    ),
    _MEMORY: (
        "its workers were paused for memory",
        "Give the GPU workers more host memory or use smaller chunks, so they are not "
        "paused over `distributed.worker.memory.pause`",
    ),
    _NOTHING: (
        "too few tasks per GPU: its workers had nothing to run",
        "Give each GPU more work at once: more partitions than GPUs (several tasks queued "
        "per GPU worker), or fewer GPU workers for this computation",
    ),
    _HOST: (
        "its tasks ran host-side work (the GPU idled while they ran)",
        "Move the host-side work of the task onto the GPU (CuPy/cuDF instead of "
        "NumPy/pandas inside it, no .get()/.to_numpy() round trips or Python loops per "
        "element), or give each task larger kernels",
    ),
}


def _of(row: dict, cid: str) -> bool:
    if row.get("job") == cid:
        return True
    return any(pair and pair[0] == cid for pair in row.get("jobs") or ())


def gpu_underused(rec: Record) -> list[dict]:
    """gpu-underused: GPU tasks ran (task groups on a GPU's workers in its samples of this
    computation) while that GPU's compute utilisation, averaged over the computation's
    samples of it, stayed under `gpu-low-util` percent.  The cause is what most of its
    low samples show: workers waiting for inputs, paused for memory, or with nothing to
    run (too few tasks per GPU), or tasks running while the GPU idled (host-side work).

    Impact: the GPU's time in the computation (its samples times their spacing) times
    the share of it left unused (1 - utilisation); the worst GPU's (GPUs run side by
    side), at most the wall time."""
    cid = rec.comp["computation_id"]
    low = float(rec.settings.get("gpu_low_util", 30))
    by_gpu: dict[tuple, list[dict]] = {}
    for r in rec.gpu:
        if r.get("compute_util") is not None and _of(r, cid):
            by_gpu.setdefault((r.get("host"), r.get("gpu_uuid")), []).append(r)
    hits = []
    for (host, uuid), rows in by_gpu.items():
        groups = sorted({g for r in rows for g in r.get("task_groups") or ()})
        if not groups or len(rows) < 3:
            continue
        util = statistics.fmean(float(r["compute_util"]) for r in rows)
        if util >= low:
            continue
        rows.sort(key=lambda r: r["time"])
        gaps = [b["time"] - a["time"] for a, b in zip(rows, rows[1:]) if b["time"] > a["time"]]
        step = statistics.median(gaps) if gaps else 0.0
        seconds = min(len(rows) * step, rec.wall)
        lost = seconds * (1 - util / 100)
        hits.append((lost, util, seconds, host, uuid, rows, groups))
    if not hits:
        return []
    hits.sort(key=lambda h: -h[0])
    lost, util, seconds, host, uuid, rows, groups = hits[0]
    # What the low samples say: no task on its workers (and what they waited on), or
    # tasks running on an idle GPU.
    idle = [r for r in rows if float(r["compute_util"]) < low]
    counts = {
        _INPUTS: sum(1 for r in idle if not r.get("task_groups") and r.get("waiting") == _INPUTS),
        _MEMORY: sum(1 for r in idle if not r.get("task_groups") and r.get("waiting") == _MEMORY),
        _NOTHING: sum(
            1 for r in idle if not r.get("task_groups") and r.get("waiting") in (_NOTHING, None)
        ),
        _HOST: sum(1 for r in idle if r.get("task_groups")),
    }
    cause = max(counts, key=lambda k: counts[k])
    why, advice = _CAUSES[cause]
    n_idle = max(1, len(idle))
    shares = ", ".join(
        f"{label} {counts[k] / n_idle:.0%}"
        for k, label in (
            (_INPUTS, "waiting for inputs"),
            (_MEMORY, "paused for memory"),
            (_NOTHING, "nothing to run"),
            (_HOST, "tasks running"),
        )
        if counts[k]
    )
    sharers = sorted({w for r in rows for w in r.get("shared_by") or ()})
    transfer = sum(g.get("transfer") or 0.0 for g in rec.groups if g["name"] in groups)
    compute = sum(g.get("compute") or 0.0 for g in rec.groups if g["name"] in groups)
    evidence = (
        f"GPU {uuid} on {host}"
        + (f" (shared by {', '.join(sharers)})" if sharers else "")
        + f": compute utilisation averaged {util:.0f}% over {len(rows)} samples "
        f"({secs(seconds)}) while {short(groups)} ran on its workers (GPU samples); of the "
        f"samples under {low:.0f}%: {shares}"
        + (
            f"; the groups spent {secs(transfer)} fetching inputs against {secs(compute)} of "
            "compute (task groups)"
            if transfer or compute
            else ""
        )
        + (f"; {len(hits)} GPUs were under {low:.0f}%" if len(hits) > 1 else "")
        + ". Impact: its time in the computation times the share left unused"
    )
    return [
        finding(
            "gpu-underused",
            f"GPU {uuid} sat mostly idle: {why}",
            evidence,
            advice,
            min(lost, rec.wall),
            groups=groups,
            workers=sharers or sorted({r["worker"] for r in rows if r.get("worker")}),
        )
    ]
