// js/common/colors.ts: the views' one hash (the flamegraph colours by it too).
import assert from "node:assert/strict";
import { test } from "node:test";
import { fnv1a, prefixColor } from "../common/colors.ts";

test("fnv1a is FNV-1a, 32 bits (the reference vectors)", () => {
  assert.equal(fnv1a(""), 0x811c9dc5);
  assert.equal(fnv1a("a"), 0xe40c292c);
  assert.equal(fnv1a("foobar"), 0xbf9cf968);
});

test("a prefix keeps its colour", () => {
  assert.equal(prefixColor("random_sample"), prefixColor("random_sample"));
  assert.match(prefixColor(null), /^hsl\(\d+ 62% 52%\)$/);
});
