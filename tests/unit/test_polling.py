"""One polling model (issue 23, item 2): the notebook monitor's feed (widgets/_feed.py) and
the JupyterLab panel's model (js/lab/model.ts, bundled by esbuild and run in node against a
stand-in for the JSON API) poll the same store with the rules of polling.json: the same
reads on the same polls, the same intervals, and the same series kept, thinned under the
rules' caps however long the cluster lives."""

from __future__ import annotations

import json
import os
import random
import subprocess
import types
from collections import Counter
from pathlib import Path

import anywidget  # noqa: F401  (a test extra: a missing one fails the run)
import pytest

from dask_analytics_lab import polling
from dask_analytics_lab.polling import RULES, Kept
from dask_analytics_lab.widgets import _feed
from dask_analytics_lab.widgets.monitor_widget import MonitorWidget

ROOT = Path(__file__).resolve().parents[2]
T0 = 1.7e9
END = 300  # the poll at which the cluster stops
POLLS = 320
TOPICS = RULES["events"]["topics"]

# Runs the panel's own TS through node (README: Node 20) and esbuild (`npm ci` installs it):
# without them this fails (a skip would hide a drift between the two).


def node(script: str, cwd: Path) -> str:
    out = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


def bundle(tmp: Path, entry: str, fake_api: Path | None = None) -> Path:
    """js/lab/<entry> as one ES module; the model's ./api replaced by `fake_api`."""
    out = tmp / (Path(entry).stem + ".mjs")
    plugin = (
        "[{name: 'fake-api', setup(b) { b.onResolve({filter: /^\\.\\/api$/}, () => "
        f"({{path: {json.dumps(str(fake_api))}}})); }}}}]"
        if fake_api
        else "[]"
    )
    esbuild = (ROOT / "node_modules" / "esbuild" / "lib" / "main.js").as_uri()
    node(
        f"import * as esbuild from {json.dumps(esbuild)};"
        "await esbuild.build({"
        f"entryPoints: [{json.dumps(str(ROOT / 'js' / 'lab' / entry))}],"
        f"outfile: {json.dumps(str(out))}, bundle: true, format: 'esm', platform: 'browser', external: ['node:*'],"
        f"logLevel: 'error', plugins: {plugin}}});",
        tmp,
    )
    return out


# --- a store that grows poll by poll ------------------------------------------------------
def dataset() -> dict[str, list[dict]]:
    """Rows of each series with the poll at which each lands; ids in landing order, as a
    database gives them.  Two workers, each with a GPU whose second worker's batches land
    a poll late (behind newer rows of the first), and ties in every peak."""
    rnd = random.Random(23)
    data: dict[str, list[dict]] = {"samples": [], "workers": [], "gpu": [], "events": []}
    for i in range(3000):  # the history before the panel opens
        data["samples"].append({"time": T0 - 3000 + i, "n_workers": 2, "landed": 0})
    for p in range(END):
        data["samples"].append({"time": T0 + p, "n_workers": 2, "landed": p})
        for w, late in (("tcp://a", 0), ("tcp://b", 1)):
            for j in range(20):
                t = T0 + p + j / 20
                data["workers"].append(
                    {
                        "worker": w,
                        "time": t,
                        "managed": rnd.randrange(0, 50) * 1000,
                        "unmanaged": 5000,
                        "cpu": rnd.randrange(0, 5) * 25.0,
                        "processing": rnd.randrange(0, 4),
                        "landed": p,
                    }
                )
                data["gpu"].append(
                    {
                        "worker": w,
                        "gpu_uuid": f"GPU-{w[-1]}",
                        "time": t,
                        "utilization": rnd.randrange(0, 100),
                        "landed": p + late,
                    }
                )
    for w in ("tcp://a", "tcp://b"):
        data["events"].append({"topic": TOPICS[0], "worker": w, "time": T0, "landed": 0})
        data["events"].append(
            {"topic": TOPICS[1], "worker": w, "time": T0 + END - 1, "landed": END - 1}
        )
    for rows in data.values():
        rows.sort(key=lambda r: r["landed"])  # stable: in order of making within a poll
        for i, r in enumerate(rows):
            r["id"] = i + 1
    return data


def cluster_row(p: int) -> dict:
    live = p < END
    return {
        "cluster_id": "k1",
        "name": "fake",
        "started": T0,
        "status": "live" if live else "stopped",
        "stopped": None if live else T0 + END,
        "ended": None if live else T0 + END,
        "sample_time": T0 + min(p, END - 1),
        "last_seen": T0 + p,
    }


def visible(rows: list[dict], p: int, since: float | None, limit: int, newest_first: bool):
    """What the store answers at poll p: the newest `limit` landed rows of [since, ...)."""
    out = [r for r in rows if r["landed"] <= p and (since is None or r["time"] >= since)]
    out.sort(key=lambda r: (r["time"], r["id"]), reverse=True)
    out = [{k: v for k, v in r.items() if k != "landed"} for r in out[:limit]]
    return out if newest_first else out[::-1]


FAKE_API_JS = """
import { readFileSync } from "node:fs";
const data = JSON.parse(readFileSync(process.env.POLLING_DATA, "utf8"));
const T0 = %(t0)s, END = %(end)s;
export function cluster(p) {
  const live = p < END;
  return { cluster_id: "k1", name: "fake", started: T0, status: live ? "live" : "stopped",
    stopped: live ? null : T0 + END, ended: live ? null : T0 + END,
    sample_time: T0 + Math.min(p, END - 1), last_seen: T0 + p };
}
function visible(rows, p, since, limit, newestFirst) {
  const out = rows.filter((r) => r.landed <= p && (since === null || r.time >= since))
    .sort((a, b) => (b.time - a.time) || (b.id - a.id)).slice(0, limit)
    .map(({ landed, ...r }) => r);
  return newestFirst ? out : out.reverse();
}
export async function get(path) {
  const p = globalThis.__poll;
  const url = new URL(path, "http://x/");
  const q = url.searchParams;
  const since = q.has("since") ? parseFloat(q.get("since")) : null;
  const limit = parseInt(q.get("limit"));
  const read = (kind) => { globalThis.__reads.push([kind, since, limit]); };
  if (url.pathname === "/api/clusters/k1") return { cluster: cluster(p) };
  if (url.pathname === "/lab/computations") return { computations: [] };
  if (url.pathname === "/api/clusters/k1/samples") {
    read("samples"); return { samples: visible(data.samples, p, null, limit, false) }; }
  if (url.pathname === "/api/clusters/k1/workers") {
    read("workers"); return { workers: visible(data.workers, p, since, limit, false) }; }
  if (url.pathname === "/api/gpu") { read("gpu"); return { gpu: visible(data.gpu, p, since, limit, false) }; }
  if (url.pathname === "/api/events") {
    const topic = q.get("topic");
    read("events:" + topic);
    return { events: visible(data.events.filter((e) => e.topic === topic), p, since, limit, true) };
  }
  throw new Error("unexpected read " + path);
}
export async function post() { throw new Error("no writes here"); }
export function reportUrl(id) { return id; }
"""

RUN_PANEL_JS = """
import { RestModel } from %(bundle)s;
const model = new RestModel("k1", null, "test");
model.setActive(false); // ticked by hand below, not by its Poll
const log = [];
for (let p = 0; p < %(polls)s; p++) {
  globalThis.__poll = p;
  globalThis.__reads = [];
  await model.tick();
  log.push({ reads: globalThis.__reads, interval: model.poll.frequency.interval / 1000,
    error: model.get("error") });
}
const ids = (rows) => rows.map((r) => r.id);
console.log(JSON.stringify({ log, samples: ids(model.get("samples_base").rows),
  workers: ids(model.get("workers_base").rows), gpu: ids(model.get("gpu_base").rows),
  events: ids(model.get("worker_events")) }));
model.dispose();
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same store polled POLLS times by the Lab panel (node) and the notebook feed."""
    tmp = tmp_path_factory.mktemp("polling")
    data = dataset()
    (tmp / "data.json").write_text(json.dumps(data))
    fake = tmp / "fake_api.mjs"
    fake.write_text(FAKE_API_JS % {"t0": json.dumps(T0), "end": END})
    model = bundle(tmp, "model.ts", fake_api=fake)
    out = subprocess.run(
        [
            "node",
            "--input-type=module",
            "-e",
            RUN_PANEL_JS % {"bundle": json.dumps(model.as_uri()), "polls": POLLS},
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp,
        env={**os.environ, "POLLING_DATA": str(tmp / "data.json")},
    )
    assert out.returncode == 0, out.stderr[-4000:]
    panel = json.loads(out.stdout)
    return data, panel, run_feed(data)


def run_feed(data: dict) -> dict:
    """The notebook monitor's feed over the same store, poll by poll."""
    state = {"poll": 0, "reads": []}

    def read(kind, since, limit):
        state["reads"].append([kind, since, limit])

    def at():
        return state["poll"]

    def list_cluster_samples(cluster_id, limit=10_000, store=None):
        read("samples", None, limit)
        return visible(data["samples"], at(), None, limit, False)

    def list_worker_samples(cluster_id, since=None, limit=100_000, store=None):
        read("workers", since, limit)
        return visible(data["workers"], at(), since, limit, False)

    def list_gpu_metrics(cluster_id=None, since=None, limit=100_000, store=None):
        read("gpu", since, limit)
        return visible(data["gpu"], at(), since, limit, False)

    def list_events(cluster_id=None, topic=None, since=None, limit=1000, store=None):
        read(f"events:{topic}", since, limit)
        rows = [e for e in data["events"] if e["topic"] == topic]
        return visible(rows, at(), since, limit, True)

    fake = types.SimpleNamespace(
        get_cluster=lambda cluster_id, store=None: cluster_row(at()),
        list_computations=lambda cluster_id=None, limit=100, store=None: [],
        list_clusters=lambda limit=100, store=None: [cluster_row(at())],
        get_profile=lambda **kw: {"count": 0, "children": {}},
        where=lambda store=None: "sqlite:///fake.db",
        list_cluster_samples=list_cluster_samples,
        list_worker_samples=list_worker_samples,
        list_gpu_metrics=list_gpu_metrics,
        list_events=list_events,
    )
    mp = pytest.MonkeyPatch()
    import dask_analytics_lab.widgets.monitor_widget as mw

    mp.setattr(_feed, "api", fake)
    mp.setattr(mw, "api", fake)
    w = MonitorWidget("k1", start=False)
    log = []
    try:
        for p in range(POLLS):
            state["poll"], state["reads"] = p, []
            w.refresh()
            log.append({"reads": state["reads"], "interval": w._feed.period(), "error": w.error})
        tables = w._feed.tables
        return {
            "log": log,
            "samples": [r["id"] for r in sorted(tables["samples"].rows(), key=lambda r: r["time"])],
            "workers": [r["id"] for r in sorted(tables["workers"].rows(), key=lambda r: r["time"])],
            "gpu": [r["id"] for r in sorted(tables["gpu"].rows(), key=lambda r: r["time"])],
            "events": [e["id"] for e in w.worker_events],
        }
    finally:
        w.close()
        mp.undo()


def test_the_lab_panel_keeps_what_it_read_under_the_caps(runs):
    """A long-lived cluster: the panel keeps each worker's peaks and each GPU's series
    thinned, not every sample it read (before: 6,000 per worker, all of them)."""
    data, panel, _ = runs
    assert all(entry["error"] == "" for entry in panel["log"]), panel["log"][-1]
    by_id = {kind: {r["id"]: r for r in data[kind]} for kind in ("workers", "gpu", "samples")}
    workers = Counter(by_id["workers"][i]["worker"] for i in panel["workers"])
    gpus = Counter(by_id["gpu"][i]["gpu_uuid"] for i in panel["gpu"])
    read_per_worker = len(data["workers"]) // 2
    assert set(workers) == {"tcp://a", "tcp://b"} and set(gpus) == {"GPU-a", "GPU-b"}
    assert all(n <= 3 * RULES["workers"]["keep"] < read_per_worker for n in workers.values()), (
        workers
    )
    assert all(n <= 2 * RULES["gpu"]["keep"] for n in gpus.values()), gpus
    assert len(panel["samples"]) <= 2 * RULES["samples"]["keep"]
    # Thinned to its peaks: each worker's highest memory is still there, and its last sample.
    for w in ("tcp://a", "tcp://b"):
        rows = [r for r in data["workers"] if r["worker"] == w]
        peak = max(rows, key=lambda r: r["managed"] + r["unmanaged"])
        kept = [by_id["workers"][i] for i in panel["workers"]]
        assert any(r["managed"] == peak["managed"] and r["worker"] == w for r in kept)
        assert rows[-1]["id"] in panel["workers"]
    # Every GPU sample was found once, the late batches too: the newest of each GPU is kept.
    for uuid in ("GPU-a", "GPU-b"):
        newest = max((r for r in data["gpu"] if r["gpu_uuid"] == uuid), key=lambda r: r["time"])
        assert newest["id"] in panel["gpu"], uuid
    assert len(panel["events"]) == 4  # both workers joined and left


def test_the_feed_and_the_panel_poll_by_the_same_rules(runs):
    """Same reads (kind, since=, limit=) on the same polls, the same interval after each
    poll (live, then history once the cluster stopped), and the same rows kept."""
    _, panel, feed = runs
    assert all(entry["error"] == "" for entry in feed["log"]), feed["log"][-1]
    for p, (a, b) in enumerate(zip(panel["log"], feed["log"], strict=True)):
        assert sorted(map(tuple, a["reads"])) == sorted(map(tuple, b["reads"])), p
        assert a["interval"] == b["interval"], p
    intervals = [e["interval"] for e in feed["log"]]
    assert intervals[0] == RULES["poll"]["live"]
    assert intervals[-1] == polling.history_period(RULES["poll"]["live"])
    workers_reads = [
        p for p, e in enumerate(feed["log"]) if any(r[0] == "workers" for r in e["reads"])
    ]
    every = polling.every_polls(RULES["workers"]["every"], RULES["poll"]["live"])
    assert workers_reads == [*range(0, END, every), END]  # then once after the end, then never
    for kind in ("samples", "workers", "gpu", "events"):
        assert panel[kind] == feed[kind], kind


# --- the one algorithm, written twice ------------------------------------------------------
RUN_KEPT_JS = """
import { readFileSync } from "node:fs";
import { Kept } from %(bundle)s;
const cases = JSON.parse(readFileSync(%(cases)s, "utf8"));
const out = cases.map(({ kind, reads }) => {
  const kept = new Kept(kind);
  return reads.map((read) => {
    const since = kept.since(), limit = kept.limit();
    return { since, limit, kept: kept.merge(read).map((r) => r.id) };
  });
});
console.log(JSON.stringify(out));
"""


def test_kept_is_one_algorithm_in_python_and_typescript(tmp_path):
    """polling.Kept and js/lab/polling.ts Kept, on the same reads: the same since= and
    limit= asked, and the same rows kept after each read, ties and late rows included."""
    rnd = random.Random(2)
    cases = []
    for kind, n in (("workers", 1500), ("gpu", 900), ("samples", 1500), ("events", 400)):
        next_id, t, reads = 1, T0, []
        for _ in range(40):
            read = []
            for _ in range(rnd.randrange(0, n)):
                t += rnd.choice((0.0, 0.5, 1.0))  # equal times too
                read.append(
                    {
                        "id": next_id,
                        "time": t - rnd.choice((0.0, 0.0, 3.0)),  # some land late
                        "worker": rnd.choice(("a", "b", "c")),
                        "gpu_uuid": rnd.choice(("g0", "g1", None)),
                        "managed": rnd.randrange(0, 4),
                        "unmanaged": rnd.choice((None, 1)),
                        "cpu": rnd.choice((None, 0, 50.0, 100.0)),
                        "processing": rnd.randrange(0, 3),
                    }
                )
                next_id += 1
            # A read repeats rows it read before (since= is inclusive, `late` goes back).
            reads.append(rnd.sample(read, len(read)) + (reads[-1][-5:] if reads else []))
        cases.append({"kind": kind, "reads": reads})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    module = bundle(tmp_path, "polling.ts")
    ts = json.loads(
        node(
            RUN_KEPT_JS
            % {
                "bundle": json.dumps(module.as_uri()),
                "cases": json.dumps(str(tmp_path / "cases.json")),
            },
            tmp_path,
        )
    )
    for case, ts_steps in zip(cases, ts, strict=True):
        kept = Kept(case["kind"])
        thinned = False
        for step, (read, theirs) in enumerate(zip(case["reads"], ts_steps, strict=True)):
            ours = {"since": kept.since(), "limit": kept.limit()}
            ours["kept"] = [r["id"] for r in kept.merge(read)]
            assert ours == theirs, (case["kind"], step)
            thinned |= len(ours["kept"]) < len(
                {r["id"] for rs in case["reads"][: step + 1] for r in rs}
            )
        assert thinned, f"{case['kind']}: the cases never reached the thinning"
