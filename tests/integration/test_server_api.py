"""The server end to end: ingest over HTTP, the read API behind the public functions,
code encrypted at rest, idempotency, TLS with a CA bundle, the token command."""

from __future__ import annotations

import contextlib
import io

import dask
import pytest

import dask_analytics_lab as dal
from dask_analytics_lab import api, cli
from dask_analytics_lab.http_reader import HttpReader
from dask_analytics_lab.remote import HttpSink
from dask_analytics_lab.store import NotFound, open_store
from dask_analytics_lab.store_errors import StoreUnavailable

from ..cluster_helpers import recorded_cluster
from ..server_helpers import ServerThread, full_cluster, request, self_signed


@pytest.fixture
def server(store_url):
    with ServerThread({"store_url": store_url}) as s:
        yield s


def test_ingest_then_the_public_api_reads_through_the_server(server):
    token = server.token("team-a")
    c, msgs = full_cluster("ignored-the-token-decides")
    sink = HttpSink(server.url, token=token)
    assert sink.write(msgs) == len(msgs)
    assert sink.write(msgs) == 0  # a retried batch is stored once
    assert sink.write(msgs[:3] + [c.sample()]) == 1

    comp_id = f"comp-{c.id}"
    api.close_readers()
    with dask.config.set({"analytics.store": server.url, "analytics.token": token}):
        clusters = dal.list_clusters()
        assert [x["cluster_id"] for x in clusters] == [c.id]
        assert clusters[0]["account"] == "team-a"  # from the token, not the message
        assert dal.get_cluster(c.id)["n_workers"] == 2
        assert len(dal.list_cluster_samples(c.id)) == 2
        assert [x["computation_id"] for x in dal.list_computations(c.id)] == [comp_id]
        assert [x["computation_id"] for x in dal.list_computations()] == [comp_id]
        comp = dal.get_computation(comp_id)
        assert {g["name"] for g in comp["groups"]} == {"sum-aggregate", "ones"}
        assert comp["code"][0]["text"].startswith("# ignored-the-token-decides's secret code")
        assert len(dal.list_task_groups(comp_id)) == 2
        assert dal.list_exceptions(c.id)[0]["count"] == 1
        assert dal.list_exceptions(computation_id=comp_id)[0]["task_group"] == "sum-aggregate"
        assert dal.list_events(c.id, topic="worker-fail-hard")[0]["msg"] == {"worker": "tcp://w1"}
        assert dal.get_profile(comp_id)["count"] == 1
        assert dal.get_profile(cluster_id=c.id)["count"] == 2
        assert len(dal.list_gpu_metrics(c.id)) == 2
        assert {r["cluster_id"] for r in dal.export()["clusters"]} == {c.id}
        with pytest.raises(NotFound):
            dal.get_computation("no-such-computation")
    api.close_readers()

    # The same reads straight from the store: identical rows, but the code is ciphertext there.
    direct = server.ctx.store.get_computation(comp_id)
    assert direct["code"][0]["text"].startswith("fernet:")
    assert "secret code" not in direct["code"][0]["text"]
    via_http = HttpReader(server.url, token=token).get_computation(comp_id)
    code = ("code", "code_line")  # the line that made it is user code too: sealed at rest
    assert (
        direct["code_line"].startswith("fernet:") and via_http["code_line"] == "x.sum().compute()"
    )
    assert {k: v for k, v in via_http.items() if k not in code} == {
        k: v for k, v in direct.items() if k not in code
    }


def test_forged_code_hash_and_bad_batches_are_refused(server):
    token = server.token("team-a")
    c, msgs = full_cluster("team-a")
    forged = c.code(text="print('mine')")
    forged["data"]["hash"] = msgs[2]["data"]["hash"]  # try to replace another snippet
    status, body, _ = request(
        server.url + "/api/ingest", method="POST", token=token, body=msgs + [forged]
    )
    assert status == 422 and "code hash does not match" in body["error"]
    assert server.ctx.store.list_clusters() == []  # the whole batch was refused


def test_tls_with_a_ca_bundle(sqlite_url, tmp_path):
    certfile, keyfile = self_signed(tmp_path)
    with ServerThread({"store_url": sqlite_url}, certfile=certfile, keyfile=keyfile) as server:
        assert server.url.startswith("https://")
        token = server.token("team-a")
        c, msgs = full_cluster("team-a")
        # Unknown issuer: the plugin's sink refuses to talk (and would retry), never skips checks.
        with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            HttpSink(server.url, token=token).write(msgs)
        assert HttpSink(server.url, token=token, ca_file=certfile).write(msgs) == len(msgs)
        reader = HttpReader(server.url, token=token, ca_file=certfile)
        assert reader.list_clusters()[0]["cluster_id"] == c.id
        # Plain http to the TLS port gets nowhere.
        with pytest.raises(StoreUnavailable):
            HttpReader(server.url.replace("https", "http"), token=token).list_clusters()

        # A real cluster's plugin, configured on the client: store, token, CA bundle.
        config = {"analytics.token": token, "analytics.ca-file": certfile}
        with recorded_cluster(server.url, config=config) as (client, info):
            assert client.submit(sum, [1, 2]).result() == 3
            assert dal.flush(client, timeout=20)["flushed"]
            assert dal.status(client)["rejected"] == 0
        assert [x["cluster_id"] for x in reader.list_clusters()] == [info["cluster_id"], c.id]


def test_token_command_prints_a_working_token(sqlite_url):
    open_store(sqlite_url).close()  # made, as a server's start makes it, before its tokens
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            cli.main(
                ["token", "create", "--account", "team-b", "--user", "bob", "--store", sqlite_url]
            )
            == 0
        )
    token = out.getvalue().strip()
    assert token.startswith("dal_")
    with ServerThread({"store_url": sqlite_url}) as server:
        status, body, _ = request(server.url + "/api/whoami", token=token)
        assert status == 200 and body["whoami"] == {
            "account": "team-b",
            "user": "bob",
            "via": "token",
            "token_required": True,
        }
        # Only the hash is kept.
        assert token not in str(server.ctx.team.list_tokens())
        token_id = server.ctx.team.list_tokens()[0]["token_id"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["token", "revoke", token_id, "--db", sqlite_url]) == 0
    with ServerThread({"store_url": sqlite_url}) as server:
        assert request(server.url + "/api/whoami", token=token)[0] == 401


def test_a_store_from_before_the_team_tables_is_upgraded(sqlite_url):
    """A store made at revision 0001 (no team tables) gets them when the server opens it."""
    from alembic import command

    from dask_analytics_lab.store import open_store
    from dask_analytics_lab.store.engine import make_engine
    from dask_analytics_lab.store.migrate import alembic_config

    c, msgs = full_cluster("default")
    with open_store(sqlite_url) as store:
        store.ingest(msgs[:2])
    engine = make_engine(sqlite_url)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0001")
    engine.dispose()
    with ServerThread({"store_url": sqlite_url}) as server:
        token = server.token("default")
        assert request(server.url + f"/api/clusters/{c.id}", token=token)[0] == 200


def test_with_a_token_the_token_says_who_ran_it(server):
    """On a JupyterHub every client says it is `jovyan`: through the server the token's
    user and account are stored, and what the client said is kept beside them."""
    token = server.token("team-a", user="ann")
    config = {
        "analytics.token": token,
        "analytics.user": "jovyan",
        "analytics.account": "someone-else",
    }
    with recorded_cluster(server.url, config=config) as (client, info):
        assert client.submit(sum, [1, 2]).result() == 3
        assert dal.flush(client, timeout=20)["flushed"]
    row = server.ctx.store.get_cluster(info["cluster_id"])
    assert (row["user"], row["account"], row["reported_user"]) == ("ann", "team-a", "jovyan")
    # and the readers see it
    via_http = HttpReader(server.url, token=token).get_cluster(info["cluster_id"])
    assert (via_http["user"], via_http["reported_user"]) == ("ann", "jovyan")


def test_without_tokens_the_client_says_who_ran_it(sqlite_url):
    with ServerThread({"store_url": sqlite_url, "token_required": False}) as server:
        c = full_cluster("default", user="jovyan")[0]
        assert HttpSink(server.url).write([c.cluster(user="jovyan")]) == 1
        row = server.ctx.store.get_cluster(c.id)
        assert (row["user"], row["reported_user"]) == ("jovyan", None)


def test_the_query_api_passes_the_lifecycle_and_labels_through(server):
    token = server.token("team-a")
    c, msgs = full_cluster("team-a")
    running = c.computation("still-running", state="running", label="ones → sum")
    assert (
        HttpSink(server.url, token=token).write(
            msgs + [running, c.sample(n_workers=0, n_threads=0), c.stop()]
        )
        == len(msgs) + 3
    )
    reader = HttpReader(server.url, token=token)
    (cluster,) = reader.list_clusters()
    direct = server.ctx.store.get_cluster(c.id)
    assert (
        cluster == reader.get_cluster(c.id) == direct
    )  # a stopped cluster's row does not move with time
    assert (cluster["status"], cluster["ended"]) == ("stopped", direct["stopped"])
    assert cluster["duration"] == direct["stopped"] - direct["started"]
    assert (cluster["n_workers"], cluster["peak_workers"], cluster["peak_threads"]) == (0, 2, 4)
    assert cluster["peak_memory"] == 2**34
    comps = {r["computation_id"]: r for r in reader.list_computations(cluster_id=c.id)}
    assert (comps["still-running"]["state"], comps["still-running"]["stop"]) == (
        "lost",
        direct["stopped"],
    )
    assert comps["still-running"]["label"] == "ones → sum"
    comp = reader.get_computation(f"comp-{c.id}")
    assert comp["code_line"] == "x.sum().compute()" and comp["label"] == "sum → ones"
    assert comp["code"][0]["lineno_frame"] == 12
    status, body, _ = request(server.url + f"/api/clusters/{c.id}", token=token)
    assert status == 200 and body["cluster"]["status"] == "stopped"
