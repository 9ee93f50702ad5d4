"""Performance reports: distributed's HTML kept where asked, stored with a JSON twin, a
link printed; public by link or private to the account; embedded store and server.

The twin is the store's own rows of the block's window (reports/twin.py, the same kind
as the Share buttons'): the recorder's computations of the block, their task groups,
task stream, profile and findings.  A cluster that analytics does not record gives a
twin of the block alone, whose page says that the report holds no cluster record."""

from __future__ import annotations

import dask
import dask.array as da
import pytest
from distributed import Client, LocalCluster

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.reports import list_performance_reports, performance_report

from ..cluster_helpers import recorded_cluster
from ..server_helpers import ServerThread, request


@pytest.fixture(scope="module")
def client():
    """A cluster analytics does not record."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(autouse=True)
def _fresh_readers():
    yield
    close_readers()


def _work() -> None:
    assert da.ones((400, 400), chunks=100).sum().compute() == 160_000


def test_report_in_the_embedded_store_served_by_the_server(sqlite_url, tmp_path, capsys):
    with (
        ServerThread({"store_url": sqlite_url}) as server,
        recorded_cluster(sqlite_url) as (_, info),
        dask.config.set(
            {
                "analytics.store": sqlite_url,
                "analytics.reports.base-url": server.url,
                "analytics.account": "team-a",
                "analytics.user": "ann",
            }
        ),
    ):
        path = tmp_path / "dask-report.html"
        with performance_report(filename=str(path)) as report:
            _work()
        assert path.exists() and "Dask Performance Report" in path.read_text()
        assert f"Performance Report Available at: {report.url}" in capsys.readouterr().out
        assert report.url.startswith(server.url + "/reports/")

        [listed] = list_performance_reports()
        assert listed["url"] == report.url and listed["private"] is False
        assert (
            listed["filename"] == str(path)
            and listed["account"] == "team-a"
            and listed["user"] == "ann"
        )

        status, html, headers = request(report.url)  # public by link: no token
        # The server's own page, from the twin: the uploaded HTML never runs on its origin.
        assert status == 200 and "dal-state" in html and html != path.read_text()
        status, twin, _ = request(listed["json_url"])
        assert status == 200 and twin["v"] == 2
        # The store's rows of the block: its one computation, as the recorder stored it.
        [stored] = dal.list_computations(info["cluster_id"], store=sqlite_url)
        assert twin["summary"]["computation_ids"] == [stored["computation_id"]]
        assert twin["cluster"]["cluster_id"] == info["cluster_id"]
        assert [c["computation_id"] for c in twin["computations"]] == [stored["computation_id"]]
        # 16 chunks and their reduction: every task in the task groups, and in the stream.
        assert twin["summary"]["n_tasks"] == stored["n_tasks"] >= 17
        assert sum(g["n_tasks"] for g in twin["task_groups"]) == twin["summary"]["n_tasks"]
        assert "sum-aggregate" in {g["prefix"] for g in twin["task_groups"]}
        assert sum(r["n_tasks"] for r in twin["task_stream"]) == twin["summary"]["n_tasks"]
        assert twin["summary"]["n_workers"] == 2 and twin["summary"]["compute"] > 0
        assert isinstance(twin["profile"]["count"], int)
        assert twin["findings"] == dal.explain(stored["computation_id"], store=sqlite_url)
        assert "_work()" in twin["summary"]["code"]
        # The page is the one every report page is: the views over the same computation.
        assert stored["computation_id"] in html and '"has_record":true' in html

        with performance_report(filename=str(tmp_path / "private.html"), private=True) as secret:
            _work()
        assert request(secret.url)[0] == 401
        assert request(secret.url, token=server.token("team-b"))[0] == 404
        assert request(secret.url, token=server.token("team-a"))[0] == 200
        assert [r["private"] for r in list_performance_reports()] == [True, False]


def test_a_cluster_analytics_does_not_record_gives_the_block_alone(
    client, sqlite_url, tmp_path, capsys
):
    with dask.config.set({"analytics.store": sqlite_url}):
        with performance_report(filename=str(tmp_path / "r.html")) as report:
            _work()
    assert report.report is not None
    [listed] = list_performance_reports(store=sqlite_url)
    assert listed["summary"]["computation_ids"] == [] and listed["summary"]["block"] is True
    assert "_work()" in listed["summary"]["code"]


def test_report_uploaded_to_a_server(client, sqlite_url, tmp_path, capsys):
    with ServerThread({"store_url": sqlite_url}) as server:
        token_a, token_b = server.token("team-a", "ann"), server.token("team-b", "bob")
        with dask.config.set({"analytics.store": server.url, "analytics.token": token_a}):
            with performance_report(filename=str(tmp_path / "r.html"), private=True) as report:
                _work()
            assert report.url.startswith(server.url + "/reports/")
            assert f"Performance Report Available at: {report.url}" in capsys.readouterr().out
            assert [r["url"] for r in list_performance_reports()] == [report.url]
            # A token of one account cannot file reports under another: the file stays, a warning says why.
            with pytest.warns(UserWarning, match="could not be stored.*cannot upload"):
                with performance_report(
                    filename=str(tmp_path / "b.html"), account="team-b"
                ) as refused:
                    _work()
            assert refused.url is None and (tmp_path / "b.html").exists()
        assert request(report.url, token=token_a)[0] == 200
        assert request(report.url, token=token_b)[0] == 404
        assert request(report.url)[0] == 401
        status, twin, _ = request(report.url + ".json", token=token_a)
        assert (
            status == 200 and twin["report"]["user"] == "ann" and twin["report"]["private"] is True
        )
        with dask.config.set({"analytics.store": server.url, "analytics.token": token_b}):
            assert list_performance_reports() == []


def test_publish_says_which_argument_is_wrong(sqlite_url):
    from dask_analytics_lab.reports import publish

    twin = {"summary": {}}
    for kwargs, problem in (
        ({"html": ""}, "html must be the report's HTML"),
        ({"twin": []}, "twin must be a JSON object"),
        ({"private": "yes"}, "private must be true or false"),
        ({"account": 7}, "account must be a string"),
        ({"filename": "x" * 1001}, "filename must be a string of at most 1000"),
    ):
        args = {"html": "<p>r</p>", "twin": twin, "filename": "r.html", **kwargs}
        with pytest.raises(ValueError, match=problem):
            publish(args.pop("html"), args.pop("twin"), store=sqlite_url, **args)
    assert list_performance_reports(store=sqlite_url) == []  # nothing half-stored
    row = publish("<p>r</p>", twin, filename="r.html", store=sqlite_url)
    assert [r["id"] for r in list_performance_reports(store=sqlite_url)] == [row["id"]]


def test_a_cluster_recording_to_a_server_gets_its_rows_as_the_twin(sqlite_url, tmp_path):
    """The recorder writes to a team server: the report's twin is the server's rows of
    the block, read with the token, and the link is the server's."""
    with ServerThread({"store_url": sqlite_url}) as server:
        token = server.token("team-a", "ann")
        config = {"analytics.store": server.url, "analytics.token": token}
        with dask.config.set(config), recorded_cluster(server.url, config=config) as (_, info):
            with performance_report(filename=str(tmp_path / "r.html"), private=True) as report:
                _work()
        assert report.url.startswith(server.url + "/reports/")
        status, twin, _ = request(report.url + ".json", token=token)
        assert status == 200 and twin["cluster"]["cluster_id"] == info["cluster_id"]
        [comp] = twin["computations"]
        assert comp["n_tasks"] >= 17 and "sum-aggregate" in {
            g["prefix"] for g in twin["task_groups"]
        }
        assert twin["report"]["account"] == "team-a"


def test_twins_stored_by_earlier_releases_still_make_their_pages():
    """Reports already stored keep opening: an earlier Share twin (no "v") and an earlier
    performance_report twin (made on the scheduler) become the same page state."""
    from dask_analytics_lab.reports.twin_page import twin_report_page, twin_state

    share = {
        "summary": {"computation_id": "c1", "cluster_id": "k1", "label": "spin"},
        "cluster": {"cluster_id": "k1", "name": "k1"},
        "computations": [{"computation_id": "c1", "state": "finished", "start": 1.0}],
        "task_groups": [{"name": "spin", "computation_id": "c1", "n_tasks": 3}],
        "task_stream": [{"id": 0, "start": 1.0, "stop": 2.0, "prefix": "spin"}],
        "findings": [{"kind": "straggler", "title": "t"}],
        "profile": {"count": 0},
    }
    state = twin_state(share)
    assert state["computation_id"] == "c1" and state["groups_base"]["rows"][0]["name"] == "spin"
    assert state["stream_base"]["rows"] == share["task_stream"]
    assert state["findings"] == {"computation_id": "c1", "findings": share["findings"]}
    scheduler_made = {
        "summary": {
            "start": 1.0,
            "stop": 3.0,
            "n_tasks": 1,
            "time_per_action": {"compute": 1.5},
            "code": "x.sum().compute()",
        },
        "task_groups": [{"name": "sum", "n_tasks": 1, "computation_id": "x"}],
        "task_stream": [{"key": "sum-1", "action": "compute", "start": 1.0, "stop": 2.5}],
        "profile": {"count": 0},
    }
    state = twin_state(scheduler_made, {"title": "old"})
    assert state["computation"]["label"] == "old" and state["computation"]["compute"] == 1.5
    assert [r["prefix"] for r in state["stream_base"]["rows"]] == ["sum"]
    # Its code, named as the block it was (never "<unknown> line ?").
    [code] = state["code"]
    assert code["text"] == "x.sum().compute()" and code["filename"] == "the report's block"
    assert code["lineno_frame"] == 1
    assert "dal-state" in twin_report_page(scheduler_made, {"title": "old"})


def test_async_with_gives_the_report_and_where_its_block_is(sqlite_url, tmp_path):
    import asyncio

    async def block() -> performance_report:
        async with (
            LocalCluster(
                n_workers=1, processes=False, asynchronous=True, dashboard_address=":0"
            ) as cluster,
            Client(cluster, asynchronous=True) as client,
        ):
            async with performance_report(filename=str(tmp_path / "r.html")) as report:
                assert await client.submit(sum, [1, 2]) == 3  # async-block-marker
        return report

    with dask.config.set({"analytics.store": sqlite_url}):
        report = asyncio.run(block())
    assert report is not None and report.report is not None
    summary = report.report["summary"]
    assert "async-block-marker" in summary["code"]
    assert summary["frame"]["filename"] == __file__ and summary["frame"]["lineno_frame"] > 0
