"""One way to name a store on every command (issue 36, item 4): `--store` anywhere on the
line, `--db` its deprecated spelling; every command that writes says which store it wrote;
`token create` writes only into a store a team server made its tables in, and only one
that something named.

Each test runs with no personal default store (its data directory is the test's own, and
analytics.store unset), so a command that ignored the --store it was given would fail
with "no store", or write where the test looks for nothing."""

from __future__ import annotations

import re
from pathlib import Path

import dask.config
import pytest
import sqlalchemy as sa

from dask_analytics_lab import cli
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.store import open_store
from dask_analytics_lab.store.team import TeamStore

from ..factories import Cluster, group
from ..server_helpers import ServerProcess, free_port, request

CLUSTER = "Scheduler-5c0ffee1-7d2a-4b8e-9f00-3a1b2c3d4e5f"
FIRST = "0b5e1c7a-1111-4a2b-8c3d-000000000001"
SECOND = "0b5e1c7a-2222-4a2b-8c3d-000000000002"
DEPRECATED = "--db is deprecated, use --store"


@pytest.fixture(autouse=True)
def no_default_store(tmp_path, monkeypatch):
    """The personal default store: under the test's own data directory, not made yet."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with dask.config.set({"analytics.store": None}):
        yield tmp_path / "data" / "dask-analytics" / "analytics.db"
    close_readers()


@pytest.fixture
def store(tmp_path):
    """A SQLite store with one cluster, two runs of one code and a token: its URL."""
    url = "sqlite:///" + str(tmp_path / "named.db")
    with open_store(url) as s:
        c = Cluster(CLUSTER)
        groups = [group("load", n_tasks=10), group("sum", n_tasks=2)]
        s.ingest(
            [
                c.cluster(),
                c.computation(FIRST, groups=groups, fingerprint="fp", stop=c.t + 75),
                c.computation(SECOND, groups=groups, fingerprint="fp", stop=c.t + 240),
            ]
        )
    return url


def main(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def tokens(url: str) -> list[dict]:
    with open_store(url) as s:
        return TeamStore(s).list_tokens()


# Every command of the group, as (the words before the place a --store may go, after it).
COMMANDS = [
    ([], ["where"]),
    ([], ["clusters"]),
    ([], ["computations"]),
    ([], ["costs"]),
    ([], ["exceptions"]),
    ([], ["events"]),
    ([], ["runs", FIRST]),
    ([], ["compare", SECOND]),
    ([], ["explain", FIRST]),
    ([], ["export"]),
    ([], ["prune", "--older-than", "3650d", "--dry-run"]),
    (["token"], ["list"]),
    (["token"], ["create", "--account", "A", "--user", "ann"]),
    (["alerts"], ["list"]),
]


def lines(group: list[str], command: list[str]) -> list[tuple[str, list[str]]]:
    """Where a --store may go: first, between a group and its command, last."""
    named = ["--store", "{store}"]
    out = [("first", [*named, *group, *command]), ("last", [*group, *command, *named])]
    if group:
        out.append(("middle", [*group, *named, *command]))
    return out


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(line, id=f"{' '.join(g + c)}-{where}")
        for g, c in COMMANDS
        for where, line in lines(g, c)
    ],
)
def test_every_command_takes_store_anywhere_on_the_line(capsys, store, line):
    line = [store if word == "{store}" else word for word in line]
    code, out, err = main(capsys, *line)
    # The default store does not exist (nor does main make it): each used the named one.
    assert code == 0, (line, out, err)
    if "where" in line:
        assert out.strip() == store
    if "clusters" in line:
        assert CLUSTER[:18] in out
    if "prune" in line:
        assert f"from {store} " in out
    if "create" in line:
        assert f"into {store}," in err


def test_token_revoke_and_alerts_test_take_store_anywhere(capsys, store):
    for line in (["--store", store, "token", "create"], ["token", "create", "--store", store]):
        assert main(capsys, *line, "--account", "A", "--user", "ann")[0] == 0
    first, second = (t["token_id"] for t in tokens(store))
    code, out, _ = main(capsys, "--store", store, "token", "revoke", first)
    assert code == 0 and f"revoked token {first} in {store}" in out
    code, out, _ = main(capsys, "token", "revoke", second, "--store", store)
    assert code == 0 and f"revoked token {second} in {store}" in out
    assert all(t["revoked"] for t in tokens(store))
    # alerts test reads no store, but a line naming one parses as on every command: it
    # then goes on to its webhook (nothing listens on this port: a failed send, not a usage error).
    hook = f"http://127.0.0.1:{free_port()}/hook"
    for line in (["--store", store, "alerts", "test"], ["alerts", "test", "--store", store]):
        code, out, err = main(capsys, *line, "--webhook", hook)
        assert code == 1 and "FAILED" in out and "No such option" not in err, (line, out, err)


def test_db_is_a_hidden_deprecated_alias_said_once(capsys, store):
    code, out, err = main(capsys, "--db", store, "token", "list", "--db", store)
    assert code == 0 and err.count(DEPRECATED) == 1, err
    code, out, err = main(capsys, "clusters", "--db", store)
    assert code == 0 and CLUSTER[:18] in out and err.count(DEPRECATED) == 1
    code, out, err = main(
        capsys, "token", "create", "--account", "A", "--user", "bo", "--db", store
    )
    assert code == 0 and out.startswith("dal_") and err.count(DEPRECATED) == 1
    assert [t["user"] for t in tokens(store)] == ["bo"]
    code, out, err = main(capsys, "--store", store, "clusters")
    assert code == 0 and DEPRECATED not in err
    for command in (["token", "create"], ["server"], ["prune"], ["clusters"]):
        code, out, _ = main(capsys, *command, "--help")
        assert code == 0 and "--store" in out and "--db" not in out, command


def test_writes_name_their_store(capsys, store):
    code, out, err = main(
        capsys, "token", "create", "--account", "A", "--user", "ann", "--store", store
    )
    assert code == 0 and out.startswith("dal_") and len(out.split()) == 1  # the token alone
    token_id = tokens(store)[0]["token_id"]
    assert f"wrote token id {token_id} for user 'ann' of account 'A' into {store}" in err
    code, out, _ = main(capsys, "token", "revoke", token_id, "--store", store)
    assert code == 0 and f"revoked token {token_id} in {store}" in out
    code, _, err = main(capsys, "token", "revoke", "nosuchid", "--store", store)
    assert code == 1 and f"no active token with id 'nosuchid' in {store}" in err
    code, out, _ = main(capsys, "prune", "--older-than", "1d", "--store", store)
    assert code == 0 and re.search(rf"deleted 1 clusters that ended before .* from {store} ", out)


def test_token_create_refuses_a_store_no_server_made(capsys, tmp_path):
    missing = tmp_path / "typo" / "analytics.db"
    code, out, err = main(
        capsys, "token", "create", "--account", "A", "--user", "ann", "--store", str(missing)
    )
    assert code == 2 and not out
    assert f"sqlite:///{missing} has no team server's tables" in err
    assert "nothing was written" in err and "--store URL --account A --user ann" in err
    assert not missing.parent.exists()  # not even its directory
    # token list and revoke make no store either.
    for line in (["token", "list"], ["token", "revoke", "someid"]):
        code, _, err = main(capsys, *line, "--store", str(missing))
        assert code == 1 and "no team server's tables" in err, line
    assert not missing.parent.exists()


def test_token_create_never_writes_the_personal_default_unnamed(capsys, no_default_store):
    default = f"sqlite:///{no_default_store}"
    for made in (False, True):  # whether or not the default store exists
        if made:
            open_store(default).close()
        code, out, err = main(capsys, "token", "create", "--account", "A", "--user", "ann")
        assert code == 2 and not out, err
        assert (
            f"{default} (your personal default store: no --store given, analytics.store unset)"
            in err
        )
        assert (
            "nothing was written" in err
            and f"--store {default} if it was started without one" in err
        )
        assert no_default_store.exists() is made
    assert tokens(default) == []
    # Named, by --store or by analytics.store, it is a store like any other.
    assert (
        main(capsys, "token", "create", "--account", "A", "--user", "ann", "--store", default)[0]
        == 0
    )
    with dask.config.set({"analytics.store": str(no_default_store)}):
        code, _, err = main(capsys, "token", "create", "--account", "A", "--user", "bob")
    assert code == 0 and f"into {default}," in err and "personal default" not in err
    assert sorted(t["user"] for t in tokens(default)) == ["ann", "bob"]


def test_commands_that_write_say_when_the_store_is_the_personal_default(capsys, no_default_store):
    default = f"sqlite:///{no_default_store}"
    code, _, err = main(capsys, "prune", "--older-than", "9d")
    assert code == 2 and f"no store at {default} (your personal default store" in err
    assert not no_default_store.exists()  # prune makes no store
    open_store(default).close()
    code, out, _ = main(capsys, "prune", "--older-than", "9d")
    assert code == 0 and f"from {default} (your personal default store" in out
    code, _, err = main(capsys, "token", "revoke", "someid")
    assert code == 1 and f"in {default} (your personal default store" in err


def server_line(store: str, *, before: bool, tmp_path: Path) -> ServerProcess:
    """`dask-analytics [--store S] server [--store S] ...` in its own process."""
    proc = ServerProcess(store, free_port(), session_file=tmp_path / "session.secret")
    i = proc.cmd.index("--db")
    del proc.cmd[i : i + 2]
    at = proc.cmd.index("server") + (0 if before else 1)
    proc.cmd[at:at] = ["--store", store]
    return proc


def test_a_server_started_on_the_refused_store_accepts_the_token_made_with_store(capsys, tmp_path):
    db = tmp_path / "team.db"
    url = f"sqlite:///{db}"
    args = ["token", "create", "--account", "data-team", "--user", "ann"]
    assert main(capsys, *args, "--store", url)[0] == 2
    assert not db.exists()
    with server_line(url, before=True, tmp_path=tmp_path) as server:
        said = "".join(server.output)
        assert f"dask-analytics server: made the team tables in {url}\n" in said, said
        assert DEPRECATED not in said
        code, token, err = main(capsys, *args, "--store", url)
        assert code == 0 and f"into {url}" in err
        status, body, _ = request(server.url + "/api/whoami", token=token.strip())
        assert status == 200 and body["whoami"]["account"] == "data-team"
    # Started again on it: the tables are there now, and it says which store it serves.
    with server_line(url, before=False, tmp_path=tmp_path) as server:
        assert f"dask-analytics server: store {url}\n" in "".join(server.output)


@pytest.mark.postgres
def test_postgres_an_empty_database_is_refused_then_served_and_the_password_never_shown(
    capsys, postgres_url, tmp_path
):
    # The session's server trusts local connections: the password is ignored, and must
    # never be printed.
    with_password = postgres_url.replace("postgres@", "postgres:s3cret-pw@")
    shown = postgres_url.replace("postgres@", "postgres:***@")
    args = ["token", "create", "--account", "A", "--user", "ann", "--store", with_password]
    code, out, err = main(capsys, *args)
    assert code == 2 and f"{shown} has no team server's tables" in err
    assert "s3cret" not in out + err
    engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []  # nothing was written
    finally:
        engine.dispose()
    with server_line(with_password, before=False, tmp_path=tmp_path) as server:
        said = "".join(server.output)
        assert f"made the team tables in {shown}" in said and "s3cret" not in said
        code, token, err = main(capsys, *args)
        assert code == 0 and f"into {shown}," in err and "s3cret" not in err
        assert request(server.url + "/api/whoami", token=token.strip())[0] == 200


def test_token_create_leaves_a_file_that_is_no_store_to_open_store(capsys, tmp_path):
    """A file that is no SQLite database: refused in open_store's words, left as it was."""
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database\n" * 100)
    line = ["token", "create", "--account", "A", "--user", "ann", "--store", str(bad)]
    code, out, err = main(capsys, *line)
    assert code == 2 and not out and "notes.txt" in err and "Traceback" not in err
    assert bad.read_text() == "not a database\n" * 100


ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    "README.md",
    "dask_analytics_lab/server/README.md",
    "deploy/README.md",
    "deploy/compose.yaml",
]


@pytest.mark.parametrize("doc", DOCS)
def test_every_token_command_the_docs_give_names_the_store(doc):
    # Continuation lines joined, in shell and in compose.yaml's comments alike.
    text = re.sub(r"\\\n[#\s]*", " ", (ROOT / doc).read_text())
    commands = re.findall(r"dask-analytics token create\s+--[^\n`]*", text)
    assert commands, doc
    for command in commands:
        assert re.search(r"--store \S", command), (doc, command)
    # --db only where the docs say it is the old spelling.
    assert not re.search(r"--db\s+\S", text), doc


def test_a_server_given_no_store_says_it_serves_the_personal_default(
    no_default_store, tmp_path, monkeypatch
):
    monkeypatch.delenv("DASK_ANALYTICS__STORE", raising=False)  # the process's own config
    proc = ServerProcess("unused", free_port(), session_file=tmp_path / "session.secret")
    i = proc.cmd.index("--db")
    del proc.cmd[i : i + 2]
    with proc:
        said = "".join(proc.output)
    assert (
        f"dask-analytics server: made the team tables in sqlite:///{no_default_store} "
        "(your personal default store: no --store given, analytics.store unset)\n"
    ) in said, said
