// The Costs page (/costs): what the clusters cost, by user, day or month, since a day.
import { h } from "../common/dom.js";
import { money, whole } from "../common/format.js";
import { api, visit } from "./api.js";
import { table } from "./tables.js";
import type { CostRow } from "../common/rows.js";

const NAMES: Record<string, string> = { user: "User", day: "Day (UTC)", month: "Month (UTC)" };

export async function costsPage(main: HTMLElement): Promise<void> {
  document.title = "Costs · dask-analytics";
  const search = new URLSearchParams(location.search);
  const by = search.get("by") || "user";
  const since = search.get("since") || "";
  const { costs } = await api<{ costs: CostRow[] }>("/costs", { by, since: since || null });
  const total = costs.reduce((a, r) => a + (r.cost || 0), 0);
  const sinceField = h("input", {
    type: "date",
    name: "since",
    value: since,
    "aria-label": "Since (UTC day)",
  });
  main.replaceChildren(
    h("h1", {}, "Costs"),
    h(
      "div",
      { class: "dal-filters" },
      h(
        "span",
        { role: "tablist", "aria-label": "Group by" },
        Object.entries(NAMES).map(([key, label]) =>
          h(
            "a",
            {
              href: `?${new URLSearchParams(since ? { by: key, since } : { by: key })}`,
              role: "tab",
              "aria-selected": String(key === by),
              class: key === by ? "chosen" : null,
            },
            `by ${label.split(" ")[0].toLowerCase()}`,
          ),
        ),
      ),
      h(
        "form",
        {
          onsubmit: (e: Event) => {
            e.preventDefault();
            visit({ by, since: sinceField.value });
          },
        },
        h("label", {}, "since ", sinceField),
        h("button", { type: "submit" }, "Show"),
      ),
    ),
    h(
      "p",
      { class: "muted" },
      `${whole(costs.length)} row${costs.length === 1 ? "" : "s"} · total ${money(total)}`,
      " · a cluster counts in the day it started, with its cost so far",
    ),
    table<CostRow>(
      [
        { label: NAMES[by] || by, value: (r) => (r.key === null ? "(unknown)" : r.key) },
        { label: "Clusters", num: true, value: (r) => whole(r.clusters) },
        { label: "Computations", num: true, value: (r) => whole(r.computations) },
        { label: "Core-hours", num: true, value: (r) => r.core_hours.toFixed(2) },
        { label: "Cost", num: true, value: (r) => money(r.cost) },
      ],
      costs,
      "No cluster recorded in this time.",
    ),
  );
}
