// js/widgets/flamegraph.ts: the profile tree as the chart lays it out, and "Hide Dask
// internals".  tests/integration/test_flamegraph_fold.py folds a real cluster's profile; here the
// rules, on trees small enough to check by hand.
import assert from "node:assert/strict";
import { test } from "node:test";
import { childSamples, flatten, foldInternals, isInternal } from "../widgets/flamegraph.ts";

const SITE = "/env/lib/python3.12/site-packages";

function frame(identifier, filename, name, count, ...kids) {
  return {
    identifier,
    count,
    description: { filename, name, line_number: 1, line: "" },
    children: Object.fromEntries(kids.map((k) => [k.identifier, k])),
  };
}

/** Two threads running tasks: a matrix product (NumPy's C code, called straight from
 *  dask.array) and the user's function, under the machinery that ran them. */
function numpyBound() {
  const matmul = (n) => frame("matmul", `${SITE}/dask/array/routines.py`, "_matmul", n);
  return frame(
    "root",
    "",
    "",
    130,
    frame(
      "run-1",
      "/usr/lib/python3.12/threading.py",
      "run",
      100,
      frame(
        "execute",
        `${SITE}/distributed/worker.py`,
        "execute",
        100, // 10 of its own: they never left Dask's machinery
        matmul(60),
        frame(
          "parse",
          "/home/ann/etl.py",
          "parse",
          30,
          frame("apply", `${SITE}/dask/utils.py`, "apply", 30),
        ),
      ),
    ),
    frame(
      "run-2",
      "/usr/lib/python3.12/threading.py",
      "run",
      30,
      frame("execute-2", `${SITE}/distributed/worker.py`, "execute", 30, matmul(30)),
    ),
  );
}

test("internal frames: dask, distributed, tornado and the thread machinery", () => {
  for (const f of [
    `${SITE}/dask/core.py`,
    `${SITE}/distributed/worker.py`,
    `${SITE}/tornado/ioloop.py`,
    "/usr/lib/python3.12/threading.py",
    "/usr/lib/python3.12/concurrent/futures/thread.py",
    "/usr/lib/python3.12/asyncio/events.py",
  ])
    assert.equal(isInternal({ filename: f }), true, f);
  for (const f of ["/home/ann/etl.py", `${SITE}/numpy/core/numeric.py`, ""])
    assert.equal(isInternal({ filename: f }), false, f);
  assert.equal(isInternal(null), false);
});

test("a child counted 0 shares its parent's unclaimed samples", () => {
  const node = frame("p", "x.py", "p", 10, frame("a", "x.py", "a", 4), frame("z", "x.py", "z", 0));
  assert.deepEqual(
    childSamples(node, 10).map(([c, n]) => [c.identifier, n]),
    [
      ["a", 4],
      ["z", 6],
    ],
  );
});

test("folding keeps what did the work, merged, and drops the machinery", () => {
  const tree = numpyBound();
  const folded = foldInternals(tree);
  assert.equal(folded.count, tree.count);
  const top = Object.values(folded.children);
  // The matrix product of both threads is one frame; the user's code keeps its callees,
  // dask's included.
  assert.deepEqual(top.map((c) => [c.identifier, c.count]).sort(), [
    ["matmul", 90],
    ["parse", 30],
  ]);
  assert.deepEqual(Object.keys(folded.children.parse.children), ["apply"]);
  // Only the 10 samples that never left the machinery are gone.
  assert.equal(
    top.reduce((t, c) => t + c.count, 0),
    120,
  );
  // The source tree is left as it was.
  assert.equal(tree.children["run-1"].children.execute.children.matmul.count, 60);
});

test("flatten lays children out heaviest first, each starting where its sibling ends", () => {
  const flat = flatten(numpyBound());
  assert.equal(flat.n, 9);
  assert.equal(flat.maxDepth, 4);
  const at = (id) => flat.ident.indexOf(id);
  assert.deepEqual(
    flat.byDepth[1].map((i) => flat.ident[i]),
    ["run-1", "run-2"],
  );
  assert.equal(flat.start[at("run-2")], 100);
  const execute = at("execute");
  assert.deepEqual(
    flat.byDepth[3].map((i) => [flat.ident[i], flat.start[i], flat.count[i]]),
    [
      ["matmul", 0, 60],
      ["parse", 60, 30],
      ["matmul", 100, 30],
    ],
  );
  assert.equal(flat.parent[flat.byDepth[3][0]], execute);
  assert.equal(flat.parent[at("root")], -1);
});
