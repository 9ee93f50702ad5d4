"""Team questions: filters on clusters and computations (user, account, state, date
range, text) and keyset pages through `before=`, on SQLite and PostgreSQL, through the
public API; then the team server's list endpoints with the same parameters, attacked."""

from __future__ import annotations

import datetime as dt
import time

import pytest

import dask_analytics_lab as dal
from dask_analytics_lab import api
from dask_analytics_lab.ids import short_id
from dask_analytics_lab.store import open_store

from ..cli_helpers import table
from ..factories import T0, Cluster, group

DAY = 86400.0


def _cluster(account: str, user: str, name: str, started: float, **kw) -> Cluster:
    c = Cluster(account=account, t0=started)
    c.msgs = [c.cluster(name=name, user=user, started=started, **kw), c.sample()]
    return c


def build_team(url: str) -> dict:
    """Three clusters: ann's stopped ETL (team-a, T0), bob's live one (team-a, now),
    ann's lost one (team-b, T0 + 40 days) with a computation running when it went."""
    store = open_store(url)
    now = time.time()
    etl = _cluster("team-a", "ann", "etl-nightly", T0)
    etl.msgs += [
        etl.computation(
            "etl-1", start=T0 + 10, groups=[group("read_parquet-1"), group("groupby-2")]
        ),
        etl.computation("etl-2", start=T0 + 20, state="erred"),
        etl.computation("etl-3", start=T0 + 30, groups=[group("read_parquet-3")]),
        etl.stop(),
    ]
    # A long heartbeat keeps it live while the module's tests run.
    live = _cluster("team-a", "bob", "Bob's 100% scratch_pad", now - 100, heartbeat=3600.0)
    live.msgs += [
        live.computation("live-1", start=now - 50, state="running", label="train_model"),
        live.sample(at=now - 1),
    ]
    lost = _cluster("team-b", "ann", "etl-weekly", T0 + 40 * DAY)
    lost.msgs += [lost.computation("lost-1", start=T0 + 40 * DAY + 5, state="running")]
    for c in (etl, live, lost):
        store.ingest(c.msgs)
    store.close()
    api.close_readers()
    return {"url": url, "etl": etl, "live": live, "lost": lost, "now": now}


@pytest.fixture(scope="module")
def team(module_store_url):
    """build_team's store, once per backend: its tests only read it."""
    yield build_team(module_store_url)
    api.close_readers()


@pytest.fixture
def own_team(store_url):
    """build_team's store, for a test that adds to it."""
    yield build_team(store_url)
    api.close_readers()


def _ids(rows: list[dict], key: str = "cluster_id") -> list[str]:
    return [r[key] for r in rows]


def test_clusters_filter_by_user_account_state_dates_and_text(team):
    url, etl, live, lost = team["url"], team["etl"], team["live"], team["lost"]
    assert _ids(dal.list_clusters(store=url)) == [live.id, lost.id, etl.id]
    assert _ids(dal.list_clusters(user="ann", store=url)) == [lost.id, etl.id]
    assert _ids(dal.list_clusters(account="team-a", store=url)) == [live.id, etl.id]
    assert _ids(dal.list_clusters(user="ann", account="team-a", store=url)) == [etl.id]
    assert _ids(dal.list_clusters(state="live", store=url)) == [live.id]
    assert _ids(dal.list_clusters(state="stopped", store=url)) == [etl.id]
    assert _ids(dal.list_clusters(state="lost", store=url)) == [lost.id]
    # state agrees with each row's status, as the one lifecycle rule says
    for state in ("live", "stopped", "lost"):
        assert {r["status"] for r in dal.list_clusters(state=state, store=url)} == {state}
    # dates: epoch seconds, datetimes (aware or naive = UTC), ISO strings, ages
    assert _ids(dal.list_clusters(since=T0 + 1, store=url)) == [live.id, lost.id]
    assert _ids(dal.list_clusters(until=T0 + 1, store=url)) == [etl.id]
    t40 = dt.datetime.fromtimestamp(T0 + 40 * DAY, dt.UTC)
    assert _ids(dal.list_clusters(since=t40, until=t40 + dt.timedelta(seconds=1), store=url)) == [
        lost.id
    ]
    assert _ids(
        dal.list_clusters(
            since=t40.replace(tzinfo=None), until=t40.date() + dt.timedelta(days=1), store=url
        )
    ) == [lost.id]
    assert _ids(
        dal.list_clusters(since=t40.strftime("%Y-%m-%dT%H:%M:%SZ"), until="2030-01-01", store=url)
    ) == [live.id, lost.id]
    assert _ids(dal.list_clusters(since="1d", store=url)) == [live.id]
    # text: in the name, any case; LIKE's wildcards are plain characters
    assert _ids(dal.list_clusters(text="ETL", store=url)) == [lost.id, etl.id]
    assert _ids(dal.list_clusters(text="100%", store=url)) == [live.id]
    assert _ids(dal.list_clusters(text="t_h", store=url)) == []  # "_" would match "tch"
    assert _ids(dal.list_clusters(text="h_pad", store=url)) == [live.id]
    assert _ids(dal.list_clusters(text="%", store=url)) == [live.id]
    assert dal.list_clusters(user="nobody", store=url) == []


def test_computations_filter_by_user_account_state_dates_and_text(team):
    url, etl = team["url"], team["etl"]
    ids = lambda *a, **kw: _ids(dal.list_computations(*a, store=url, **kw), "computation_id")  # noqa: E731
    assert ids() == ["live-1", "lost-1", "etl-3", "etl-2", "etl-1"]
    assert ids(user="ann") == ["lost-1", "etl-3", "etl-2", "etl-1"]
    assert ids(user="ann", account="team-a") == ["etl-3", "etl-2", "etl-1"]
    assert ids(account="team-b") == ["lost-1"]
    assert ids(state="running") == ["live-1"]  # not lost-1: its cluster is gone
    assert ids(state="lost") == ["lost-1"]
    assert [r["state"] for r in dal.list_computations(state="lost", store=url)] == ["lost"]
    assert ids(state="erred") == ["etl-2"]
    assert ids(state="finished") == ["etl-3", "etl-1"]
    assert ids(since=T0 + 15, until=T0 + 30) == ["etl-2"]
    assert ids(text="READ_PARQUET") == ["etl-3", "etl-1"]
    assert ids(text="groupby") == ["etl-1"]
    assert ids(etl.id, state="finished", text="groupby") == ["etl-1"]
    assert ids(etl.id, user="bob") == []


def test_computation_text_searches_code_lines_and_task_prefixes(store_url):
    """--text finds a computation by the line that made it, and by a task prefix its
    label left out (a label names at most four)."""
    store = open_store(store_url)
    c = Cluster()
    many = [
        group(f"{p}-1") for p in ("read_csv", "astype", "fillna", "assign", "dropna", "to_parquet")
    ]
    store.ingest(
        [
            c.cluster(),
            c.code("cell", "df.groupby('k').v.mean().compute()\n"),
            c.computation(
                "by-line",
                code=["cell"],
                code_line="df.groupby('k').v.mean().compute()",
                label="read_parquet → mean",
            ),
            c.computation("by-prefix", groups=many, label="read_csv → astype → … → to_parquet"),
            c.computation(
                "neither", label="ones → sum", code=["cell"], code_line="x.sum().compute()"
            ),
        ]
    )
    store.close()
    try:
        ids = lambda text: _ids(dal.list_computations(text=text, store=store_url), "computation_id")  # noqa: E731
        assert "fillna" not in dal.get_computation("by-prefix", store=store_url)["label"]
        assert ids("GROUPBY('K')") == ["by-line"]
        assert ids("fillna") == ["by-prefix"]
        assert ids("mean") == ["by-line"]  # the label still counts
        assert ids(".compute()") == ["neither", "by-line"]
        assert ids("v_mean") == []  # "_" is a plain character, as in labels
    finally:
        api.close_readers()


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"since": "yesterday"}, "since must be seconds since the epoch"),
        ({"until": float("nan")}, "until must be"),
        ({"since": True}, "since must be"),
        ({"since": [1]}, "since must be"),
        ({"state": "dead"}, "state must be one of live, stopped, lost"),
        ({"before": "not-a-cursor"}, "before must be the `cursor` of the last row"),
        ({"before": "WzEsMl0"}, "before must be the `cursor`"),  # [1,2]: an id that is no text
        ({"text": ""}, "text must be text of 1 to 200 characters"),
        ({"user": "a\x00b"}, "user contains control characters"),
        ({"limit": -1}, "limit must be a whole number"),
    ],
)
def test_bad_values_say_what_to_pass(team, kw, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        dal.list_clusters(store=team["url"], **kw)


def test_computation_state_names_its_own_choices(team):
    with pytest.raises(ValueError, match="running, finished, erred, cancelled, lost"):
        dal.list_computations(state="live", store=team["url"])


def test_pages_follow_the_cursor_to_the_end(store_url):
    """Every row once, newest first, across pages, with ties on start broken by id."""
    store = open_store(store_url)
    c = Cluster(account="team-a")
    msgs = [c.cluster(started=T0)]
    for i in range(23):
        # three at a time share a start: the page boundary falls inside a tie
        msgs.append(
            c.computation(f"comp-{i:02d}", start=T0 + i // 3, label="sum" if i % 2 else "mean")
        )
    store.ingest(msgs)
    everything = _ids(store.list_computations(limit=None), "computation_id")
    assert len(everything) == 23
    pages, before = [], None
    while True:
        page = store.list_computations(limit=5, before=before)
        if not page:
            break
        pages.append(_ids(page, "computation_id"))
        before = page[-1]["cursor"]
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert sum(pages, []) == everything
    starts = [r["start"] for r in store.list_computations(limit=None)]
    assert starts == sorted(starts, reverse=True)
    # a filter holds across pages
    means, before = [], None
    while page := store.list_computations(limit=4, text="mean", before=before):
        means += _ids(page, "computation_id")
        before = page[-1]["cursor"]
    assert means == [x for x in everything if int(x[-2:]) % 2 == 0]
    # clusters too
    for i in range(6):
        store.ingest([Cluster(f"c-{i}", account="team-a").cluster(started=T0 + i // 2)])
    ids, before = [], None
    while page := store.list_clusters(limit=4, before=before):
        ids += _ids(page)
        before = page[-1]["cursor"]
    assert ids == _ids(store.list_clusters(limit=None))
    assert len(ids) == 7
    store.close()


# --- the team server: the same filters, inside the token's account -----------------------
@pytest.fixture(scope="module")
def server(team):
    from ..server_helpers import ServerThread

    with ServerThread({"store_url": team["url"]}) as s:
        yield s


def _get(server, path: str, token: str | None, **params) -> tuple[int, dict]:
    import urllib.parse

    from ..server_helpers import request

    status, body, _ = request(
        f"{server.url}/api{path}?{urllib.parse.urlencode(params)}", token=token
    )
    return status, body


def test_server_filters_stay_inside_the_tokens_account(team, server):
    a, b = server.token("team-a", "ann"), server.token("team-b", "ann")
    etl, live, lost = team["etl"], team["live"], team["lost"]
    ids = lambda body, key="cluster_id": [r[key] for r in body[key.split("_")[0] + "s"]]  # noqa: E731
    status, body = _get(server, "/clusters", a)
    assert status == 200 and ids(body) == [live.id, etl.id]
    status, body = _get(server, "/clusters", a, user="ann", text="etl")
    assert status == 200 and ids(body) == [etl.id]  # not team-b's etl-weekly
    status, body = _get(server, "/clusters", b, user="ann")
    assert status == 200 and ids(body) == [lost.id]
    status, body = _get(server, "/clusters", a, state="live", since="1d")
    assert ids(body) == [live.id]
    status, body = _get(server, "/computations", a, state="finished", until=str(T0 + 25))
    assert status == 200 and ids(body, "computation_id") == ["etl-1"]
    status, body = _get(server, "/computations", b, state="lost")
    assert ids(body, "computation_id") == ["lost-1"]
    status, body = _get(server, f"/clusters/{etl.id}/computations", a, text="read_parquet", limit=1)
    assert ids(body, "computation_id") == ["etl-3"]
    status, body = _get(
        server,
        f"/clusters/{etl.id}/computations",
        a,
        text="read_parquet",
        limit=1,
        before=body["computations"][0]["cursor"],
    )
    assert ids(body, "computation_id") == ["etl-1"]
    # pages through the public API and HttpReader
    import dask

    with dask.config.set({"analytics.store": server.url, "analytics.token": a}):
        api.close_readers()
        page = dal.list_computations(limit=2, user="ann")
        assert _ids(page, "computation_id") == ["etl-3", "etl-2"]
        page = dal.list_computations(limit=2, user="ann", before=page[-1]["cursor"])
        assert _ids(page, "computation_id") == ["etl-1"]
        assert _ids(dal.list_clusters(since=dt.datetime(2023, 11, 1), until="2023-12-01")) == [
            etl.id
        ]
        with pytest.raises(PermissionError, match="cannot read account 'team-b'"):
            dal.list_clusters(account="team-b")
        with pytest.raises(ValueError, match="state must be one of"):
            dal.list_clusters(state="gone")
    api.close_readers()


def test_server_account_filter_never_widens_and_no_login_reads_nothing(team, server):
    a = server.token("team-a", "ann")
    for path in ("/clusters", "/computations", f"/clusters/{team['etl'].id}/computations"):
        status, body = _get(server, path, None, user="ann")
        assert status == 401, (path, body)
        status, body = _get(server, path, a, account="team-b", user="ann")
        assert status == 403 and "cannot read account 'team-b'" in body["error"], (path, body)
    # another account's cluster by id, even with matching filters: as unknown
    status, body = _get(server, f"/clusters/{team['lost'].id}/computations", a, state="lost")
    assert status == 404
    # a cursor made from another account's row pages through one's own rows only
    b = server.token("team-b", "ann")
    status, body = _get(server, "/clusters", b)
    status, body = _get(server, "/clusters", a, before=body["clusters"][0]["cursor"])
    assert status == 200 and {r["account"] for r in body["clusters"]} == {"team-a"}


@pytest.mark.parametrize(
    "params, says",
    [
        ({"since": "yesterday"}, "since must be seconds since the epoch"),
        ({"until": "nan"}, "until must be"),
        ({"until": "inf"}, "until must be"),
        ({"since": "9" * 400}, "since must be"),
        ({"since": "2026-13-45"}, "since must be"),
        ({"state": "dead"}, "state must be one of"),
        ({"state": "' OR 1=1 --"}, "state must be one of"),
        ({"user": "x" * 201}, "user must be text of 1 to 200 characters"),
        ({"user": ""}, "user must be text"),
        ({"text": "a\x00b"}, "text contains control characters"),
        ({"text": "\x1b[2J"}, "text contains control characters"),
        ({"before": "%%%"}, "before must be the `cursor`"),
        ({"before": "eyJhIjoxfQ"}, "before must be the `cursor`"),  # {"a":1}
        ({"before": "WyJ4IiwieSJd"}, "before must be the `cursor`"),  # ["x","y"]
        ({"before": "A" * 5000}, "before must be the `cursor`"),
        ({"limit": "0"}, "limit must be a whole number"),
        ({"sort": "start"}, "unknown query parameter"),
    ],
)
def test_server_refuses_hostile_values_before_any_query(team, server, params, says, monkeypatch):
    token = server.token("team-a", "ann")
    called = []
    monkeypatch.setattr(server.ctx.store, "list_clusters", lambda **kw: called.append(kw) or [])
    monkeypatch.setattr(server.ctx.store, "list_computations", lambda **kw: called.append(kw) or [])
    for path in ("/clusters", "/computations"):
        if path == "/computations" and params.get("state") == "dead":
            params = {"state": "live"}  # a cluster's state, not a computation's
        status, body = _get(server, path, token, **params)
        assert status == 400 and says.split(" (")[0] in body["error"], (path, params, body)
    assert called == []


def test_server_repeated_filter_is_refused(team, server):
    from ..server_helpers import request

    token = server.token("team-a", "ann")
    status, body, _ = request(f"{server.url}/api/clusters?user=ann&user=bob", token=token)
    assert status == 400 and "give user once" in body["error"]


# --- the command line ----------------------------------------------------------------
def _cli(capsys, *args: str) -> tuple[int, str, str]:
    from dask_analytics_lab import cli

    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_filters_and_pages(team, capsys):
    url, etl, lost = team["url"], team["etl"], team["lost"]
    code, out, err = _cli(capsys, "--store", url, "clusters", "--user", "ann", "--text", "ETL")
    assert code == 0, err
    assert [r["cluster"] for r in table(out)] == [short_id(lost.id), short_id(etl.id)]
    code, out, _ = _cli(
        capsys,
        "--store",
        url,
        "clusters",
        "--state",
        "stopped",
        "--since",
        "2023-11-01",
        "--until",
        "2023-11-30",
    )
    assert [r["cluster"] for r in table(out)] == [short_id(etl.id)]
    # a full page says how to get the next one
    code, out, err = _cli(capsys, "--store", url, "computations", "--user", "ann", "--limit", "2")
    assert [r["computation"] for r in table(out)] == ["lost-1", "etl-3"]
    cursor = err.split("older: --before ")[1].strip()
    code, out, err = _cli(
        capsys, "--store", url, "computations", "--user", "ann", "--limit", "2", "--before", cursor
    )
    assert [r["computation"] for r in table(out)] == ["etl-2", "etl-1"]
    code, out, err = _cli(
        capsys,
        "--store",
        url,
        "computations",
        "--user",
        "ann",
        "--limit",
        "2",
        "--before",
        "x" + cursor,
    )
    assert code == 2 and "before must be the `cursor`" in err, err
    code, out, err = _cli(
        capsys, "--store", url, "computations", "--cluster", etl.id, "--state", "erred"
    )
    assert [r["computation"] for r in table(out)] == ["etl-2"]
    code, out, err = _cli(capsys, "--store", url, "clusters", "--since", "last tuesday")
    assert code == 2 and "since must be seconds since the epoch" in err
    code, out, err = _cli(capsys, "--store", url, "clusters", "--state", "running")
    assert code == 2 and "'running' is not one of 'live', 'stopped', 'lost'" in err


def test_cli_costs(team, capsys):
    code, out, err = _cli(
        capsys, "--store", team["url"], "costs", "--by", "month", "--account", "team-a"
    )
    assert code == 0, err
    assert [(r["month"], r["clusters"], r["computations"]) for r in table(out)] == [
        (dt.datetime.fromtimestamp(team["now"], dt.UTC).strftime("%Y-%m"), "1", "1"),
        ("2023-11", "1", "3"),
    ]
    code, out, err = _cli(capsys, "--store", team["url"], "costs", "--by", "week")
    assert code == 2 and "'week' is not one of 'user', 'day', 'month'" in err


def test_a_bare_number_is_refused_as_an_age_without_its_unit(team):
    # "--since 30" meant 30 days: as 30 s after 1970 it would quietly match everything.
    with pytest.raises(ValueError, match=r"since='30' reads as seconds since the epoch.*'30d'"):
        dal.list_clusters(since="30", store=team["url"])
    with pytest.raises(ValueError, match="until=7 reads as seconds"):
        dal.list_computations(until=7, store=team["url"])


def test_series_read_their_window_in_the_store_and_through_the_server(own_team):
    """Worker samples and events between since and until (a report of an early computation
    of a long-lived cluster reads its own stretch, not the newest rows)."""
    from ..server_helpers import ServerThread

    team, etl = own_team, own_team["etl"]
    store = open_store(team["url"])
    store.ingest(
        [etl.workers(2, at=T0 + t) for t in range(0, 1000, 10)]
        + [
            etl.msg("event", {"topic": "worker-joined", "time": T0 + t, "msg": {"worker": f"w{t}"}})
            for t in (5, 505, 905)
        ]
    )
    store.close()
    rows = dal.list_worker_samples(
        etl.id, since=T0 + 100, until=T0 + 200, limit=5, store=team["url"]
    )
    assert [r["time"] - T0 for r in rows] == [180, 190, 190, 200, 200]  # the newest 5 of the window
    rows = dal.list_worker_samples(etl.id, since=T0 + 100, until=T0 + 200, store=team["url"])
    assert {r["time"] - T0 for r in rows} == set(range(100, 201, 10)) and len(rows) == 22
    events = dal.list_events(
        etl.id, topic="worker-joined", since=T0 + 500, until=T0 + 600, store=team["url"]
    )
    assert [e["msg"]["worker"] for e in events] == ["w505"]
    with ServerThread({"store_url": team["url"]}) as server:
        a = server.token("team-a", "ann")
        status, body = _get(
            server, f"/clusters/{etl.id}/workers", a, since=str(T0 + 100), until=str(T0 + 200)
        )
        assert status == 200 and len(body["workers"]) == 22
        status, body = _get(
            server, "/events", a, cluster_id=etl.id, topic="worker-joined", since=str(T0 + 900)
        )
        assert status == 200 and [e["msg"]["worker"] for e in body["events"]] == ["w905"]
        for path, params in (
            (f"/clusters/{etl.id}/workers", {"since": "soon"}),
            ("/events", {"until": "nan"}),
            ("/gpu", {"since": "30"}),
        ):
            status, body = _get(server, path, a, **params)
            assert status == 400 and ("since" in body["error"] or "until" in body["error"]), (
                path,
                body,
            )
        status, body = _get(server, f"/clusters/{etl.id}/workers", None, since=str(T0))
        assert status == 401
        status, body = _get(
            server, f"/clusters/{etl.id}/workers", server.token("team-b", "ann"), since=str(T0)
        )
        assert status == 404  # another account's cluster: as unknown
