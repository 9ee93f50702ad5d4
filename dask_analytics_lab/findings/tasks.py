"""Rules read from the task stream and the task groups: how the work was cut and spread.

small-tasks, straggler, too-few-tasks and imbalance.  Each counts only what it explains:
a straggler's tail is not also counted as imbalance or as too few tasks.
"""

from __future__ import annotations

import math

import numpy as np

from ..figures import group_name
from .finding import finding, secs, short
from .record import Record
from .stream import Columns


class _Busy:
    """Thread seconds the task stream shows busy between two moments, in O(log rows) a
    question after one sort: each row weighs its `Columns.weight`, and busy(T) = sum of
    weight x (min(T, stop) - start) over rows started by T, kept as prefix sums over the
    sorted starts and stops."""

    def __init__(self, cols: Columns):
        keep = cols.stop > cols.start
        start, stop, weight = cols.start[keep], cols.stop[keep], cols.weight[keep]
        self._starts, self._s = self._sums(start, weight)
        self._stops, self._e = self._sums(stop, weight)

    @staticmethod
    def _sums(t: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The times sorted, and the running sums (weight, time x weight) before each:
        row k holds the sums of the first k."""
        order = np.argsort(t, kind="stable")
        t, w = t[order], w[order]
        sums = np.zeros((len(t) + 1, 2))
        sums[1:, 0] = np.cumsum(w)
        sums[1:, 1] = np.cumsum(t * w)
        return t, sums

    def until(self, t: float) -> float:
        ws, tws = self._s[np.searchsorted(self._starts, t, "left")]
        we, twe = self._e[np.searchsorted(self._stops, t, "left")]
        return float((t * ws - tws) - (t * we - twe))

    def between(self, a: float, b: float) -> float:
        return self.until(b) - self.until(a)


def _others_busy(rec: Record, name: str, start: float, stop: float) -> float:
    """Thread seconds the task stream shows other groups' tasks running within [start,
    stop]: time the group's own tasks could not have had."""
    cols = rec.columns
    if "busy" not in rec.memo:
        rec.memo["busy"] = _Busy(cols)
    own = cols.of(name)  # its own rows, clipped to the window
    a, b = cols.start[own], cols.stop[own]
    overlap = np.minimum(b, stop) - np.maximum(a, start)
    keep = (b > a) & (overlap > 0)
    mine = float((overlap[keep] * cols.weight[own][keep]).sum())
    return max(0.0, rec.memo["busy"].between(start, stop) - mine)


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


def stragglers(rec: Record) -> np.ndarray:
    """Each stream row's seconds over its group's median when it is a straggler (0
    else): a task that ran `straggler-ratio` times its group's median or more, in a
    group of at least `straggler-min-tasks` tasks.  All 0 for a binned stream."""
    if "stragglers" in rec.memo:
        return rec.memo["stragglers"]
    st, cols = rec.settings, rec.columns
    out = np.zeros(len(cols.rows))
    medians = cols.medians()
    if medians:
        counts = cols.counts()
        med = np.array(
            [
                medians[n] if counts.get(n, 0) >= st["straggler_min_tasks"] else 0.0
                for n in cols.names
            ]
        )[cols.group]
        d = cols.durations()
        slow = (med > 0) & (d >= st["straggler_ratio"] * med)
        out[slow] = (d - med)[slow]
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
    excess = stragglers(rec)
    slow = excess > 0
    if not slow.any():
        return []
    cols = rec.columns
    i = int(np.flatnonzero(slow)[np.argmax(cols.stop[slow])])
    worst = cols.rows[i]
    end = float(cols.stop[i])
    group = cols.names[cols.group[i]]
    med = rec.medians()[group]
    t0 = float(cols.start[i]) + med
    others = ~slow & (cols.start < end)
    left = float(np.maximum(0.0, cols.stop[others] - np.maximum(cols.start[others], t0)).sum())
    extra = end - t0
    would = t0 + (left + extra) / rec.threads
    lost = max(0.0, end - would)
    mine = cols.group == cols.group[i]
    n_slow = int((slow & mine).sum())
    d = end - float(cols.start[i])
    evidence = (
        f"a task of {group_name(group)} ran {secs(d)} on {worst['worker']}, {d / med:.0f}x its group's median of "
        f"{secs(med)} ({int(mine.sum())} tasks, {n_slow} this slow; task stream); "
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
    known = {g["name"] for g in rec.groups}
    deps = {g["name"]: set(g.get("dependencies") or ()) & known for g in rec.groups}
    # Peel off groups nothing cyclic feeds (Kahn's order): a graph of groups is nearly
    # always acyclic, and then nothing is left to search.
    left = {n: set(d) for n, d in deps.items()}
    ready = [n for n, d in left.items() if not d]
    users: dict[str, list[str]] = {}
    for n, d in deps.items():
        for x in d:
            users.setdefault(x, []).append(n)
    while ready:
        n = ready.pop()
        for u in users.get(n, ()):
            left[u].discard(n)
            if not left[u]:
                ready.append(u)
        left.pop(n, None)
    out = set()
    for name in left:  # on a cycle, or fed by one
        seen, todo = set(), list(deps[name])
        while todo:
            d = todo.pop()
            if d == name:
                out.add(name)
                break
            if d not in seen and d in left:
                seen.add(d)
                todo.extend(deps[d])
    return out


def widths(rec: Record) -> dict[str, int]:
    """How many tasks of each group could run at once: its task count, or for a chained
    group the most of its tasks the task stream shows running together."""
    if "widths" in rec.memo:
        return rec.memo["widths"]
    out = {g["name"]: g.get("n_tasks") or 0 for g in rec.groups}
    cols = rec.columns
    for g in _chained(rec) if not cols.binned else ():
        rows = cols.of(g)
        if not len(rows):
            continue
        times = np.concatenate((cols.start[rows], cols.stop[rows]))
        steps = np.concatenate((np.ones(len(rows)), -np.ones(len(rows))))
        order = np.lexsort((steps, times))  # an end before a start at the same moment
        most = int(np.cumsum(steps[order]).max())
        out[g] = min(out[g], most)
    rec.memo["widths"] = out
    return out


def _low_stretches(rec: Record, threads: int) -> tuple[float, float, dict[str, float]]:
    """Over the stretches where fewer tasks ran than `threads` (but some did): their
    length, the thread-time left idle in them over the threads, and each group's
    task-seconds in them.  A task counts 1, a bin busy/width; straggler excess is left
    out (the straggler rule tells of it).

    One sort of the rows' edges; a row's share of the low stretches is the low time
    accrued by its end less that by its start (running sums at the sorted edges)."""
    cols = rec.columns
    keep = cols.stop > cols.start
    n = int(keep.sum())
    if not n:
        return 0.0, 0.0, {}
    weight, group = cols.weight[keep], cols.group[keep]
    times = np.concatenate((cols.start[keep], (cols.stop - stragglers(rec))[keep]))
    steps = np.concatenate((weight, -weight))
    order = np.argsort(times, kind="stable")
    t = times[order]
    c = np.cumsum(steps[order])  # threads busy after each edge
    dt = np.append(np.diff(t), 0.0)
    low = (dt > 0) & (c > 1e-9) & (c < threads - 1e-6)
    low_time = float(dt[low].sum())
    idle = float(((threads - c[low]) * dt[low]).sum() / threads)
    accrued = np.empty(2 * n)  # low time before each edge, back in the edges' order
    accrued[order] = np.concatenate(([0.0], np.cumsum(np.where(low, dt, 0.0))[:-1]))
    share = weight * (accrued[n:] - accrued[:n])
    sums = np.bincount(group, weights=share, minlength=len(cols.names))
    by_group = {cols.names[k]: float(v) for k, v in enumerate(sums.tolist()) if v > 1e-9}
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
    ran = rec.columns.names
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
    cols = rec.columns
    # A group of one task (a chunk) or one task at a time (a chain) had nowhere else to go.
    alone = {g for g, n in widths(rec).items() if n < 2}
    counted = np.isin(
        cols.group, [c for c, g in enumerate(cols.names) if g not in alone]
    ) & np.isin(cols.worker, [c for c, w in enumerate(cols.workers) if w in wthreads])
    work = (cols.work - stragglers(rec))[counted]
    by_worker = np.bincount(cols.worker[counted], weights=work, minlength=len(cols.workers))
    n_by_worker = np.bincount(
        cols.worker[counted], weights=cols.n[counted], minlength=len(cols.workers)
    )
    busy = {w: 0.0 for w in wthreads}
    tasks = {w: 0 for w in wthreads}
    for c, w in enumerate(cols.workers):
        if w in busy:
            busy[w], tasks[w] = float(by_worker[c]), int(n_by_worker[c])
    by_group = np.bincount(cols.group[counted], weights=work, minlength=len(cols.names))
    groups = {cols.names[k]: float(v) for k, v in enumerate(by_group.tolist()) if v}
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
