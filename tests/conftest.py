"""Shared fixtures.

`store_url` runs a test once per backend: a fresh SQLite file, then a fresh database
on a real PostgreSQL server that the session starts on 127.0.0.1 (Debian's
postgresql package; see tests/postgres_server.py). Use it in any test file:

    def test_something(store_url):              # "sqlite:///..." then "postgresql://..."
        store = open_store(store_url)

`sqlite_url` and `postgres_url` give one backend; `postgres_server` is the
session's server (create_database(), url(name), halt()/resume()).  `module_store_url`
is `store_url` shared by a module's tests (a module fixture fills it once per backend,
for tests that only read).  `store_url`'s PostgreSQL databases are copies of one the
session migrated to head (a copy takes ~30 ms, migrating ~300 ms; a SQLite store is
new, made at head at its first open); `postgres_url`'s are empty: the tests of
migrations themselves use it (tests/unit/test_store_open.py runs them on both backends).
Deselect the PostgreSQL runs with `-m "not postgres"`.

`replicas` is 3 `dask-analytics server` processes started at once on a fresh
PostgreSQL database, behind a real HAProxy (Debian's haproxy package; see
tests/balancer.py): `.url` is the balancer's, `.servers` the replicas by name (r0..r2,
also in each answer's X-Replica header), `.token(account)` makes a token.  Mark its
tests `postgres`.

Tiers: tests/unit/ (no cluster, browser, server or PostgreSQL: the model, the contract,
store queries on SQLite, polling, layout, hygiene; its conftest refuses the rest),
tests/integration/ (clusters, servers, PostgreSQL, Jupyter) and tests/browser/ (real
Chromium); each test is marked with its tier's name (`-m unit`).  `bash scripts/dev
test` runs `tests/unit -m "not postgres"` first, as a gate, then everything else in
parallel with pytest-xdist: every fixture owns its ports, databases and folders.

`browser` is one headless Chromium per test module; `page` a fresh page in it that
fails its test on any JavaScript error, sized by the module's VIEWPORT if it has one.
"""

from __future__ import annotations

import shutil

import pytest

from .postgres_server import PostgresServer, PostgresUnavailable

TIERS = ("unit", "integration", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name in TIERS:
            item.add_marker(item.path.parent.name)


@pytest.fixture(scope="session")
def postgres_server():
    try:
        server = PostgresServer().start()
    except PostgresUnavailable as e:
        # Fail, never skip: a green run must mean PostgreSQL was tested too.
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """A fresh, empty database on the session's PostgreSQL server, dropped afterwards."""
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


@pytest.fixture(scope="session")
def postgres_at_head(postgres_server):
    """The name of a database migrated to this release's head, to copy."""
    from dask_analytics_lab.store import open_store

    name = postgres_server.create_database("head")
    open_store(postgres_server.url(name)).close()  # closed: a template takes no connection
    return name


@pytest.fixture
def migrated_postgres_url(postgres_server, postgres_at_head):
    """A fresh database already at head (a copy), dropped afterwards."""
    name = postgres_server.create_database(template=postgres_at_head)
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


@pytest.fixture
def replicas(postgres_url, tmp_path):
    """3 server replicas on one fresh PostgreSQL database behind HAProxy (tests/balancer.py)."""
    from .balancer import BalancerUnavailable, Replicas

    try:
        r = Replicas(postgres_url, tmp_path / "replicas", n=3).start()
    except BalancerUnavailable as e:
        pytest.fail(str(e), pytrace=False)  # fail, never skip, as for PostgreSQL
    yield r
    r.stop()


@pytest.fixture
def sqlite_url(tmp_path):
    """A SQLite store URL in the test's temporary directory (the file does not exist yet)."""
    return "sqlite:///" + str(tmp_path / "analytics.db")


@pytest.fixture(params=["computation", "spans"])
def both_sources(request, monkeypatch):
    """The module's recorded clusters on both sources of computations (collect/sources.py):
    Dask's Computation objects, and computations made from its spans; in this process and
    in the schedulers it starts.  A module asks for it with
    `pytestmark = pytest.mark.usefixtures("both_sources")`."""
    import dask

    monkeypatch.setenv("DASK_ANALYTICS__COMPUTATION__SOURCE", request.param)
    with dask.config.set({"analytics.computation.source": request.param}):
        yield request.param


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request):
    """A fresh store URL, once per backend."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("migrated_postgres_url")


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def module_store_url(request, tmp_path_factory):
    """A fresh store URL, once per backend, shared by the module's tests: for a module
    fixture that fills it once for tests that only read."""
    if request.param == "sqlite":
        yield "sqlite:///" + str(tmp_path_factory.mktemp("store") / "analytics.db")
        return
    server = request.getfixturevalue("postgres_server")
    name = server.create_database(template=request.getfixturevalue("postgres_at_head"))
    yield server.url(name)
    server.drop_database(name)


@pytest.fixture(scope="module")
def browser():
    from .browser_helpers import CHROMIUM, chromium

    if not CHROMIUM or not shutil.which(CHROMIUM):
        pytest.fail(
            f"{CHROMIUM} not found: install Debian's chromium (scripts/dev test does)",
            pytrace=False,
        )
    with chromium() as b:
        yield b


@pytest.fixture()
def page(browser, request):
    viewport = getattr(request.module, "VIEWPORT", {"width": 1200, "height": 800})
    context = browser.new_context(viewport=viewport, device_scale_factor=1.5)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on(
        "console",
        lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    yield page
    context.close()
    assert not errors, errors
