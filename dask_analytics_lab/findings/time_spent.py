"""Rules read from where the time went: Dask's fine performance metrics per task prefix,
the task groups' transfer time, and the workers' CPU.

gil-contention, cpu-starved, transfer-bound and serialization.
"""

from __future__ import annotations

import numpy as np

from ..figures import format_bytes, group_name
from .finding import finding, secs
from .record import Record

# Dask's metric activities that are (de)serialization: protocol/serialize.py,
# protocol/compression.py and spill.py's pickling.
SERIALIZATION = ("serialize", "deserialize", "compress", "decompress", "pickle", "unpickle")


# Fine-metric contexts of a transfer: the receiving worker's fetch and the sending one's.
FETCH_CONTEXTS = ("gather-dep", "get-data")


def _threads_of(rec: Record, groups: list[dict]) -> int:
    """Threads that ran these groups (task stream; the cluster's threads without one)."""
    cols = rec.columns
    codes = [c for c in (cols.code(g["name"]) for g in groups) if c is not None]
    ran_on = np.unique(cols.slots()[np.isin(cols.group, codes)])
    return len(ran_on) or rec.threads


def _fetch_serialization_share(rec: Record) -> float:
    """The share of the fetches' time that was (de)serializing data: the sender's
    serialize and compress (get-data) and the receiver's deserialize and decompress
    (gather-dep), against the receiver's whole fetch time (gather-dep), which waits
    through the sender's.  0 without fine metrics of fetches.

    From `serialization-share` up it is 1: the fetches were bound by it.  A worker
    (de)serializing a message in its event loop holds up its other sends and receives,
    so their network time was waiting on it too (measured: lists of Python objects that
    spent half their fetch time (de)serializing, sent as DataFrames instead, saved
    nearly all of it; benchmarks/findings_quality.py)."""
    fetch = coded = 0.0
    for m in rec.metrics:
        if m["unit"] != "seconds" or m["context"] not in FETCH_CONTEXTS:
            continue
        v = float(m["value"] or 0.0)
        if m["context"] == "gather-dep":
            fetch += v
        if m["activity"] in SERIALIZATION:
            coded += v
    share = min(1.0, coded / fetch) if fetch > 0 else 0.0
    return 1.0 if share >= rec.settings["serialization_share"] else share


def _busy_host(rec: Record) -> bool:
    host, cores = rec.comp.get("host_cpu"), rec.comp.get("host_cores")
    return host is not None and bool(cores) and host >= rec.settings["starved_host_cpu"]


def _processes_save(rec: Record, got: float, n: int, workers: int) -> float:
    """The share of a GIL-bound prefix's wall time that n processes a worker would save,
    where each worker's threads, one at a time, got `got` of a core.  On a quiet machine
    each process gets a core: 1 - got / n.  On a busy host (the computation's host_cpu
    at least `starved-host-cpu`) the cores are shared with what keeps them busy: the
    others' runnable threads, seen from what one thread got (cores / got - workers),
    then share them with n threads a worker instead of one."""
    if got <= 0:
        return 0.0
    then = 1.0
    if _busy_host(rec):
        cores = float(rec.comp["host_cores"])
        others = max(0.0, cores / got - workers)
        then = min(1.0, cores / (others + n * workers))
    return max(0.0, 1 - got / (n * then))


def gil_contention(rec: Record) -> list[dict]:
    """gil-contention: a task prefix, on workers with several threads, whose threads
    waited (execute thread-noncpu) at least `gil-wait-share` of their time while they
    ran on the CPU (thread-cpu) at about one core per worker - between `gil-min-cpu` and
    `gil-max-cpu` percent of one core over the prefix's wall time: they took turns
    holding Python's GIL.  Waiting on I/O or sleep leaves the CPU near 0, and threads
    that run in parallel use several cores and wait little: neither is claimed.

    Impact: the waiting over the cluster's threads, what processes (one thread each, no
    shared GIL) would have run in parallel instead; at most what n processes per worker
    would save of the prefix's wall time (`_processes_save`): on a busy machine the
    threads also waited for a free core, which processes do not give them."""
    st = rec.settings
    wthreads = rec.worker_threads()
    multi = sorted(w for w, n in wthreads.items() if n > 1)
    if not multi:
        return []
    on = rec.metric("thread-cpu", context="execute")
    off = rec.metric("thread-noncpu", context="execute")
    spans: dict[str, tuple[float, float]] = {}
    for g in rec.groups:
        p = g.get("prefix") or g["name"]
        if g.get("start") and g.get("stop"):
            a, b = spans.get(p, (g["start"], g["stop"]))
            spans[p] = (min(a, g["start"]), max(b, g["stop"]))
    hits = []
    for prefix, waited in off.items():
        ran = on.get(prefix, 0.0)
        if not prefix or prefix not in spans or waited + ran <= 0:
            continue
        wall = spans[prefix][1] - spans[prefix][0]
        cpu = 100 * ran / wall / len(multi) if wall > 0 else 0.0
        if (
            waited / (waited + ran) >= st["gil_wait_share"]
            and st["gil_min_cpu"] <= cpu <= st["gil_max_cpu"]
        ):
            hits.append((waited, ran, prefix, cpu, wall))
    if not hits:
        return []
    hits.sort(reverse=True)
    waited, ran, prefix, cpu, wall = hits[0]
    n = max(wthreads[w] for w in multi)
    impact = sum(
        min(h[0] / rec.threads, _processes_save(rec, h[3] / 100, n, len(multi)) * h[4])
        for h in hits
    )
    evidence = (
        f"{prefix}: threads waited {secs(waited)} and ran {secs(ran)} on the CPU "
        f"({waited / (waited + ran):.0%} waiting; execute thread-noncpu vs thread-cpu), {cpu:.0f}% of one "
        f"core per worker over its {secs(wall)} (thread-cpu over its groups' wall time), on workers of {n} "
        f"threads: one core, what one GIL lets through. Impact: the waiting over {rec.threads} threads, "
        f"at most what {n} processes a worker would save of the wall time"
        + (
            f" on a host with {rec.comp.get('host_cpu'):.0f}% of its cores busy (a process gets a share "
            "of a core, as its threads did)"
            if _busy_host(rec)
            else ""
        )
    )
    advice = (
        f"Run pure-Python work in processes: workers with one thread each (LocalCluster(processes=True, "
        f"threads_per_worker=1), `dask worker --nworkers {n} --nthreads 1`), or use libraries that release "
        "the GIL (NumPy, pandas)"
    )
    return [
        finding(
            "gil-contention",
            f"{prefix}: threads took turns holding the GIL",
            evidence,
            advice,
            impact,
            groups=[h[2] for h in hits],
            workers=multi,
        )
    ]


def cpu_starved(rec: Record) -> list[dict]:
    """cpu-starved: the tasks' threads waited off the CPU (execute thread-noncpu) at least
    `starved-wait-share` of their time, yet did run on it now and then (at least 1% of
    it: waiting on sleep or I/O alone runs near 0), while the scheduler's host had at
    least `starved-host-cpu` percent of all its cores busy (the computation's `host_cpu`):
    the threads were ready and no core was free - other programs on the machine, or more
    threads than cores.

    Impact: the waiting over the computation's threads, what a core free for each thread
    would have saved; at most the wall time."""
    st = rec.settings
    host = rec.comp.get("host_cpu")
    if host is None or host < st["starved_host_cpu"]:
        return []
    off = rec.metric("thread-noncpu", context="execute")
    waited = sum(off.values())
    ran = sum(rec.metric("thread-cpu", context="execute").values())
    spent = waited + ran
    if spent <= 0 or waited < st["starved_wait_share"] * spent or ran < 0.01 * spent:
        return []
    cores: int | None = rec.comp.get("host_cores")
    threads = rec.threads
    most = sorted((p for p in off if p), key=lambda p: -off[p])
    evidence = (
        f"threads waited {secs(waited)} off the CPU and ran {secs(ran)} on it ({waited / spent:.0%} waiting; "
        f"execute thread-noncpu vs thread-cpu), while the scheduler's host had {host:.0f}% of "
        + (f"its {cores} cores" if cores else "its cores")
        + f" busy; the workers had {threads} threads"
        + (" (more threads than cores)" if cores and threads > cores else "")
        + f". Impact: the waiting over the {threads} threads"
    )
    if cores and threads > cores:
        title = f"more threads ({threads}) than cores ({cores}): threads waited for a free core"
        advice = (
            f"Use at most one thread per core: n_workers x threads_per_worker <= {cores} "
            f"(e.g. LocalCluster(n_workers={max(1, cores // 2)}, threads_per_worker=2)), and keep "
            "other work off the machine while it runs"
        )
    else:
        title = "the machine was busy: threads waited for a free core"
        advice = (
            "Free the machine's cores: stop other programs (another notebook's cluster, a build, "
            "a browser tab spinning) or run where cores are free; every figure of a run on a "
            "busy machine is slower than the code is"
        )
    return [
        finding(
            "cpu-starved",
            title,
            evidence,
            advice,
            min(waited / threads, rec.wall),
            groups=most[:3],
        )
    ]


def transfer_bound(rec: Record) -> list[dict]:
    """transfer-bound: groups whose tasks spent at least `transfer-share` of their time
    (transfer + compute, the task groups' figures) fetching their inputs from other
    workers.  What they fetched was at most their input groups' size (nbytes); fetched
    slower than `transfer-latency-rate`, the time was waiting (busy workers, a fetch per
    small input), not volume, and the advice says so.

    Impact: the transfer time over the threads that ran those groups (task stream; the
    cluster's threads without one), at most the wall time: a task waits for its inputs
    on its own thread.  The share of the fetches spent (de)serializing is the
    serialization finding's: cheaper data, not less of it, saves that."""
    share = rec.settings["transfer_share"]
    hits = [
        g
        for g in rec.groups
        if (g.get("transfer") or 0.0) > 0
        and g["transfer"] / (g["transfer"] + (g.get("compute") or 0.0)) >= share
    ]
    if not hits:
        return []
    hits.sort(key=lambda g: -g["transfer"])
    g = hits[0]
    coded = _fetch_serialization_share(rec)
    if coded >= 1.0:
        return []  # bound by (de)serializing: cheaper data, not less of it (serialization)
    threads = _threads_of(rec, hits)
    network = sum(rec.metric("network").values())
    sizes = {x["name"]: x.get("nbytes") or 0 for x in rec.groups}
    moved = sum(sizes.get(d, 0) for d in g.get("dependencies") or ())
    rate = moved / g["transfer"]
    latency = rate < rec.settings["transfer_latency_rate"]
    name = group_name(g["name"])
    evidence = (
        f"{name}: {secs(g['transfer'])} fetching inputs against {secs(g.get('compute') or 0.0)} of "
        f"compute ({g['transfer'] / (g['transfer'] + (g.get('compute') or 0.0)):.0%} transfer; task groups); "
        f"its inputs hold {format_bytes(moved)}, so at most that moved, at {format_bytes(rate)}/s or less"
        + (f"; workers spent {secs(network)} on the network (fine metrics)" if network else "")
        + (
            f"; {coded:.0%} of the fetches' time was (de)serializing (fine metrics; the "
            "serialization finding counts it)"
            if coded >= 0.005
            else ""
        )
        + f". Impact: the transfer time over the {threads} thread(s) that ran them"
        + (", less its (de)serializing share" if coded >= 0.005 else "")
    )
    if latency:
        title = f"{name} waited on fetches of little data"
        advice = (
            f"The fetches moved little data ({format_bytes(rate)}/s at most): their time was waiting, on "
            "workers too busy to answer or on one fetch per small input. Give each task more of its "
            "inputs at once (fewer, larger partitions or chunks; a tree reduction with a larger "
            "split_every), or free the workers' event loop (fewer threads per worker)"
        )
    else:
        title = f"{name} waited on data transfers"
        advice = (
            "Move less data between workers: reduce before combining (e.g. aggregate per partition "
            "first), keep the data with the work (persist inputs where they are used, avoid shuffles "
            "of wide data), or give workers more memory and fewer, larger workers"
        )
    return [
        finding(
            "transfer-bound",
            title,
            evidence,
            advice,
            min(sum(h["transfer"] for h in hits) / threads * (1 - coded), rec.wall),
            groups=[h["name"] for h in hits],
        )
    ]


def serialization(rec: Record) -> list[dict]:
    """serialization: (de)serialization and (de)compression (fine metrics, every
    context) took at least `serialization-share` of the time the tasks ran plus that.

    Impact: the fetches' (de)serializing share of the tasks' transfer time (a task
    waits on its inputs' decoding as on their transfer; transfer-bound claims the rest;
    all of it when the fetches were bound by it, `_fetch_serialization_share`),
    plus what was (de)serialized outside fetches (spilling, results) over the workers
    (each does its own, beside its tasks)."""
    spent: dict[str | None, float] = {}
    for activity in SERIALIZATION:
        for prefix, v in rec.metric(activity).items():
            spent[prefix] = spent.get(prefix, 0.0) + v
    total = sum(spent.values())
    ran = sum(rec.metric("thread-cpu", context="execute").values()) + sum(
        rec.metric("thread-noncpu", context="execute").values()
    )
    if total <= 0 or total / (total + ran) < rec.settings["serialization_share"]:
        return []
    named = sorted((p for p in spent if p), key=lambda p: -spent[p])
    by = "; ".join(
        f"{p or 'not tied to a task'}: {secs(v)}"
        for p, v in sorted(spent.items(), key=lambda x: -x[1])[:3]
    )
    workers = max(1, len(rec.worker_threads()))
    # A task waits on its inputs' (de)serializing as on their transfer: that share of the
    # fetch time is this finding's (transfer-bound claims the rest), and what was
    # (de)serialized outside fetches (spilling, results) is spread over the workers.
    fetching = [g for g in rec.groups if (g.get("transfer") or 0.0) > 0]
    coded = _fetch_serialization_share(rec)
    waited = sum(g["transfer"] for g in fetching) * coded / _threads_of(rec, fetching)
    fetch_coded = sum(
        v for c in FETCH_CONTEXTS for a in SERIALIZATION for v in rec.metric(a, context=c).values()
    )
    elsewhere = max(0.0, total - fetch_coded) / workers
    evidence = (
        f"{secs(total)} (de)serializing and (de)compressing data ({by}; fine metrics) against {secs(ran)} "
        f"running tasks ({total / (total + ran):.0%})"
        + (
            "; the fetches were bound by it (at least "
            f"{rec.settings['serialization_share']:.0%} of their time (de)serializing, and a worker "
            f"busy (de)serializing holds its transfers up): {secs(waited)} of fetching per thread"
            if coded >= 1.0
            else f"; it was {coded:.0%} of the time tasks waited on their inputs ({secs(waited)} of "
            "their fetches per thread)"
            if waited > 0
            else ""
        )
        + ". Impact: "
        + (
            "the fetches' time, plus "
            if coded >= 1.0
            else "that share of the fetches' time, plus "
            if waited > 0
            else ""
        )
        + f"the (de)serializing outside fetches over the {workers} worker(s)"
    )
    advice = (
        "Send less, or cheaper, data: return NumPy/pandas objects rather than Python lists and dicts of "
        "objects, avoid large closures and objects in the graph (load data inside tasks), and try "
        "distributed.comm.compression: false on a fast network"
    )
    title = f"(de)serialization took {total / (total + ran):.0%} of the time" + (
        f", most in {named[0]}" if named else ""
    )
    impact = min(waited + elsewhere, rec.wall)
    return [finding("serialization", title, evidence, advice, impact, groups=named[:3])]
