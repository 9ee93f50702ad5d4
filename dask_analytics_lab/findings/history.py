"""Rules read from what happened around the tasks: failures, the runs before, and the
cluster's idle time after.

failures, slower-than-before and idle-cluster.
"""

from __future__ import annotations

import statistics

from ..figures import group_name, short_location
from .finding import finding, secs, short
from .memory import memory_kills
from .record import Record


def failures(rec: Record) -> list[dict]:
    """failures: the computation's failure rows (exceptions), less those memory-kill
    tells of (KilledWorker, and tasks lost with a worker killed for memory): what failed, in which
    group, on which workers, how often; when the computation still finished, Dask ran
    the tasks again (or retries= did) and the failure was hidden.

    Impact: the whole wall time when the computation erred (shown whatever its size:
    a failed computation is never healthy); else each failure's count x its group's
    mean task time (the attempts that were thrown away)."""
    killed = {e["msg"].get("worker") for e in memory_kills(rec)}
    # memory-kill tells of KilledWorker, and of the tasks a worker killed for memory took with it.
    rows = [
        x
        for x in rec.exceptions
        if x.get("exc_type") != "KilledWorker"
        and not (
            x.get("exc_type") in ("WorkerDied", "LostData")
            and set(x.get("workers") or ()) <= killed
            and killed
        )
    ]
    if not rows:
        return []
    rows.sort(key=lambda x: -x["count"])
    total = sum(x["count"] for x in rows)
    retried = sum(x.get("retried") or 0 for x in rows)
    recovered = sum(x.get("recovered") or 0 for x in rows)
    groups = list(dict.fromkeys(x["task_group"] for x in rows if x.get("task_group")))
    workers = list(
        dict.fromkeys(w for x in rows for w in x.get("workers") or [] if isinstance(w, str))
    )
    top = rows[0]
    what = top.get("exc_type") or "an exception"
    erred = rec.comp["state"] == "erred"
    if erred:
        impact, how = rec.wall, "the whole wall time: the computation erred"
    else:
        mean = {
            g["name"]: (g.get("compute") or 0.0) / max(1, g.get("n_done") or g.get("n_tasks") or 1)
            for g in rec.groups
        }
        impact = sum(x["count"] * mean.get(x.get("task_group"), 0.0) for x in rows)
        how = "each failure's count x its group's mean task time"
    evidence = (
        f"{total:,} failure(s): {top['count']:,} x {what} in group "
        f"{group_name(top.get('task_group') or '(unknown)')}"
        + (f" ({top['pattern']})" if top.get("pattern") else "")
        + (f", raised at {short_location(top['location'])}" if top.get("location") else "")
        + (f"; {len(rows) - 1} other kind(s)" if len(rows) > 1 else "")
        + (f"; on {short(workers)}" if workers else "")
        + (
            f"; Dask ran {retried:,} of the failed attempts again (retries=) and {recovered:,} task(s) then "
            "succeeded"
            if retried
            else ""
        )
        + (
            ""
            if erred
            else "; the computation still finished: "
            + ("retries hid them" if retried else "Dask ran them again, hiding them")
        )
        + f" (exceptions). Impact: {how}"
    )
    advice = (
        f"Read the traceback (dask analytics exceptions --computation {rec.comp['computation_id']} "
        "--traceback) and fix the cause"
        + (
            ""
            if erred
            else "; a failure that retries hide still costs the attempts and may fail next time"
        )
    )
    title = (
        f"{top.get('task_group') or 'a task'} failed"
        if erred
        else f"{total:,} hidden failure(s) in {top.get('task_group') or 'a task group'}"
    ) + f": {top.get('exc_type') or 'an exception'}"
    return [finding("failures", title, evidence, advice, impact, groups=groups, workers=workers)]


def slower_than_before(rec: Record) -> list[dict]:
    """slower-than-before: against the earlier finished runs of the same code with as
    many tasks (at least two; `compare`'s baseline, the latest, on the same inputs): wall
    time `slower-ratio` times their median or more, and beyond the slowest of them by
    more than their spread (slowest less fastest) - what a machine's noise made of the
    same work before is not news.  With other inputs, a longer run may be the size, not a
    problem.  Names the group whose compute time moved most against the baseline.

    Impact: this run's wall time less the median of the earlier ones."""
    c = rec.compare
    if not c or not c.get("baseline_id") or c.get("inputs_differ") is not None:
        return []
    walls = sorted(r["wall"] for r in rec.runs)
    if len(walls) < 2:
        return []
    typical = statistics.median(walls)
    now = rec.wall
    if now < rec.settings["slower_ratio"] * typical or now <= walls[-1] + (walls[-1] - walls[0]):
        return []
    wall = c["wall"]
    moved = [g for g in c["groups"] if g.get("before") and g.get("after")]
    g = moved[0] if moved else None
    evidence = (
        f"wall time {secs(now)}, {now / typical:.1f}x the median {secs(typical)} of {len(walls)} earlier runs of "
        f"the same code ({secs(walls[0])} to {secs(walls[-1])}); against run {c['baseline_id']}, the latest, "
        f"on the same inputs: {secs(wall['before'])} → {secs(wall['after'])} (compare)"
        + (
            f"; {g['prefix']}: compute {secs(g['before']['compute'])} → {secs(g['after']['compute'])}"
            + (f" ({g['ratio']:.1f}x)" if g.get("ratio") else "")
            if g
            else ""
        )
        + ". Impact: wall time now less the earlier runs' median"
    )
    advice = (
        f"Look at what changed in {g['prefix']}: its code, its libraries, or the cluster it ran on; "
        if g
        else "Look at what changed: the code, its libraries, or the cluster; "
    ) + f"dask analytics compare {rec.comp['computation_id']} shows every group"
    return [
        finding(
            "slower-than-before",
            f"{now / typical:.1f}x slower than before" + (f", most in {g['prefix']}" if g else ""),
            evidence,
            advice,
            now - typical,
            groups=[g["prefix"]] if g else [],
        )
    ]


def idle_cluster(rec: Record) -> list[dict]:
    """idle-cluster: this was the cluster's last computation, and the cluster then sat
    idle at least `idle-min` (until it stopped, was lost, or now while it lives).  A
    cluster its own idle timeout closed, of `idle-min` or less, followed the advice: no
    finding.

    Impact: what an idle timeout of `idle-min` (the advice) would have saved: the idle
    seconds beyond it (beside this computation's wall time: the cost of keeping the
    cluster, not a delay), priced at its price per core-hour."""
    if rec.later or rec.comp.get("stop") is None:
        return []
    end = rec.cluster.get("ended") or rec.cluster.get("sample_time") or rec.stop
    idle = end - rec.comp["stop"]
    least = rec.settings["idle_min"]
    own = (rec.cluster.get("settings") or {}).get("idle_timeout")
    timed_out = rec.cluster.get("stop_reason") == "idle-timeout"
    if idle < least or (timed_out and own is not None and own <= least):
        return []
    saved = idle - least
    threads = int(rec.cluster.get("peak_threads") or rec.threads)
    core_hours = saved * threads / 3600
    price = rec.cluster.get("price_per_core_hour")
    how = (
        "its idle timeout closed it"
        if timed_out
        else "it stopped"
        if rec.cluster.get("status") == "stopped"
        else "it was lost"
        if rec.cluster.get("status") == "lost"
        else "its last sample; it is still up"
    )
    evidence = (
        f"the cluster ran no computation for {secs(idle)} after this one, its last, until {how}, "
        f"{threads} threads"
        + (f"; its idle timeout was {secs(own)}" if own else "; no idle timeout was set")
        + f". Impact: the idle time beyond {secs(least)} (the timeout advised; cluster time, beside the "
        f"wall time): {core_hours:.2f} core-hours"
        + (f", ~{core_hours * price:.2f} at {price:g} per core-hour" if price else "")
    )
    suggest = f"{rec.settings['idle_min']:g}s"  # a value the config takes, not a figure
    advice = (
        f"Close clusters when done (client.close(); cluster.close()), or let them close themselves: "
        f'analytics.idle.timeout: "{suggest}" (or distributed.scheduler.idle-timeout)'
    )
    return [
        finding(
            "idle-cluster",
            f"the cluster sat idle {secs(idle)} after this computation",
            evidence,
            advice,
            saved,
            workers=[],
        )
    ]
