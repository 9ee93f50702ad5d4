"""Issue 19, item 1: what analytics costs the scheduler is counted inside it, by part, as a
share of the event loop's own CPU, and `dal.status` shows it."""

from __future__ import annotations

from distributed import wait
from distributed.diagnostics.plugin import SchedulerPlugin

import dask_analytics_lab as dal
from dask_analytics_lab.collect.accounting import PARTS

from .cluster_helpers import recorded_cluster
from .waiting import wait_for


class CountTransitions(SchedulerPlugin):
    """Dask calls every plugin's hook for every transition: an independent count."""

    name = "count-transitions"

    def __init__(self) -> None:
        self.calls = 0

    def transition(self, *args, **kwargs) -> None:
        self.calls += 1


def test_status_accounts_every_part_of_the_cost(sqlite_url):
    with recorded_cluster(sqlite_url, processes=True) as (client, info):
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
    assert 0 < cost["dispatch_seconds"] < cost["parts"]["hooks"]


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
