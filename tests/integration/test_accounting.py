"""Issue 19, item 1: what analytics costs the scheduler is counted inside it, by part, as a
share of the event loop's own CPU, and `dal.status` shows it."""

from __future__ import annotations

import pytest
from distributed import wait
from distributed.diagnostics.plugin import SchedulerPlugin

import dask_analytics_lab as dal
from dask_analytics_lab.collect.accounting import PARTS

from ..cluster_helpers import recorded_cluster
from ..waiting import wait_for


class CountTransitions(SchedulerPlugin):
    """Dask calls every plugin's hook for every transition: an independent count."""

    name = "count-transitions"

    def __init__(self) -> None:
        self.calls = 0

    def transition(self, *args, **kwargs) -> None:
        self.calls += 1


def test_status_accounts_every_part_of_the_cost(sqlite_url):
    with recorded_cluster(sqlite_url, processes=True, config={"analytics.accounting": True}) as (
        client,
        info,
    ):
        client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.add_plugin(CountTransitions())
        )
        futures = client.map(lambda i: i + 1, range(2000))
        wait(futures)
        del futures
        # a profile fetch runs once the computation ended and a cycle passed
        wait_for(lambda: dal.status(client)["profiles_fetched"] >= 1, what="a profile fetch")
        status = dal.status(client)
        counted = client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.plugins["count-transitions"].calls
        )
    cost = status["cost"]
    assert set(cost["parts"]) == set(PARTS)
    # every transition after our counter arrived is counted (ours came first: it saw more)
    assert cost["transition_calls"] >= counted >= 4 * 2000
    for part in ("hooks", "graph", "ticks", "profiles"):
        assert cost["parts"][part] > 0, part
    assert cost["seconds"] == sum(cost["parts"].values())
    assert 0 < cost["seconds"] < cost["loop_cpu_seconds"]
    assert cost["share"] == cost["seconds"] / cost["loop_cpu_seconds"]
    assert (
        0 < cost["transition_us"] and cost["longest_call_ms"] > 0 and cost["longest_part"] in PARTS
    )
    assert cost["threads"]["dask-analytics-shipper"] > 0  # it wrote what the plugin sent
    assert 0 <= cost["gc_seconds"] <= cost["seconds"]
    # Dask's own cost of calling the hook, a part of hooks: the floor of any transition hook
    assert 0 < cost["dispatch_seconds"] <= cost["parts"]["hooks"]
    # The hook's own cost is timed calls less timed calls of it for no task,
    # Dask's call of it that less the clock alone: both baselines were taken.
    assert cost["hook_samples"] > 0 and cost["hook_baselines"] > 0
    assert cost["hooks_timed"] is True


def test_without_accounting_the_hook_is_not_timed_and_the_rest_is_counted(sqlite_url):
    # The default: the hook has no timing in it (collect/hook.py's `metered` is not
    # there), and says so; update_graph and ticks are timed per call either way.
    with recorded_cluster(sqlite_url) as (client, info):
        wait(client.map(lambda i: i + 1, range(500)))
        wait_for(lambda: dal.status(client)["cost"]["parts"]["ticks"] > 0, what="a tick")
        cost = dal.status(client)["cost"]
        hook = client.run_on_scheduler(
            lambda dask_scheduler: (
                dask_scheduler.plugins["dask-analytics-lab"].transition.__qualname__
            )
        )
    assert cost["hooks_timed"] is False
    assert cost["hook_samples"] == cost["hook_baselines"] == 0
    assert cost["parts"]["hooks"] == cost["dispatch_seconds"] == 0
    assert cost["parts"]["graph"] > 0 and cost["transition_calls"] >= 4 * 500
    assert hook == "_hook.<locals>.transition"  # the plain hook, not `metered` around it


def test_the_hooks_cost_and_dispatch_come_from_timed_calls_and_their_baselines():
    from dask_analytics_lab.collect.accounting import CLOCK, NO_OP, OUTLIER, CostMeter

    meter = CostMeter()
    meter.transition_calls = 1000

    def timed(seconds: float, what: int = 0) -> None:
        meter.begin_sample()
        meter.end_sample(seconds, what)

    timed(3e-6)
    timed(5e-6)
    assert meter.dispatch_seconds() == 0.0  # no baseline yet: all of it is the hook's
    assert meter.hooks_seconds() == pytest.approx(1000 * 4e-6)
    timed(1.5e-6, NO_OP)
    timed(2 * OUTLIER, NO_OP)  # descheduled: left out
    timed(0.5e-6, CLOCK)
    # Dask's call of the hook where it runs, less the clock: 1 us; the hook's own
    # work: 4 - 1.5 us; in all, the timed calls less the clock.
    assert meter.dispatch_seconds() == pytest.approx(1000 * 1e-6)
    assert meter.hooks_seconds() == pytest.approx(1000 * 3.5e-6)
    report = meter.report()
    assert report["hook_samples"] == 2 and report["hook_baselines"] == 2
    assert report["dispatch_us"] == pytest.approx(1.0)
    # Noise that puts the baseline above the hook: its own part is nothing, not less.
    timed(40e-6, NO_OP)
    assert meter.hooks_seconds() == meter.dispatch_seconds() == pytest.approx(1000 * 20.25e-6)


def test_an_intervals_hook_cost_comes_from_its_own_timed_calls():
    # A benchmark's row: the difference of two readings, costed with the row's own means
    # (the running means of all calls before would reprice the earlier rows' calls).
    from dask_analytics_lab.collect.accounting import (
        CLOCK,
        NO_OP,
        CostMeter,
        hook_seconds,
        sums_between,
    )

    meter = CostMeter()

    def timed(seconds: float, what: int = 0) -> None:
        meter.begin_sample()
        meter.end_sample(seconds, what)

    meter.transition_calls = 1000
    for seconds, what in ((2e-6, 0), (1e-6, NO_OP), (0.5e-6, CLOCK)):
        timed(seconds, what)
    before = meter.hook_sums()
    assert hook_seconds(before) == pytest.approx((1000 * 1.5e-6, 1000 * 0.5e-6))
    meter.transition_calls = 3000  # 2,000 more calls, each dearer
    for seconds, what in ((6e-6, 0), (2e-6, NO_OP), (0.5e-6, CLOCK)):
        timed(seconds, what)
    # As a client reads them through `dal.status`: the pairs come back as tuples.
    after = {k: tuple(v) if isinstance(v, list) else v for k, v in meter.hook_sums().items()}
    row = hook_seconds(sums_between(before, after))
    # The row's own calls: 6 less the clock, of it 1.5 us Dask's call.
    assert row == pytest.approx((2000 * 5.5e-6, 2000 * 1.5e-6))
    # The running means would have said otherwise: (4 - 0.5) us over all 3,000 calls.
    assert meter.hooks_seconds() - hook_seconds(before)[0] != pytest.approx(row[0])


def test_the_longest_call_is_the_plugins_own_work_and_a_collection_inside_it_is_shown_apart():
    # A full collection that starts inside a tick walks the whole heap (the scheduler's, in
    # a real run): the tick is charged all of it, but its longest call is its own work.
    import gc

    from dask_analytics_lab.collect.accounting import CostMeter

    heap = [[i] for i in range(300_000)]  # something for a full collection to walk
    meter = CostMeter(watch_gc=True)
    try:
        token = meter.enter("ticks")
        gc.collect()
        meter.leave(token)
    finally:
        meter.close()
    del heap
    cost = meter.report()
    assert cost["longest_gc_ms"] > 0
    assert cost["parts"]["ticks"] * 1e3 >= cost["longest_gc_ms"]  # charged in full
    assert cost["longest_call_ms"] < cost["parts"]["ticks"] * 1e3  # but not the longest own call
    assert cost["longest_part"] == "ticks"
