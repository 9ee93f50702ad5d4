// js/report/page.ts: a report page retells the views' empty states by their titles
// (common/dom.ts retellEmpty); a title a view no longer says would leave the notebook's
// words on a report page, so every retold title must be one a view says.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const js = fileURLToPath(new URL("..", import.meta.url));

test("every title the report page retells is one a view says", () => {
  const page = readFileSync(`${js}/report/page.ts`, "utf8");
  const table = page.slice(
    page.indexOf("export const EMPTY_TEXTS"),
    page.indexOf("};", page.indexOf("export const EMPTY_TEXTS")),
  );
  const titles = [...table.matchAll(/^ {2}"([^"]+)": \[/gm)].map((m) => m[1]);
  assert.ok(titles.length > 5, "the table was not found");
  const views = ["widgets", "common"]
    .flatMap((dir) =>
      readdirSync(`${js}/${dir}`)
        .filter((f) => f.endsWith(".ts"))
        .map((f) => `${js}/${dir}/${f}`),
    )
    .map((f) => readFileSync(f, "utf8"))
    .join("\n");
  const unsaid = titles.filter((t) => !views.includes(`"${t}"`));
  assert.deepEqual(unsaid, []);
});
