"""Issue 13, part 1 (and issue 18, item 6): a run compared with the earlier runs of the
same code, also at another size.

The end-to-end test runs one function with 1x, then 4x the work per task on a real
LocalCluster; the rules (which run is the baseline, what is found, who may see what)
are checked on stored messages, on SQLite and PostgreSQL, and over the team server.
"""

from __future__ import annotations

import time

import dask
import pytest
import sqlalchemy as sa

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers, run_summary
from dask_analytics_lab.cli import main as cli
from dask_analytics_lab.messages import fingerprint
from dask_analytics_lab.store import open_store
from dask_analytics_lab.store.compare import NoFingerprint
from dask_analytics_lab.store_errors import NotFound

from ..cluster_helpers import recorded_cluster
from ..factories import Cluster, group
from ..server_helpers import ServerThread, request
from ..workloads import etl, job


def test_a_rerun_with_four_times_the_work_is_compared_with_the_first(tmp_path, capsys):
    store = str(tmp_path / "analytics.db")
    try:
        with recorded_cluster(store) as (client, info):
            assert job(client, 0.05) == 6
            assert job(client, 0.2) == 6
            assert dal.flush(client)["flushed"]
        first, second = sorted(
            dal.list_computations(info["cluster_id"], store=store), key=lambda c: c["start"]
        )
        assert first["fingerprint"] == second["fingerprint"] is not None

        result = dal.compare(second["computation_id"], store=store)
        assert result["baseline_id"] == first["computation_id"]
        spun = next(g for g in result["groups"] if g["prefix"] == "spin")
        assert spun["ratio"] > 2
        assert spun["before"]["n_tasks"] == spun["after"]["n_tasks"] == 4
        assert result["groups"][0]["prefix"] == "spin"  # the group that moved most comes first
        assert any(f.startswith("spin: compute") for f in result["findings"]), result["findings"]
        assert result["wall"]["ratio"] > 1

        runs = dal.list_runs(second["computation_id"], store=store)
        assert [r["computation_id"] for r in runs] == [
            second["computation_id"],
            first["computation_id"],
        ]
        assert runs[0]["compute"] > runs[1]["compute"]
        assert runs[0]["cost"] is not None and runs[0]["cost"] > runs[1]["cost"]

        assert cli(["--store", store, "compare", second["computation_id"]]) == 0
        out = capsys.readouterr().out
        assert (
            f"against {first['computation_id'][:8]}" in out and "spin: compute" in out
        )  # short ids
        assert cli(["--store", store, "runs", second["computation_id"]]) == 0
        out = capsys.readouterr().out
        assert first["computation_id"][:8] in out and second["computation_id"][:8] in out
        # The first run has nothing before it.
        assert dal.compare(first["computation_id"], store=store)["baseline_id"] is None
    finally:
        close_readers()


FP = fingerprint("df.groupby('a').sum().compute()", ["read", "groupby"])


def live(account: str) -> Cluster:
    """A cluster whose messages are from the last minute: it reads live, so its running
    computation reads running (not lost)."""
    return Cluster(account=account, t0=time.time() - 60)


def runs_of(c: Cluster, *, fp: str = FP) -> list[dict]:
    """Four runs of one piece of code: finished, erred, finished (slow), running."""
    return [
        c.computation(
            "run-1",
            start=c.t,
            stop=c.t + 10,
            fingerprint=fp,
            groups=[
                group("read-1", n_tasks=4, compute=2.0),
                group("groupby-1", n_tasks=2, compute=4.0, dependencies=["read-1"]),
            ],
        ),
        c.computation(
            "run-2",
            state="erred",
            start=c.t,
            stop=c.t + 1,
            fingerprint=fp,
            groups=[group("read-2", n_tasks=4, n_erred=4, compute=0.1)],
        ),
        c.computation(
            "run-3",
            start=c.t,
            stop=c.t + 40,
            fingerprint=fp,
            groups=[
                group("read-3", n_tasks=4, compute=2.1),
                group("groupby-3", n_tasks=2, compute=20.0, nbytes=2**31, dependencies=["read-3"]),
            ],
        ),
        c.computation(
            "run-4",
            state="running",
            start=c.t,
            fingerprint=fp,
            groups=[group("read-4", n_tasks=4, compute=1.0)],
        ),
    ]


def test_the_baseline_is_the_latest_earlier_finished_run_of_the_same_code(store_url):
    mine, other = live("acme"), live("acme")
    with open_store(store_url) as store:
        store.ingest(
            [
                mine.cluster(started=mine.t),
                *runs_of(mine),
                other.cluster(started=other.t),
                other.computation("elsewhere-1", start=mine.t + 5, fingerprint=FP),
                mine.computation("different", fingerprint=fingerprint("x.compute()", ["x"])),
            ]
        )
        # run-3's baseline: run-1 (run-2 erred); run-4's: run-3, not run-2 nor itself.
        assert store.compare("run-3")["baseline_id"] == "run-1"
        assert store.compare("run-4")["baseline_id"] == "run-3"
        # A run on another cluster of the reader's counts too.
        assert store.compare("elsewhere-1")["baseline_id"] == "run-3"

        result = store.compare("run-3")
        assert result["wall"] == {"before": 10.0, "after": 40.0, "ratio": 4.0}
        by = {g["prefix"]: g for g in result["groups"]}
        assert by["groupby"]["ratio"] == pytest.approx(5.0)
        assert by["read"]["ratio"] == pytest.approx(1.05)
        assert [g["prefix"] for g in result["groups"]] == ["groupby", "read"]
        assert result["findings"][0] == "4.0x slower overall (10.0 s → 40.0 s)"
        assert result["findings"][1].startswith("groupby: compute 5.0x (4.00 s → 20.0 s), bytes ")
        assert not any(f.startswith("read") for f in result["findings"])  # 5% is not news

        running = store.compare("run-4")
        assert running["findings"][0] == "this run is still running: its figures are so far"
        assert any(f.startswith("groupby: gone") for f in running["findings"])

        explicit = store.compare("run-3", baseline="run-2")
        assert explicit["baseline_id"] == "run-2"
        assert "read: 4 tasks erred where none did" not in explicit["findings"]

        first = store.compare("run-1")
        assert first["baseline_id"] is None and first["findings"] == [
            "no earlier finished run of this code to compare with"
        ]
        assert [g["prefix"] for g in first["groups"]] == ["groupby", "read"]

        assert [r["computation_id"] for r in store.list_runs("run-3")] == [
            "elsewhere-1",
            "run-4",
            "run-3",
            "run-2",
            "run-1",
        ]
        assert [r["computation_id"] for r in store.list_runs("run-3", limit=2)] == [
            "elsewhere-1",
            "run-4",
        ]
        # A run's cost: its compute time at its cluster's price per core-hour (0.05).
        run1 = next(r for r in store.list_runs("run-1") if r["computation_id"] == "run-1")
        assert run1["cost"] == pytest.approx(6.0 / 3600 * 0.05)
        assert run1["wall"] == 10.0 and run1["cluster_name"] == "LocalCluster-1"


def test_compare_sees_only_the_readers_account_and_says_what_to_do(store_url):
    acme, rival = Cluster(account="acme"), Cluster(account="rival")
    with open_store(store_url) as store:
        store.ingest(
            [
                acme.cluster(),
                *runs_of(acme),
                rival.cluster(),
                rival.computation("rival-1", start=acme.t - 1000, fingerprint=FP),
                rival.computation("rival-2", fingerprint=FP),
                acme.computation("old", fingerprint=None),
            ]
        )
        # rival-1 is earlier and finished, but it is another account's.
        assert store.compare("run-1", account="acme")["baseline_id"] is None
        assert (
            store.compare("run-1")["baseline_id"] == "rival-1"
        )  # a reader of every account sees it
        assert [r["computation_id"] for r in store.list_runs("rival-2", account="rival")] == [
            "rival-2",
            "rival-1",
        ]
        with pytest.raises(NotFound, match="unknown computation id 'rival-2'"):
            store.compare("rival-2", account="acme")
        with pytest.raises(NotFound, match="unknown computation id 'rival-1'"):
            store.compare("run-3", baseline="rival-1", account="acme")
        with pytest.raises(NotFound, match="unknown computation id 'rival-1'"):
            store.list_runs("rival-1", account="acme")
        with pytest.raises(NoFingerprint, match="pass baseline="):
            store.compare("old", account="acme")
        assert [r["computation_id"] for r in store.list_runs("old", account="acme")] == ["old"]
        assert store.compare("old", baseline="run-1", account="acme")["baseline_id"] == "run-1"
        with pytest.raises(NotFound, match="dask-analytics computations lists"):
            store.compare("nope")


def test_compare_over_the_team_server_is_scoped_to_the_token(tmp_path):
    with ServerThread({"store_url": f"sqlite:///{tmp_path / 'team.db'}"}) as server:
        acme, rival = Cluster(account="acme"), Cluster(account="rival")
        server.ctx.store.ingest(
            [
                acme.cluster(),
                *runs_of(acme),
                rival.cluster(),
                rival.computation("rival-1", fingerprint=FP),
            ]
        )
        ann, eve = server.token("acme"), server.token("rival", user="eve")
        try:
            with dask.config.set({"analytics.token": ann}):
                result = dal.compare("run-3", store=server.url)
                assert result["baseline_id"] == "run-1"
                assert dal.compare("run-3", "run-2", store=server.url)["baseline_id"] == "run-2"
                assert [r["computation_id"] for r in dal.list_runs("run-3", store=server.url)] == [
                    "run-4",
                    "run-3",
                    "run-2",
                    "run-1",
                ]
        finally:
            close_readers()

        api = server.url + "/api/computations"
        for path in ("/run-3/compare", "/run-3/runs", "/run-3/summary"):
            status, body, _ = request(api + path)
            assert status == 401, (path, body)
            status, body, _ = request(api + path, token=eve)
            assert status == 404 and "run-3" in body["error"], (path, body)
            status, body, _ = request(api + path + "?account=rival", token=ann)
            assert status == 403, (path, body)
        status, body, _ = request(api + "/run-3/compare?baseline=rival-1", token=ann)
        assert status == 404 and "rival-1" in body["error"]
        for hostile in ("%00", "x" * 5000, "a&baseline=b"):
            status, body, _ = request(api + "/run-3/compare?baseline=" + hostile, token=ann)
            assert status == 400, (hostile, body)
        status, body, _ = request(api + "/run-3/compare?since=1", token=ann)
        assert status == 400 and "unknown query parameter" in body["error"]
        status, body, _ = request(api + "/run-3/runs?limit=0", token=ann)
        assert status == 400 and "limit" in body["error"]
        status, body, _ = request(api + "/run-3/compare", token=ann, method="POST", body={"x": 1})
        assert status in (403, 405)
        status, body, _ = request(api + "/run-3/summary", token=ann)
        assert status == 200 and body["summary"]["baseline_id"] == "run-1"
        assert [r["computation_id"] for r in body["summary"]["runs"]] == [
            "run-1",
            "run-2",
            "run-3",
            "run-4",
        ]


# --- issue 18, item 6: a re-run at another size --------------------------------------
def input_groups(dask_scheduler) -> dict:
    """What Dask did: the last computation's groups that depend on none of its others,
    {prefix: {"n_tasks", "nbytes"}}."""
    groups = dask_scheduler.computations[-1].groups
    out: dict = {}
    for tg in groups:
        if not any(dep in groups for dep in tg.dependencies):
            p = out.setdefault(tg.prefix.name, {"n_tasks": 0, "nbytes": 0})
            p["n_tasks"] += sum(tg.states.values())
            p["nbytes"] += tg.nbytes_total
    return out


@pytest.mark.parametrize("code", [True, False], ids=["code", "no-code"])
def test_a_rerun_at_another_size_is_compared_with_the_first_and_says_the_inputs_differ(
    tmp_path, code
):
    store = str(tmp_path / "analytics.db")
    try:
        with recorded_cluster(store, config={"analytics.computation.code.transmit": code}) as (
            client,
            info,
        ):
            etl(3000)
            dask_small = client.run_on_scheduler(input_groups)
            etl(6000)
            dask_large = client.run_on_scheduler(input_groups)
            assert dal.flush(client)["flushed"]
        small, large = sorted(
            dal.list_computations(info["cluster_id"], store=store), key=lambda c: c["start"]
        )
        prefixes = {
            c["computation_id"]: {
                g["prefix"] for g in dal.get_computation(c["computation_id"], store=store)["groups"]
            }
            for c in (small, large)
        }
        # The depth changed: the larger run has a partial stage the smaller one has not.
        assert (
            "sum-partial" in prefixes[large["computation_id"]] - prefixes[small["computation_id"]]
        )
        assert (small["code_line"] is not None) is code
        assert small["fingerprint"] == large["fingerprint"] is not None

        result = dal.compare(large["computation_id"], store=store)
        assert result["baseline_id"] == small["computation_id"]
        inputs = result["inputs_differ"]
        (prefix,) = dask_small
        assert dask_small[prefix]["n_tasks"] == 3 and dask_large[prefix]["n_tasks"] == 6
        assert inputs["before"] == dask_small[prefix] and inputs["after"] == dask_large[prefix]
        assert inputs["groups"] == [
            {"prefix": prefix, "before": dask_small[prefix], "after": dask_large[prefix]}
        ]
        assert result["findings"][0] == (
            f"the inputs differ (3 → 6 input tasks, whose results held {dask_small[prefix]['nbytes']} B → "
            f"{dask_large[prefix]['nbytes']} B): a change in time may come from the size, not from the code"
        )
        # The views' "vs previous" reads the same comparison.
        summary = run_summary(large["computation_id"], store=store)
        assert (
            summary["baseline_id"] == small["computation_id"] and summary["inputs_differ"] == inputs
        )
    finally:
        close_readers()


def test_fingerprints_hold_across_sizes_with_and_without_a_line():
    line = "return (x + 1).sum(split_every=4).compute()"
    # Prefix sets seen here for one line at several sizes (dask 2026.8): one chunk fuses
    # everything, a few reduce in one step, many gain a partial stage; dataframes tree-reduce.
    shapes = [
        ["finalize-hlgfinalizecompute", "sum-sum-aggregate"],
        ["finalize-hlgfinalizecompute", "sum", "sum-aggregate"],
        ["finalize-hlgfinalizecompute", "sum", "sum-partial", "sum-aggregate"],
    ]
    assert len({fingerprint(line, p) for p in shapes}) == 1
    assert fingerprint(line, shapes[0]) != fingerprint("x.mean().compute()", shapes[0])
    # Without a line: the prefixes less the reduction stages.
    assert fingerprint(None, shapes[1]) == fingerprint(None, shapes[2])
    assert fingerprint(None, ["random_sample", "mean_chunk", "mean_agg-aggregate"]) == fingerprint(
        None, ["random_sample", "mean_chunk", "mean_combine-partial", "mean_agg-aggregate"]
    )
    assert fingerprint(None, ["frompandas", "getitem", "chunk", "sum-tree"]) != fingerprint(
        None, ["frompandas", "getitem", "chunk", "max-tree", "other"]
    )
    # A computation that is all reduction stages keeps them (not every such run is one).
    assert fingerprint(None, ["sum-aggregate"]) != fingerprint(None, ["max-aggregate"])
    assert fingerprint(None, ["x"]) != fingerprint("x", [])


def test_inputs_differ_per_input_group_and_in_total(store_url):
    c = live("acme")
    fp = fingerprint("etl(n)", [])

    def run(cid: str, read: int, lookup_bytes: int, **kw) -> dict:
        return c.computation(
            cid,
            fingerprint=fp,
            start=c.t,
            stop=c.t + 10,
            groups=[
                group(f"read-{cid}", n_tasks=read, nbytes=1000 * read),
                group(f"lookup-{cid}", n_tasks=2, nbytes=lookup_bytes),
                group(
                    f"join-{cid}",
                    n_tasks=read,
                    nbytes=10,
                    dependencies=[f"read-{cid}", f"lookup-{cid}"],
                ),
            ],
            **kw,
        )

    with open_store(store_url) as store:
        store.ingest(
            [
                c.cluster(started=c.t),
                run("a", 4, 5000),
                run("b", 4, 5400),
                run("c", 8, 5000),
                c.computation("d", fingerprint=fp, start=c.t, groups=[group("other-d")]),
            ]
        )
        # Same tasks, bytes within 10% (Dask samples object columns): the same inputs.
        same = store.compare("b")
        assert same["inputs_differ"] is None
        assert not any("inputs differ" in f for f in same["findings"])

        bigger = store.compare("c")
        assert bigger["baseline_id"] == "b"
        assert bigger["inputs_differ"] == {
            "before": {"n_tasks": 6, "nbytes": 9400},
            "after": {"n_tasks": 10, "nbytes": 13000},
            "groups": [
                {
                    "prefix": "lookup",
                    "before": {"n_tasks": 2, "nbytes": 5400},
                    "after": {"n_tasks": 2, "nbytes": 5000},
                },
                {
                    "prefix": "read",
                    "before": {"n_tasks": 4, "nbytes": 4000},
                    "after": {"n_tasks": 8, "nbytes": 8000},
                },
            ],
            "sentence": "6 → 10 input tasks, whose results held 9.18 kiB → 12.70 kiB "
            "(lookup: 2 → 2 tasks, 5.27 kiB → 4.88 kiB; read: 4 → 8 tasks, 3.91 kiB → 7.81 kiB)",
        }
        assert bigger["findings"][0].startswith("the inputs differ (6 → 10 input tasks")
        assert store.run_summary("c")["inputs_differ"] == bigger["inputs_differ"]
        # A baseline named by hand is compared the same way.
        assert store.compare("c", baseline="a")["inputs_differ"]["before"] == {
            "n_tasks": 6,
            "nbytes": 9000,
        }

        other = store.compare("d")
        assert (
            "the two runs share no task prefix: the same line of code made different work"
            in other["findings"]
        )


def old_fingerprint(code_line: str | None, prefixes: list[str]) -> str:
    """The rule before issue 18: the line and the set of task prefixes."""
    import hashlib

    return hashlib.sha256(
        "\0".join([code_line or "", *sorted(set(prefixes))]).encode()
    ).hexdigest()[:32]


def test_stored_fingerprints_are_made_again_on_upgrade(store_url):
    from dask_analytics_lab.codecrypt import CodeCipher, generate_key
    from dask_analytics_lab.store import schema
    from dask_analytics_lab.store.engine import make_engine

    c = live("default")
    small, large = (
        [group("sum-1"), group("sum-aggregate-1")],
        [group("sum-2"), group("sum-partial-2"), group("sum-aggregate-2")],
    )
    line = "return x.sum().compute()"
    sealed = CodeCipher(generate_key()).encrypt(line)  # a key this process does not have
    with open_store(store_url) as store:
        store.ingest(
            [c.cluster(started=c.t)]
            + [
                c.computation(
                    cid,
                    code_line=code_line,
                    groups=groups,
                    start=c.t,
                    fingerprint=old_fingerprint(code_line, [g["prefix"] for g in groups]),
                )
                for cid, code_line, groups in [
                    ("line-small", line, small),
                    ("line-large", line, large),
                    ("bare-small", None, small),
                    ("bare-large", None, large),
                    ("sealed", line, large),
                ]
            ]
        )
        before = {r["computation_id"]: r["fingerprint"] for r in store.export()["computations"]}
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            comps = schema.computations
            conn.execute(
                sa.update(comps).where(comps.c.computation_id == "sealed").values(code_line=sealed)
            )
        with engine.begin() as conn:
            # Back to the revision before size-free fingerprints (later revisions undone
            # properly); the next open upgrades again.
            from alembic import command

            from dask_analytics_lab.store.migrate import alembic_config

            command.downgrade(alembic_config(conn), "0007")
    finally:
        engine.dispose()
    with open_store(store_url) as store:
        after = {r["computation_id"]: r["fingerprint"] for r in store.export()["computations"]}
        assert after["line-small"] == after["line-large"] == fingerprint(line, [])
        assert after["bare-small"] == after["bare-large"] == fingerprint(None, ["sum"])
        assert after["sealed"] == before["sealed"]  # no key here opens its line: left as it was
        assert store.compare("line-large")["baseline_id"] == "line-small"
        assert store.compare("bare-large")["baseline_id"] == "bare-small"
