// js/common/progress.ts: what became of a group's tasks, as the bar and the totals count it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { addCounts, taskCounts } from "../common/progress.ts";

test("the store's exact counts, the rest split over the live states", () => {
  const c = taskCounts({
    n_tasks: 100,
    n_done: 60,
    n_erred: 5,
    n_cancelled: 2,
    n_not_run: 3,
    states: { memory: 10, processing: 8, queued: 50 },
  });
  assert.equal(c.exact, true);
  assert.deepEqual(
    [c.total, c.done, c.memory, c.erred, c.cancelled, c["not-run"]],
    [100, 60, 10, 5, 2, 3],
  );
  // 30 left: 8 processing, then queued up to what is left, nothing waiting.
  assert.deepEqual([c.processing, c["no-worker"], c.queued, c.waiting], [8, 0, 22, 0]);
});

test("a row recorded before the store kept counts: read from its states", () => {
  const c = taskCounts({ states: { memory: 4, released: 3, erred: 2, waiting: 1 } });
  assert.equal(c.exact, false);
  assert.equal(c.total, 10); // no n_tasks: the states' total
  assert.equal(c.done, 7);
  assert.equal(c.erred, 2);
  assert.equal(c["not-run"], 0);
  assert.equal(c.waiting, 1);
});

test("the segments never add up to more than the total", () => {
  const c = taskCounts({ n_tasks: 5, n_done: 5, states: { memory: 9, processing: 3 } });
  assert.equal(c.memory, 5);
  assert.equal(c.processing, 0);
  assert.equal(c.waiting, 0);
});

test("addCounts sums every segment; exact only if every row is", () => {
  const rows = [
    { n_tasks: 4, n_done: 4, states: {} },
    { n_tasks: 6, n_done: 1, n_erred: 2, states: { processing: 1 } },
  ];
  const sum = addCounts(rows);
  assert.deepEqual(
    [sum.total, sum.done, sum.erred, sum.processing, sum.waiting, sum.exact],
    [10, 5, 2, 1, 2, true],
  );
  assert.equal(addCounts([...rows, { states: { memory: 1 } }]).exact, false);
  assert.equal(addCounts([]).total, 0);
});
