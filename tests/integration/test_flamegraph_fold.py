""" "Hide Dask internals" on a NumPy-bound profile (issue 23, item 6): a real
LocalCluster's profile of a matrix product, folded by js/widgets/flamegraph.ts
foldInternals (bundled by esbuild, run in node), keeps the frames that did the work."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import dask.array as da

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers

from ..cluster_helpers import recorded_cluster

ROOT = Path(__file__).resolve().parents[2]

# Runs the views' own JS through node (README: Node 20) and esbuild (`npm ci` installs it):
# without them this fails (a skip would hide a drift between the two).


def fold(tmp_path: Path, tree: dict) -> dict:
    bundle = tmp_path / "flamegraph.mjs"
    subprocess.run(
        [
            str(ROOT / "node_modules" / ".bin" / "esbuild"),
            str(ROOT / "js" / "widgets" / "flamegraph.ts"),
            "--bundle",
            "--format=esm",
            f"--outfile={bundle}",
            "--log-level=error",
        ],
        check=True,
        timeout=120,
    )
    (tmp_path / "tree.json").write_text(json.dumps(tree))
    script = (
        f"import {{ foldInternals }} from {json.dumps(bundle.as_uri())};"
        "import { readFileSync } from 'node:fs';"
        f"const tree = JSON.parse(readFileSync({json.dumps(str(tmp_path / 'tree.json'))}, 'utf8'));"
        "console.log(JSON.stringify(foldInternals(tree)))"
    )
    out = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)


def frames(tree: dict) -> list[dict]:
    out, todo = [], list(tree["children"].values())
    while todo:
        node = todo.pop()
        out.append(node)
        todo += node["children"].values()
    return out


def test_hiding_dask_internals_keeps_a_numpy_bound_profile(tmp_path):
    url = f"sqlite:///{tmp_path / 'analytics.db'}"
    with recorded_cluster(url) as (client, info):
        x = da.random.random((3000, 3000), chunks=(1500, 1500))
        (x @ x.T).sum().compute()
        assert dal.flush(client)["flushed"]
    try:
        (comp,) = dal.list_computations(info["cluster_id"], store=url)
        tree = dal.get_profile(computation_id=comp["computation_id"], store=url)
    finally:
        close_readers()
    assert tree["count"] > 0
    folded = fold(tmp_path, tree)
    kept = frames(folded)
    # Not emptied (before the fix: nothing kept): the frames kept carry most samples.  Not
    # all: samples that never left Dask's own machinery (its metrics meter, idle threads)
    # fold away, ~10% of them in a fresh clone's run (89% kept there).
    assert kept and sum(c["count"] for c in folded["children"].values()) >= 0.5 * tree["count"], (
        folded
    )
    assert folded["count"] == tree["count"]
    # What did the work is named: the matrix product and the random numbers (NumPy's C
    # code, called straight from dask.array: their innermost Python frames stay).
    names = {f["description"]["name"] for f in kept}
    assert "_matmul" in names or "_apply_random" in names, names
    # The machinery that ran the tasks is gone.
    assert not names & {"execute_graph", "_execute_subgraph", "run", "_worker", "execute"}, names
