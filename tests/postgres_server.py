"""A throwaway PostgreSQL server for the tests: initdb in a temp dir, 127.0.0.1, a free port.

Uses Debian's `postgresql` package (binaries under /usr/lib/postgresql/<version>/bin).
PostgreSQL refuses to run as root, so when the tests run as root the server runs as
the `postgres` OS user that package creates.  Missing binaries are an error, never a
reason to skip: the README's test command installs them.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

HOW_TO_FIX = (
    "run the README's test command, which installs Debian's postgresql package "
    "(apt-get install -y postgresql) before running pytest"
)


class PostgresUnavailable(RuntimeError):
    """The test PostgreSQL server could not be found or started; the text says why and what to do."""


def find_bin_dir() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin that holds initdb and pg_ctl."""
    candidates = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        version = Path(d).parent.name
        if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists() and version.isdigit():
            candidates.append((int(version), Path(d)))
    if not candidates:
        raise PostgresUnavailable(
            "PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin; "
            + HOW_TO_FIX
        )
    return max(candidates)[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """Start with `start()`, stop with `stop()`; `url(dbname)` gives a SQLAlchemy URL."""

    user = "postgres"  # the database superuser initdb creates (trust auth, local only)

    def __init__(self, settings: list[str] | None = None) -> None:
        """settings: the server's `-c name=value` settings.  None: the tests' own (fsync
        off, for speed: these databases are thrown away); a list (a deployment's, say):
        exactly those, PostgreSQL's defaults for everything else (fsync on ...)."""
        self.settings = settings
        self.bin_dir = find_bin_dir()
        self.dir = Path(tempfile.mkdtemp(prefix="dal-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = 0
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            # postgres will not run as root: hand the directory to the postgres OS user.
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresUnavailable(
                    "the tests run as root, PostgreSQL refuses root, and there is no `postgres` "
                    "OS user to run it as; " + HOW_TO_FIX
                ) from None
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        cmd = self._as_user + [str(self.bin_dir / args[0]), *args[1:]]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def start(self) -> PostgresServer:
        r = self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        if r.returncode:
            raise PostgresUnavailable(f"initdb failed:\n{r.stdout}\n{r.stderr}")
        # A free port can be taken between our probe and the server's bind: try a few.
        for _ in range(5):
            self.port = free_port()
            if self.resume(check=False):
                atexit.register(self.stop)  # a backstop, should the test run end without teardown
                return self
        log = self.log.read_text() if self.log.exists() else ""
        raise PostgresUnavailable(f"pg_ctl start failed:\n{log[-3000:]}")

    def resume(self, check: bool = True) -> bool:
        """Start the server process (again, after halt()) on the same port and data."""
        # fsync off: these databases are thrown away, and the tests run faster.
        settings = (
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            if self.settings is None
            else " ".join(shlex.quote(f"-c{s}") for s in self.settings)
        )
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 {settings}"
        r = self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            opts,
            "-w",
            "-t",
            "60",
            "start",
        )
        if check and r.returncode:
            raise PostgresUnavailable(f"pg_ctl start failed:\n{r.stdout}\n{r.stderr}")
        return r.returncode == 0

    def halt(self) -> None:
        """Stop the server process, keeping its data (an outage: resume() brings it back)."""
        # With synchronous_commit off, an immediate stop can lose the last commits: what
        # was committed before an outage must survive it, as on a real server.
        try:
            self.admin("CHECKPOINT")
        except Exception:
            pass  # already down
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        if self.data.exists():
            self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def admin(self, sql: str) -> None:
        """Run one statement as the superuser, outside a transaction."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=self.user, dbname="postgres", autocommit=True
        ) as c:
            c.execute(sql)

    def create_database(self, prefix: str = "test", template: str | None = None) -> str:
        """Make a fresh database and return its name: empty, or a copy of `template`
        (a database nobody is connected to)."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return name

    def drop_database(self, name: str) -> None:
        # FORCE ends connections a test left open (an engine not yet disposed).
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":  # a quick manual check: python tests/postgres_server.py
    with PostgresServer() as pg:
        t = time.time()
        db = pg.create_database()
        print("running", pg.url(db), f"(create database {time.time() - t:.2f}s)")
        pg.drop_database(db)
