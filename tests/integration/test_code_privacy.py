"""Code stays private (issue 9, items 2, 4, 5 and 9), each attack made against a running
server: another account's code by hash, code at rest in the database (snippets and
reports, server and embedded store), reports that ignored the privacy switches, and
the code key (not in argv, kept apart from the database, a lost key said plainly)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import pytest
import sqlalchemy as sa

import dask_analytics_lab as dal
from dask_analytics_lab import codecrypt
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.reports import list_performance_reports, performance_report

from ..cluster_helpers import recorded_cluster
from ..server_helpers import Cluster, ServerThread, add_token, free_port, request
from ..waiting import wait_for

SECRET = "hunter2-" + "7f3a9c"  # in the code: must never be readable in the database


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch):
    """No code key but the ones a test gives (the developer's own environment aside)."""
    monkeypatch.delenv(codecrypt.CODE_KEY_ENV, raising=False)
    codecrypt.set_process_keys(None)
    yield
    codecrypt.set_process_keys(None)
    close_readers()


# --- helpers ------------------------------------------------------------------------
def raw_dump(url: str) -> str:
    """Every value of every row of every table, as stored (gzip'd blobs opened), as text."""
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    meta.reflect(engine)
    parts = []
    with engine.connect() as conn:
        for table in meta.sorted_tables:
            for row in conn.execute(sa.select(table)):
                for value in row:
                    if isinstance(value, memoryview):
                        value = value.tobytes()
                    if isinstance(value, bytes):
                        if value[:2] == b"\x1f\x8b":
                            value = gzip.decompress(value)
                        parts.append(value.decode("utf-8", "replace"))
                    elif isinstance(value, (dict, list)):
                        parts.append(json.dumps(value))
                    else:
                        parts.append(str(value))
    engine.dispose()
    return "\n".join(parts)


def report_body(secret: str) -> dict:
    return {
        "html": f"<html><body><pre>df.sum()  # {secret}</pre></body></html>",
        "filename": "r.html",
        "private": False,
        "twin": {
            "summary": {"n_tasks": 1, "code": f"df.sum()  # {secret}"},
            "profile": {"count": 1, "description": {"line": f"x = '{secret}'"}, "children": {}},
            "task_groups": [],
            "task_stream": [],
        },
    }


class Server:
    """`python -m dask_analytics_lab.server server` in its own process, its output in a file."""

    def __init__(self, tmp: Path, db: str, *, env: dict | None = None, args: list[str] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"server-{self.port}.log"
        self.cmd = [
            sys.executable,
            "-m",
            "dask_analytics_lab.server",
            "server",
            "--db",
            db,
            "--port",
            str(self.port),
            *args,
        ]
        self.env = {
            **{k: v for k, v in os.environ.items() if k != codecrypt.CODE_KEY_ENV},
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> Server:
        for _ in range(3):
            self.proc = subprocess.Popen(
                self.cmd, stdout=self.log.open("w"), stderr=subprocess.STDOUT, env=self.env
            )
            deadline = time.monotonic() + 60
            while "dask-analytics server at" not in self.output():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            else:
                return self
            if "Address already in use" not in self.output():
                break
            # Another test process took the free port between its choice and the bind.
            self._on(free_port())
        raise RuntimeError(f"server did not start ({self.proc.poll()}): {self.output()[-3000:]}")

    def _on(self, port: int) -> None:
        self.cmd[self.cmd.index(str(self.port))] = str(port)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def user_dirs(tmp: Path) -> dict:
    """HOME and the XDG folders of a fresh user under tmp (platformdirs reads them)."""
    return {
        "HOME": str(tmp / "home"),
        "XDG_CONFIG_HOME": str(tmp / "home" / ".config"),
        "XDG_DATA_HOME": str(tmp / "home" / ".local" / "share"),
    }


# --- item 2: another account's code, by hash ----------------------------------------
def test_a_hash_reads_no_other_accounts_code(store_url):
    """B lists A's snippet hash in its own computation: B's read shows no text, exactly as
    for a hash nobody sent."""
    with ServerThread({"store_url": store_url}) as server:
        token_a, token_b = server.token("A"), server.token("B", "mallory")
        a = Cluster(account="A")
        code = a.code(text=f"password = '{SECRET}'\nx.sum().compute()\n")
        target = code["data"]["hash"]
        assert (
            request(
                server.url + "/api/ingest",
                method="POST",
                token=token_a,
                body=[a.cluster(), code, a.computation("comp-a", code=[target])],
            )[0]
            == 200
        )
        # A reads its own code.
        status, body, _ = request(server.url + "/api/computations/comp-a", token=token_a)
        assert status == 200 and SECRET in body["computation"]["code"][0]["text"]

        b = Cluster(account="B")
        unknown = "0" * 32
        answers = [
            request(server.url + "/api/ingest", method="POST", token=token_b, body=batch)
            for batch in (
                [b.cluster()],
                [b.computation("probe", code=[target])],
                [b.computation("control", code=[unknown])],
            )
        ]
        assert [s for s, _, _ in answers] == [200, 200, 200]
        assert answers[1][1] == answers[2][1]  # ingest says the same for A's hash and for nobody's

        def read(cid: str) -> dict:
            status, body, _ = request(server.url + f"/api/computations/{cid}", token=token_b)
            assert status == 200
            return body["computation"]

        probe, control = read("probe"), read("control")
        assert SECRET not in json.dumps(probe)
        assert probe["code"] == [
            {
                "hash": target,
                "text": None,
                "filename": None,
                "lineno_frame": 12,
                "lineno_relative": 3,
            }
        ]
        # The same answer as for a hash nobody sent (how fast each comes back, the other
        # half of a timing oracle: benchmarks/code_read_timing.py).
        assert probe["code"][0] | {"hash": unknown} == control["code"][0]
        # B's export holds none of A's code either.
        status, body, _ = request(server.url + "/api/export", token=token_b)
        assert status == 200 and SECRET not in json.dumps(body)


# --- item 4: code at rest ---------------------------------------------------------------
def test_server_keeps_snippets_and_reports_encrypted_at_rest(store_url, tmp_path):
    """`dask-analytics server`: snippets, code lines and reports (private or not: HTML,
    twin, summary) hold no plain code in any database row; readers with the key see it."""
    token = add_token(store_url, "A")
    env = {**user_dirs(tmp_path), codecrypt.CODE_KEY_ENV: codecrypt.generate_key()}
    with Server(tmp_path, store_url, env=env) as server:
        c = Cluster(account="A")
        code = c.code(text=f"password = '{SECRET}'\n")
        comp = c.computation(
            "comp-a", code=[code["data"]["hash"]], code_line=f"password = '{SECRET}'"
        )
        assert (
            request(
                server.url + "/api/ingest",
                method="POST",
                token=token,
                body=[c.cluster(), code, comp],
            )[0]
            == 200
        )
        for private in (False, True):
            status, body, _ = request(
                server.url + "/api/reports",
                method="POST",
                token=token,
                body={**report_body(SECRET), "private": private},
            )
            assert status == 201
        url = body["report"]["url"]

        dump = raw_dump(store_url)
        assert "comp-a" in dump and "fernet:" in dump  # the rows are there ...
        assert SECRET not in dump  # ... and not one holds the code in plain text

        # Readers with the key see it all.
        detail = request(server.url + "/api/computations/comp-a", token=token)[1]["computation"]
        assert SECRET in detail["code"][0]["text"] and SECRET in detail["code_line"]
        [row] = request(server.url + "/api/computations", token=token)[1]["computations"]
        assert SECRET in row["code_line"]
        assert SECRET in request(url, token=token)[1]
        twin = request(url + ".json", token=token)[1]
        assert (
            SECRET in twin["summary"]["code"] and SECRET in twin["profile"]["description"]["line"]
        )
        listed = request(server.url + "/api/reports", token=token)[1]["reports"]
        assert [SECRET in r["summary"]["code"] for r in listed] == [True, True]


def _spin_in_a_task(x):
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass
    return x


def test_embedded_store_encrypts_code_with_a_configured_key(sqlite_url, tmp_path):
    """A scheduler writing straight into SQLite with analytics.code-key-file set: snippets
    and reports are ciphertext in the file; readers and a server with the key read them."""
    key_file = tmp_path / "keys" / "code.key"
    with dask.config.set({"analytics.code-key-file": str(key_file)}):
        with recorded_cluster(sqlite_url) as (client, info):
            with performance_report(filename=str(tmp_path / "r.html"), store=sqlite_url) as report:
                da.ones(100, chunks=50).map_blocks(
                    _spin_in_a_task
                ).sum().compute()  # hunter2-7f3a9c
            dal.flush(client)
            cluster_id = info["cluster_id"]
        assert report.url is not None
        assert key_file.stat().st_mode & 0o777 == 0o600  # made on first write

        dump = raw_dump(sqlite_url)
        assert cluster_id in dump and "fernet:" in dump
        assert SECRET not in dump
        assert SECRET in (tmp_path / "r.html").read_text()  # the file the user asked for is theirs

        # This process has the key: the API reads the code back.
        comps = dal.list_computations(cluster_id, store=sqlite_url)
        texts = [
            c["text"]
            for comp in comps
            for c in dal.get_computation(comp["computation_id"], store=sqlite_url)["code"]
        ]
        assert any(SECRET in t for t in texts)
        [listed] = list_performance_reports(store=sqlite_url)
        assert SECRET in listed["summary"]["code"]
        # A server on the same store with the same key file serves the report.
        with ServerThread(
            {"store_url": sqlite_url, "code_key": key_file.read_text().strip()}
        ) as server:
            status, html, _ = request(server.url + "/reports/" + listed["id"])
            assert status == 200 and SECRET in html

    # Without the key the code is not readable, and the reader says why.
    with dask.config.set({"analytics.code-key-file": str(tmp_path / "other.key")}):
        codecrypt.load_or_create_key_file(tmp_path / "other.key")
        code = [
            c
            for comp in comps
            for c in dal.get_computation(comp["computation_id"], store=sqlite_url)["code"]
        ]
        assert code and all(c["text"] is None and "does not match" in c["code_error"] for c in code)


def test_embedded_store_without_a_key_keeps_code_plain(sqlite_url):
    """The documented default: no key configured, no encryption in an embedded store."""
    with recorded_cluster(sqlite_url) as (client, info):
        da.ones(10, chunks=5).sum().compute()  # hunter2-7f3a9c
        dal.flush(client)
    assert SECRET in raw_dump(sqlite_url)


# --- item 5: reports honour the privacy switches ----------------------------------------
OFF = {"analytics.computation.code.transmit": False, "analytics.profile.transmit": False}


def test_reports_honour_the_privacy_switches(sqlite_url, tmp_path):
    with (
        ServerThread({"store_url": sqlite_url}) as server,
        dask.config.set({"analytics.reports.base-url": server.url}),
    ):
        # The cluster records with code and profile on, so the store has both ...
        with recorded_cluster(sqlite_url) as (client, info):

            def spin_marker_fn(x):
                # The profile holds the source line it samples: this one's variable marks it.
                end_of_profile_probe = time.perf_counter() + 0.4
                while time.perf_counter() < end_of_profile_probe:
                    pass
                return x

            # Control: switches on, the report holds the code and a profile.
            with performance_report(filename=str(tmp_path / "on.html"), store=sqlite_url) as on:
                client.map(spin_marker_fn, range(4), pure=False)[0].result()  # marker-calling-code
                client.gather(client.map(spin_marker_fn, range(4, 8), pure=False))
            # ... the user turns the switches off for reports.
            with dask.config.set(OFF):
                with performance_report(
                    filename=str(tmp_path / "off.html"), store=sqlite_url
                ) as off:
                    client.gather(
                        client.map(spin_marker_fn, range(8, 16), pure=False)
                    )  # marker-calling-code
            cluster_id = info["cluster_id"]

            def newest_has_its_profile() -> bool:
                dal.flush(client)
                comps = dal.list_computations(cluster_id, store=sqlite_url)
                newest = max(comps, key=lambda c: c["start"])["computation_id"]
                return dal.get_profile(newest, store=sqlite_url)["count"] > 0

            wait_for(newest_has_its_profile, what="the last computation's profile in the store")

        on_html, off_html = (tmp_path / "on.html").read_text(), (tmp_path / "off.html").read_text()
        # (Task keys name the function in the task stream: that is not code, and stays.)
        assert "marker-calling-code" in on_html and "end_of_profile_probe" in on_html
        assert "marker-calling-code" not in off_html and "end_of_profile_probe" not in off_html
        assert "analytics.computation.code.transmit is false" in off_html
        for report, private in ((on, True), (off, False)):
            status, twin, _ = request(report.url + ".json")
            assert status == 200
            assert twin["summary"]["recorded"] == {"code": private, "profile": private}
            assert ("marker-calling-code" in json.dumps(twin)) is private
            assert (twin["profile"]["count"] > 0) is private
            status, html, _ = request(report.url)
            assert status == 200 and ("end_of_profile_probe" in html) is private

        # The Share button, with the switches off: no code, no code line, no profile.
        comp_id = max(
            dal.list_computations(cluster_id, store=sqlite_url), key=lambda c: c["start"]
        )["computation_id"]
        assert dal.get_computation(comp_id, store=sqlite_url)["code"]  # the store has code ...
        assert dal.get_profile(comp_id, store=sqlite_url)["count"] > 0  # ... and a profile
        from dask_analytics_lab.reports.share import share_computation

        with dask.config.set(OFF):
            shared = share_computation(comp_id, store=sqlite_url)
        status, twin, _ = request(shared["url"] + ".json")
        assert status == 200 and twin["summary"]["recorded"] == {"code": False, "profile": False}
        assert (
            twin["code"] == [] and twin["summary"]["code"] is None and twin["profile"]["count"] == 0
        )
        assert "code_line" not in twin["computations"][0]
        status, page, _ = request(shared["url"])
        assert status == 200
        assert "marker-calling-code" not in json.dumps(twin) + page
        assert "end_of_profile_probe" not in json.dumps(twin) + page
        # Switches on: the same share holds both (the control).
        shared = share_computation(comp_id, store=sqlite_url)
        twin = request(shared["url"] + ".json")[1]
        assert "marker-calling-code" in json.dumps(twin) and twin["profile"]["count"] > 0


# --- item 9: the code key -------------------------------------------------------------
def test_code_key_on_the_command_line_is_refused(tmp_path):
    key = codecrypt.generate_key()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dask_analytics_lab.server",
            "server",
            "--db",
            str(tmp_path / "a.db"),
            "--port",
            str(free_port()),
            "--code-key",
            key,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **user_dirs(tmp_path)},
    )
    assert proc.returncode != 0
    assert "--code-key is refused" in proc.stderr and "--code-key-file" in proc.stderr
    assert codecrypt.CODE_KEY_ENV in proc.stderr
    assert not (tmp_path / "home").exists() or not list((tmp_path / "home").rglob("*.key"))


def test_default_key_file_lives_apart_from_the_default_database(tmp_path):
    dirs = user_dirs(tmp_path)
    with Server(
        tmp_path,
        str(tmp_path / "home" / ".local" / "share" / "dask-analytics" / "analytics.db"),
        env=dirs,
    ) as server:
        assert request(server.url + "/api/whoami")[0] == 401  # up, tokens required
    key_file = Path(dirs["XDG_CONFIG_HOME"]) / "dask-analytics" / "code.key"
    assert key_file.exists() and key_file.stat().st_mode & 0o777 == 0o600
    assert key_file.parent.stat().st_mode & 0o077 == 0
    data_dir = Path(dirs["XDG_DATA_HOME"]) / "dask-analytics"
    assert (data_dir / "analytics.db").exists() and not list(data_dir.glob("*key*"))
    assert str(key_file) in server.output()  # the log says where the key is
    codecrypt.parse_keys(key_file.read_text())


def test_key_from_the_environment_or_a_file_never_argv(tmp_path):
    key = codecrypt.generate_key()
    db = "sqlite:///" + str(tmp_path / "a.db")
    token = add_token(db, "A")
    c = Cluster(account="A")
    code = c.code(text=f"password = '{SECRET}'\n")
    batch = [c.cluster(), code, c.computation("comp-a", code=[code["data"]["hash"]])]
    with Server(tmp_path, db, env={**user_dirs(tmp_path), codecrypt.CODE_KEY_ENV: key}) as server:
        assert request(server.url + "/api/ingest", method="POST", token=token, body=batch)[0] == 200
        cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes().decode()
        assert key not in cmdline
    assert not list((tmp_path / "home").rglob("*.key"))  # the environment's key: no file made
    key_file = tmp_path / "server.key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    with Server(
        tmp_path, db, env=user_dirs(tmp_path), args=["--code-key-file", str(key_file)]
    ) as server:
        status, body, _ = request(server.url + "/api/computations/comp-a", token=token)
        assert status == 200 and SECRET in body["computation"]["code"][0]["text"]


def test_a_lost_key_is_said_plainly_and_crashes_nothing(tmp_path):
    db = "sqlite:///" + str(tmp_path / "a.db")
    token = add_token(db, "A")
    c = Cluster(account="A")
    code = c.code(text=f"password = '{SECRET}'\n")
    batch = [
        c.cluster(),
        code,
        c.computation("comp-a", code=[code["data"]["hash"]], code_line="x = 1"),
    ]
    with Server(
        tmp_path, db, env={**user_dirs(tmp_path), codecrypt.CODE_KEY_ENV: codecrypt.generate_key()}
    ) as server:
        assert request(server.url + "/api/ingest", method="POST", token=token, body=batch)[0] == 200
        status, body, _ = request(
            server.url + "/api/reports", method="POST", token=token, body=report_body(SECRET)
        )
        assert status == 201
        report_id = body["report"]["id"]

    # The key is lost: the server starts with another one.
    with Server(
        tmp_path, db, env={**user_dirs(tmp_path), codecrypt.CODE_KEY_ENV: codecrypt.generate_key()}
    ) as server:
        for _ in range(3):
            status, body, _ = request(server.url + "/api/computations/comp-a", token=token)
            assert status == 200
            [snippet] = body["computation"]["code"]
            assert snippet["text"] is None and snippet["filename"] == "/home/ann/nb.py"
            assert "does not match" in snippet["code_error"] and "key" in snippet["code_error"]
            assert (
                body["computation"]["code_line"] is None
                and "does not match" in body["computation"]["code_error"]
            )
        status, body, _ = request(server.url + "/api/export", token=token)
        assert status == 200 and body["export"]["code_snippets"][0]["text"] is None
        assert "does not match" in body["export"]["code_snippets"][0]["code_error"]
        status, body, _ = request(server.url + "/api/reports", token=token)
        assert status == 200
        [row] = body["reports"]
        assert row["summary"]["code"] is None and "does not match" in row["code_error"]
        status, body, _ = request(server.url + f"/reports/{report_id}.json", token=token)
        assert status == 500 and "does not match" in body["error"]
        # Where the key comes from (a file's path, a variable) is for the log, not the page.
        assert codecrypt.CODE_KEY_ENV not in body["error"], body
        status, page, _ = request(server.url + f"/reports/{report_id}", token=token)
        assert status == 500 and "does not match" in page
        assert codecrypt.CODE_KEY_ENV not in page
        assert request(server.url + "/api/clusters", token=token)[0] == 200  # still serving
        log = server.output()
    assert log.count("code stored encrypted cannot be read") == 1, log
    assert "Traceback" not in log
