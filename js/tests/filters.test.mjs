// js/common/filters.ts: what a person typed into the filters, as the API's parameters.
import assert from "node:assert/strict";
import { test } from "node:test";
import { FILTER_NAMES, filterParams, filtersFrom } from "../common/filters.ts";

test("empty filters are left out, values trimmed", () => {
  assert.deepEqual(filterParams({ user: "  ann ", state: "", text: "   " }), { user: "ann" });
  assert.deepEqual(filterParams({}), {});
});

test("the 'to' day is included: until= is the next midnight, UTC", () => {
  const day = Date.parse("2026-11-23T00:00:00Z") / 1000;
  assert.deepEqual(filterParams({ since: "2026-11-23", until: "2026-11-23" }), {
    since: "2026-11-23",
    until: String(day + 86400),
  });
});

test("a value that is no date goes as typed, for the server to refuse", () => {
  assert.deepEqual(filterParams({ until: "yesterday" }), { until: "yesterday" });
});

test("the filters in a URL's query string, and nothing else", () => {
  const f = filtersFrom(new URLSearchParams("user=ann&state=erred&page=3&text=&finding=spilling"));
  assert.deepEqual(f, { user: "ann", state: "erred", finding: "spilling" });
  assert.deepEqual(FILTER_NAMES, ["user", "state", "since", "until", "text", "finding"]);
});
