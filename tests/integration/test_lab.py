"""%load_ext dask_analytics, the server extension's routes, and the widgets over a real
cluster's records (no browser: tests/browser/test_browser.py drives the real front end)."""

from __future__ import annotations

import json
from unittest import mock

import anywidget  # noqa: F401,E402  (a test extra: a missing one fails the run)
import dask
import pytest
from distributed import Client, LocalCluster  # noqa: E402

import dask_analytics_lab as dal  # noqa: E402
from dask_analytics_lab.lab import magics  # noqa: E402
from tests.cluster_helpers import FAST, recorded_cluster  # noqa: E402


@pytest.fixture()
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    with dask.config.set({"analytics.store": url, **FAST}):
        yield url


@pytest.fixture()
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    yield ip
    magics.unload(ip)
    magics._registered.clear()
    InteractiveShell.clear_instance()


def _work(client: Client) -> None:
    import dask.array as da

    x = da.ones((400, 400), chunks=100)
    (x + x.T).sum().compute()


def test_load_ext_records_current_and_later_clients(store, shell, capsys):
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as first,
    ):
        shell.run_line_magic("load_ext", "dask_analytics")
        out = capsys.readouterr().out
        assert "recording into sqlite:///" in out and "cluster" in out
        assert dal.status(first)["cluster_id"] == first.scheduler_info()["id"]
        # nframes is on, so computations from now on carry their code.
        assert dask.config.get("distributed.diagnostics.computations.nframes") >= 1
    # A Client made after %load_ext registers by itself, before its first computation.
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as later,
    ):
        info = dal.status(later)
        assert info["cluster_id"] == later.scheduler_info()["id"]
        assert "recording" in capsys.readouterr().out
        _work(later)
        dal.flush(later)
        comps = dal.list_computations(info["cluster_id"])
        assert comps and comps[0]["state"] == "finished"
    shell.run_line_magic("dask_analytics", "status")
    assert "recording into" in capsys.readouterr().out


def test_unload_stops_recording_new_clients(store, shell):
    shell.run_line_magic("load_ext", "dask_analytics")
    assert magics.PRELOAD in dask.config.get("distributed.client.preload")
    shell.run_line_magic("unload_ext", "dask_analytics")
    assert magics.PRELOAD not in dask.config.get("distributed.client.preload")


def test_monitor_over_a_real_cluster(store):
    from dask_analytics_lab.widgets import monitor

    def boom(x):
        raise ValueError(f"bad input {x}")

    with recorded_cluster(store, processes=False) as (client, info):
        # Recorded already: monitor() reads, it registers nothing a second time.
        with mock.patch.object(dal.api, "register", side_effect=AssertionError("registered")):
            w = monitor(client)
        try:
            assert w.cluster_id == info["cluster_id"]
            _work(client)
            futures = client.map(boom, range(3))
            with pytest.raises(ValueError):
                client.gather(futures)
            dal.flush(client)
            w.refresh()
            rows = [r for r in w.computations_base["rows"] + w.computations_patch["rows"]]
            assert len({r["computation_id"] for r in rows}) >= 2
            # Following the newest: the failed map, with its exception and traceback.
            w.refresh()
            groups = {g["name"]: g for g in w.groups_base["rows"] + w.groups_patch["rows"]}
            assert any(name.startswith("boom") for name in groups)
            for _ in range(20):
                w.refresh()
                if w.exceptions:
                    break
            assert "bad input" in w.exceptions[0]["exception_text"]
            assert w.cluster["n_workers"] == 2
            # The array computation: its code and a name made of its final groups.
            arrays = [r for r in rows if r.get("label") and "sum" in r["label"]]
            assert arrays, rows
            w.computation_id = arrays[0]["computation_id"]
            w.refresh()
            assert any("(x + x.T).sum().compute()" in c["text"] for c in w.code)
        finally:
            w.close()


def test_share_report_of_a_stored_computation(store):
    from dask_analytics_lab.reports.render import computation_report
    from dask_analytics_lab.reports.share import share_computation

    with recorded_cluster(store, processes=False) as (client, info):
        _work(client)
        dal.flush(client)
        cid = dal.list_computations(info["cluster_id"])[0]["computation_id"]
    page, twin, meta = computation_report(cid)
    assert "DaskAnalyticsReport.render" in page and cid in page
    assert twin["summary"]["computation_id"] == cid and twin["task_groups"]
    assert "</script" not in page.split('id="dal-state">', 1)[1].split("</script>", 1)[0]
    # Nothing serves this store to this process (no Jupyter kernel, no base-url): no link
    # rather than a dead one; the widget opens it from the Jupyter server it runs under.
    row = share_computation(cid)
    assert row["local"] is True and row["id"] and row["url"] is None
    with dask.config.set({"analytics.reports.base-url": "http://analytics.example"}):
        row = share_computation(cid)
    assert row["url"] == f"http://analytics.example/reports/{row['id']}"


def test_server_extension_routes_are_behind_jupyter_login(store):
    """Every route the extension mounts is a Jupyter handler under Jupyter's rules, report
    links included (tests/browser/test_lab_security.py attacks them on a running server)."""
    from jupyter_server.base.handlers import APIHandler, JupyterHandler

    from dask_analytics_lab.lab.serverext import JupyterRules, make_routes

    specs = make_routes("/user/x/", dask_analytics_lab_store(store))
    patterns = {s.regex.pattern: s.handler_class for s in specs}
    assert all(p.startswith("/user/x/dask-analytics") for p in patterns)
    for pattern, cls in patterns.items():
        assert issubclass(cls, JupyterHandler) and cls.__mro__[1] is JupyterRules, pattern
        assert cls.check_xsrf_cookie is JupyterRules.check_xsrf_cookie, (
            pattern
        )  # Jupyter's, not a no-op
        assert cls.set_default_headers is JupyterRules.set_default_headers, pattern
    assert issubclass(patterns["/user/x/dask-analytics/api/clusters$"], APIHandler)
    assert issubclass(patterns["/user/x/dask-analytics/lab/share$"], APIHandler)
    # The sidebar's list is the team server's own computations query, at the path it reads:
    # the same analytics handler (next after Jupyter's rules), with the same settings.
    by_path = {s.regex.pattern: s for s in specs}
    lab = by_path["/user/x/dask-analytics/lab/computations$"]
    api = by_path["/user/x/dask-analytics/api/computations$"]
    assert issubclass(lab.handler_class, APIHandler)
    assert lab.handler_class.__mro__[2] is api.handler_class.__mro__[2]
    assert lab.kwargs == api.kwargs
    report = patterns["/user/x/dask-analytics/reports/([^/]+)$"]
    assert not getattr(report.get, "__allow_unauthenticated", False), (
        "a report link needs the Jupyter login too"
    )
    # The analytics server's own token login has no place behind Jupyter's.
    assert not any(p.endswith(("/login$", "/logout$")) for p in patterns)


def dask_analytics_lab_store(url: str) -> str:
    from dask_analytics_lab import config

    return config.validate_store(url)


def test_load_ext_on_bad_config_names_the_key(shell):
    with dask.config.set({"analytics.interval": "soon"}):
        with pytest.raises(Exception, match="analytics.interval"):
            shell.run_line_magic("load_ext", "dask_analytics")


def test_jupyter_config_enables_the_server_extension():
    from pathlib import Path

    cfg = json.loads(
        (Path(__file__).parents[2] / "jupyter-config" / "dask_analytics_lab.json").read_text()
    )
    assert cfg["ServerApp"]["jpserver_extensions"] == {"dask_analytics_lab.lab": True}
    from dask_analytics_lab.lab import _jupyter_server_extension_points

    assert _jupyter_server_extension_points()[0]["module"] == "dask_analytics_lab.lab"


def test_a_store_it_cannot_serve_still_says_why_at_lab_info(tmp_path):
    """A bad analytics.store: only lab-info is mounted (behind Jupyter's rules), and it
    says why, so the sidebar shows the reason rather than "extension missing"."""
    import logging
    import types

    from dask_analytics_lab.lab.serverext import JupyterRules, load

    mounted: list = []
    app = types.SimpleNamespace(
        web_app=types.SimpleNamespace(
            settings={"base_url": "/u/"}, add_handlers=lambda host, specs: mounted.extend(specs)
        ),
        log=logging.getLogger("test"),
    )
    with dask.config.set({"analytics.store": "mysql://nowhere/db"}):
        load(app)
    assert [s.regex.pattern for s in mounted] == ["/u/dask-analytics/lab-info$"]
    spec = mounted[0]
    assert spec.handler_class.__mro__[1] is JupyterRules
    info = spec.kwargs["info"]
    assert info["mounted"] is False and "analytics.store" in info["error"], info
    assert "restart Jupyter" in info["error"]
