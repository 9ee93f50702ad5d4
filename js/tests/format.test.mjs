// js/common/format.ts and clock.ts: the figures every view prints.
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { freeze, frozen, now } from "../common/clock.ts";
import * as fmt from "../common/format.ts";

afterEach(() => freeze(null));

test("duration: rounded once, so a minute never reads 60 s", () => {
  const cases = [
    [0, "0 s"],
    [1e-7, "0 µs"],
    [0.000123, "123 µs"],
    [0.0042, "4 ms"],
    [0.5, "500 ms"],
    [1.234, "1.23 s"],
    [9.999, "10.00 s"],
    [12.34, "12.3 s"],
    [59.94, "59.9 s"],
    [59.96, "1m 00s"],
    [75, "1m 15s"],
    [239.6, "4m 00s"],
    [3599.4, "59m 59s"],
    [3600, "1h 00m"],
    [172799, "47h 59m"],
    [172800, "2d 0h"],
    [3 * 86400 + 4 * 3600 + 59, "3d 4h"],
    [-1, "0 s"],
  ];
  for (const [s, want] of cases) assert.equal(fmt.duration(s), want, `duration(${s})`);
});

test("a figure that was not recorded is a dash, not 0 or NaN", () => {
  for (const f of [fmt.duration, fmt.bytes, fmt.count, fmt.whole, fmt.percent, fmt.money])
    for (const missing of [null, undefined, NaN, Infinity])
      assert.equal(f(missing), "–", `${f.name}(${missing})`);
  for (const f of [fmt.clock, fmt.datetime, fmt.ago]) assert.equal(f(null), "–", f.name);
});

test("bytes in binary units", () => {
  assert.equal(fmt.bytes(0), "0 B");
  assert.equal(fmt.bytes(1023), "1023 B");
  assert.equal(fmt.bytes(1536), "1.50 kiB");
  assert.equal(fmt.bytes(50 * 1024 ** 2), "50.0 MiB");
  assert.equal(fmt.bytes(300 * 1024 ** 3), "300 GiB");
  assert.equal(fmt.bytes(2 * 1024 ** 6), "2048 PiB");
});

test("count, whole, percent and money", () => {
  assert.deepEqual([9999, 12345, 123456, 1234567, 12345678].map(fmt.count), [
    "9999",
    "12.3k",
    "123k",
    "1.23M",
    "12.3M",
  ]);
  assert.equal(fmt.whole(1234567), "1,234,567");
  assert.deepEqual([0, 0.05, 5, 55].map(fmt.percent), ["0.0%", "<0.1%", "5.0%", "55%"]);
  assert.deepEqual([0, 0.005, 1.5].map(fmt.money), ["$0.00", "$0.0050", "$1.50"]);
});

test("ago counts from the views' clock: a report's frozen moment", () => {
  assert.equal(frozen(), null);
  freeze(1_000_000);
  assert.equal(now(), 1_000_000);
  assert.equal(fmt.ago(1_000_000 - 2), "just now");
  assert.equal(fmt.ago(1_000_000 - 302), "5m 02s ago");
  assert.equal(fmt.ago(1_000_000 - 7.5), "7 s ago");
  freeze(0); // 0: no moment, the clock runs again
  assert.equal(frozen(), null);
});

test("datetime as the CLI prints it", () => {
  assert.match(fmt.datetime(1.7e9), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
});

test("short drops the scheme and cuts long ids in the middle", () => {
  assert.equal(fmt.short("tcp://127.0.0.1:34567"), "127.0.0.1:34567");
  assert.equal(fmt.short(null), "");
  const cut = fmt.short("x".repeat(20) + "y".repeat(20), 11);
  assert.equal(cut, "xxxxx…yyyyy");
});
