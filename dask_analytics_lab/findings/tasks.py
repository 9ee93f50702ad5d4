"""Rules read from the task stream and the task groups: how the work was cut and spread.

small-tasks, straggler, too-few-tasks and imbalance.  Each counts only what it explains:
a straggler's tail is not also counted as imbalance or as too few tasks.
"""

from __future__ import annotations

import math
from bisect import bisect_left

from ..figures import group_name
from .finding import finding, secs, short
from .record import Record


class _Busy:
    """Thread seconds the task stream shows busy between two moments, in O(log rows) a
    question after O(rows log rows) once: each row weighs 1 (a task) or its bin's busy
    share, and busy(T) = sum of weight x (min(T, stop) - start) over rows started by T,
    kept as prefix sums over the sorted starts and stops."""

    def __init__(self, stream: list[dict]):
        starts: list[tuple[float, float]] = []
        stops: list[tuple[float, float]] = []
        for r in stream:
            span = r["stop"] - r["start"]
            if span <= 0:
                continue
            w = min(1.0, (r.get("busy") or 0.0) / span) if r.get("binned") else 1.0
            starts.append((r["start"], w))
            stops.append((r["stop"], w))
        starts.sort()
        stops.sort()
        self._starts, self._stops = [t for t, _ in starts], [t for t, _ in stops]
        self._s = self._sums(starts)
        self._e = self._sums(stops)

    @staticmethod
    def _sums(rows: list[tuple[float, float]]) -> list[tuple[float, float]]:
        out, w_sum, tw_sum = [(0.0, 0.0)], 0.0, 0.0
        for t, w in rows:
            w_sum += w
            tw_sum += t * w
            out.append((w_sum, tw_sum))
        return out

    def until(self, t: float) -> float:
        ws, tws = self._s[bisect_left(self._starts, t)]
        we, twe = self._e[bisect_left(self._stops, t)]
        return (t * ws - tws) - (t * we - twe)

    def between(self, a: float, b: float) -> float:
        return self.until(b) - self.until(a)


def _others_busy(rec: Record, name: str, start: float, stop: float) -> float:
    """Thread seconds the task stream shows other groups' tasks running within [start,
    stop]: time the group's own tasks could not have had."""
    if "busy" not in rec.memo:
        by_group: dict[str, list[dict]] = {}
        for r in rec.stream:
            by_group.setdefault(r.get("task_group") or "", []).append(r)
        rec.memo["busy"], rec.memo["stream_by_group"] = _Busy(rec.stream), by_group
    own = 0.0  # its own rows, clipped to the window: O(its rows), no sort
    for r in rec.memo["stream_by_group"].get(name, ()):
        span = r["stop"] - r["start"]
        overlap = min(r["stop"], stop) - max(r["start"], start)
        if span > 0 and overlap > 0:
            own += overlap * (min(1.0, (r.get("busy") or 0.0) / span) if r.get("binned") else 1.0)
    return max(0.0, rec.memo["busy"].between(start, stop) - own)


def small_tasks(rec: Record) -> list[dict]:
    """small-tasks: a group of at least `small-tasks-min` tasks, each shorter than
    `target-task` (median, task stream; the mean when it is binned), whose threads spent
    more time per task outside the tasks than in them: the cost of each task (the
    scheduler's decision, the messages, the worker's bookkeeping), measured, not assumed,
    so a busy machine, where it grows, is seen too.

    Measured: the group's wall time on the threads, less its compute and the other
    groups' tasks running meanwhile (task stream), per task.  Impact: that overhead, less
    what the advice's fewer tasks would still cost at the same rate per task."""
    st = rec.settings
    medians, threads = rec.medians(), rec.threads
    hits = []
    for g in rec.groups:
        n = g.get("n_tasks") or 0
        if n < st["small_tasks_min"] or not g.get("start") or not g.get("stop"):
            continue
        compute = g.get("compute") or 0.0
        typical = medians.get(g["name"], compute / n)
        if typical >= st["target_task"]:
            continue
        spare = (g["stop"] - g["start"]) * threads - compute
        if spare <= typical * n:
            continue  # not even with the threads all its own (the task stream read below)
        spare -= _others_busy(rec, g["name"], g["start"], g["stop"])
        per_task = max(0.0, spare) / n
        if per_task <= typical:
            continue
        aim = max(2 * threads, math.ceil(compute / st["target_task"]))
        lost = max(0.0, spare - aim * per_task) / threads
        hits.append((lost, g, typical, per_task, aim))
    if not hits:
        return []
    hits.sort(key=lambda h: -h[0])
    lost, g, typical, per_task, aim = hits[0]
    name = group_name(g["name"])
    evidence = (
        f"group {name}: {g['n_tasks']:,} tasks, median {secs(typical)} each; they took "
        f"{secs(g['stop'] - g['start'])} of wall time on {threads} threads for {secs(g.get('compute') or 0.0)} "
        f"of compute: about {secs(per_task)} per task went to running the task rather than its work "
        f"(the threads' time less compute and other groups' tasks, per task). Impact: that overhead "
        f"less what {aim:,} tasks would still cost"
    )
    if len(hits) > 1:
        evidence += f"; also {short([group_name(h[1]['name']) for h in hits[1:]])}"
    advice = (
        f"Make fewer, larger tasks: about {aim:,} tasks of ~{secs(st['target_task'])} or more for "
        f"{name} (larger chunks / partitions, e.g. repartition(npartitions={aim}) or bigger array "
        "chunks), or batch the work inside each task"
    )
    return [
        finding(
            "small-tasks",
            f"{g['n_tasks']:,} tiny tasks in {name}: the cost per task outweighs their work",
            evidence,
            advice,
            min(sum(h[0] for h in hits), rec.wall),
            groups=[h[1]["name"] for h in hits],
        )
    ]


def stragglers(rec: Record) -> dict[int, float]:
    """{id(row): seconds over its group's median} for each straggler task: one that ran
    `straggler-ratio` times its group's median or more, in a group of at least
    `straggler-min-tasks` tasks."""
    if "stragglers" in rec.memo:
        return rec.memo["stragglers"]
    st = rec.settings
    medians = rec.medians()
    out = {}
    for name, rows in rec.durations().items():
        med = medians[name]
        if len(rows) < st["straggler_min_tasks"] or med <= 0:
            continue
        for d, r in rows:
            if d >= st["straggler_ratio"] * med:
                out[id(r)] = d - med
    rec.memo["stragglers"] = out
    return out


def straggler(rec: Record) -> list[dict]:
    """straggler: tasks far longer than their group's typical task (see `stragglers`)
    that held up the end.

    Impact: how much later the latest straggler ended than the computation's tasks
    would have, had its work been split evenly (the advice): from when it would have
    ended at its group's median, the work the other tasks (not its dependents, which
    wait for it) still had to do plus its own extra work, spread over every thread.
    Splitting moves that extra work; it does not make it vanish."""
    slow = stragglers(rec)
    if not slow:
        return []
    rows = [r for rows in rec.durations().values() for _, r in rows]
    worst = max((r for r in rows if id(r) in slow), key=lambda r: r["stop"])
    end = worst["stop"]
    group = worst.get("task_group") or worst.get("prefix") or ""  # as durations() keys it
    med = rec.medians()[group]
    t0 = worst["start"] + med
    left = sum(
        max(0.0, r["stop"] - max(r["start"], t0))
        for r in rows
        if id(r) not in slow and r["start"] < end
    )
    extra = end - t0
    would = t0 + (left + extra) / rec.threads
    lost = max(0.0, end - would)
    n_slow = sum(
        1 for r in rows if id(r) in slow and (r.get("task_group") or r.get("prefix")) == group
    )
    d = worst["stop"] - worst["start"]
    evidence = (
        f"a task of {group_name(group)} ran {secs(d)} on {worst['worker']}, {d / med:.0f}x its group's median of "
        f"{secs(med)} ({len(rec.durations()[group])} tasks, {n_slow} this slow; task stream); "
        f"split evenly, its {secs(extra)} beyond the median and the other tasks' remaining {secs(left)} of work "
        f"over {rec.threads} threads would have been done {secs(lost)} before it ended. Impact: that difference"
    )
    advice = (
        "Find what makes those tasks long: a skewed partition (repartition, or split on a better key), "
        "a bigger input file or chunk, or a slow worker; smaller, even tasks let the others share the tail"
    )
    return [
        finding(
            "straggler",
            f"a straggler in {group_name(group)} held up the end by {secs(lost)}",
            evidence,
            advice,
            lost,
            groups=[group],
            workers=[worst["worker"]],
        )
    ]


def _chained(rec: Record) -> set[str]:
    """Groups that depend on themselves through other groups (spin -> add -> spin, an
    iteration x = f(x)): their tasks wait on one another, so their count says nothing of
    how many could run at once."""
    deps = {g["name"]: set(g.get("dependencies") or ()) for g in rec.groups}
    out = set()
    for name in deps:
        seen, todo = set(), list(deps[name])
        while todo:
            d = todo.pop()
            if d == name:
                out.add(name)
                break
            if d not in seen:
                seen.add(d)
                todo.extend(deps.get(d, ()))
    return out


def widths(rec: Record) -> dict[str, int]:
    """How many tasks of each group could run at once: its task count, or for a chained
    group the most of its tasks the task stream shows running together."""
    if "widths" in rec.memo:
        return rec.memo["widths"]
    out = {g["name"]: g.get("n_tasks") or 0 for g in rec.groups}
    chained = _chained(rec)
    edges: dict[str, list[tuple[float, int]]] = {}
    for r in rec.stream:
        g = r.get("task_group") or ""
        if g in chained and not r.get("binned"):
            edges.setdefault(g, []).extend(((r["start"], 1), (r["stop"], -1)))
    for g, points in edges.items():
        most = running = 0
        for _, step in sorted(points):  # an end before a start at the same moment
            running += step
            most = max(most, running)
        out[g] = min(out[g], most)
    rec.memo["widths"] = out
    return out


def _low_stretches(rec: Record, threads: int) -> tuple[float, float, dict[str, float]]:
    """Over the stretches where fewer tasks ran than `threads` (but some did): their
    length, the thread-time left idle in them over the threads, and each group's
    task-seconds in them.  A task counts 1, a bin busy/width; straggler excess is left
    out (the straggler rule tells of it)."""
    slow = stragglers(rec)
    edges: list[tuple[float, float, str]] = []
    for r in rec.stream:
        width = r["stop"] - r["start"]
        if width <= 0:
            continue
        weight = (r.get("busy") or 0.0) / width if r.get("binned") else 1.0
        group = r.get("task_group") or r.get("prefix") or ""
        edges.append((r["start"], weight, group))
        edges.append((r["stop"] - slow.get(id(r), 0.0), -weight, group))
    edges.sort(key=lambda e: e[0])
    low_time = idle = 0.0
    by_group: dict[str, float] = {}
    running: dict[str, float] = {}
    c = 0.0
    for i, (t, w, g) in enumerate(edges):
        c += w
        v = running.get(g, 0.0) + w
        if v > 1e-9:
            running[g] = v
        else:
            running.pop(g, None)
        if i + 1 < len(edges) and edges[i + 1][0] > t and 1e-9 < c < threads - 1e-6:
            dt = edges[i + 1][0] - t
            low_time += dt
            idle += (threads - c) * dt / threads
            for k, x in running.items():
                by_group[k] = by_group.get(k, 0.0) + x * dt
    return low_time, idle, by_group


def too_few_tasks(rec: Record) -> list[dict]:
    """too-few-tasks: for `too-few-share` of the wall time or more, fewer tasks ran than
    the cluster has threads, and the groups running then had fewer tasks than threads
    (so no spreading could have filled them: the graph itself was too narrow); a chained
    group counts the most of its tasks that ran at once (`widths`).

    Impact: the thread-time left idle in those stretches, over the threads: the wall
    time the same work would have taken less, cut into at least as many tasks as threads."""
    threads = rec.threads
    if threads < 2 or rec.wall <= 0:
        return []
    n_tasks = widths(rec)
    ran = {r.get("task_group") or r.get("prefix") or "" for r in rec.stream}
    if all(n_tasks.get(g, 0) >= threads for g in ran):
        # Whichever group the sweep found most in the low stretches could have filled the
        # threads (below): no finding, and no sweep (the rule's costliest step).
        return []
    low_time, idle, by_group = _low_stretches(rec, threads)
    if low_time < rec.settings["too_few_share"] * rec.wall or not by_group:
        return []
    main = max(by_group, key=by_group.__getitem__)
    if n_tasks.get(main, 0) >= threads:
        return []  # enough tasks to fill the threads: spreading, not the graph, is to blame
    narrow = sorted(
        (g for g in by_group if n_tasks.get(g, 0) < threads), key=lambda g: -by_group[g]
    )
    width = n_tasks.get(main, 0)
    chained = main in _chained(rec)
    has = (
        f"ran {width} task at a time: its tasks wait on one another (a chain)"
        if chained
        else f"has {width} task(s)"
    )
    evidence = (
        f"for {secs(low_time)} of the {secs(rec.wall)} wall time ({low_time / rec.wall:.0%}) fewer tasks "
        f"ran than the {threads} threads (task stream); group {main} {has}. "
        f"Impact: the idle thread-time then over {threads} threads"
    )
    advice = (
        f"Cut {main} into at least {2 * threads} tasks (more partitions or smaller chunks)"
        + (
            ", or run independent steps side by side rather than one after another"
            if chained
            else ""
        )
        + f", or run it on a smaller cluster: {threads} threads waited on {width} task(s)"
    )
    return [
        finding(
            "too-few-tasks",
            f"too few tasks to use the {threads} threads",
            evidence,
            advice,
            idle,
            groups=narrow,
        )
    ]


def imbalance(rec: Record) -> list[dict]:
    """imbalance: the busiest worker worked `imbalance-ratio` times its even share per
    thread or more (task stream, straggler excess and groups of one task left out) and
    ran more tasks than it has threads, so the work could have been spread while other
    workers sat idle.

    Impact: the busiest worker's busy time per thread less the even share per thread."""
    wthreads = rec.worker_threads()
    if len(wthreads) < 2:
        return []
    slow = stragglers(rec)
    busy = {w: 0.0 for w in wthreads}
    tasks = {w: 0 for w in wthreads}
    groups: dict[str, float] = {}
    # A group of one task (a chunk) or one task at a time (a chain) had nowhere else to go.
    alone = {g for g, n in widths(rec).items() if n < 2}
    for r in rec.stream:
        w = r.get("worker")
        if w not in busy or r.get("task_group") in alone:
            continue
        b = (
            (r.get("busy") or 0.0)
            if r.get("binned")
            else r["stop"] - r["start"] - slow.get(id(r), 0.0)
        )
        busy[w] += b
        tasks[w] += r.get("n_tasks") or 1
        g = r.get("task_group") or r.get("prefix") or ""
        groups[g] = groups.get(g, 0.0) + b
    total = sum(busy.values())
    if total <= 0:
        return []
    even = total / sum(wthreads.values())
    top = max(busy, key=lambda w: busy[w] / wthreads[w])
    per_thread = busy[top] / wthreads[top]
    if per_thread < rec.settings["imbalance_ratio"] * even or tasks[top] <= wthreads[top]:
        return []
    idle = sorted((w for w in busy if busy[w] / wthreads[w] < even), key=lambda w: busy[w])
    evidence = (
        f"{top} ran {tasks[top]:,} tasks, busy {secs(busy[top])} on {wthreads[top]} thread(s), while "
        + "; ".join(f"{w} ran {tasks[w]:,} ({secs(busy[w])})" for w in idle[:3])
        + f" (task stream); an even share is {secs(even)} per thread. Impact: the busiest worker's busy "
        "time per thread less the even share"
    )
    advice = (
        "Let Dask spread the work: drop workers=/resources= restrictions that pin it to few workers, "
        "scatter inputs with broadcast=True or to several workers, and keep work stealing on "
        "(distributed.scheduler.work-stealing)"
    )
    top_groups = sorted(groups, key=lambda g: -groups[g])[:3]
    return [
        finding(
            "imbalance",
            f"work piled up on {top} while other workers sat idle",
            evidence,
            advice,
            per_thread - even,
            groups=top_groups,
            workers=[top, *idle],
        )
    ]
