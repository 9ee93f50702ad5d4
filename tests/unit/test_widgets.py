"""Widget models without a browser: what the kernel sends, and how little of it per tick."""

from __future__ import annotations

import json
import types

import anywidget  # noqa: F401,E402  (a test extra: a missing one fails the run)
import pytest

from dask_analytics_lab import display  # noqa: E402
from dask_analytics_lab.display import downsample  # noqa: E402
from dask_analytics_lab.widgets import _feed  # noqa: E402
from dask_analytics_lab.widgets._sync import KeyedTable  # noqa: E402
from dask_analytics_lab.widgets.monitor_widget import MonitorWidget  # noqa: E402
from dask_analytics_lab.widgets.views import Flamegraph, TaskGroups  # noqa: E402

from ..browser_helpers import browser_table  # noqa: E402


# --- the table protocol --------------------------------------------------------------
class Owner:
    """Stands in for a widget: records every trait set."""

    def __init__(self):
        self.sets: list[tuple[str, dict]] = []

    def __setattr__(self, name, value):
        if name != "sets":
            self.sets.append((name, json.loads(json.dumps(value))))
        object.__setattr__(self, name, value)


def test_table_sends_only_changes_and_browser_rebuilds_everything():
    owner = Owner()
    table = KeyedTable(owner, "groups", "name", min_patch=4, ratio=0.5)
    rows = [{"name": f"g{i}", "n": 0} for i in range(10)]
    table.update(rows)
    assert browser_table(owner, "groups", "name") == {r["name"]: r for r in rows}
    owner.sets.clear()

    assert table.update(rows) is False  # nothing changed: nothing sent
    assert owner.sets == []

    rows[3] = {"name": "g3", "n": 5}
    table.update(rows)
    assert [n for n, _ in owner.sets] == ["groups_patch"]  # the base is not resent
    assert owner.sets[0][1]["rows"] == [{"name": "g3", "n": 5}]
    assert browser_table(owner, "groups", "name")["g3"]["n"] == 5

    # Removing rows and changing many: past the threshold it rebases once.
    owner.sets.clear()
    rows = [{"name": f"g{i}", "n": 9} for i in range(2, 10)]
    table.update(rows)
    assert [n for n, _ in owner.sets] == ["groups_base", "groups_patch"]
    assert owner.sets[1][1]["rows"] == []
    assert browser_table(owner, "groups", "name") == {r["name"]: r for r in rows}


def test_table_partial_updates_and_replace():
    owner = Owner()
    table = KeyedTable(owner, "samples", "time")
    table.update([{"time": 1}, {"time": 2}], complete=False)
    table.update([{"time": 3}], complete=False)  # appends; keeps the rest
    assert sorted(browser_table(owner, "samples", "time")) == [1, 2, 3]
    table.replace([{"time": 9}])
    assert sorted(browser_table(owner, "samples", "time")) == [9]


def test_downsample_keeps_newest_and_bound():
    rows = [{"time": i} for i in range(1000)]
    out = downsample(rows, 100)
    assert len(out) == 100 and out[-1]["time"] == 999 and out[0]["time"] == 0
    assert downsample(rows[:5], 100) == rows[:5]


def test_label_of_names_final_groups():
    groups = [
        {"name": "a-1", "prefix": "random_sample", "n_tasks": 64, "dependencies": []},
        {"name": "b-2", "prefix": "mean_chunk", "n_tasks": 64, "dependencies": ["a-1"]},
        {"name": "c-3", "prefix": "mean_agg-aggregate", "n_tasks": 1, "dependencies": ["b-2"]},
    ]
    assert display.label_of(groups) == "mean_agg-aggregate"
    assert display.label_of([]) == ""


def test_clean_makes_browser_json():
    assert display.clean({"a": float("nan"), "b": [1.5, float("inf")], "c": "x"}) == {
        "a": None,
        "b": [1.5, None],
        "c": "x",
    }


# --- feeds against a simulated store -------------------------------------------------
class FakeStore:
    """What dask_analytics_lab.api returns, for a 50,000-task computation that progresses."""

    N_GROUPS = 20
    TASKS = 2500  # per group: 50,000 in all

    def __init__(self):
        self.step = 0
        self.calls: list[str] = []

    def groups(self):
        out = []
        for i in range(self.N_GROUPS):
            # Two groups move per step, in dependency order; the rest stay put.
            done = min(self.TASKS, max(0, (2 * self.step - i) * self.TASKS // 2))
            states = (
                {"memory": done, "waiting": self.TASKS - done}
                if done < self.TASKS
                else {"released": self.TASKS}
            )
            out.append(
                {
                    "name": f"g{i:02d}-abc",
                    "prefix": f"g{i:02d}",
                    "states": states,
                    "n_tasks": self.TASKS,
                    "compute": done * 0.01,
                    "transfer": 0.0,
                    "disk_read": 0.0,
                    "disk_write": 0.0,
                    "nbytes": done * 8000,
                    "start": 100.0 + i,
                    "stop": None,
                    "dependencies": [f"g{i - 1:02d}-abc"] if i else [],
                    "updated": 1.0,
                }
            )
        return out

    def running(self):
        return any(g["states"].get("waiting") for g in self.groups())

    def module(self):
        fs = self

        def record(name):
            fs.calls.append(name)

        def get_cluster(cluster_id, store=None):
            record("get_cluster")
            return {
                "cluster_id": cluster_id,
                "name": "fake",
                "started": 100.0,
                "stopped": None,
                "n_workers": 2,
                "sample_time": 100.0 + fs.step,
                "last_seen": 1e12,
            }

        def list_cluster_samples(cluster_id, limit=10_000, store=None):
            record(f"list_cluster_samples:{limit}")
            return [
                {"id": s, "time": 100.0 + s, "n_workers": 2}
                for s in range(max(0, fs.step + 1 - limit), fs.step + 1)
            ]

        def list_computations(cluster_id=None, limit=100, store=None):
            record("list_computations")
            return [
                {
                    "computation_id": "c1",
                    "cluster_id": "k1",
                    "start": 100.0,
                    "stop": None,
                    "state": "running" if fs.running() else "finished",
                    "n_tasks": 50_000,
                    "updated": float(fs.step),
                }
            ]

        def get_computation(computation_id, store=None):
            record("get_computation")
            return {
                "computation_id": computation_id,
                "cluster_id": "k1",
                "start": 100.0,
                "state": "running" if fs.running() else "finished",
                "n_erred": 0,
                "updated": float(fs.step),
                "groups": fs.groups(),
                "code": [
                    {
                        "hash": "h",
                        "text": "x.sum().compute()",
                        "filename": "cell.py",
                        "lineno_frame": 1,
                        "lineno_relative": 0,
                    }
                ],
            }

        def list_exceptions(**kwargs):
            record("list_exceptions")
            return []

        def get_profile(computation_id=None, cluster_id=None, prefix=None, store=None):
            record("get_profile")
            return {"count": 3, "identifier": "root", "description": {}, "children": {}}

        def run_summary(computation_id, store=None):
            record("run_summary")
            return {
                "computation_id": computation_id,
                "baseline_id": None,
                "wall": None,
                "findings": [],
                "groups": {},
                "runs": [],
            }

        def list_gpu_metrics(cluster_id=None, store=None, **kwargs):
            record("list_gpu_metrics")
            return []

        def list_worker_samples(cluster_id, worker=None, since=None, limit=100_000, store=None):
            record(f"list_worker_samples:{since}")
            return [
                {
                    "id": 2 * s + i,
                    "worker": f"tcp://w{i}",
                    "time": 100.0 + s,
                    "managed": 1000 * s,
                    "unmanaged": 5000,
                    "spilled": 0,
                    "memory_limit": 10**9,
                    "processing": 1,
                }
                for s in range(fs.step + 1)
                for i in range(2)
                if since is None or 100.0 + s >= since
            ]

        def list_task_stream(computation_id, limit=100_000, store=None):
            record("list_task_stream")
            return [
                {
                    "id": i,
                    "start": 100.0 + i,
                    "stop": 100.5 + i,
                    "worker": f"tcp://w{i % 2}",
                    "thread": 1,
                    "prefix": "g00",
                    "state": "memory",
                    "n_tasks": 1,
                    "busy": None,
                    "binned": False,
                }
                for i in range(20)
            ]  # what ran before: unchanged rows are not resent

        def list_events(cluster_id=None, topic=None, since=None, limit=1000, store=None):
            record(f"list_events:{topic}")
            return []

        def list_clusters(limit=100, store=None):
            return [{"cluster_id": "k1"}]

        def where(store=None):
            return "sqlite:///fake.db"

        return types.SimpleNamespace(
            **{k: v for k, v in locals().items() if callable(v) and k not in ("record", "fs")}
        )


class Recorder:
    """Replaces a widget's comm: keeps every state update the kernel would send."""

    def __init__(self, widget):
        self.messages: list[dict] = []
        widget.comm.send = self.send  # type: ignore[method-assign]

    def send(self, data=None, metadata=None, buffers=None):
        if data and data.get("method") == "update":
            self.messages.append(data["state"])

    def take(self) -> list[dict]:
        out, self.messages = self.messages, []
        return out


@pytest.fixture()
def fake_store(monkeypatch):
    store = FakeStore()
    fake = store.module()
    monkeypatch.setattr(_feed, "api", fake)
    import dask_analytics_lab.widgets.monitor_widget as mw

    monkeypatch.setattr(mw, "api", fake)
    return store


def test_live_50k_task_view_sends_small_updates(fake_store):
    w = MonitorWidget("k1", start=False)
    rec = Recorder(w)
    w.refresh()
    first = rec.take()
    assert len(first) == 1, "one tick must be one message"
    state = first[0]
    assert len(state["groups_base"]["rows"]) == 20 and state["computation_id"] == "c1"
    assert state["code"][0]["text"] == "x.sum().compute()"

    sizes, rebases = [], 0
    for _ in range(8):
        fake_store.step += 1
        w.refresh()
        msgs = rec.take()
        assert len(msgs) == 1
        msg = msgs[0]
        assert "code" not in msg and "computations_base" not in msg, (
            "unchanged rows must not be resent"
        )
        rebases += "groups_base" in msg
        sizes.append(len(json.dumps(msg)))
    full = len(json.dumps(first[0]))
    # A live tick carries the groups that moved lately, not the whole table; the table
    # is resent whole only now and then (when the patch has grown).
    assert sum(sizes) / len(sizes) < 0.6 * full, (sizes, full)
    assert rebases <= 3, rebases
    # And a tick with no progress sends nothing at all.
    w.refresh()
    assert rec.take() == []
    # The browser's view equals the store's current truth.
    view = browser_table(w, "groups", "name")
    assert {k: v["states"] for k, v in view.items()} == {
        g["name"]: g["states"] for g in fake_store.groups()
    }
    w.close()


def test_feed_reads_little_per_tick(fake_store):
    w = MonitorWidget("k1", start=False)
    w.refresh()
    fake_store.calls.clear()
    w.refresh()  # nothing changed: only the cheap reads
    assert sorted(set(fake_store.calls)) == ["get_cluster", "list_computations"], fake_store.calls
    fake_store.step += 1
    fake_store.calls.clear()
    w.refresh()
    assert "get_computation" in fake_store.calls  # the row's `updated` moved
    assert "list_cluster_samples:3" in fake_store.calls  # only the newest samples
    w.close()


def test_workers_are_read_from_the_newest_sample_on_and_all_stay_shown(fake_store):
    from dask_analytics_lab.polling import RULES, every_polls

    w = MonitorWidget("k1", start=False)
    for _ in range(every_polls(RULES["workers"]["every"], w.interval) + 1):
        fake_store.step += 1
        w.refresh()
    reads = [c for c in fake_store.calls if c.startswith("list_worker_samples")]
    assert reads[0] == "list_worker_samples:None" and len(reads) == 2, reads
    assert (
        reads[1] == f"list_worker_samples:{100.0 + 1}"
    )  # from the newest sample the first read saw
    shown = browser_table(w, "workers", "id")
    assert {r["time"] for r in shown.values()} == {100.0 + s for s in range(fake_store.step + 1)}
    w.close()


def test_profile_arrives_after_the_computation_finishes(fake_store):
    fake_store.step = 100  # all done
    w = Flamegraph("c1", start=False)
    w.refresh()
    assert w.profile["count"] == 3
    w.close()


def test_selecting_a_computation_resets_its_views(fake_store):
    w = MonitorWidget("k1", start=False)
    w.refresh()
    assert w.groups_base["rows"]
    w.computation_id = "other"  # what a click in the browser does
    assert w.groups_base["rows"] == [] and w.code == [] and w.follow is True
    w.close()


def test_taskgroups_view_alone(fake_store):
    w = TaskGroups("c1", start=False)
    w.refresh()
    assert w.computation["computation_id"] == "c1"
    assert len(browser_table(w, "groups", "name")) == 20
    w.close()


def test_widgets_point_at_built_bundles():
    from dask_analytics_lab.widgets._base import STATIC

    for name in (
        "monitor",
        "taskgroups",
        "flamegraph",
        "code",
        "cluster",
        "gpu",
        "share",
        "report-page",
    ):
        path = STATIC / f"{name}.js"
        assert path.exists(), f"{path} missing: pip install -e . builds it (npm run build)"
    assert "export" in (STATIC / "monitor.js").read_text()


def test_the_stylesheet_ships_once():
    """Every widget gets js/common/style.css through anywidget's _css; no bundle carries
    a copy of it (it used to be inlined into all of them)."""
    from dask_analytics_lab.widgets import views
    from dask_analytics_lab.widgets._base import STATIC
    from dask_analytics_lab.widgets.monitor_widget import MonitorWidget

    sheet = STATIC / "style.css"
    assert ".dal-tab" in sheet.read_text()
    for cls in (
        MonitorWidget,
        views.TaskGroups,
        views.Flamegraph,
        views.CodeSnippets,
        views.ClusterSummary,
        views.GpuMetrics,
        views.ShareButton,
    ):
        assert str(cls._css) == sheet.read_text(), cls
    for bundle in STATIC.glob("*.js"):
        assert "--dal-fg2:" not in bundle.read_text(), (
            f"{bundle.name} carries a copy of the stylesheet"
        )


# --- issue 8: the feed shows what the store says -----------------------------------------
def test_feed_takes_liveness_from_the_store_status(fake_store, monkeypatch):
    """A lost cluster (no stop message, status "lost" from the store) is history: the feed
    slows down instead of polling it as live forever; no clock rule of the feed's own."""
    fake_store.step = 100  # the computation finished
    fake = _feed.api
    real_get_cluster = fake.get_cluster

    def lost_cluster(cluster_id, store=None):
        row = real_get_cluster(cluster_id, store=store)
        return dict(row, stopped=None, last_seen=1e12, status="lost", ended=150.0, duration=50.0)

    monkeypatch.setattr(fake, "get_cluster", lost_cluster)
    w = MonitorWidget("k1", start=False)
    for _ in range(3):
        w.refresh()
    assert w.cluster["status"] == "lost"
    assert w._feed.live is False
    monkeypatch.setattr(
        fake,
        "get_cluster",
        lambda cid, store=None: dict(lost_cluster(cid), status="live", ended=None),
    )
    w.refresh()
    assert w._feed.live is True
    assert _feed.is_live({"stopped": None}) and not _feed.is_live(
        {"stopped": 5.0}
    )  # readers before `status`
    w.close()


def test_feed_lists_computations_by_their_stored_label(fake_store, monkeypatch):
    fake = _feed.api
    real_list = fake.list_computations

    def labelled(cluster_id=None, limit=100, store=None):
        return [
            dict(r, label="random_sample → sum", code_line="x.sum().compute()")
            for r in real_list(cluster_id, limit, store)
        ]

    monkeypatch.setattr(fake, "list_computations", labelled)
    fake_store.step = 100
    w = MonitorWidget("k1", start=False)
    w.refresh()
    rows = browser_table(w, "computations", "computation_id")
    assert (
        rows["c1"]["label"] == "random_sample → sum"
        and rows["c1"]["code_line"] == "x.sum().compute()"
    )
    w.close()


# --- issue 10: a widget reads the store only while a view of it is on screen ----------
def _wait_until(cond, what: str, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def _view(widget, view_id: str, visible: bool) -> None:
    """What js/common/onscreen.ts sends as a view comes on or goes off screen."""
    widget._handle_custom_msg({"type": "view", "id": view_id, "visible": visible}, [])


def test_widget_polls_only_while_a_view_is_on_screen(fake_store):
    w = MonitorWidget("k1", interval=0.02)
    clock = MonitorWidget("k1", interval=0.02)  # a widget that stays on screen: the ticker's pulse
    try:
        _view(clock, "clock", True)
        # Made but never shown: no reads.
        _wait_until(lambda: clock._feed.ticks >= 3, "the ticker ran")
        assert not w.polling and w._feed.ticks == 0

        _view(w, "a", True)
        _wait_until(lambda: w._feed.ticks >= 2, "the shown widget polls")
        _view(w, "b", True)  # a second view of it (the same output shown twice)
        _view(w, "a", False)  # the first one is removed: the other still shows it
        before = w._feed.ticks
        _wait_until(lambda: w._feed.ticks >= before + 2, "it polls while one view is left")

        _view(w, "b", False)  # the last view goes away (scrolled off, cleared, tab hidden)
        assert not w.polling
        stopped = w._feed.ticks
        pulse = clock._feed.ticks
        _wait_until(lambda: clock._feed.ticks >= pulse + 3, "the ticker ran on")
        assert w._feed.ticks <= stopped + 1, (
            "a widget with no view on screen kept polling"
        )  # +1: a tick in flight
        idle = w._feed.ticks

        _view(w, "c", True)  # a view returns: polling resumes at once
        assert w.polling
        _wait_until(lambda: w._feed.ticks > idle, "polling resumes")
        w._handle_custom_msg({"type": "view", "id": 7}, [])  # malformed: ignored
        assert w.polling
    finally:
        w.close()
        clock.close()
    assert not w.polling


def test_displayed_widget_polls_before_its_views_report(fake_store):
    """Displaying counts as on screen: a view's message waits for the kernel, which may
    be blocked in compute() in the same cell; the first message takes over."""
    w = MonitorWidget("k1", interval=0.02)
    try:
        assert not w.polling
        w._repr_mimebundle_()  # what display(w) / a cell's last expression calls
        assert w.polling
        _wait_until(lambda: w._feed.ticks >= 2, "the displayed widget polls")
        _view(w, "a", False)  # its view reports: off screen
        assert not w.polling
    finally:
        w.close()


def test_a_widget_whose_views_never_speak_stops_polling(fake_store, monkeypatch):
    """Displayed where no front end renders widgets (a terminal, nbconvert): no view ever
    speaks, so once the displaying cell has ended and SILENT_VIEW passed, it stops; a
    widget whose view spoke in time polls on."""
    from IPython.core.interactiveshell import InteractiveShell

    from dask_analytics_lab.widgets import _base

    monkeypatch.setattr(_base, "SILENT_VIEW", 0.05)
    shell = InteractiveShell.instance()
    silent = MonitorWidget("k1", interval=0.02)
    heard = MonitorWidget("k1", interval=0.02)
    try:
        silent._repr_mimebundle_()
        heard._repr_mimebundle_()
        assert silent.polling and heard.polling  # the cell still runs: it may be blocked
        _view(heard, "a", True)
        shell.events.trigger("post_run_cell", None)  # the cell ends
        _wait_until(lambda: not silent.polling, "the unseen widget stops polling")
        assert heard.polling
    finally:
        silent.close()
        heard.close()
        InteractiveShell.clear_instance()


def test_widget_made_with_start_false_never_polls(fake_store):
    w = MonitorWidget("k1", interval=0.02, start=False)
    try:
        _view(w, "a", True)
        assert not w.polling  # refresh() is how such a widget reads
    finally:
        w.close()
