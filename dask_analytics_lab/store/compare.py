"""Runs of the same code, and what changed between two of them.

Most Dask work is the same job run again: a nightly ETL, a notebook re-run, a sweep.
Computations made by the same line share a fingerprint whatever their size (without
the line: the same task prefixes, less the stages of tree reductions; see
messages.fingerprint); `list_runs` lists them and `compare` sets one against a
baseline, the latest earlier finished run by default, from any cluster the reader may
see.  A run at another size is no regression: `compare` says when the two runs' inputs
differ (their input task groups' tasks and bytes), and when they share no task prefix.

Figures per run and per task prefix: wall time, compute (seconds of task execution),
transfer, disk, bytes and tasks.  A run's cost is its compute time priced at its
cluster's price per core-hour: the part of the cluster's bill this run kept busy.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ..figures import duration, format_bytes
from ..store_errors import NotFound
from . import schema as s
from .queries import _clock, _computation_row, _in_account, _limit, _mark_lost, _rows

# Figures kept per run and per prefix, summed over a prefix's groups.
FIGURES = ("compute", "transfer", "disk", "nbytes", "n_tasks", "n_erred")

# A change counts as one when the figure moved by this factor either way...
NOTABLE = 1.5
# ...and by at least this much (seconds, or bytes for nbytes): noise on tiny groups is not news.
FLOOR = {"compute": 0.5, "wall": 0.5, "transfer": 0.5, "disk": 0.5, "nbytes": 64 * 2**20}
# Inputs differ when their tasks differ, or their bytes by more than this factor: Dask
# sizes object columns from a random sample, so the same input can read a few percent apart.
INPUT_BYTES = 1.1
# The views' "vs previous" shows no ratio for a prefix under this much compute time in both
# runs (seconds): 4 ms against 1 ms reads "4.0x slower" and means nothing.
VS_MIN_COMPUTE = 0.1


def _ratio(before: float | None, after: float | None) -> float | None:
    if before is None or after is None or before <= 0:
        return None
    return after / before


def _wall(row: dict[str, Any]) -> float | None:
    if row.get("start") is None or row.get("stop") is None:
        return None
    wall: float = max(0.0, row["stop"] - row["start"])
    return wall


def _prices(conn: sa.Connection, cluster_ids: set[str]) -> dict[str, dict[str, Any]]:
    c = s.clusters.c
    q = sa.select(c.cluster_id, c.name, c.price_per_core_hour).where(
        c.cluster_id.in_(sorted(cluster_ids))
    )
    return {r.cluster_id: {"name": r.name, "price": r.price_per_core_hour} for r in conn.execute(q)}


def _run(row: dict[str, Any], cluster: dict[str, Any] | None) -> dict[str, Any]:
    price = (cluster or {}).get("price")
    compute = row.get("compute") or 0.0
    return {
        "computation_id": row["computation_id"],
        "cluster_id": row["cluster_id"],
        "cluster_name": (cluster or {}).get("name"),
        "label": row.get("label"),
        "state": row["state"],
        "start": row["start"],
        "stop": row.get("stop"),
        "wall": _wall(row),
        **{k: row.get(k) for k in FIGURES if k != "n_erred"},
        "n_erred": row.get("n_erred"),
        "cost": None if price is None else compute / 3600 * price,
    }


class NoFingerprint(NotFound):
    """The computation's earlier runs cannot be found: it has no fingerprint."""


def _fingerprint_of(comp: dict[str, Any]) -> str:
    if not comp.get("fingerprint"):
        raise NoFingerprint(
            f"computation {comp['computation_id']!r} was recorded without a fingerprint (by a release "
            "before 0.2, or it has not reported its code yet), so its earlier runs cannot be found; "
            "pass baseline= (dask-analytics compare ID --baseline OTHER_ID)"
        )
    fingerprint: str = comp["fingerprint"]
    return fingerprint


def list_runs(
    conn: sa.Connection,
    computation_id: str,
    *,
    account: str | None = None,
    limit: int | None = 100,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """Every run of this computation's code the reader may see, newest first, each with
    its wall time, figures and cost (None where its cluster has no price). A computation
    without a fingerprint has one run: itself."""
    comp = _computation_row(conn, computation_id, account)
    c = s.computations
    if comp.get("fingerprint"):
        q = (
            sa.select(c)
            .where(c.c.fingerprint == comp["fingerprint"], _in_account(c, account))
            .order_by(c.c.start.desc(), c.c.computation_id.desc())
            .limit(_limit(limit))
        )
        rows = _rows(conn.execute(q))
    else:  # recorded before fingerprints: the one run of its code we can name is itself
        rows = [comp]
    rows = _mark_lost(conn, rows, _clock(now))
    clusters = _prices(conn, {r["cluster_id"] for r in rows})
    return [_run(r, clusters.get(r["cluster_id"])) for r in rows]


def baseline_of(
    conn: sa.Connection, comp: dict[str, Any], *, account: str | None = None
) -> dict[str, Any] | None:
    """The latest finished run of the same code that started before `comp`."""
    c = s.computations
    fp = _fingerprint_of(comp)
    q = (
        sa.select(c)
        .where(
            c.c.fingerprint == fp,
            _in_account(c, account),
            c.c.state == "finished",
            c.c.computation_id != comp["computation_id"],
            sa.or_(
                c.c.start < comp["start"],
                sa.and_(c.c.start == comp["start"], c.c.computation_id < comp["computation_id"]),
            ),
        )
        .order_by(c.c.start.desc(), c.c.computation_id.desc())
        .limit(1)
    )
    rows = _rows(conn.execute(q))
    return rows[0] if rows else None


def _groups(conn: sa.Connection, comp: dict[str, Any]) -> list[sa.Row[Any]]:
    g = s.task_groups.c
    q = sa.select(
        g.name,
        g.prefix,
        g.n_tasks,
        g.n_erred,
        g.compute,
        g.transfer,
        g.disk_read,
        g.disk_write,
        g.nbytes,
        g.start,
        g.stop,
        g.dependencies,
    ).where(g.cluster_id == comp["cluster_id"], g.computation_id == comp["computation_id"])
    return list(conn.execute(q))


def _by_prefix(groups: list[sa.Row[Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in groups:
        prefix = r.prefix or r.name
        p = out.setdefault(prefix, {k: 0 for k in FIGURES} | {"start": None, "stop": None})
        p["compute"] += r.compute or 0.0
        p["transfer"] += r.transfer or 0.0
        p["disk"] += (r.disk_read or 0.0) + (r.disk_write or 0.0)
        p["nbytes"] += r.nbytes or 0
        p["n_tasks"] += r.n_tasks or 0
        p["n_erred"] += r.n_erred or 0
        if r.start:
            p["start"] = r.start if p["start"] is None else min(p["start"], r.start)
        if r.stop:
            p["stop"] = r.stop if p["stop"] is None else max(p["stop"], r.stop)
    for p in out.values():
        p["wall"] = _wall(p)
        del p["start"], p["stop"]
    return out


def _inputs(groups: list[sa.Row[Any]]) -> dict[str, dict[str, Any]]:
    """The input groups by prefix, {"n_tasks", "nbytes"}: those that depend on no other
    group of the computation (what they read or made is the input the rest works on)."""
    names = {r.name for r in groups}
    out: dict[str, dict[str, Any]] = {}
    for r in groups:
        deps = r.dependencies if isinstance(r.dependencies, list) else []
        if any(d in names and d != r.name for d in deps):
            continue
        p = out.setdefault(r.prefix or r.name, {"n_tasks": 0, "nbytes": 0})
        p["n_tasks"] += r.n_tasks or 0
        p["nbytes"] += r.nbytes or 0
    return out


def _bytes_moved(before: int, after: int) -> bool:
    if before == after:
        return False
    if before <= 0 or after <= 0:
        return True
    return max(after / before, before / after) > INPUT_BYTES


def inputs_differ(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """None when the two runs had the same inputs (same tasks, bytes within INPUT_BYTES);
    else {"before": {"n_tasks", "nbytes"}, "after": {...}, "groups": [{"prefix",
    "before", "after"}] (each input prefix, None where a run had none), "sentence"}."""
    zero = {"n_tasks": 0, "nbytes": 0}
    groups: list[dict[str, Any]] = [
        {"prefix": p, "before": before.get(p), "after": after.get(p)}
        for p in sorted(set(before) | set(after))
    ]
    total = {
        side: {k: sum(f[k] for f in figures.values()) for k in zero}
        for side, figures in (("before", before), ("after", after))
    }
    if not any(
        (g["before"] or zero)["n_tasks"] != (g["after"] or zero)["n_tasks"]
        or _bytes_moved((g["before"] or zero)["nbytes"], (g["after"] or zero)["nbytes"])
        for g in groups
    ):
        return None
    b, a = total["before"], total["after"]
    # An input task's result is what Dask measured: when Dask fused the reading with the
    # first reduction step, that result is small, and the sentence says whose bytes they are.
    said = (
        f"{b['n_tasks']:,} → {a['n_tasks']:,} input tasks, whose results held "
        f"{format_bytes(b['nbytes'])} → {format_bytes(a['nbytes'])}"
    )
    moved = [g for g in groups if g["before"] != g["after"]]
    if len(groups) > 1 and moved:
        said += (
            " ("
            + "; ".join(
                f"{g['prefix']}: {(g['before'] or zero)['n_tasks']:,} → {(g['after'] or zero)['n_tasks']:,} tasks, "
                f"{format_bytes((g['before'] or zero)['nbytes'])} → {format_bytes((g['after'] or zero)['nbytes'])}"
                for g in moved[:3]
            )
            + ("; …" if len(moved) > 3 else "")
            + ")"
        )
    return {**total, "groups": groups, "sentence": said}


def compare(
    conn: sa.Connection,
    computation_id: str,
    *,
    baseline: str | None = None,
    account: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """This run against a baseline (default: `baseline_of`): {"computation_id",
    "baseline_id", "wall": {"before", "after", "ratio"}, "groups": [{"prefix",
    "before", "after", "ratio"}], "inputs_differ": inputs_differ(...) or None,
    "findings": [str]}.  A group's ratio is of its compute time (after / before);
    groups are listed by how much compute time moved.  With no earlier run, baseline_id
    is None and the findings say so."""
    now = _clock(now)
    after = _mark_lost(conn, [_computation_row(conn, computation_id, account)], now)[0]
    before: dict[str, Any] | None
    if baseline is not None:
        before = _mark_lost(conn, [_computation_row(conn, baseline, account)], now)[0]
    else:
        before = baseline_of(conn, after, account=account)
    clusters = _prices(conn, {after["cluster_id"]} | ({before["cluster_id"]} if before else set()))
    run_after = _run(after, clusters.get(after["cluster_id"]))
    groups_after = _groups(conn, after)
    if before is None:
        return {
            "computation_id": after["computation_id"],
            "baseline_id": None,
            "before": None,
            "after": run_after,
            "wall": {"before": None, "after": run_after["wall"], "ratio": None},
            "groups": [
                {"prefix": p, "before": None, "after": f, "ratio": None}
                for p, f in sorted(_by_prefix(groups_after).items())
            ],
            "inputs_differ": None,
            "findings": ["no earlier finished run of this code to compare with"],
        }
    run_before = _run(before, clusters.get(before["cluster_id"]))
    groups_before = _groups(conn, before)
    b, a = _by_prefix(groups_before), _by_prefix(groups_after)
    groups: list[dict[str, Any]] = [
        {
            "prefix": p,
            "before": b.get(p),
            "after": a.get(p),
            "ratio": _ratio((b.get(p) or {}).get("compute"), (a.get(p) or {}).get("compute")),
        }
        for p in set(b) | set(a)
    ]
    groups.sort(
        key=lambda g: (
            -abs((g["after"] or {}).get("compute", 0.0) - (g["before"] or {}).get("compute", 0.0)),
            g["prefix"],
        )
    )
    wall = {
        "before": run_before["wall"],
        "after": run_after["wall"],
        "ratio": _ratio(run_before["wall"], run_after["wall"]),
    }
    inputs = inputs_differ(_inputs(groups_before), _inputs(groups_after))
    return {
        "computation_id": after["computation_id"],
        "baseline_id": before["computation_id"],
        "before": run_before,
        "after": run_after,
        "wall": wall,
        "groups": groups,
        "inputs_differ": inputs,
        "findings": findings(run_before, run_after, wall, groups, inputs),
    }


def _times(x: float) -> str:
    return f"{x:.1f}x" if x < 10 else f"{x:.0f}x"


def _moved(kind: str, before: float | None, after: float | None) -> bool:
    before, after = before or 0.0, after or 0.0
    if abs(after - before) < FLOOR[kind]:
        return False
    if before <= 0 or after <= 0:
        return True
    return after / before >= NOTABLE or before / after >= NOTABLE


def _change(kind: str, before: float | None, after: float | None) -> str:
    show = format_bytes if kind == "nbytes" else duration
    word = {"nbytes": "bytes", "wall": "wall time"}.get(kind, kind)
    before, after = before or 0, after or 0
    if not before:
        return f"{show(after)} {word} where there was none"
    if not after:
        return f"no {word}, {show(before)} before"
    return f"{word} {_times(after / before)} ({show(before)} → {show(after)})"


def findings(
    before: dict[str, Any],
    after: dict[str, Any],
    wall: dict[str, Any],
    groups: list[dict[str, Any]],
    inputs: dict[str, Any] | None = None,
) -> list[str]:
    """What changed most, in plain words, biggest first, after how this run ended and
    whether the two runs worked on the same inputs, and on the same work at all."""
    out: list[str] = []
    if after["state"] == "running":
        out.append("this run is still running: its figures are so far")
    elif after["state"] != "finished":
        out.append(f"this run {after['state']}; the baseline finished")
    if inputs is not None:
        out.append(
            f"the inputs differ ({inputs['sentence']}): a change in time may come from the size, "
            "not from the code"
        )
    if groups and all(g["before"] is None or g["after"] is None for g in groups):
        out.append("the two runs share no task prefix: the same line of code made different work")
    preamble = len(out)
    if wall["ratio"] and _moved("wall", wall["before"], wall["after"]):
        how = "slower" if wall["ratio"] > 1 else "faster"
        x = wall["ratio"] if wall["ratio"] > 1 else 1 / wall["ratio"]
        out.append(
            f"{_times(x)} {how} overall ({duration(wall['before'])} → {duration(wall['after'])})"
        )
    for g in groups:
        b, a = g["before"], g["after"]
        if b is None:
            out.append(
                f"{g['prefix']}: new, {duration(a['compute'])} compute over {a['n_tasks']:,} tasks"
            )
            continue
        if a is None:
            out.append(f"{g['prefix']}: gone ({duration(b['compute'])} compute before)")
            continue
        said = [
            _change(k, b[k], a[k])
            for k in ("compute", "transfer", "disk", "nbytes")
            if _moved(k, b[k], a[k])
        ]
        if a["n_erred"] and not b["n_erred"]:
            said.append(f"{a['n_erred']:,} tasks erred where none did")
        if a["n_tasks"] != b["n_tasks"] and b["n_tasks"]:
            said.append(f"{b['n_tasks']:,} → {a['n_tasks']:,} tasks")
        if said:
            out.append(f"{g['prefix']}: " + ", ".join(said))
    if len(out) == preamble:
        out.append("no notable change")
    return out


def _compute(group: dict[str, Any]) -> float:
    """The larger of a prefix's compute time in the two runs."""
    return max((side or {}).get("compute") or 0.0 for side in (group["before"], group["after"]))


def run_summary(
    conn: sa.Connection, computation_id: str, *, account: str | None = None
) -> dict[str, Any]:
    """For views: this run's ratio against its baseline, and the recent runs' wall times."""
    try:
        result = compare(conn, computation_id, account=account)
        runs = list_runs(conn, computation_id, account=account, limit=20)
    except NoFingerprint:
        return {
            "computation_id": computation_id,
            "baseline_id": None,
            "wall": None,
            "findings": [],
            "inputs_differ": None,
            "groups": {},
            "runs": [],
        }
    return {
        "computation_id": result["computation_id"],
        "baseline_id": result["baseline_id"],
        "wall": result["wall"],
        "findings": result["findings"],
        "inputs_differ": result["inputs_differ"],
        "groups": {
            g["prefix"]: g["ratio"] if _compute(g) >= VS_MIN_COMPUTE else None
            for g in result["groups"]
        },
        "runs": [
            {
                "computation_id": r["computation_id"],
                "start": r["start"],
                "wall": r["wall"],
                "state": r["state"],
            }
            for r in runs[::-1]
        ],
    }
