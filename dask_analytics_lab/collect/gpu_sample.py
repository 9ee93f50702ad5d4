"""What a worker's GPU sampler sends the scheduler: a `Sample` per reading of its
devices (collect/gpu_sampler.py makes them, collect/gpu_run.py turns them into rows)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from .gpu_nvml import Reading


class Sample(TypedDict):
    """One reading of every device, and what ran then: what the scheduler receives."""

    time: float
    task_groups: list[str]
    gpus: list[Reading]
    keys: NotRequired[list[str]]  # when at most MAX_KEYS tasks ran
    # When no task ran: what the worker waited on (WAIT_INPUTS, WAIT_MEMORY, WAIT_NOTHING).
    waiting: NotRequired[str]


# What a worker running no task waits on, from its own state machine.
WAIT_INPUTS = "inputs"  # tasks wait for data: being fetched, or still computed elsewhere
WAIT_MEMORY = "memory"  # paused: over the memory pause threshold
WAIT_NOTHING = "nothing"  # nothing to do here: no task waits on this worker
