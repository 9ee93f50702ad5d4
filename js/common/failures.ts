// Failed tasks, one row per failure: the exception type, the frame that raised it and
// the message with its literals masked (the store groups by these), with an exact count,
// a few real messages, the workers involved, and the traceback on demand.
import { h, type Child } from "./dom.js";
import * as fmt from "./format.js";
import type { ExceptionRow } from "./rows.js";

const TOKEN = /-([0-9a-f]{8,})$/;

/** "/home/ann/project/etl.py:42 in parse" -> "project/etl.py:42 in parse" (full in the tooltip);
 *  a Jupyter cell's file is "notebook cell", as in the Code tab. */
export function shortLocation(loc: string | null | undefined): string {
  const m = String(loc || "").match(/^(.*?)(:\d+ in .*)?$/s)!;
  if (/ipykernel_\d+[\\/]\d+\.py$/.test(m[1])) return `notebook cell${m[2] || ""}`;
  const parts = m[1].split(/[\\/]/);
  return (parts.length > 2 ? parts.slice(-2).join("/") : m[1]) + (m[2] || "");
}

/** The masked message with its type in bold: `KeyError('key-…')`. */
function patternLine(type: string, pattern: string): Child[] {
  if (type && pattern.startsWith(type))
    return [h("b.dal-fail-type", type), pattern.slice(type.length)];
  if (type && pattern) return [h("b.dal-fail-type", type), `: ${pattern}`];
  return [type ? h("b.dal-fail-type", type) : null, pattern];
}

/** A stable key of an exception row, for remembering which rows are open across redraws. */
export function failureKey(e: ExceptionRow): string {
  return e.id != null ? String(e.id) : `${e.computation_id}|${e.task_group}|${e.hash}`;
}

/** "KeyError" and "key <str> is missing"; a row recorded before failures were grouped
 *  by type and frame has only its message. */
export function failureTitle(e: ExceptionRow): { type: string; pattern: string } {
  if (e.exc_type) return { type: e.exc_type, pattern: e.pattern ?? "" };
  const text = e.exception_text || "(no exception text)";
  const m = text.match(/^([A-Za-z_][\w.]*)(?=[(:]|$)/);
  return { type: m ? m[1] : "", pattern: text };
}

export function failureExamples(e: ExceptionRow): string[] {
  const ex = Array.isArray(e.examples)
    ? e.examples.filter((x): x is string => x != null && x !== "")
    : [];
  if (!ex.length && e.exception_text) ex.push(e.exception_text);
  return ex;
}

/** One row (a <details>): the summary line, then examples, workers and the traceback.
 *  `open` (a Set of keys) remembers what the user opened across live redraws. */
export function failureRow(e: ExceptionRow, open: Set<string> | null = null): HTMLDetailsElement {
  const key = failureKey(e);
  const { type, pattern } = failureTitle(e);
  const examples = failureExamples(e);
  const workers = Array.isArray(e.workers) ? e.workers : [];
  const group = e.task_group ? e.task_group.replace(TOKEN, "") : null;
  const tb = h(
    "details.dal-tb",
    { open: open?.has(`${key}/tb`) },
    h("summary", "Traceback"),
    h(
      "pre",
      e.traceback_text
        ? `Traceback (most recent call last):\n${e.traceback_text}${e.exception_text || ""}`
        : "(no traceback recorded)",
    ),
  );
  const row = h(
    "details.dal-fail",
    { open: open?.has(key), dataset: { count: e.count, type: type || "" } },
    h(
      "summary.dal-fail-head",
      h(
        "span.dal-fail-count",
        { title: `${fmt.count(e.count)} task${e.count === 1 ? "" : "s"} failed this way` },
        `× ${fmt.count(e.count)}`,
      ),
      h("span.dal-fail-pattern", { title: pattern }, ...patternLine(type, pattern)),
      e.location
        ? h(
            "span.dal-fail-where",
            { title: `raised at ${e.location}` },
            `at ${shortLocation(e.location)}`,
          )
        : null,
      group ? h("span.dal-fail-group", { title: e.task_group }, group) : null,
    ),
    h(
      "div.dal-fail-body",
      examples.length
        ? h(
            "div.dal-fail-examples",
            h("div.dal-fail-label", examples.length > 1 ? "Examples" : "Message"),
            h(
              "ul",
              examples.map((x) => h("li", x)),
            ),
          )
        : null,
      h(
        "div.dal-fail-meta",
        h("span", `first ${fmt.clock(e.first_time)}`),
        h("span", `last ${fmt.clock(e.last_time)}`),
        e.example_key ? h("span", `e.g. task ${e.example_key}`) : null,
        workers.length
          ? h(
              "span",
              { title: workers.join("\n") },
              `worker${workers.length === 1 ? "" : "s"} ${workers.map((w) => fmt.short(w, 28)).join(", ")}`,
            )
          : null,
      ),
      tb,
    ),
  );
  if (open) {
    const remember = (el: HTMLDetailsElement, id: string) =>
      el.addEventListener("toggle", () => {
        if (el.open) open.add(id);
        else open.delete(id);
      });
    remember(row, key);
    remember(tb, `${key}/tb`);
  }
  return row;
}

export function failureList(excs: ExceptionRow[], open: Set<string> | null = null): HTMLElement {
  return h(
    "div.dal-fails",
    excs.map((e) => failureRow(e, open)),
  );
}
