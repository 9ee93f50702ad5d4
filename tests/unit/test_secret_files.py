"""The secret files server replicas share (the login session secret, the code key),
made on first start: replicas started together, all finding the file missing, must
all end up with the one secret, never a half-written (empty) file."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from dask_analytics_lab import codecrypt
from dask_analytics_lab.server.cli import _session_secret

ROUNDS, STARTERS = 30, 6


def _together(make) -> list[list]:
    """`make()` from STARTERS threads at once, ROUNDS times over; each round's results."""
    rounds = []
    for r in range(ROUNDS):
        start, got = threading.Barrier(STARTERS), []

        def one() -> None:
            start.wait()
            try:
                got.append(make(r))
            except Exception as e:  # an empty file read back: the server would refuse to start
                got.append(e)

        threads = [threading.Thread(target=one) for _ in range(STARTERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rounds.append(got)
    return rounds


def test_replicas_starting_together_share_one_session_secret(tmp_path):
    for got in _together(
        lambda r: _session_secret(
            SimpleNamespace(session_secret_file=str(tmp_path / f"{r}.secret"))
        )
    ):
        assert all(isinstance(g, bytes) and len(g) >= 32 for g in got), got
        assert len(set(got)) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing left aside


def test_replicas_starting_together_share_one_code_key(tmp_path):
    for got in _together(lambda r: codecrypt.load_or_create_key_file(tmp_path / f"{r}.key")):
        assert all(isinstance(g, list) and len(g) == 1 for g in got), got
        assert len({tuple(g) for g in got}) == 1
    assert oct((tmp_path / "0.key").stat().st_mode & 0o777) == "0o600"
