// The list filters (user, state, dates, text, finding) and the "Older" page button,
// shared by the JupyterLab sidebar and the team page.  The store checks every value
// (dask_analytics_lab/filters.py); this only turns what a person typed into the API's parameters.
import { h, type Attrs } from "./dom.js";
import { FINDING_KINDS } from "./reads.gen.js";

export interface Filters {
  user?: string;
  state?: string;
  since?: string; // YYYY-MM-DD, as a date input gives it (UTC)
  until?: string; // YYYY-MM-DD, that day included
  text?: string;
  finding?: string; // a finding kind: clusters with a computation that has one
}

export const FILTER_NAMES = ["user", "state", "since", "until", "text", "finding"] as const;

const DAY = 86400;

/** The API's query parameters for these filters: empty ones left out, the "to" day
 *  included (the API's until is exclusive). */
export function filterParams(f: Filters): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FILTER_NAMES) {
    const v = (f[name] || "").trim();
    if (!v) continue;
    if (name === "until") {
      const t = Date.parse(`${v}T00:00:00Z`);
      // A value that is no date goes as typed: the server then says what it wants.
      out.until = Number.isFinite(t) ? String(t / 1000 + DAY) : v;
    } else {
      out[name] = v;
    }
  }
  return out;
}

/** The filters in a URL's query string (the team page keeps them there). */
export function filtersFrom(search: URLSearchParams): Filters {
  const f: Filters = {};
  for (const name of FILTER_NAMES) {
    const v = search.get(name);
    if (v) f[name] = v;
  }
  return f;
}

/** A form with the six filters; `apply` gets them on submit, and empty on Clear. */
export function filterBar(
  states: string[],
  initial: Filters,
  apply: (f: Filters) => void,
): HTMLFormElement {
  const field = (name: keyof Filters, label: string, attrs: Attrs) =>
    h("input", { name, "aria-label": label, title: label, value: initial[name] || "", ...attrs });
  const state = h(
    "select",
    { name: "state", "aria-label": "State", title: "State" },
    h("option", { value: "" }, "any state"),
    states.map((s) => h("option", { value: s, selected: initial.state === s }, s)),
  );
  const finding = h(
    "select",
    {
      name: "finding",
      "aria-label": "Finding",
      title: "With a computation that has this finding (as explain gives it)",
    },
    h("option", { value: "" }, "any finding"),
    FINDING_KINDS.map((k) => h("option", { value: k, selected: initial.finding === k }, k)),
  );
  const form = h(
    "form.dal-filters",
    { role: "search", "aria-label": "Filter" },
    field("user", "User", { type: "text", placeholder: "user", size: 8 }),
    state,
    finding,
    h("label.dal-filter-date", "from ", field("since", "From (UTC day)", { type: "date" })),
    h("label.dal-filter-date", "to ", field("until", "To (UTC day, included)", { type: "date" })),
    field("text", "Name contains", { type: "search", placeholder: "name contains", size: 12 }),
    h("button", { type: "submit" }, "Filter"),
    h(
      "button",
      {
        type: "button",
        onclick: () => {
          for (const el of Array.from(form.elements) as HTMLInputElement[])
            if (el.name) el.value = "";
          apply({});
        },
      },
      "Clear",
    ),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const data = new FormData(form);
    const f: Filters = {};
    for (const name of FILTER_NAMES) {
      const v = String(data.get(name) || "").trim();
      if (v) f[name] = v;
    }
    apply(f);
  });
  return form;
}

/** "Newest" (back to the first page, when on a later one) and "Older" (the page after
 *  the last row's cursor; none after a short page: nothing is older). */
export function pager(
  rows: { cursor?: string | null }[],
  limit: number,
  onPage: boolean,
  go: (before: string | null) => void,
): HTMLElement {
  const older = rows.length >= limit && rows.length ? rows[rows.length - 1].cursor : null;
  return h(
    "div.dal-pager",
    onPage ? h("button", { type: "button", onclick: () => go(null) }, "« Newest") : null,
    older ? h("button", { type: "button", onclick: () => go(older) }, "Older »") : null,
  );
}
