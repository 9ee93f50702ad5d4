"""The one HTTP client (remote.py) against a real `dask-analytics server` process: kept
connections are reused, by one thread and by several; a connection the server dropped is
replaced without an error; the shipper's backoff is jittered and bounded.

A small TCP proxy in front of the server counts the connections clients open and can
cut them, as a server's idle timeout or restart does.
"""

from __future__ import annotations

import http.server
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dask_analytics_lab.collect.writer import retry_delay
from dask_analytics_lab.http_reader import HttpReader
from dask_analytics_lab.remote import HttpSink
from dask_analytics_lab.store import StoreUnavailable

from ..server_helpers import Cluster, ServerProcess, free_port, make_tokens


class CountingProxy:
    """Forwards TCP connections on 127.0.0.1:<port> to the server, counting them.

    drop_all(): closes every connection now (a server's idle timeout, between requests).
    cut_next_request: the next request to arrive is not forwarded; its connection is
    closed instead (the server closing an idle connection just as a request goes out).
    """

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted = 0
        self.cut = 0
        self.cut_next_request = False
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self.accepted += 1
                self._open += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while data := src.recv(65536):
                with self._lock:
                    cut = requests and self.cut_next_request
                    if cut:
                        self.cut_next_request = False
                        self.cut += 1
                if cut:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            self._close(s)

    @staticmethod
    def _close(s: socket.socket) -> None:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()

    def drop_all(self) -> None:
        with self._lock:
            conns, self._open = self._open, []
        for s in conns:
            self._close(s)

    def close(self) -> None:
        self.listener.close()
        self.drop_all()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    url = "sqlite:///" + str(tmp_path_factory.mktemp("remote") / "analytics.db")
    token = make_tokens(url, 1)[0]
    with ServerProcess(url, free_port()) as s:
        s.token = token
        yield s


@pytest.fixture
def proxy(server):
    p = CountingProxy(int(server.url.rsplit(":", 1)[1]))
    yield p
    p.close()


def test_one_connection_carries_every_request(server, proxy):
    c = Cluster(account="load")
    sink = HttpSink(proxy.url, token=server.token)
    assert sink.write([c.cluster()]) == 1
    for _ in range(20):
        assert sink.write([c.sample(), c.event()]) == 2
    assert proxy.accepted == 1
    reader = HttpReader(proxy.url, token=server.token)
    for _ in range(20):
        assert c.id in {x["cluster_id"] for x in reader.list_clusters()}
    assert len(reader.list_cluster_samples(c.id)) == 20
    assert proxy.accepted == 2  # the sink's and the reader's
    sink.close()
    reader.close()


def test_threads_share_a_reader_on_a_few_connections(server, proxy):
    c = Cluster(account="load")
    assert HttpSink(server.url, token=server.token).write([c.cluster(name="shared")]) == 1
    reader = HttpReader(proxy.url, token=server.token)

    def read(_: int) -> str:
        return reader.get_cluster(c.id)["name"]

    with ThreadPoolExecutor(4) as pool:
        names = list(pool.map(read, range(100)))
    assert names == ["shared"] * 100
    # Each thread holds one connection at a time: never more than four, and kept.
    assert 1 <= proxy.accepted <= 4, proxy.accepted
    reader.close()


def test_a_connection_the_server_dropped_is_replaced(server, proxy):
    c = Cluster(account="load")
    sink = HttpSink(proxy.url, token=server.token)
    reader = HttpReader(proxy.url, token=server.token)
    assert sink.write([c.cluster()]) == 1
    assert reader.get_cluster(c.id)["cluster_id"] == c.id
    assert proxy.accepted == 2

    # Closed while idle (the server's idle timeout): noticed before use, so even a POST
    # that must not be sent twice goes out once, on a new connection.
    proxy.drop_all()
    assert reader.client.post("/api/ingest", [c.sample()])["stored"] == 1
    assert sink.write([c.sample()]) == 1
    assert reader.get_cluster(c.id)["cluster_id"] == c.id
    assert proxy.accepted == 4 and proxy.cut == 0

    # Closed as the request arrives: a GET, and an ingest batch (stored once per
    # (cluster_id, seq)), are sent once more on a new connection.
    proxy.cut_next_request = True
    assert reader.get_cluster(c.id)["cluster_id"] == c.id
    proxy.cut_next_request = True
    assert sink.write([c.sample()]) == 1
    assert proxy.cut == 2 and proxy.accepted == 6
    assert len(reader.list_cluster_samples(c.id)) == 3  # each sample once

    # A request that must not be sent twice is not: the caller hears of it.
    proxy.cut_next_request = True
    with pytest.raises(StoreUnavailable, match="cannot reach the analytics server"):
        reader.client.post("/api/ingest", [c.sample()])
    sink.close()
    reader.close()


def test_a_restarted_server_is_read_again_without_an_error(server):
    c = Cluster(account="load")
    sink = HttpSink(server.url, token=server.token)
    reader = HttpReader(server.url, token=server.token)
    assert sink.write([c.cluster()]) == 1
    assert reader.get_cluster(c.id)["cluster_id"] == c.id
    server.kill()  # every kept connection goes with it
    with pytest.raises(StoreUnavailable, match="cannot reach the analytics server"):
        reader.get_cluster(c.id)
    server.start()
    assert reader.get_cluster(c.id)["cluster_id"] == c.id
    assert sink.write([c.sample()]) == 1
    sink.close()
    reader.close()


class _Redirects(http.server.BaseHTTPRequestHandler):
    seen: list

    def _redirect(self) -> None:
        self.seen.append((self.command, self.headers.get("Authorization")))
        self.send_response(307)
        self.send_header("Location", "http://127.0.0.1:9/elsewhere")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _redirect  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


def test_the_reader_posts_nothing_to_where_a_redirect_points():
    """A report upload carries the token: redirected, it stops with the same error as the
    plugin's sink, and nothing goes to the other server."""
    seen: list = []
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("R", (_Redirects,), {"seen": seen})
    )
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        reader = HttpReader(
            f"http://127.0.0.1:{srv.server_address[1]}", token="dal_0123456789ab_" + "t" * 43
        )
        with pytest.raises(
            StoreUnavailable, match="redirects to http://127.0.0.1:9/elsewhere.*analytics.store"
        ):
            reader.upload_report({"html": "<p>hi</p>"})
        assert [m for m, _ in seen] == ["POST"]
    finally:
        srv.shutdown()


def test_retry_delays_double_within_bounds_and_are_jittered():
    low, high = 0.2, 30.0
    for failures in range(1, 80):
        ceiling = min(high, low * 2**failures)
        draws = [retry_delay(failures, low, high) for _ in range(200)]
        assert all(max(low, ceiling / 2) <= d <= ceiling for d in draws), (
            failures,
            min(draws),
            max(draws),
        )
        assert len(set(draws)) > 150, failures  # spread out, not one value per step
    assert max(retry_delay(1, low, high) for _ in range(100)) <= 2 * low
    assert min(retry_delay(30, low, high) for _ in range(100)) >= high / 2
    assert {retry_delay(5, 1.0, 1.0) for _ in range(10)} == {1.0}  # min == max: no room to jitter
