"""dal.cost_report: cost per user, per UTC day and per UTC month, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

import dask_analytics_lab as dal
from dask_analytics_lab import api
from dask_analytics_lab.store import open_store

from ..factories import T0, Cluster

# T0 is 2023-11-14 22:13:20 UTC: two hours later is the next day in UTC.
DAY = 86400.0


def _priced(
    account: str, user: str, started: float, core_hours: float, cost: float | None, comps: int
) -> list[dict]:
    c = Cluster(account=account, t0=started)
    msgs = [
        c.cluster(user=user, started=started, price_per_core_hour=None if cost is None else 0.05),
        c.sample(core_seconds=core_hours * 3600, cost=cost),
    ]
    msgs += [c.computation(f"{c.id}-{i}", start=started + i) for i in range(comps)]
    return msgs


@pytest.fixture(scope="module")
def costs(module_store_url):
    """The priced clusters, once per backend: the tests only read them."""
    store = open_store(module_store_url)
    for msgs in (
        _priced("team-a", "ann", T0, 10.0, 0.5, 2),  # 2023-11-14
        _priced("team-a", "bob", T0 + 7200, 40.0, 2.0, 1),  # 2023-11-15 (UTC)
        _priced("team-a", "ann", T0 + 20 * DAY, 4.0, 0.2, 0),  # 2023-12-04
        _priced("team-a", "cy", T0 + 21 * DAY, 1.0, None, 3),  # no price
        _priced("team-b", "ann", T0, 1000.0, 50.0, 1),  # another account
    ):
        store.ingest(msgs)
    store.close()
    api.close_readers()
    yield module_store_url
    api.close_readers()


def _pick(rows: list[dict]) -> list[tuple]:
    return [
        (
            r["key"],
            r["clusters"],
            r["computations"],
            round(r["core_hours"], 6),
            None if r["cost"] is None else round(r["cost"], 6),
        )
        for r in rows
    ]


def test_cost_per_user_day_and_month(costs):
    assert _pick(dal.cost_report("user", account="team-a", store=costs)) == [
        ("bob", 1, 1, 40.0, 2.0),
        ("ann", 2, 2, 14.0, 0.7),
        ("cy", 1, 3, 1.0, None),
    ]
    assert _pick(dal.cost_report("day", account="team-a", store=costs)) == [
        ("2023-12-05", 1, 3, 1.0, None),
        ("2023-12-04", 1, 0, 4.0, 0.2),
        ("2023-11-15", 1, 1, 40.0, 2.0),
        ("2023-11-14", 1, 2, 10.0, 0.5),
    ]
    assert _pick(dal.cost_report("month", account="team-a", store=costs)) == [
        ("2023-12", 2, 3, 5.0, 0.2),
        ("2023-11", 2, 3, 50.0, 2.5),
    ]
    # every account, when the reader may see them all
    assert _pick(dal.cost_report("user", store=costs))[0] == ("ann", 3, 3, 1014.0, 50.7)


def test_cost_since_and_until(costs):
    assert _pick(
        dal.cost_report(
            "day", account="team-a", since="2023-11-15", until="2023-12-05", store=costs
        )
    ) == [("2023-12-04", 1, 0, 4.0, 0.2), ("2023-11-15", 1, 1, 40.0, 2.0)]
    assert dal.cost_report("month", since="2030-01-01", store=costs) == []


def test_cost_report_says_what_to_pass(costs):
    with pytest.raises(ValueError, match="by must be one of user, day, month; got 'week'"):
        dal.cost_report("week", store=costs)
    with pytest.raises(ValueError, match="since must be seconds since the epoch"):
        dal.cost_report("day", since="last week", store=costs)


# --- /api/costs on the team server: the token's account only ---------------------------
@pytest.fixture(scope="module")
def server(costs):
    from ..server_helpers import ServerThread

    with ServerThread({"store_url": costs}) as s:
        yield s


def _get(server, token, **params):
    import urllib.parse

    from ..server_helpers import request

    status, body, _ = request(
        f"{server.url}/api/costs?{urllib.parse.urlencode(params)}", token=token
    )
    return status, body


def test_server_costs_are_the_tokens_account(server):
    a, b = server.token("team-a", "ann"), server.token("team-b", "zed")
    status, body = _get(server, a)
    assert status == 200 and [r["key"] for r in body["costs"]] == [
        "bob",
        "ann",
        "cy",
    ]  # by user by default
    status, body = _get(server, b, by="month")
    assert status == 200 and _pick(body["costs"]) == [("2023-11", 1, 1, 1000.0, 50.0)]
    status, body = _get(server, a, by="day", since="2023-11-15", until="1700200000")
    assert [r["key"] for r in body["costs"]] == ["2023-11-15"]
    assert _get(server, None)[0] == 401
    status, body = _get(server, a, account="team-b")
    assert status == 403 and "cannot read account 'team-b'" in body["error"]
    import dask

    with dask.config.set({"analytics.store": server.url, "analytics.token": b}):
        api.close_readers()
        assert _pick(dal.cost_report("user")) == [("ann", 1, 1, 1000.0, 50.0)]
        with pytest.raises(ValueError, match="by must be one of"):
            dal.cost_report("year")
    api.close_readers()


@pytest.mark.parametrize(
    "params, says",
    [
        ({"by": "week"}, "by must be one of user, day, month"),
        ({"by": "user; DROP TABLE clusters"}, "by must be one of"),
        ({"by": ""}, "by must be one of"),
        ({"since": "tomorrow-ish"}, "since must be"),
        ({"until": "-inf"}, "until must be"),
        ({"group": "user"}, "unknown query parameter"),
    ],
)
def test_server_costs_refuse_hostile_values(server, params, says, monkeypatch):
    token = server.token("team-a", "ann")
    called = []
    monkeypatch.setattr(server.ctx.store, "cost_report", lambda **kw: called.append(kw) or [])
    status, body = _get(server, token, **params)
    assert status == 400 and says in body["error"], body
    assert called == []
