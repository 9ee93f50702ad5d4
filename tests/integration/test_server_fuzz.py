"""Bad and hostile input to every endpoint: always a 4xx with a clear JSON message (never
a 5xx), and a refused request changes nothing.  Property-based, with hypothesis, against
the real server on SQLite and PostgreSQL (which refuses more: NUL, surrogates, big ints)."""

from __future__ import annotations

import gzip
import json
import urllib.parse

from hypothesis import given
from hypothesis import strategies as st

from ..fuzz_helpers import FUZZ, hostile_batches, json_values, texts
from ..server_helpers import ServerThread, full_cluster, request


def _assert_refused_cleanly(status: int, body, where: str) -> None:
    assert status < 500, f"{where}: {status} {body}"
    if status >= 400:
        assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], (
            where,
            body,
        )


def test_fuzz_ingest(store_url):
    with ServerThread({"store_url": store_url}) as server:
        token = server.token("fuzz")
        c, template = full_cluster("fuzz")
        template = template + [c.stop()]
        assert (
            request(server.url + "/api/ingest", method="POST", token=token, body=template[:2])[0]
            == 200
        )
        c.id = c.id  # the same cluster: later messages hit existing rows too

        @FUZZ
        @given(batch=hostile_batches(template), gzipped=st.booleans())
        def check(batch, gzipped):
            before = server.ctx.store.export()
            status, body, _ = request(
                server.url + "/api/ingest", method="POST", token=token, body=batch, gzipped=gzipped
            )
            _assert_refused_cleanly(status, body, f"ingest {json.dumps(batch)[:300]}")
            if status >= 400:
                assert server.ctx.store.export() == before, "a refused batch changed the store"

        check()


def test_fuzz_ingest_raw_bodies(sqlite_url):
    with ServerThread({"store_url": sqlite_url, "max_body_bytes": 50_000}) as server:
        token = server.token("fuzz")

        @FUZZ
        @given(
            raw=st.binary(max_size=300) | st.builds(gzip.compress, st.binary(max_size=300)),
            ctype=st.sampled_from(
                ["application/json", "text/plain", "", "application/json; charset=latin-1"]
            ),
            encoding=st.sampled_from(["gzip", "", "br", "identity"]),
        )
        def check(raw, ctype, encoding):
            headers = (
                {"Content-Type": ctype, "Content-Encoding": encoding}
                if encoding
                else {"Content-Type": ctype}
            )
            status, body, _ = request(
                server.url + "/api/ingest", method="POST", token=token, raw=raw, headers=headers
            )
            _assert_refused_cleanly(status, body, f"raw {raw[:60]!r}")
            assert status >= 400 or body == {"stored": 0, "received": 0}

        check()
        # Sizes: over the limit, and a small gzip bomb.
        status, body, _ = request(
            server.url + "/api/ingest",
            method="POST",
            token=token,
            raw=b"[" + b"1," * 40_000 + b"1]",
            headers={"Content-Type": "application/json"},
        )
        assert status == 413 and "over" in body["error"]
        bomb = gzip.compress(b"[" + b" " * 50_000_000 + b"]")
        status, body, _ = request(
            server.url + "/api/ingest",
            method="POST",
            token=token,
            raw=bomb,
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert status == 413 and "decompressed" in body["error"]
        assert server.ctx.store.list_clusters() == []


GETS = [
    "/api/clusters",
    "/api/clusters/{id}",
    "/api/clusters/{id}/computations",
    "/api/clusters/{id}/samples",
    "/api/clusters/{id}/profile",
    "/api/computations",
    "/api/computations/{id}",
    "/api/computations/{id}/groups",
    "/api/computations/{id}/profile",
    "/api/exceptions",
    "/api/events",
    "/api/gpu",
    "/api/export",
    "/api/reports",
    "/api/whoami",
    "/reports/{id}",
    "/reports/{id}.json",
    "/",
    "/clusters/{id}",
    "/computations/{id}",
    "/exceptions",
    "/reports",
    "/login",
]
PARAMS = [
    "limit",
    "cluster_id",
    "computation_id",
    "topic",
    "monitor_id",
    "worker",
    "account",
    "next",
    "x",
]


def test_fuzz_queries(store_url):
    with ServerThread({"store_url": store_url}) as server:
        token = server.token("fuzz")
        c, msgs = full_cluster("fuzz")
        assert request(server.url + "/api/ingest", method="POST", token=token, body=msgs)[0] == 200
        ids = st.sampled_from([c.id, f"comp-{c.id}"]) | texts.filter(bool)
        values = (
            texts | st.integers(-5, 10**12).map(str) | st.sampled_from([c.id, "1", "100000000"])
        )

        @FUZZ
        @given(
            path=st.sampled_from(GETS),
            ident=ids,
            params=st.dictionaries(
                st.sampled_from(PARAMS) | texts.filter(bool), values, max_size=3
            ),
            with_token=st.booleans(),
        )
        def check(path, ident, params, with_token):
            quoted = urllib.parse.quote(ident.encode("utf-8", "surrogatepass"), safe="")
            query = urllib.parse.urlencode(
                {
                    k.encode("utf-8", "surrogatepass"): v.encode("utf-8", "surrogatepass")
                    for k, v in params.items()
                }
            )
            url = server.url + path.replace("{id}", quoted) + ("?" + query if query else "")
            status, body, headers = request(url, token=token if with_token else None)
            assert status < 500, (url, status, body)
            if path.startswith("/api/") and status >= 400:
                _assert_refused_cleanly(status, body, url)

        check()


def test_fuzz_report_uploads(sqlite_url):
    with ServerThread({"store_url": sqlite_url}) as server:
        token = server.token("fuzz")
        valid = {
            "html": "<p>r</p>",
            "twin": {"summary": {}},
            "filename": "r.html",
            "private": False,
        }
        fields = st.sampled_from(
            sorted(valid) + ["title", "cluster_id", "account", "user", "other"]
        )

        @FUZZ
        @given(
            body=st.one_of(
                json_values,
                st.dictionaries(fields, json_values, max_size=6),
                st.builds(lambda k, v: {**valid, k: v}, fields, json_values),
            )
        )
        def check(body):
            before = server.ctx.team.list_reports()
            status, answer, _ = request(
                server.url + "/api/reports", method="POST", token=token, body=body
            )
            _assert_refused_cleanly(status, answer, f"report {json.dumps(body)[:300]}")
            if status >= 400:
                assert server.ctx.team.list_reports() == before
            else:
                assert status == 201 and answer["report"]["account"] == "fuzz"

        check()


def test_fuzz_login_and_other_methods(sqlite_url):
    with ServerThread({"store_url": sqlite_url}) as server:

        @FUZZ
        @given(
            form=st.dictionaries(
                st.sampled_from(["token", "next", "x"]) | texts, texts, max_size=3
            ),
            nxt=texts,
            method=st.sampled_from(["POST", "PUT", "DELETE", "PATCH"]),
            path=st.sampled_from(
                ["/login", "/logout", "/api/clusters", "/api/ingest", "/reports/x"]
            ),
        )
        def check(form, nxt, method, path):
            raw = urllib.parse.urlencode(
                {
                    k.encode("utf-8", "surrogatepass"): v.encode("utf-8", "surrogatepass")
                    for k, v in form.items()
                }
            ).encode()
            url = (
                server.url
                + path
                + "?next="
                + urllib.parse.quote(nxt.encode("utf-8", "surrogatepass"), safe="")
            )
            status, body, headers = request(
                url,
                method=method,
                raw=raw,
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            assert status < 500, (method, url, status, body)
            if status in (301, 302):  # a redirect only ever goes to this server's own pages
                assert headers["Location"].startswith("/") and not headers["Location"].startswith(
                    "//"
                )
            assert "Set-Cookie" not in headers or path == "/logout"

        check()
