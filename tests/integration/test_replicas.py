"""Issue 22: stateless server replicas over one PostgreSQL, behind a real HAProxy.

The `replicas` fixture (conftest.py, balancer.py) starts 3 `dask-analytics server`
processes at once on an empty database and HAProxy in front of them, checking each
one's /ready; every answer names the replica that gave it (X-Replica).  A login, a
revocation and a guessed token's throttle hold on every replica; one replica killed
in the middle of ingest loses nothing and doubles nothing.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.parse
import urllib.request

import dask.array as da
import pytest
import sqlalchemy as sa

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers
from dask_analytics_lab.collect.shipper import Shipper
from dask_analytics_lab.remote import HttpSink
from dask_analytics_lab.server.tokens import token_id_of
from dask_analytics_lab.store import open_store
from dask_analytics_lab.store.engine import make_engine
from dask_analytics_lab.store.migrate import head
from dask_analytics_lab.store.team import TeamStore

from ..cluster_helpers import recorded_cluster
from ..server_helpers import Cluster, browser, form_xsrf, log_in, request
from ..waiting import wait_for

pytestmark = pytest.mark.postgres

NAMES = ["r0", "r1", "r2"]


def rows(url: str, sql: str) -> list[tuple]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def header(answer: tuple, name: str) -> str | None:
    """A header of a request() answer, whatever its case (HAProxy sends names in lower case)."""
    return {k.lower(): v for k, v in answer[2].items()}.get(name.lower())


def served_by(answer: tuple) -> str | None:
    return header(answer, "X-Replica")


def opened(opener, url: str) -> tuple[int, str]:
    """(status, X-Replica) of a GET through a cookie-keeping opener."""
    try:
        with opener.open(url) as r:
            return r.status, r.headers["X-Replica"]
    except urllib.error.HTTPError as e:
        return e.code, e.headers["X-Replica"]


def test_replicas_started_together_on_an_empty_database_migrate_it_once(replicas):
    assert rows(replicas.db, "SELECT version_num FROM alembic_version") == [(head(),)]
    # Alembic logs each step it runs: one replica ran them all, under the advisory lock;
    # the others found the schema at head once they had the lock.
    ran = {
        name
        for name, s in replicas.servers.items()
        if any("Running upgrade" in line for line in s.output)
    }
    assert len(ran) == 1, {name: "".join(s.output)[-1500:] for name, s in replicas.servers.items()}
    for s in replicas.servers.values():  # each one ready, asked directly
        status, body, _ = request(s.url + "/ready")
        assert status == 200 and body["schema"] == head()
    assert replicas.balancer.states() == {name: "UP" for name in NAMES}


def test_a_login_through_the_balancer_is_honoured_by_every_replica(replicas):
    token = replicas.token("A")
    opener, _ = browser()
    log_in(opener, replicas.url, token).close()  # form, post and redirect: each may land anywhere
    answers = [opened(opener, replicas.url + "/api/whoami") for _ in range(6)]
    assert {status for status, _ in answers} == {200}, answers
    assert {name for _, name in answers} == set(NAMES), answers  # round robin: every replica
    # Logged out on one replica: the session is over on all of them.
    xsrf = form_xsrf(opener, replicas.url + "/login")
    opener.open(
        urllib.request.Request(
            replicas.url + "/logout",
            data=urllib.parse.urlencode({"_xsrf": xsrf}).encode(),
            headers={"Origin": replicas.url},
        )
    ).close()
    answers = [opened(opener, replicas.url + "/api/whoami") for _ in range(6)]
    assert {status for status, _ in answers} == {401}, answers
    assert {name for _, name in answers} == set(NAMES), answers


def test_a_revoked_token_is_refused_by_every_replica_within_seconds(replicas):
    token = replicas.token("A")
    opener, _ = browser()
    log_in(opener, replicas.url, token).close()
    for _ in range(2):  # every replica has looked the token up (and cached it)
        answers = [request(replicas.url + "/api/whoami", token=token) for _ in NAMES]
        assert [a[0] for a in answers] == [200] * 3 and {served_by(a) for a in answers} == set(
            NAMES
        )
    with open_store(
        replicas.db
    ) as store:  # as `dask-analytics token revoke` does, from another process
        assert TeamStore(store).revoke_token(token_id_of(token))

    # Refused is 401, or 429 once the failures the waiting itself makes pass the
    # throttle's count (sooner on a busy machine, where the waiting takes longer).
    refused = {401, 429}

    def refused_everywhere() -> bool:
        answers = [request(replicas.url + "/api/whoami", token=token) for _ in NAMES]
        return {a[0] for a in answers} <= refused and {served_by(a) for a in answers} == set(NAMES)

    # Each replica caches a lookup for 30 s, but empties its cache within 2 s of any revocation.
    wait_for(
        refused_everywhere, timeout=10, what="every replica to refuse the revoked token", every=0.2
    )
    answers = [request(replicas.url + "/api/whoami", token=token) for _ in range(6)]
    assert {a[0] for a in answers} <= refused
    answers = [
        opened(opener, replicas.url + "/api/whoami") for _ in range(6)
    ]  # its login session too
    assert {status for status, _ in answers} == {401} and {name for _, name in answers} == set(
        NAMES
    )


def test_a_guessed_token_is_throttled_by_the_count_all_replicas_share(replicas):
    good = replicas.token("A")
    guess = "dal_0123456789ab_" + "x" * 43
    answers = [request(replicas.url + "/api/whoami", token=guess) for _ in range(16)]
    statuses = [a[0] for a in answers]
    # One server alone: 10 failures (401), then refused (429) before any look-up.  Each
    # replica saw a third of them, but counts by the database's count.
    assert statuses == [401] * 10 + [429] * 6, statuses
    assert {served_by(a) for a in answers[10:]} == set(NAMES)
    assert all(int(header(a, "Retry-After")) > 0 for a in answers[10:])
    # What is throttled is that credential from that address, never a working one.
    answers = [request(replicas.url + "/api/whoami", token=good) for _ in NAMES]
    assert [a[0] for a in answers] == [200] * 3 and {served_by(a) for a in answers} == set(NAMES)


SHIPPERS = 4  # simulated schedulers, each one's messages through its own plugin shipper
PER_CLUSTER = 1500  # events each sends


def _feed(shipper: Shipper, maker: Cluster, gate: threading.Event | None = None) -> None:
    """Put a cluster's messages as a busy scheduler would: steadily, never far ahead of its
    writes.  `gate`: the last tenth waits for it (a kill meant for the middle of the ingest
    lands there however slow a busy machine makes the test's own loop)."""
    shipper.put(maker.cluster())
    for i in range(PER_CLUSTER):
        if gate is not None and i == PER_CLUSTER - PER_CLUSTER // 10:
            gate.wait(60)
        shipper.put(maker.event("t", {"i": i}))
        if i % 100 == 99:
            wait_for(
                lambda: shipper.pending < 200,
                timeout=120,
                what="the shipper to catch up",
                every=0.01,
            )


@pytest.mark.timeout(240)
def test_a_replica_killed_in_the_middle_of_ingest_loses_and_doubles_nothing(replicas):
    token = replicas.token("A")
    makers = [Cluster(account="A") for _ in range(SHIPPERS)]
    shippers = [
        Shipper(
            lambda: HttpSink(replicas.url, token=token),
            min_delay=0.05,
            max_delay=0.5,
            describe="the balancer",
        )
        for _ in makers
    ]
    total = SHIPPERS * (1 + PER_CLUSTER)
    victim = replicas.servers["r1"]
    killed = threading.Event()
    try:
        with recorded_cluster(replicas.url, config={"analytics.token": token}) as (client, info):
            feeders = [
                threading.Thread(target=_feed, args=(sh, m, killed), daemon=True)
                for sh, m in zip(shippers, makers)
            ]
            for t in feeders:
                t.start()
            killed_at = None
            while any(t.is_alive() for t in feeders):
                assert (
                    da.ones((100, 100), chunks=25).sum().compute() == 10_000
                )  # the real scheduler works on
                if killed_at is None and sum(sh.stored for sh in shippers) >= total // 3:
                    # SIGKILL while HAProxy has a request on r1 (scur: its requests in flight).
                    wait_for(
                        lambda: int(replicas.balancer.stats()["r1"]["scur"]) > 0,
                        timeout=30,
                        every=0.002,
                        what="a request in flight on r1",
                    )
                    victim.kill()
                    killed_at = sum(sh.stored for sh in shippers)
                    killed.set()
            assert killed_at is not None and killed_at < total, (
                "the feeders finished before the kill"
            )
            for t in feeders:
                t.join(60)
            wait_for(
                lambda: replicas.balancer.states()["r1"] != "UP",
                timeout=30,
                what="haproxy to see r1 down",
            )
            for sh in shippers:
                assert sh.flush(timeout=120), "a shipper could not deliver through the balancer"
                assert sh.dropped == 0 and sh.rejected == 0
            flushed = dal.flush(client, timeout=60)
            assert flushed["flushed"] and flushed["dropped"] == 0 and flushed["rejected"] == 0, (
                flushed
            )
            ran = client.run_on_scheduler(
                lambda dask_scheduler: {str(c.id) for c in dask_scheduler.computations}
            )
    finally:
        killed.set()  # no feeder left waiting for a kill that did not come
        for sh in shippers:
            sh.close()
        close_readers()

    # Every message exactly once: (cluster, seq) is the ingest's key, and the events
    # themselves (no key of their own) are neither missing nor doubled.
    for m in makers:
        assert rows(
            replicas.db,
            f"SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM ingested "
            f"WHERE cluster_id = '{m.id}'",
        ) == [(1 + PER_CLUSTER, 1 + PER_CLUSTER, 0, PER_CLUSTER)]
        assert rows(
            replicas.db,
            f"SELECT count(*), count(DISTINCT msg::text) FROM events WHERE cluster_id = '{m.id}'",
        ) == [(PER_CLUSTER, PER_CLUSTER)]
    # The real scheduler's messages: seqs 1..n with no gap (its last one, the cluster's
    # stop, came after the kill), and every computation it ran stored once.
    cid = info["cluster_id"]
    ((n, distinct, low, high),) = rows(
        replicas.db,
        f"SELECT count(*), count(DISTINCT seq), min(seq), max(seq) "
        f"FROM ingested WHERE cluster_id = '{cid}'",
    )
    assert n == distinct == high and low == 1
    stored = rows(
        replicas.db, f"SELECT computation_id FROM computations WHERE cluster_id = '{cid}'"
    )
    assert len(stored) == len({c for (c,) in stored}) and ran <= {c for (c,) in stored}
    assert rows(
        replicas.db, f"SELECT stopped IS NOT NULL FROM clusters WHERE cluster_id = '{cid}'"
    ) == [(True,)]
    stats = replicas.balancer.stats()
    print(
        f"\nkilled r1 after {killed_at} of {total} simulated messages were stored; {n} messages of the real "
        f"scheduler ({len(ran)} computations); haproxy: r1 {stats['r1']['status']}, its broken answers "
        f"{stats['r1']['eresp']}, failed connections {stats['r1']['econ']}, 5xx answered "
        f"{stats['BACKEND']['hrsp_5xx']}, redispatched {stats['BACKEND']['wredis']}"
    )
