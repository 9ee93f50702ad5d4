"""Issue 41, item 3: deadlines end to end.  The plugin says how long it waits
(X-Request-Timeout), a trusted proxy when it took the request (X-Request-Start); the
server answers 503 + Retry-After at once when the batches queued ahead would keep a
new one past that, and drops a batch whose time ran out in the queue before decoding
or storing any of it.

A store that stops answering is made here by holding a batch's first store call on an
event (both body threads then sit in it), as a PostgreSQL that stalls holds them."""

from __future__ import annotations

import threading
import time

import pytest

from dask_analytics_lab.remote import HttpSink
from dask_analytics_lab.server import ingest as ingest_module
from dask_analytics_lab.server.deadlines import (
    FIRST_COST,
    START_HEADER,
    TIMEOUT_HEADER,
    IngestQueue,
    deadline,
)
from dask_analytics_lab.store_errors import StoreUnavailable

from ..balancer import HAProxy, deploy_config
from ..server_helpers import ServerThread, full_cluster, request
from ..waiting import wait_for


class StalledStore:
    """The store's first call of a batch (who owns its cluster ids) held until `release`
    is set; counts the batches that got there.  `stall_both_threads()`: two batches
    (`held`, each in a thread: (cluster id, answer)) sit in it, one on each body thread."""

    def __init__(self, server: ServerThread, monkeypatch: pytest.MonkeyPatch):
        self.server = server
        self.token = server.token("A")
        self.release = threading.Event()
        self.calls = 0
        self.held: list[tuple[threading.Thread, list]] = []
        real = server.ctx.cluster_owners

        def cluster_owners(claims, **kw):
            self.calls += 1
            self.release.wait(60)
            return real(claims, **kw)

        monkeypatch.setattr(server.ctx, "cluster_owners", cluster_owners)

    def stall_both_threads(self) -> None:
        self.held = [in_background(post, self.server, self.token, 60) for _ in range(2)]
        wait_for(lambda: self.calls == 2, what="both body threads to be in the stalled store")

    def let_go(self) -> None:
        """Release the store; the held batches are stored (and nothing else)."""
        self.release.set()
        for t, out in self.held:
            t.join(30)
            assert out[0][1][0] == 200, out
        assert stored(self.server) == {out[0][0] for _, out in self.held}


def post(server: ServerThread, token: str, timeout: float | None = None):
    """(cluster id, (status, answer, headers)) of one batch of a cluster of its own."""
    c, msgs = full_cluster("A")
    headers = {TIMEOUT_HEADER: f"{timeout:g}"} if timeout is not None else {}
    return c.id, request(
        f"{server.url}/api/ingest", method="POST", token=token, body=msgs, headers=headers
    )


def stored(server: ServerThread) -> set[str]:
    return {c["cluster_id"] for c in server.ctx.store.list_clusters()}


def in_background(fn, *args) -> tuple[threading.Thread, list]:
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    return t, out


@pytest.fixture
def server(sqlite_url):
    with ServerThread({"store_url": sqlite_url}) as s:
        yield s


def refused(server: ServerThread, reason: str) -> float:
    return (
        server.ctx.metrics.registry.get_sample_value(
            "dask_analytics_ingest_refused_total", {"reason": reason}
        )
        or 0.0
    )


def test_a_batch_the_queue_would_keep_past_its_timeout_is_refused_at_once(server, monkeypatch):
    store = StalledStore(server, monkeypatch)
    store.stall_both_threads()
    queue = server.ctx.ingest_queue
    wait_for(lambda: queue.wait() > 2, what="the queue to know the store stalls")
    decoded = []
    real_decode = ingest_module.decode_messages
    monkeypatch.setattr(
        ingest_module, "decode_messages", lambda raw: decoded.append(raw) or real_decode(raw)
    )

    late, (status, answer, headers) = post(server, store.token, timeout=1)

    assert status == 503, answer
    assert int(headers["Retry-After"]) >= 1 and "busy" in answer["error"]
    assert decoded == [] and store.calls == 2  # refused before any work
    wait_for(lambda: refused(server, "busy") == 1, what="the refusal to be counted")
    # The plugin's own client reads the Retry-After its shipper then waits out.
    _, msgs = full_cluster("A")
    with pytest.raises(StoreUnavailable) as refusal:
        HttpSink(server.url, token=store.token, timeout=1).write(msgs)
    assert refusal.value.retry_after is not None and refusal.value.retry_after >= 1
    # A stranger learns nothing of the load: no token is 401 before any of this.
    status, _, _ = request(f"{server.url}/api/ingest", method="POST", body=msgs)
    assert status == 401 and decoded == []
    store.let_go()
    # Once the store answers again, the same short wait is served: a refusal is not sticky.
    again, (status, answer, _) = post(server, store.token, timeout=1)
    assert status == 200 and again in stored(server), answer


def test_a_batch_whose_time_ran_out_in_the_queue_is_dropped_before_any_work(server, monkeypatch):
    store = StalledStore(server, monkeypatch)
    store.stall_both_threads()
    queue = server.ctx.ingest_queue
    late, answer = in_background(post, server, store.token, 2)
    wait_for(lambda: queue.waiting == 1, what="the third batch to wait for a body thread")
    time.sleep(2.5)  # its client's timeout passes while it waits
    store.let_go()
    late.join(30)
    _, (status, body, headers) = answer[0]
    assert status == 503 and headers["Retry-After"] and "timeout" in body["error"], body
    assert store.calls == 2
    wait_for(lambda: refused(server, "expired") == 1, what="the drop to be counted")


def test_a_timeout_that_is_not_a_number_of_seconds_is_refused_saying_so(server):
    token = server.token("A")
    # Without a token the header is never read: 401 first, whatever it holds.
    status, _, _ = request(
        f"{server.url}/api/ingest", method="POST", body=[], headers={TIMEOUT_HEADER: "x" * 9000}
    )
    assert status == 401
    # A wait longer than MAX_TIMEOUT ("1e9") counts as MAX_TIMEOUT.
    cases = [*((bad, 400) for bad in ("soon", "0", "-1", "nan", "")), ("2.5", 200), ("1e9", 200)]
    for value, expected in cases:
        status, answer, _ = request(
            f"{server.url}/api/ingest",
            method="POST",
            token=token,
            body=[],
            headers={TIMEOUT_HEADER: value},
        )
        assert status == expected, (value, answer)
        if expected == 400:
            assert TIMEOUT_HEADER in answer["error"], (value, answer)


def test_the_proxys_start_counts_only_from_a_trusted_proxy():
    then = int((time.time() - 4) * 1e6)
    headers = {TIMEOUT_HEADER: "10", START_HEADER: f"t={then}"}
    trusted = deadline(headers, from_proxy=True) - time.monotonic()
    untrusted = deadline(headers, from_proxy=False) - time.monotonic()
    assert 5 < trusted < 6.5 and 9 < untrusted <= 10
    # A stamp from a clock that disagrees (in the future, or an hour old) counts for nothing.
    for stamp in (int((time.time() + 60) * 1e6), int((time.time() - 3600) * 1e6), "garbage"):
        d = deadline({TIMEOUT_HEADER: "10", START_HEADER: f"t={stamp}"}, from_proxy=True)
        assert 9 < d - time.monotonic() <= 10


def test_the_plugins_client_says_how_long_it_waits(server, monkeypatch):
    seen = []
    real = ingest_module.deadlines.deadline
    monkeypatch.setattr(
        ingest_module.deadlines,
        "deadline",
        lambda headers, **kw: seen.append((headers.get(TIMEOUT_HEADER), kw)) or real(headers, **kw),
    )
    _, msgs = full_cluster("A")
    assert HttpSink(server.url, token=server.token("A"), timeout=7).write(msgs) == len(msgs)
    # A direct client is no proxy: an X-Request-Start of its own would count for nothing.
    assert seen == [("7", {"from_proxy": False})]


@pytest.mark.postgres  # needs haproxy, installed with PostgreSQL by the README's test command
def test_through_the_deploy_balancer_the_deadline_counts_from_haproxy(
    sqlite_url, tmp_path, monkeypatch
):
    """deploy/haproxy.cfg stamps X-Request-Start, which the replica trusts from HAProxy's
    address (forwarded_allow_ips) only; HAProxy's own 503 says when to come back."""
    seen = []
    real = ingest_module.deadlines.deadline
    monkeypatch.setattr(
        ingest_module.deadlines,
        "deadline",
        lambda headers, **kw: seen.append((headers.get(START_HEADER), kw)) or real(headers, **kw),
    )
    server: ServerThread | None = ServerThread(
        {"store_url": sqlite_url, "forwarded_allow_ips": "127.0.0.1"}
    ).start()
    assert server is not None
    balancer = HAProxy({"r0": server.port}, tmp_path / "haproxy", config=deploy_config)
    try:
        balancer.start()
        balancer.wait_up(["r0"])
        _, msgs = full_cluster("A")
        assert HttpSink(balancer.url, token=server.token("A")).write(msgs) == len(msgs)
        [(stamp, kw)] = seen
        assert stamp and stamp.startswith("t=") and kw == {"from_proxy": True}
        assert abs(int(stamp[2:]) / 1e6 - time.time()) < 60  # microseconds since the epoch
        server.stop()
        server = None
        wait_for(lambda: balancer.states()["r0"] != "UP", what="HAProxy to see the replica down")
        status, _, headers = request(f"{balancer.url}/api/ingest", method="POST", body=[])
        named = {k.lower(): v for k, v in headers.items()}  # HAProxy writes them lower case
        assert status == 503 and int(named["retry-after"]) >= 1, (status, headers)
    finally:
        balancer.stop()
        if server is not None:
            server.stop()


def test_a_batch_dropped_unread_does_not_make_a_stalled_queue_look_fast():
    queue = IngestQueue(2)
    queue.handed()
    queue.done(queue.started(), worked=False)
    assert queue.cost == FIRST_COST and queue.waiting == 0 and queue.wait() == 0
    queue.handed()
    t0 = queue.started()
    queue.done(t0 - 2.0)  # a batch that took two seconds moves the average
    assert queue.cost > FIRST_COST
