// js/lab/polling.ts: how the Lab panel polls (the rules of dask_analytics_lab/polling.json).
// That it keeps what the notebook feed keeps is tests/unit/test_polling.py's (both languages,
// the same reads); here: the rules on their own.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  Kept,
  RULES,
  downsample,
  everyPolls,
  historyPeriod,
  thin,
  workerPeaks,
} from "../lab/polling.ts";

const ids = (rows) => rows.map((r) => r.id);

test("the poll period once everything shown is history", () => {
  assert.equal(historyPeriod(1), RULES.poll.history);
  assert.equal(historyPeriod(RULES.poll.history * 3), RULES.poll.history * 3);
});

test("a read every N seconds is every round(N / interval) polls, at least 1", () => {
  assert.equal(everyPolls(5, 1), 5);
  assert.equal(everyPolls(5, 2), 3); // 2.5 rounds up
  assert.equal(everyPolls(1, 10), 1);
  assert.equal(everyPolls(5, 0), 5000); // a zero interval does not divide by zero
});

test("downsample spreads evenly and keeps the newest", () => {
  const rows = Array.from({ length: 100 }, (_, i) => i);
  assert.equal(downsample(rows, 200), rows);
  const kept = downsample(rows, 10);
  assert.equal(kept.length, 10);
  assert.deepEqual(kept, [0, 10, 20, 30, 40, 50, 60, 70, 80, 99]);
});

test("worker peaks: each stretch's highest memory, CPU and tasks, per worker, by time", () => {
  const rows = [];
  for (const w of ["a", "b"])
    for (let i = 0; i < 40; i++)
      rows.push({
        id: rows.length + 1,
        time: i,
        worker: w,
        managed: i === 7 ? 100 : 1,
        unmanaged: 0,
        cpu: i === 13 ? 100 : 0,
        processing: i === 21 ? 9 : 0,
      });
  const kept = workerPeaks(rows, 4); // 40 > 3 x 4: thinned to 4 stretches of 10
  for (const w of ["a", "b"]) {
    const mine = kept.filter((r) => r.worker === w);
    assert.ok(mine.length <= 12);
    for (const t of [7, 13, 21])
      assert.ok(
        mine.some((r) => r.time === t),
        `${w} at ${t}`,
      );
  }
  assert.deepEqual(
    kept.map((r) => r.time),
    [...kept.map((r) => r.time)].sort((x, y) => x - y),
  );
  assert.equal(workerPeaks(rows.slice(0, 12), 4).length, 12); // under 3 x most: all of them
});

test("thin: samples past 2 x keep downsampled, GPUs each on their own, events the newest", () => {
  const keep = RULES.samples.keep;
  const samples = Array.from({ length: 2 * keep + 1 }, (_, i) => ({ id: i + 1, time: i }));
  assert.equal(thin("samples", samples).length, keep);
  assert.equal(thin("samples", samples.slice(0, 2 * keep)).length, 2 * keep);

  const gk = RULES.gpu.keep;
  const gpu = [];
  for (let i = 0; i < 2 * gk + 1; i++) gpu.push({ id: gpu.length + 1, time: i, gpu_uuid: "g0" });
  gpu.push({ id: gpu.length + 1, time: 0.5, gpu_uuid: "g1" });
  const kept = thin("gpu", gpu);
  assert.equal(kept.filter((r) => r.gpu_uuid === "g0").length, gk);
  assert.equal(kept.filter((r) => r.gpu_uuid === "g1").length, 1);

  const ek = RULES.events.keep;
  const events = Array.from({ length: ek + 3 }, (_, i) => ({ id: i + 1, time: ek + 3 - i }));
  const newest = thin("events", events);
  assert.equal(newest.length, ek);
  assert.equal(newest.at(-1).time, ek + 3);
});

test("Kept: the first read takes the newest `first`, then since= the newest time less `late`", () => {
  const gpu = new Kept("gpu");
  assert.equal(gpu.since(), null);
  assert.equal(gpu.query(), `limit=${RULES.gpu.limit}`);
  gpu.merge([
    { id: 1, time: 100 },
    { id: 2, time: 105 },
  ]);
  assert.equal(gpu.since(), 105 - RULES.gpu.late);
  assert.equal(gpu.query(), `limit=${RULES.gpu.limit}&since=${105 - RULES.gpu.late}`);

  const samples = new Kept("samples"); // read whole, not since=
  assert.equal(samples.limit(), RULES.samples.first);
  samples.merge([{ id: 1, time: 1 }]);
  assert.equal(samples.limit(), RULES.samples.tail);
  assert.equal(samples.since(), null);
});

test("Kept: a row read again (since= is inclusive) is kept once; a late one is new", () => {
  const k = new Kept("gpu");
  k.merge([
    { id: 1, time: 10 },
    { id: 2, time: 11 },
  ]);
  // id 3 landed after id 2 but is older: a since= read going back `late` finds it.
  assert.deepEqual(
    ids(
      k.merge([
        { id: 2, time: 11 },
        { id: 3, time: 9 },
      ]),
    ),
    [3, 1, 2],
  );
  assert.equal(k.reads, 2);
});

test("Kept: due the first time, every `every` seconds, once after the end, then never", () => {
  const k = new Kept("workers");
  const every = everyPolls(RULES.workers.every, 1);
  assert.equal(k.due(3, 1, false), true); // nothing read yet
  k.merge([]);
  assert.equal(k.due(every, 1, false), true);
  assert.equal(k.due(every + 1, 1, false), false);
  assert.equal(k.due(every + 1, 1, true), true); // the cluster ended: one last read
  k.merge([], true);
  assert.equal(k.due(2 * every, 1, true), false);
});
