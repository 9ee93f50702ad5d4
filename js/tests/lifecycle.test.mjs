// js/common/lifecycle.ts and failures.ts: how the views read the store's rows.
import assert from "node:assert/strict";
import { test } from "node:test";
import { failureExamples, failureKey, failureTitle, shortLocation } from "../common/failures.ts";
import {
  clusterEnded,
  clusterSize,
  clusterStatus,
  clusterUptime,
  computationDuration,
} from "../common/lifecycle.ts";

test("a cluster's status is the store's; a row without one is live until it stopped", () => {
  assert.equal(clusterStatus(null), "unknown");
  assert.equal(clusterStatus({ cluster_id: "k", status: "lost" }), "lost");
  assert.equal(clusterStatus({ cluster_id: "k", stopped: 5 }), "stopped");
  assert.equal(clusterStatus({ cluster_id: "k" }), "live");
});

test("uptime runs to now while live and stops at the end", () => {
  const live = { cluster_id: "k", status: "live", started: 100 };
  assert.equal(clusterUptime(live, 160), 60);
  assert.equal(clusterEnded(live), null);
  const lost = { cluster_id: "k", status: "lost", started: 100, last_seen: 130 };
  assert.equal(clusterEnded(lost), 130);
  assert.equal(clusterUptime(lost, 10_000), 30);
  assert.equal(clusterUptime({ cluster_id: "k" }), null);
});

test("an ended cluster shows its peak size, a live one its size now", () => {
  const row = { cluster_id: "k", n_workers: 0, peak_workers: 8, n_threads: 0, peak_threads: 32 };
  assert.deepEqual(
    [clusterSize({ ...row, status: "live" }).workers, clusterSize({ ...row, status: "live" }).peak],
    [0, false],
  );
  const ended = clusterSize({ ...row, status: "stopped" });
  assert.deepEqual([ended.peak, ended.workers, ended.threads], [true, 8, 32]);
});

test("a computation's duration never grows after it ended", () => {
  assert.equal(computationDuration({ start: 10, stop: 25 }, 1000), 15);
  assert.equal(computationDuration({ start: 10, state: "running" }, 40), 30);
  assert.equal(computationDuration({ start: 10, state: "finished", updated: 12 }, 1000), 2);
  assert.equal(computationDuration({ start: 10, state: "erred" }, 1000), null);
  assert.equal(computationDuration(null), null);
});

test("a failure's location, title, key and examples", () => {
  assert.equal(shortLocation("/home/ann/project/etl.py:42 in parse"), "project/etl.py:42 in parse");
  assert.equal(
    shortLocation("/tmp/ipykernel_123/456789.py:3 in <module>"),
    "notebook cell:3 in <module>",
  );
  assert.equal(shortLocation(null), "");
  assert.deepEqual(failureTitle({ exc_type: "KeyError", pattern: "KeyError('k…')" }), {
    type: "KeyError",
    pattern: "KeyError('k…')",
  });
  assert.deepEqual(failureTitle({ exception_text: "ValueError: bad" }), {
    type: "ValueError",
    pattern: "ValueError: bad",
  });
  assert.equal(failureKey({ id: 7 }), "7");
  assert.equal(failureKey({ computation_id: "c", task_group: "g", hash: "h" }), "c|g|h");
  assert.deepEqual(failureExamples({ examples: ["a", "", null, "b"] }), ["a", "b"]);
  assert.deepEqual(failureExamples({ exception_text: "boom" }), ["boom"]);
});
