// js/common/table.ts: the KeyedTable's receiving half, and the header a table sorts by.
import assert from "node:assert/strict";
import { test } from "node:test";
import { installDom, keydown } from "./fake-dom.mjs";
import { LocalModel } from "../common/model.ts";
import { focusedSort, readTable, refocusSort, sortHeader, tableTraits } from "../common/table.ts";

const doc = installDom();

test("a patch applies to the base of its version only", () => {
  const base = {
    v: 2,
    rows: [
      { name: "a", n: 1 },
      { name: "b", n: 2 },
    ],
  };
  const model = new LocalModel({ groups_base: base });
  assert.deepEqual(readTable(model, "groups", "name"), base.rows);
  model.set("groups_patch", {
    v: 2,
    rows: [
      { name: "b", n: 3 },
      { name: "c", n: 4 },
    ],
    removed: ["a"],
  });
  assert.deepEqual(readTable(model, "groups", "name"), [
    { name: "b", n: 3 },
    { name: "c", n: 4 },
  ]);
  // A patch of another version (the base moved on first) is not applied to it.
  model.set("groups_patch", { v: 1, rows: [{ name: "z", n: 0 }] });
  assert.deepEqual(readTable(model, "groups", "name"), base.rows);
  assert.deepEqual(readTable(new LocalModel(), "groups", "name"), []);
  assert.deepEqual(tableTraits("groups"), ["groups_base", "groups_patch"]);
});

test("a sort header is in the tab order and says its order", () => {
  const none = sortHeader("th.dal-num", "Erred", "none", () => {});
  assert.equal(none.tagName, "TH");
  assert.equal(none.className, "dal-num");
  assert.equal(none.getAttribute("tabindex"), "0");
  assert.equal(none.getAttribute("aria-sort"), "none");
  assert.equal(none.textContent, "Erred");
  const desc = sortHeader("th", "Compute", "descending", () => {}, { title: "Sort" });
  assert.equal(desc.getAttribute("aria-sort"), "descending");
  assert.equal(desc.getAttribute("title"), "Sort");
  assert.equal(desc.textContent, "Compute▼");
  assert.equal(sortHeader("th", "x", "ascending", () => {}).textContent, "x▲");
});

test("a click, Enter and Space sort; other keys do not", () => {
  let sorts = 0;
  const th = sortHeader("th", "Erred", "none", () => sorts++);
  th.click();
  const enter = keydown("Enter");
  th.dispatchEvent(enter);
  const space = keydown(" ");
  th.dispatchEvent(space);
  assert.equal(sorts, 3);
  // Space would also scroll the page.
  assert.equal(space.defaultPrevented, true);
  const tab = keydown("Tab");
  th.dispatchEvent(tab);
  assert.equal(sorts, 3);
  assert.equal(tab.defaultPrevented, false);
});

test("the focused header gets the focus back after a redraw", () => {
  const draw = () => {
    const root = doc.createElement("div");
    const row = doc.createElement("tr");
    for (const id of ["order", "erred"])
      row.append(sortHeader("th", id, "none", () => {}, { dataset: { sort: id } }));
    root.append(row);
    return root;
  };
  const before = draw();
  before.childNodes[0].childNodes[1].focus();
  assert.equal(focusedSort(before), "erred");
  const after = draw();
  refocusSort(after, focusedSort(before));
  assert.equal(doc.activeElement, after.childNodes[0].childNodes[1]);
  // Focus elsewhere on the page is left where it is.
  const outside = doc.createElement("input");
  outside.focus();
  const again = draw();
  refocusSort(again, focusedSort(after));
  assert.equal(doc.activeElement, outside);
});
