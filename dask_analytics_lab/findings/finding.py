"""A finding: what went wrong, why that matters, the recorded figures it rests on, what to
change, and what that would save (seconds of wall time, an estimate whose sum the
evidence spells out)."""

from __future__ import annotations

from ..figures import duration, format_bytes

__all__ = ["WHY", "finding", "format_bytes", "secs", "short"]

# Why each kind matters, in one line: what a newcomer to Dask may not know.
WHY = {
    "small-tasks": "Every task costs the scheduler and the workers the same overhead, whatever "
    "its work: thousands of tiny tasks spend more time being scheduled than computing.",
    "straggler": "One task far longer than its siblings keeps the whole computation waiting "
    "while the other threads sit idle.",
    "imbalance": "Work piled on one worker ends no sooner than that worker can do all of it.",
    "spilling": "Data written to disk and read back costs far more than memory: the tasks wait "
    "on the disk.",
    "memory-kill": "A worker killed for its memory loses everything it held: Dask computes it "
    "again, or gives up.",
    "gil-contention": "Threads of one Python process share one GIL: pure-Python tasks in them "
    "run one at a time, however many threads there are.",
    "cpu-starved": "Threads waiting for a free core make every figure slower than the code is, "
    "and hide what the computation itself could do better.",
    "transfer-bound": "Tasks waiting for their inputs to arrive from other workers compute "
    "nothing meanwhile.",
    "serialization": "Turning data into bytes and back costs CPU on both sides of every "
    "transfer and every spill.",
    "too-few-tasks": "With fewer tasks than threads, the other threads have nothing to do.",
    "failures": "A failed attempt is work thrown away, and a failure that retries hide today "
    "can fail the run tomorrow.",
    "slower-than-before": "The same code on the same inputs got slower: something changed in "
    "the code, its libraries or the cluster.",
    "idle-cluster": "An idle cluster still holds its workers' cores and memory, and costs what "
    "they cost.",
    "gpu-underused": "A GPU waiting on the host, on its inputs or on too few tasks is the "
    "costliest part of the cluster doing nothing.",
}


def finding(
    kind: str,
    title: str,
    evidence: str,
    advice: str,
    impact: float,
    *,
    groups: list[str] | None = None,
    workers: list[str] | None = None,
) -> dict:
    return {
        "kind": kind,
        "title": title,
        "why": WHY[kind],
        "evidence": evidence,
        "advice": advice,
        "impact": round(max(0.0, float(impact)), 3),
        "groups": list(groups or []),
        "workers": list(workers or []),
    }


def secs(x: float) -> str:
    """A duration as every table and view prints it (figures.duration: "150 ms",
    "12.5 s", "5m 00s"), so the evidence quotes the figures a reader sees there."""
    return duration(x)


def short(names: list[str], n: int = 3) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")
