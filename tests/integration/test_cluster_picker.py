"""The monitor's cluster picker, kernel side: the list of recorded clusters it carries,
and that choosing one switches every trait to that cluster's history and back.

A real SQLite store filled through its own ingest (tests/views_data.py, plus a live
cluster of this test's own), read by the real MonitorWidget feed; and the same through a
team server (the remote reader).
"""

from __future__ import annotations

import anywidget  # noqa: F401  (a test extra: a missing one fails the run)
import pytest

from dask_analytics_lab.api import close_readers
from dask_analytics_lab.widgets import _feed
from dask_analytics_lab.widgets.monitor_widget import MonitorWidget
from tests.views_data import HOSTILE, build, live_cluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('picker') / 'analytics.db'}"
    sc = build(url)
    live = live_cluster(url)
    yield url, sc, live
    close_readers()


def ticks(w: MonitorWidget, n: int = 3) -> MonitorWidget:
    for _ in range(n):  # the cluster, then its computations, then the chosen one's details
        w.refresh()
    assert not w.error, w.error
    return w


def computations(w: MonitorWidget) -> set[str]:
    rows = {r["computation_id"] for r in w.computations_base["rows"]}
    if w.computations_patch["v"] == w.computations_base["v"]:
        rows -= set(w.computations_patch["removed"])
        rows |= {r["computation_id"] for r in w.computations_patch["rows"]}
    return rows


def groups(w: MonitorWidget) -> set[str]:
    rows = {r["name"] for r in w.groups_base["rows"]}
    if w.groups_patch["v"] == w.groups_base["v"]:
        rows |= {r["name"] for r in w.groups_patch["rows"]}
    return rows


def test_picker_lists_recorded_clusters_newest_first_with_status(store):
    url, sc, live = store
    w = ticks(MonitorWidget(live, store=url, start=False))
    try:
        listed = [(c["cluster_id"], c["name"], c["status"]) for c in w.clusters]
        assert listed == [
            (live, HOSTILE, "live"),
            (sc.lost["cluster_id"], "crashed-kernel", "lost"),
            (sc.stopped["cluster_id"], "etl-nightly", "stopped"),
        ]
        assert all(c["started"] for c in w.clusters)
        assert w.home == {
            "cluster_id": live,
            "follow": False,
            "label": "the cluster it opened on",
            "tag": "opened here",
        }
    finally:
        w.close()


def test_choosing_another_cluster_switches_every_trait_and_back(store):
    url, sc, live = store
    w = ticks(MonitorWidget(live, store=url, start=False))
    try:
        assert w.cluster["name"] == HOSTILE and computations(w) == {"comp-live-sum"}
        assert w.computation_id == "comp-live-sum" and groups(w) == {"ones-aaa", "sum-bbb"}
        assert w.profile.get("count")
        live_samples = w.samples_base["rows"]
        assert live_samples

        # What the browser does: cluster_id and follow_cluster in one message.
        w.set_state({"follow_cluster": False, "cluster_id": sc.stopped["cluster_id"]})
        # At once, before any read: nothing of the live cluster is left in the traits.
        assert w.cluster == {} and computations(w) == set() and groups(w) == set()
        assert w.computation_id is None and w.profile == {} and w.code == [] and w.exceptions == []
        ticks(w)
        assert w.cluster["name"] == "etl-nightly" and w.cluster["status"] == "stopped"
        assert computations(w) == {sc.stopped["groupby"], sc.stopped["parse"], sc.stopped["early"]}
        assert w.computation_id == sc.stopped["parse"]  # its newest
        assert groups(w) == {"load-0a1b2c3d4e", "parse-5f6a7b8c9d", "store-1c2d3e4f5a"}
        assert [e["count"] for e in w.exceptions] == [500]
        assert w.samples_base["rows"] and w.samples_base["rows"] != live_samples
        assert w.home["cluster_id"] == live  # where "back" goes does not move

        # A computation of that cluster, chosen by a click, shows as usual.
        w.set_state({"computation_id": sc.stopped["groupby"], "follow": False})
        ticks(w, 1)
        assert groups(w) == {"read_parquet-1a2b3c4d5e", "groupby-agg-6f7a8b9c0d"}

        # Back to the cluster it opened on.
        w.show_cluster()
        ticks(w)
        assert w.cluster_id == live and w.cluster["name"] == HOSTILE
        assert computations(w) == {"comp-live-sum"} and w.computation_id == "comp-live-sum"
        assert groups(w) == {"ones-aaa", "sum-bbb"}
    finally:
        w.close()


def test_following_the_newest_and_back_to_it(store):
    url, sc, live = store
    w = ticks(MonitorWidget(store=url, start=False))  # no client: the newest, followed
    try:
        assert w.home["follow"] is True and w.cluster_id == live
        w.show_cluster(sc.lost["cluster_id"])
        ticks(w)
        assert w.follow_cluster is False and w.cluster["name"] == "crashed-kernel"
        assert computations(w) == {sc.lost["train"]} and w.computation["state"] == "lost"
        w.show_cluster()  # back: follows the newest again
        ticks(w)
        assert (
            w.follow_cluster is True
            and w.cluster_id == live
            and computations(w) == {"comp-live-sum"}
        )
    finally:
        w.close()


def test_opened_on_a_computation_goes_back_to_its_cluster(store):
    url, sc, live = store
    w = ticks(MonitorWidget(computation_id=sc.stopped["early"], store=url, start=False))
    try:
        assert (
            w.cluster_id == sc.stopped["cluster_id"]
            and w.home["cluster_id"] == sc.stopped["cluster_id"]
        )
        assert w.computation_id == sc.stopped["early"]  # the one asked for, kept
        w.show_cluster(live)
        ticks(w)
        assert computations(w) == {"comp-live-sum"}
        w.show_cluster()
        ticks(w)
        assert w.cluster_id == sc.stopped["cluster_id"] and w.cluster["name"] == "etl-nightly"
    finally:
        w.close()


def test_the_list_is_bounded_and_keeps_the_cluster_shown(store, monkeypatch):
    url, sc, live = store
    monkeypatch.setattr(_feed, "MAX_CLUSTERS", 1)
    w = ticks(MonitorWidget(sc.stopped["cluster_id"], store=url, start=False))
    try:
        # The newest one, and the (older) one on screen after it.
        assert [c["cluster_id"] for c in w.clusters] == [live, sc.stopped["cluster_id"]]
    finally:
        w.close()


def test_opening_the_picker_reads_the_list_now(tmp_path):
    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    first = live_cluster(url, name="first")
    w = ticks(MonitorWidget(first, store=url, start=False))
    try:
        assert [c["name"] for c in w.clusters] == ["first"]
        other = live_cluster(
            url,
            name="just-started",
            cluster_id="tcp://10.0.0.10:8786-newer",
            computation="comp-newer",
        )
        w.refresh()
        assert [c["name"] for c in w.clusters] == ["first"]  # read now and then, not every tick...
        w._handle_custom_msg({"type": "clusters"}, [])  # ...and at once when the picker opens
        w.refresh()
        assert [c["cluster_id"] for c in w.clusters] == [other, first]
    finally:
        w.close()
        close_readers()


def test_picker_over_a_team_server(store):
    from tests.server_helpers import ServerThread

    url, sc, live = store
    with ServerThread({"store_url": url, "token_required": False}) as server:
        w = ticks(MonitorWidget(live, store=server.url, start=False))
        try:
            assert [c["name"] for c in w.clusters][:3] == [HOSTILE, "crashed-kernel", "etl-nightly"]
            assert [c["status"] for c in w.clusters][:3] == ["live", "lost", "stopped"]
            w.set_state({"follow_cluster": False, "cluster_id": sc.stopped["cluster_id"]})
            ticks(w)
            assert w.cluster["name"] == "etl-nightly"
            assert computations(w) == {
                sc.stopped["groupby"],
                sc.stopped["parse"],
                sc.stopped["early"],
            }
            assert groups(w) == {"load-0a1b2c3d4e", "parse-5f6a7b8c9d", "store-1c2d3e4f5a"}
        finally:
            w.close()
