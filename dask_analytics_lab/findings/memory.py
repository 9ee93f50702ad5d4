"""Rules read from memory: spilling to disk, and workers their nanny killed.

spilling and memory-kill.
"""

from __future__ import annotations

from .finding import finding, format_bytes, secs, short
from .record import Record


def spilling(rec: Record) -> list[dict]:
    """spilling: workers wrote data to disk and read it back (fine metrics disk-write /
    disk-read, every context; worker samples' spilled bytes name the workers).

    Impact: the disk seconds over the workers that spilled (each worker spills on its
    own, so theirs overlap; a spill blocks the worker that does it)."""
    wrote, read = rec.metric("disk-write"), rec.metric("disk-read")
    seconds = sum(wrote.values()) + sum(read.values())
    if seconds <= 0:
        return []
    nbytes = sum(rec.metric("disk-write", unit="bytes").values())
    back = sum(rec.metric("disk-read", unit="bytes").values())
    spilled: dict[str, int] = {}
    for s in rec.samples:
        if s.get("spilled"):
            spilled[s["worker"]] = max(spilled.get(s["worker"], 0), int(s["spilled"]))
    workers = sorted(spilled, key=lambda w: -spilled[w])
    n = max(1, len(workers))
    prefixes = sorted(
        {p for p in (*wrote, *read) if p}, key=lambda p: -(wrote.get(p, 0) + read.get(p, 0))
    )
    evidence = (
        f"{secs(sum(wrote.values()))} writing {format_bytes(nbytes)} to disk and {secs(sum(read.values()))} "
        f"reading {format_bytes(back)} back (fine metrics disk-write / disk-read"
        + (f", most under {short(prefixes)}" if prefixes else "")
        + ")"
        + (
            f"; {short([f'{w} held up to {format_bytes(spilled[w])} spilled' for w in workers])} (worker "
            "samples)"
            if workers
            else ""
        )
        + f". Impact: the disk time over the {n} worker(s) that spilled"
    )
    advice = (
        "Give workers more memory (fewer, larger workers, or a larger memory_limit), use smaller chunks so "
        "less is held at once, persist less, or drop intermediate results sooner"
    )
    return [
        finding(
            "spilling",
            f"workers spilled {format_bytes(nbytes)} to disk",
            evidence,
            advice,
            seconds / n,
            groups=prefixes,
            workers=workers,
        )
    ]


# A kill that ends a computation (KilledWorker) is timed a moment after the computation's
# stop: the scheduler errs the task while it removes the worker.
KILL_SLACK = 1.0


def memory_kills(rec: Record) -> list[dict]:
    """worker-left events of workers their nanny killed for memory during the computation."""
    return sorted(
        (
            e
            for e in rec.events
            if e["topic"] == "worker-left"
            and isinstance(e.get("msg"), dict)
            and e["msg"].get("reason") == "memory"
            and rec.start <= e["time"] <= rec.stop + KILL_SLACK
        ),
        key=lambda e: e["time"],
    )


def memory_kill(rec: Record) -> list[dict]:
    """memory-kill: workers killed by their nanny for memory during the computation
    (worker-left events, reason "memory", timed when the worker left), and tasks Dask gave up on as KilledWorker
    (analytics-killed-worker events, exceptions).

    Impact: the whole wall time when the computation erred with KilledWorker (its work
    was lost); else, per kill, the time since the computation started or the previous
    kill: the work in flight that each kill threw away."""
    kills = memory_kills(rec)
    killed_tasks = [
        e
        for e in rec.events
        if e["topic"] == "analytics-killed-worker"
        and isinstance(e.get("msg"), dict)
        and e["msg"].get("computation_id") == rec.comp["computation_id"]
    ]
    killed_rows = [x for x in rec.exceptions if x.get("exc_type") == "KilledWorker"]
    if not kills and not killed_tasks and not killed_rows:
        return []
    workers = [e["msg"].get("worker") for e in kills if e["msg"].get("worker")]
    for e in killed_tasks:
        workers += [w for w in e["msg"].get("workers") or [] if isinstance(w, str)]
    for x in killed_rows:
        workers += [w for w in x.get("workers") or [] if isinstance(w, str)]
    workers = list(dict.fromkeys(workers))
    groups = list(
        dict.fromkeys(
            [e["msg"].get("group") for e in killed_tasks if e["msg"].get("group")]
            + [x["task_group"] for x in killed_rows if x.get("task_group")]
        )
    )
    if rec.comp["state"] == "erred" and (killed_tasks or killed_rows):
        lost, how = rec.wall, "the whole wall time: the computation erred with KilledWorker"
    else:
        lost, prev = 0.0, rec.start
        for e in kills:
            lost += max(0.0, min(e["time"], rec.stop) - prev)
            prev = max(prev, e["time"])
        how = "per kill, the time since the start or the previous kill (work in flight, lost)"
    rss = [e["msg"].get("rss") for e in kills if e["msg"].get("rss")]
    evidence = (
        f"{len(kills)} worker(s) killed by their nanny for memory ({short(workers)}; worker-left events"
        + (f", at up to {format_bytes(max(rss))} RSS" if rss else "")
        + ")"
        + (f"; Dask gave up on {short(groups)} as KilledWorker" if groups else "")
        + f". Impact: {how}"
    )
    advice = (
        "Give workers more memory (a larger memory_limit, fewer workers per machine), or make each task "
        "need less: smaller chunks/partitions, and no task that builds a result larger than a worker's "
        "memory"
    )
    title = (
        f"{len(kills)} worker(s) killed for memory" if kills else "tasks failed as KilledWorker"
    ) + (f" running {groups[0]}" if groups else "")
    return [finding("memory-kill", title, evidence, advice, lost, groups=groups, workers=workers)]
