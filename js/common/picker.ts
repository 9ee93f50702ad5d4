// The monitor's cluster picker: the header's cluster name is a button that opens the
// store's recorded clusters (newest first: name, status, when it started, who ran it);
// choosing one shows that cluster's history in every tab, and "Back" returns to the
// cluster the monitor opened on (or to following the newest).
//
// The model carries `clusters` (the kernel reads them: dask_analytics_lab/widgets/_feed.py),
// `cluster_id`, `follow_cluster` and `home` ({cluster_id, follow, label, tag}).  Choosing
// sets cluster_id and follow_cluster; opening sends {type: "clusters"} so the list is read
// at once.  Every recorded string goes in as text (h() appends text nodes), never as HTML:
// cluster names come from whoever started a cluster.
import { h, clear, watch } from "./dom.js";
import * as fmt from "./format.js";
import { clusterUptime, statusBadge } from "./lifecycle.js";
import { rovingFocus, settleFocus } from "./keys.js";
import type { Model } from "./model.js";
import type { ClusterRow } from "./rows.js";

const OPTION = ".dal-pick-opt";
const LISTED = 100; // what the kernel sends at most (MAX_CLUSTERS in _feed.py)

export interface ClusterPicker {
  /** The button (the cluster's name) and, when away from home, "Back". */
  el: HTMLElement;
  /** The list, to place in the monitor's root (positioned under the button). */
  pop: HTMLElement;
  dispose: () => void;
}

/** The cluster the monitor opened on: one cluster, or following the newest. */
interface Home {
  cluster_id?: string | null;
  follow?: boolean;
  label?: string;
  tag?: string;
}

export function clusterPicker(model: Model): ClusterPicker {
  const name = h("span.dal-title");
  const button = h(
    "button.dal-pick-btn",
    {
      type: "button",
      "aria-haspopup": "listbox",
      "aria-expanded": "false",
      title: "Show another recorded cluster",
    },
    name,
    h("span.dal-caret", { "aria-hidden": "true" }, "▾"),
  );
  const back = h("button.dal-btn.dal-pick-back", { type: "button", hidden: true });
  const el = h("span.dal-picker", button, back);
  const filter = h("input.dal-input.dal-pick-filter", {
    type: "search",
    placeholder: "Filter by name, user or id…",
    "aria-label": "Filter clusters",
  });
  const list = h("div.dal-pick-list", { role: "listbox", "aria-label": "Recorded clusters" });
  const foot = h("div.dal-pick-foot");
  // data-lm-suppress-shortcuts: JupyterLab's notebook shortcuts (arrows move cells,
  // "a" / "b" add some) stay out of the list and its filter.
  const pop = h(
    "div.dal-pick-pop",
    { hidden: true, "data-lm-suppress-shortcuts": "" },
    filter,
    list,
    foot,
  );

  const home = (): Home => model.get("home") || {};
  const clusters = (): ClusterRow[] => model.get("clusters") || [];
  const away = () => {
    const hm = home();
    if (hm.follow) return !model.get("follow_cluster");
    return !!hm.cluster_id && model.get("cluster_id") !== hm.cluster_id;
  };
  const isOpen = () => !pop.hidden;

  const choose = (id: string | undefined) => {
    model.set("follow_cluster", false);
    model.set("cluster_id", id);
    model.save_changes();
    close(true);
  };
  const goHome = () => {
    const hm = home();
    model.set("follow_cluster", !!hm.follow);
    if (hm.cluster_id) model.set("cluster_id", hm.cluster_id);
    model.save_changes();
    close(false);
  };

  const drawButton = () => {
    const id = model.get("cluster_id");
    const row: ClusterRow = clusters().find((c) => c.cluster_id === id) || {};
    const c: ClusterRow = model.get("cluster") || {};
    // Right after a switch the cluster row is not read yet: the list's name serves.
    const text =
      (c.cluster_id === id && c.name) ||
      row.name ||
      (id ? fmt.short(id, 40) : "") ||
      model.get("title") ||
      "Dask analytics";
    name.textContent = text;
    button.setAttribute("aria-label", `Cluster: ${text}. Choose another recorded cluster`);
    const hm = home();
    back.hidden = !away();
    back.textContent = `↩ Back to ${hm.label || "the cluster it opened on"}`;
  };

  const drawList = () => {
    if (!isOpen()) return;
    const rows = clusters();
    const hm = home();
    const shown = model.get("cluster_id");
    const q = filter.value.trim().toLowerCase();
    const match = (c: ClusterRow) =>
      !q ||
      [c.name, c.user, c.cluster_id].some((s) =>
        String(s || "")
          .toLowerCase()
          .includes(q),
      );
    const focused = list.contains(document.activeElement)
      ? (document.activeElement as HTMLElement).dataset.cluster
      : null;
    clear(list);
    const now = Date.now() / 1000;
    rows.forEach((c, i) => {
      if (!match(c)) return;
      const selected = c.cluster_id === shown;
      const isHome = hm.follow ? i === 0 : c.cluster_id === hm.cluster_id;
      const ran = clusterUptime(c, now);
      list.append(
        h(
          `div.dal-pick-opt${selected ? ".selected" : ""}`,
          {
            role: "option",
            "aria-selected": String(selected),
            tabindex: -1,
            dataset: { cluster: c.cluster_id },
            title: `${c.name || ""}\n${c.cluster_id}`.replace(/^\n/, ""),
            onclick: () => choose(c.cluster_id),
          },
          h("span.dal-pick-name", c.name || fmt.short(c.cluster_id, 40)),
          statusBadge(c),
          h(
            "span.dal-pick-meta",
            h("span", `started ${fmt.clock(c.started)}`),
            ran != null
              ? h("span", `${c.status === "live" ? "up" : "ran"} ${fmt.duration(ran)}`)
              : null,
            c.user ? h("span", c.user) : null,
            isHome ? h("span.dal-pick-home", { title: hm.label || "" }, hm.tag || "home") : null,
          ),
        ),
      );
    });
    if (!list.childElementCount) {
      list.append(
        h(
          "div.dal-empty-hint.dal-pick-none",
          rows.length ? "No recorded cluster matches." : "No clusters recorded yet.",
        ),
      );
    }
    foot.textContent =
      rows.length >= LISTED
        ? `The newest ${LISTED} clusters; an older one: monitor(cluster_id=…)`
        : `${rows.length} recorded cluster${rows.length === 1 ? "" : "s"}, newest first`;
    const item = (id: string | null | undefined) =>
      id ? list.querySelector<HTMLElement>(`${OPTION}[data-cluster="${CSS.escape(id)}"]`) : null;
    settleFocus(list, OPTION, item(shown), item(focused));
  };

  const place = () => {
    // Under the button, inside the monitor (its root is the offset parent).
    pop.style.top = `${button.offsetTop + button.offsetHeight + 4}px`;
    pop.style.left = `${Math.max(button.offsetLeft - 4, 4)}px`;
  };

  function open() {
    if (isOpen()) return;
    pop.hidden = false;
    button.setAttribute("aria-expanded", "true");
    filter.value = "";
    place();
    try {
      model.send({ type: "clusters" }); // read the list now, not at the next look
    } catch {
      // no kernel (a stand-in model): the list as it is
    }
    drawList();
    (list.querySelector<HTMLElement>(`${OPTION}[tabindex="0"]`) || filter).focus();
  }

  function close(refocus: boolean) {
    if (!isOpen()) return;
    pop.hidden = true;
    button.setAttribute("aria-expanded", "false");
    clear(list);
    if (refocus) button.focus();
  }

  button.addEventListener("click", () => (isOpen() ? close(true) : open()));
  button.addEventListener("keydown", (e) => {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      open();
    }
  });
  back.addEventListener("click", goHome);
  rovingFocus(list, OPTION);
  list.addEventListener("keydown", (e) => {
    const first = list.querySelector(OPTION);
    if (e.key === "ArrowUp" && first && (e.target as HTMLElement).closest(OPTION) === first) {
      filter.focus();
    } else if (e.key.length === 1 && e.key !== " " && !e.ctrlKey && !e.metaKey && !e.altKey) {
      filter.focus(); // typing filters: the key lands in the box
    }
  });
  filter.addEventListener("input", drawList);
  filter.addEventListener("keydown", (e) => {
    if (e.key === "ArrowDown" || e.key === "Enter") {
      e.preventDefault();
      const first = list.querySelector<HTMLElement>(OPTION);
      if (!first) return;
      if (e.key === "Enter" && list.querySelectorAll(OPTION).length === 1) first.click();
      else first.focus();
    }
  });
  // Escape closes; the notebook never sees the keys the list uses (arrows, Enter, Escape).
  pop.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      close(true);
    }
    e.stopPropagation();
  });
  // A click or the focus going elsewhere closes it.
  const outside = (e: Event) => {
    if (isOpen() && !pop.contains(e.target as Node) && !el.contains(e.target as Node)) close(false);
  };
  document.addEventListener("mousedown", outside);
  pop.addEventListener("focusout", (e) => {
    const to = (e as FocusEvent).relatedTarget as Node | null;
    if (to && !pop.contains(to) && !el.contains(to)) close(false);
  });

  drawButton();
  const unwatch = [
    watch(
      model,
      ["cluster_id", "follow_cluster", "home", "cluster", "clusters", "title"],
      drawButton,
    ),
    watch(model, ["clusters", "cluster_id"], drawList),
  ];
  return {
    el,
    pop,
    dispose: () => {
      for (const u of unwatch) u();
      document.removeEventListener("mousedown", outside);
      pop.remove();
    },
  };
}
