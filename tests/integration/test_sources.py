"""Issue 45, item 2: the collector's computations from Dask's Computation objects or from
its spans (collect/sources.py), chosen by what the running distributed offers.

On this distributed Dask still keeps its Computation objects beside its spans, so a
recorder on the spans source can be checked against them in the same run: the same
computations at the same moments, with the same groups and code.  The record made from
each source is checked by the everyday sequences of test_record_truth.py, which run on
both.
"""

from __future__ import annotations

import dask
import pytest
from distributed import Client, LocalCluster, span, wait

import dask_analytics_lab as dal
from dask_analytics_lab.collect import sources
from dask_analytics_lab.collect.plugin import PLUGIN_NAME
from dask_analytics_lab.collect.sources import SourceUnavailable, SpansSource

from ..cluster_helpers import recorded_cluster


def inc(x):
    return x + 1


def double(x):
    return 2 * x


def _as_dask_sees_them(scheduler) -> list[tuple[set[str], list]]:
    return [({tg.name for tg in c.groups}, list(c.code)) for c in scheduler.computations]


def _as_spans_make_them(source: SpansSource) -> list[tuple[set[str], list]]:
    return [({tg.name for tg in c.groups}, list(c.code)) for c in source.computations]


def test_the_spans_source_makes_the_computations_dask_makes(sqlite_url):
    """Back to back, a re-run into groups still held, the same line run again into them
    (its code block already on their span), a graph submitted while another runs, a run
    after a failure, a user's span(): one computation where Dask made one, each with the
    groups and code blocks Dask gave its Computation."""
    config = {"analytics.computation.source": "spans"}
    with recorded_cluster(sqlite_url, config=config) as (client, info):
        scheduler = client.cluster.scheduler
        source = scheduler.extensions[sources.EXTENSION]
        assert isinstance(source, SpansSource)
        first = client.map(inc, range(10))
        wait(first)  # held: the re-run below lands in these live groups
        again = client.map(inc, range(10, 20))  # a new graph into the live group
        wait(again)
        busy = client.map(double, range(4))
        more = client.submit(inc, 100)  # while `busy` may still run: joins it, or not
        wait([*busy, more])
        failed = client.submit(lambda: 1 / 0)
        wait(failed)
        client.gather(client.map(double, range(10, 14)))
        held = []
        for i in range(2):  # the same code block twice, into the live group "inc"
            held.append(client.map(inc, range(100 * i + 50, 100 * i + 55)))
            wait(held[-1])
        with span("etl"):
            client.gather(client.map(double, range(20, 24)))
            client.gather(client.map(inc, range(20, 24)))
        status = dal.status(client)
        assert status["computation_source"] == "spans"
        mine = _as_spans_make_them(source)
        assert len(mine) == len(scheduler.computations) >= 8
        assert mine == _as_dask_sees_them(scheduler)
        assert all(code for _, code in mine)  # register() turned on the client's frames
        del first, again, busy, more, failed, held


def test_auto_takes_dasks_computations_where_this_distributed_has_them(sqlite_url):
    with recorded_cluster(sqlite_url) as (client, info):
        scheduler = client.cluster.scheduler
        plugin = scheduler.plugins[PLUGIN_NAME]
        assert plugin.source.computations is scheduler.computations
        assert dal.status(client)["computation_source"] == "computation"


def test_without_computation_objects_auto_takes_spans_and_says_what_is_missing():
    """A distributed that dropped Computation (Dask marks it deprecated): `auto` makes
    computations from spans; `computation` says what to set; no spans either says so."""
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster:
        scheduler = cluster.scheduler
        saved = scheduler.computations
        try:
            del scheduler.computations
            assert isinstance(sources._make(scheduler, "auto"), SpansSource)
            with pytest.raises(SourceUnavailable, match="set it to 'spans' or 'auto'"):
                sources._make(scheduler, "computation")
            spans = scheduler.extensions.pop("spans")
            try:
                with pytest.raises(SourceUnavailable, match="has none"):
                    sources._make(scheduler, "auto")
            finally:
                scheduler.extensions["spans"] = spans
        finally:
            scheduler.computations = saved


def test_a_bad_source_setting_says_which_are_known(sqlite_url):
    with dask.config.set({"analytics.computation.source": "tasks"}):
        with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
            with Client(cluster) as client, pytest.raises(Exception, match="computation.source"):
                dal.register(client, store=sqlite_url)


def test_a_restart_lets_go_of_computations_made_from_spans_without_the_recorder():
    """The GPU monitor alone reads the spans source too; client.restart() empties it as
    Dask empties its own computations, and the next graph begins a new one."""
    from dask_analytics_lab.collect.gpu_monitor import GPUMonitorPlugin

    with dask.config.set({"analytics.computation.source": "spans"}):
        with (
            LocalCluster(n_workers=1, processes=True, dashboard_address=":0") as cluster,
            Client(cluster) as client,
        ):
            client.register_plugin(GPUMonitorPlugin())
            scheduler = cluster.scheduler
            wait(client.map(inc, range(3)))
            source = scheduler.extensions[sources.EXTENSION]
            assert isinstance(source, SpansSource) and len(source.computations) == 1
            client.restart()
            assert len(source.computations) == len(scheduler.computations) == 0
            wait(client.map(double, range(3)))
            assert [{tg.name for tg in c.groups} for c in source.computations] == [{"double"}]
