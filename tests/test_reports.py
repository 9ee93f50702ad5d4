"""Performance reports: distributed's HTML kept where asked, stored with a JSON twin, a
link printed; public by link or private to the account; embedded store and server."""

from __future__ import annotations

import dask
import dask.array as da
import pytest
from distributed import Client, LocalCluster

from dask_analytics_lab.api import close_readers
from dask_analytics_lab.reports import list_performance_reports, performance_report

from .server_helpers import ServerThread, request


@pytest.fixture(scope="module")
def client():
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


def test_report_in_the_embedded_store_served_by_the_server(client, sqlite_url, tmp_path, capsys):
    with (
        ServerThread({"store_url": sqlite_url}) as server,
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
        assert status == 200
        # 16 chunks and their reduction: every task in the stream and in the task groups.
        assert twin["summary"]["n_tasks"] >= 16
        assert sum(g["n_tasks"] for g in twin["task_groups"]) == twin["summary"]["n_tasks"]
        assert "sum-aggregate" in {g["prefix"] for g in twin["task_groups"]}
        assert {t["action"] for t in twin["task_stream"]} >= {"compute"}
        assert (
            twin["summary"]["n_workers"] == 2 and twin["summary"]["time_per_action"]["compute"] > 0
        )
        assert isinstance(twin["profile"]["count"], int)
        assert "_work()" in twin["summary"]["code"]

        with performance_report(filename=str(tmp_path / "private.html"), private=True) as secret:
            _work()
        assert request(secret.url)[0] == 401
        assert request(secret.url, token=server.token("team-b"))[0] == 404
        assert request(secret.url, token=server.token("team-a"))[0] == 200
        assert [r["private"] for r in list_performance_reports()] == [True, False]


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
