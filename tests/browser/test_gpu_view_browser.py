"""The GPU view in a real Chromium (issue 39): a GPU two workers share is drawn once and
names both workers; a GPU of its own is drawn once too.  The notebook monitor's state is
read from a real store by the widget's Python feed and rendered by the built module
(dask_analytics_lab/static/monitor.js), as tests/browser/test_views_browser.py does."""

from __future__ import annotations

import json
import shutil

import anywidget  # noqa: F401  (a test extra: a missing one fails the run)
import playwright  # noqa: F401  (a test extra: a missing one fails the run)
import pytest

from dask_analytics_lab.api import close_readers
from dask_analytics_lab.store import open_store
from tests.browser_helpers import WIDGET_HARNESS, save, static_server, widget_state
from tests.factories import Cluster

pytestmark = pytest.mark.timeout(180)

W1, W2, W3 = "tcp://10.0.0.5:4000", "tcp://10.0.0.5:4001", "tcp://10.0.0.5:4002"


def _samples(c: Cluster, worker: str, uuid: str, index: int, shared_by: list[str] | None):
    rows = [
        {
            "timestamp": float(i),
            "time": c.t + i,
            "gpu_uuid": uuid,
            "gpu_index": index,
            "gpu_name": "NVIDIA H200",
            "mem_used": (i + 1) * 2**30,
            "mem_total": 140 * 2**30,
            "mem_util": 10.0,
            "compute_util": 13.0,
            "job": None,
            "dag": None,
            "task_groups": [],
            "waiting": "inputs",
            "shared_by": shared_by,
        }
        for i in range(5)
    ]
    return c.msg(
        "gpu_samples", {"worker": worker, "host": "gpu-box", "monitor_id": "m1", "samples": rows}
    )


def test_a_shared_gpu_is_one_chart_that_names_its_workers(tmp_path, page):
    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    c = Cluster()
    msgs = [
        c.cluster(),
        _samples(c, W1, "GPU-shared", 0, [W1, W2]),
        _samples(c, W3, "GPU-solo", 1, None),
    ]
    with open_store(url) as store:
        store.ingest(msgs)
    try:
        state = widget_state(url, c.id, None)
    finally:
        close_readers()
    assert {r["gpu_uuid"] for r in state["gpu_base"]["rows"]} == {"GPU-shared", "GPU-solo"}

    from dask_analytics_lab.widgets._base import STATIC

    root = tmp_path / "harness"
    root.mkdir()
    shutil.copy(STATIC / "monitor.js", root / "monitor.js")
    shutil.copy(STATIC / "style.css", root / "style.css")
    (root / "index.html").write_text(WIDGET_HARNESS)
    (root / "gpu.json").write_text(json.dumps(state))
    with static_server(root) as base:
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.harnessReady === true")
        page.evaluate("() => window.show('gpu')")
        monitor = page.locator(".dal-monitor")
        monitor.locator(".dal-tab", has_text="GPU").click()
        sections = monitor.locator(".dal-gpu .dal-section")
        sections.first.wait_for()
        titles = [t.lower() for t in sections.all_inner_texts()]  # drawn in capitals
        assert len(titles) == 2, titles
        shared = next(t for t in titles if "gpu 0" in t)
        assert f"shared by {W1}, {W2}" in shared and "gpu-box" in shared, shared
        solo = next(t for t in titles if "gpu 1" in t)
        assert W3 in solo and "shared" not in solo, solo
        monitor.screenshot(path=save("views-gpu-shared.png"))
