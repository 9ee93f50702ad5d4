// The monitor: one cluster, its computations newest first (following the newest
// while work runs), and the chosen computation's task groups, profile and code, the
// cluster summary, GPU metrics and the share button; "Findings" says why it was slow
// (explain), its top finding a line above the task groups; "Time" is where each task group's
// time went (Dask's fine performance metrics), "Task stream" when and where each task ran.  It composes the other views,
// which read the same model (their traits are a subset of the monitor's).
import { h, clear, watch, throttle } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { readTable, tableTraits } from "../common/table.js";
import taskgroups from "./taskgroups.js";
import findings, { findingsOf } from "./findings.js";
import flamegraph from "./flamegraph.js";
import time from "./time.js";
import stream from "./stream.js";
import code from "./code.js";
import cluster from "./cluster.js";
import {
  clusterStatus,
  clusterEnded,
  clusterUptime,
  clusterSize,
  statusBadge,
  computationDuration,
} from "../common/lifecycle.js";
import { taskCounts, progressBar } from "../common/progress.js";
import gpu from "./gpu.js";
import { shareControl } from "./share.js";
import type { RenderProps, View } from "../common/model.js";
import type { ClusterRow, ComputationRow, TaskGroupRow } from "../common/rows.js";
import { rovingFocus, settleFocus } from "../common/keys.js";
import { onScreen } from "../common/onscreen.js";
import { clusterPicker } from "../common/picker.js";

export const LOGO =
  `<svg viewBox="0 0 24 24" class="dal-logo" aria-hidden="true"><rect x="2" y="13" width="4" height="9" rx="1.2" fill="#ee6b3b"/>` +
  `<rect x="8" y="8" width="4" height="14" rx="1.2" fill="#f5a524"/><rect x="14" y="4" width="4" height="18" rx="1.2" fill="#2fa572"/>` +
  `<rect x="20" y="10" width="3" height="12" rx="1.2" fill="#5b8def"/></svg>`;

const TABS: [string, string, View][] = [
  ["groups", "Task groups", taskgroups],
  ["findings", "Findings", findings],
  ["profile", "Profile", flamegraph],
  ["time", "Time", time],
  ["stream", "Task stream", stream],
  ["code", "Code", code],
  ["cluster", "Cluster", cluster],
  ["gpu", "GPU", gpu],
];

/** A computation in a list: what it ran (its label), the line of code that made it,
 *  when, how long, and what became of its tasks. */
export function computationItem(
  c: ComputationRow,
  selected: boolean,
  onclick: () => void,
): HTMLElement {
  const state = c.state || "running";
  const counts = taskCounts(c);
  const name = c.label || `computation ${fmt.short(c.computation_id, 12)}`;
  return h(
    `div.dal-comp${selected ? ".selected" : ""}`,
    {
      onclick,
      dataset: { computation: c.computation_id },
      role: "option",
      "aria-selected": selected ? "true" : "false",
      tabindex: selected ? 0 : -1,
      title: `${c.label || ""}\n${c.code_line || ""}\n${c.computation_id}`.replace(/^\n+/, ""),
    },
    h("span.dal-comp-name", name),
    h(`span.dal-badge.${state}`, h("span.dal-dot"), state),
    c.code_line ? h("span.dal-comp-code", c.code_line.trim()) : null,
    counts.total ? progressBar(counts, { cls: "dal-mini", label: false }) : null,
    h(
      "span.dal-comp-meta",
      h("span", fmt.clock(c.start)),
      h("span", fmt.duration(computationDuration(c))),
      h("span", `${fmt.count(c.n_tasks)} tasks`),
      counts.erred
        ? h("span", { style: { color: "var(--dal-bad)" } }, `${fmt.count(counts.erred)} erred`)
        : null,
      counts.cancelled
        ? h("span.dal-notrun-num", `${fmt.count(counts.cancelled)} cancelled while running`)
        : null,
      counts["not-run"]
        ? h("span.dal-notrun-num", `${fmt.count(counts["not-run"])} never ran`)
        : null,
    ),
  );
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-card.dal-monitor");
  const header = h("div.dal-header");
  const list = h("div.dal-comp-list", { role: "listbox", "aria-label": "Computations" });
  const follow = h("input", { type: "checkbox" });
  const side = h(
    "div.dal-side",
    h(
      "div.dal-side-title",
      h("span", "Computations"),
      h("label.dal-follow", { title: "Jump to each new computation" }, follow, "follow"),
    ),
    list,
  );
  const tabs = h("div.dal-tabs", { role: "tablist" });
  const panes = h("div");
  const share = shareControl(model);
  // The share panel opens under the tab bar: a link or a message never crowds the tabs.
  const main = h("div.dal-main", tabs, share.panel, panes);
  // The header: the logo, the cluster's name (in a notebook, the cluster picker: any
  // recorded cluster; a shared report or a Lab panel shows one), then what drawHeader
  // redraws.  The picker stays put through redraws, so its focus and list do too.
  const logo = h("span");
  logo.innerHTML = LOGO;
  const title = h("span.dal-title");
  const picker = Array.isArray(model.get("clusters")) ? clusterPicker(model) : null;
  const info = h("span.dal-head-info");
  header.append(logo.firstChild!, picker ? picker.el : title, info);
  root.append(header, h("div.dal-body", side, main));
  if (picker) root.append(picker.pop);
  el.append(root);

  // Each view renders once into its own pane; switching tabs only shows/hides panes,
  // so zoom, search and sort survive.
  const cleanups = [share.dispose];
  if (picker) cleanups.push(picker.dispose);
  const paneOf: Record<string, HTMLElement> = {};
  const tabButtons: Record<string, HTMLButtonElement> = {};
  for (const [id, label, view] of TABS) {
    const pane = h("div.dal-pane", {
      style: { display: "none" },
      dataset: { pane: id },
      role: "tabpanel",
      "aria-label": label,
    });
    panes.append(pane);
    paneOf[id] = pane;
    const cleanup = view.render({ model, el: pane });
    if (typeof cleanup === "function") cleanups.push(cleanup);
    tabButtons[id] = h(
      "button.dal-tab",
      {
        role: "tab",
        dataset: { tab: id },
        onclick: () => {
          model.set("tab", id);
          model.save_changes();
        },
      },
      label,
    );
    tabs.append(tabButtons[id]);
  }
  // A shared report is the monitor without the share button (nothing to share from there).
  if (model.get("shareable") !== false) tabs.append(h("span.dal-spacer"), share.el);

  const showTab = () => {
    const tab = model.get("tab") || "groups";
    for (const [id] of TABS) {
      paneOf[id].style.display = id === tab ? "block" : "none";
      tabButtons[id].classList.toggle("active", id === tab);
      tabButtons[id].setAttribute("aria-selected", String(id === tab));
      tabButtons[id].tabIndex = id === tab ? 0 : -1;
    }
  };

  const drawHeader = throttle(() => {
    const c: ClusterRow = model.get("cluster") || {};
    clear(info);
    title.textContent = c.name || model.get("title") || "Dask analytics";
    if (c.cluster_id) {
      // A shared report is a snapshot: "live" and "up" as of when it was made.
      const now = model.get("snapshot_time") || Date.now() / 1000;
      const status = clusterStatus(c);
      const size = clusterSize(c);
      const ended = clusterEnded(c);
      info.append(
        statusBadge(c),
        h(
          "span.dal-stats",
          h(
            "span.dal-stat.dal-size",
            { title: size.peak ? "How big it got: its peak" : "" },
            size.peak ? "peak " : "",
            h("b", fmt.count(size.workers)),
            " workers",
          ),
          h("span.dal-stat", h("b", fmt.count(size.threads)), " threads"),
          size.peak
            ? h("span.dal-stat", h("b", fmt.bytes(size.memory)), " memory")
            : h(
                "span.dal-stat",
                h("b", fmt.bytes(size.memoryUsed)),
                ` / ${fmt.bytes(size.memory)}`,
              ),
          h("span.dal-stat", h("b", fmt.money(c.cost))),
          ended != null
            ? h(
                "span.dal-stat",
                status === "lost" ? "last seen " : "ended ",
                h("b", fmt.clock(ended)),
              )
            : null,
          h(
            "span.dal-stat.dal-uptime",
            status === "live" ? "up " : "ran ",
            h("b", fmt.duration(clusterUptime(c, now))),
          ),
        ),
      );
    }
    info.append(h("span.dal-spacer"));
    if (model.get("error"))
      info.append(
        h("span.dal-share-msg.bad", { title: model.get("error") }, "store unreachable — retrying"),
      );
    info.append(
      h("span.dal-where", { title: `Recorded in ${model.get("where")}` }, model.get("where") || ""),
    );
  });

  const drawList = throttle(() => {
    const rows = readTable<ComputationRow>(model, "computations", "computation_id").sort(
      (a, b) => (b.start || 0) - (a.start || 0),
    );
    const selected = model.get("computation_id");
    follow.checked = !!model.get("follow");
    // A redraw replaces the items: the one with the keyboard focus gets it back.
    const focused = list.contains(document.activeElement)
      ? (document.activeElement as HTMLElement).dataset.computation
      : null;
    clear(list);
    if (!rows.length)
      list.append(
        h("div.dal-empty", h("div.dal-empty-hint", "Nothing computed yet on this cluster.")),
      );
    for (const c of rows) {
      list.append(
        computationItem(c, c.computation_id === selected, () => {
          model.set("computation_id", c.computation_id);
          model.set("follow", false);
          model.save_changes();
        }),
      );
    }
    const item = (id: string | null) =>
      id ? list.querySelector<HTMLElement>(`[data-computation="${CSS.escape(id)}"]`) : null;
    settleFocus(list, ".dal-comp", item(selected), item(focused ?? null));
    const groups = readTable<TaskGroupRow>(model, "groups", "name");
    const erred = groups.reduce((a, g) => a + taskCounts(g).erred, 0);
    tabButtons.groups.replaceChildren(
      "Task groups",
      groups.length
        ? h(
            `span.dal-count${erred ? ".bad" : ""}`,
            erred ? `${fmt.count(erred)} erred` : groups.length,
          )
        : "",
    );
    const found = findingsOf(model);
    tabButtons.findings.replaceChildren(
      "Findings",
      found && found.length ? h("span.dal-count.bad", found.length) : "",
    );
    const gpuRows =
      (model.get("gpu_base")?.rows?.length || 0) + (model.get("gpu_patch")?.rows?.length || 0);
    tabButtons.gpu.style.opacity = gpuRows ? "1" : "0.55";
  });

  rovingFocus(list, ".dal-comp");
  rovingFocus(tabs, ".dal-tab", { activateOnMove: true });
  follow.addEventListener("change", () => {
    model.set("follow", follow.checked);
    model.save_changes();
  });
  showTab();
  drawHeader();
  drawList();
  // Durations of live things move on even when no data changes.
  const timer = setInterval(drawHeader, 5000);
  cleanups.push(
    watch(model, ["tab"], showTab),
    watch(model, ["cluster", "where", "title", "error"], drawHeader),
    watch(
      model,
      [
        "computation_id",
        "follow",
        "findings",
        "computation",
        ...tableTraits("computations"),
        ...tableTraits("groups"),
        ...tableTraits("gpu"),
      ],
      drawList,
    ),
    () => clearInterval(timer),
  );
  return () => {
    for (const c of cleanups) c();
    root.remove();
  };
}

export default onScreen({ render });
