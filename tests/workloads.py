"""What the tests' clusters run: task functions shared by more than one test module.

Task prefixes are these functions' names (`spin`, `total`): the tests read them back."""

from __future__ import annotations

import time

from dask import delayed


def spin(seconds: float, i: int = 0) -> int:
    """Pure Python on the CPU for `seconds` of its thread's CPU time (its compute time is
    its run time)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    return i


def total(xs: list) -> int:
    return sum(xs)


def job(client, seconds: float) -> int:
    # One line makes every run: the runs share their fingerprint.
    return client.compute(delayed(total)([delayed(spin)(seconds, i) for i in range(4)])).result()


def etl(n: int) -> float:
    """A tree reduction whose depth follows the size: 1000-element chunks, 4 at a time,
    so 3 chunks reduce in one step and 6 need a `sum-partial` step first."""
    import dask.array as da

    x = da.random.random(n, chunks=1000)
    return (x + 1).sum(split_every=4).compute()
