"""The unit tier: the model, the contract, store queries on SQLite, polling, layout and
hygiene; no process or in-process cluster, no browser, no server, no PostgreSQL (the
PostgreSQL runs of its store tests are marked `postgres` and run with the other tiers).

`bash scripts/dev test` runs this tier first, alone, as a gate.  A test here that starts
what the tier has no room for fails at once, saying where it belongs, so the gate stays
fast however the suite grows."""

from __future__ import annotations

import pytest


class BelongsElsewhere(RuntimeError):
    pass


def _refuse(what: str, tier: str):
    def refuse(*args: object, **kwargs: object) -> None:
        raise BelongsElsewhere(f"a unit test may not start {what}: move it to tests/{tier}/")

    return refuse


@pytest.fixture(autouse=True)
def _unit_tier_only(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    import distributed

    from .. import browser_helpers, server_helpers

    monkeypatch.setattr(
        distributed.Scheduler, "__init__", _refuse("a Dask scheduler", "integration")
    )
    monkeypatch.setattr(distributed.Worker, "__init__", _refuse("a Dask worker", "integration"))
    monkeypatch.setattr(server_helpers.ServerThread, "start", _refuse("a server", "integration"))
    monkeypatch.setattr(server_helpers.ServerProcess, "start", _refuse("a server", "integration"))
    monkeypatch.setattr(browser_helpers, "chromium", _refuse("Chromium", "browser"))
    if request.node.get_closest_marker("postgres") is None:
        from .. import postgres_server

        monkeypatch.setattr(
            postgres_server.PostgresServer, "start", _refuse("PostgreSQL unmarked", "integration")
        )
