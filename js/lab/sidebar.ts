// The left-area panel: live and past clusters from the store, newest first, each with
// its computations; it refreshes itself while it is visible.
import { Widget } from "@lumino/widgets";
import { Poll } from "@lumino/polling";
import { h, clear } from "../common/dom.js";
import * as fmt from "../common/format.js";
import {
  clusterStatus,
  clusterEnded,
  clusterUptime,
  clusterSize,
  statusBadge,
} from "../common/lifecycle.js";
import { computationItem, LOGO } from "../widgets/monitor.js";
import { rovingFocus, settleFocus } from "../common/keys.js";
import { Filters, filterBar, filterParams, pager } from "../common/filters.js";
import type { SentCluster, SentComputation } from "../common/rows.js";
import { ApiError, get, url } from "./api";
import { BACKOFF, trouble } from "./errors";

// Cluster heads and computation rows: one keyboard stop, walked with the arrow keys.
const ITEMS = ".dal-cl-head, .dal-comp";

const POLL_MS = 3000;
const MAX_CLUSTERS = 30;
const MAX_COMPUTATIONS = 15;

export interface IOpenRequest {
  clusterId: string;
  computationId: string | null;
}

export class Sidebar extends Widget {
  private list: HTMLElement;
  private pages: HTMLElement;
  private problem: HTMLElement;
  private trouble: HTMLElement;
  private footer: HTMLElement;
  private filters: Filters = {};
  private before: string | null = null;
  private status: HTMLElement;
  // Polls only while the sidebar is shown and the browser tab is visible; after a
  // failed read it waits longer each time (up to a minute), and after a good one
  // polls at its rate again.
  private poll = new Poll({
    factory: () => this.load(),
    frequency: { interval: POLL_MS, backoff: BACKOFF.growth, max: BACKOFF.max },
    standby: () => !this.isVisible || "when-hidden",
    name: "dask-analytics:sidebar",
  });
  private expanded = new Set<string>();
  private autoExpanded = false;
  private last = "";
  // Loads started: a load that a newer one (a page turned, a filter) overtook draws nothing.
  private loads = 0;
  where = "";

  constructor(private open: (req: IOpenRequest) => void) {
    super();
    this.id = "dask-analytics-sidebar";
    this.addClass("dal");
    this.addClass("dal-sidebar");
    const logo = h("span");
    logo.innerHTML = LOGO;
    this.status = h("span.dal-faint");
    this.list = h("div.dal-sidebar-list", {
      role: "tree",
      "aria-label": "Clusters and their computations",
    });
    rovingFocus(this.list, ITEMS);
    this.footer = h("div.dal-sidebar-foot");
    this.pages = h("div.dal-sidebar-pages");
    this.problem = h("div.dal-filter-error", { role: "alert" });
    this.trouble = h("div.dal-sidebar-trouble", { role: "status" });
    // A new filter starts again from the newest page.
    const bar = filterBar(["live", "stopped", "lost"], {}, (f) => {
      this.filters = f;
      this.turn(null);
    });
    this.node.append(
      h(
        "div.dal-sidebar-head",
        logo.firstChild,
        h("span.dal-title", "Dask analytics"),
        h("span.dal-spacer"),
        this.status,
      ),
      bar,
      this.problem,
      this.trouble,
      this.list,
      this.pages,
      this.footer,
    );
  }

  protected onAfterShow(): void {
    void this.refresh();
  }

  /** Read the store now (then every POLL_MS while shown). */
  refresh(): Promise<void> {
    return this.poll.refresh();
  }

  private turn(before: string | null): void {
    this.before = before;
    this.last = "";
    void this.refresh();
  }

  dispose(): void {
    this.poll.dispose();
    super.dispose();
  }

  private async load(): Promise<void> {
    const mine = ++this.loads;
    try {
      await this.read(mine);
    } catch (e) {
      if (mine === this.loads) this.showTrouble(e);
      throw e; // the Poll waits longer before the next try
    }
    if (mine !== this.loads) return;
    this.status.textContent = "";
    this.status.title = "";
    clear(this.trouble);
  }

  /** What went wrong, in words, above whatever was drawn before. */
  private showTrouble(e: unknown): void {
    const said = trouble(e, url(""));
    this.status.textContent = "offline";
    this.status.title = said.hint;
    clear(this.trouble).append(
      h(
        "div.dal-empty",
        { dataset: { problem: said.problem } },
        h("div.dal-empty-title", said.title),
        h("div.dal-empty-hint", said.hint),
      ),
    );
  }

  private async readInfo(): Promise<void> {
    const info = await get<{
      store: string | null;
      mounted: boolean;
      team_server?: string | null;
      error?: string;
    }>("lab-info");
    if (!info.mounted) {
      // Loaded, but it could not serve analytics.store: it says why.
      throw new ApiError(503, info.error || "the server extension serves no store", "config");
    }
    const store = info.store || "";
    this.where = store;
    const team = info.team_server;
    clear(this.footer).append(
      h("span", { title: store }, `${team ? "team server" : "store"}: ${fmt.short(store, 60)}`),
      " · ",
      // A team server's own pages, with its own login; else this Jupyter server's.
      h("a", { href: team || url(""), target: "_blank", rel: "noopener" }, "team view"),
    );
  }

  private async read(mine: number): Promise<void> {
    if (!this.where) await this.readInfo();
    const query = new URLSearchParams({
      limit: String(MAX_CLUSTERS),
      ...filterParams(this.filters),
    });
    if (this.before) query.set("before", this.before);
    let clusters: SentCluster[];
    try {
      ({ clusters } = await get<{ clusters: SentCluster[] }>(`api/clusters?${query}`));
    } catch (e) {
      if (mine !== this.loads) return;
      if (!(e instanceof ApiError) || e.status !== 400) throw e;
      this.problem.textContent = e.message; // a filter the store refused: it says why
      return;
    }
    this.problem.textContent = "";
    if (!this.autoExpanded && clusters.length) {
      this.expanded.add(clusters[0].cluster_id); // the newest cluster opens by itself
      this.autoExpanded = true;
    }
    const computations: Record<string, SentComputation[]> = {};
    await Promise.all(
      clusters
        .filter((c) => this.expanded.has(c.cluster_id))
        .map(async (c) => {
          // Filtered by a finding: the cluster's computations that have it.
          const which = new URLSearchParams({
            cluster_id: c.cluster_id,
            limit: String(MAX_COMPUTATIONS),
          });
          if (this.filters.finding) which.set("finding", this.filters.finding);
          const r = await get<{ computations: SentComputation[] }>(`lab/computations?${which}`);
          computations[c.cluster_id] = r.computations;
        }),
    );
    if (mine !== this.loads) return;
    const key = JSON.stringify([clusters, computations, [...this.expanded]]);
    if (key !== this.last) {
      this.draw(clusters, computations);
      clear(this.pages).append(
        pager(clusters, MAX_CLUSTERS, this.before !== null, (b) => this.turn(b)),
      );
      // Only once all of it is drawn: a draw that failed is tried again at the next poll.
      this.last = key;
    }
  }

  private draw(clusters: SentCluster[], computations: Record<string, SentComputation[]>): void {
    // A redraw replaces the items: the one with the keyboard focus gets it back.
    const had = this.list.contains(document.activeElement)
      ? (document.activeElement as HTMLElement)
      : null;
    const again = had?.dataset.computation
      ? `.dal-comp[data-computation="${CSS.escape(had.dataset.computation)}"]`
      : had?.dataset.cluster
        ? `.dal-cl-head[data-cluster="${CSS.escape(had.dataset.cluster)}"]`
        : null;
    this.drawItems(clusters, computations);
    settleFocus(this.list, ITEMS, null, again ? this.list.querySelector<HTMLElement>(again) : null);
  }

  private drawItems(
    clusters: SentCluster[],
    computations: Record<string, SentComputation[]>,
  ): void {
    clear(this.list);
    if (!clusters.length && (this.before || Object.keys(this.filters).length)) {
      this.list.append(h("div.dal-empty", h("div.dal-empty-title", "No cluster matches")));
      return;
    }
    if (!clusters.length) {
      this.list.append(
        h(
          "div.dal-empty",
          h("div.dal-empty-title", "No clusters recorded yet"),
          h(
            "div.dal-empty-hint",
            "In a notebook: ",
            h("code", "%load_ext dask_analytics"),
            ", then create a Client.",
          ),
        ),
      );
      return;
    }
    for (const c of clusters) {
      const open = this.expanded.has(c.cluster_id);
      // live / stopped / lost: the store's word (common/lifecycle.ts), never a clock here.
      const status = clusterStatus(c);
      const ended = clusterEnded(c);
      const size = clusterSize(c);
      const head = h(
        "div.dal-cl-head",
        {
          dataset: { cluster: c.cluster_id, status },
          role: "treeitem",
          "aria-expanded": String(open),
          title: `${c.cluster_id}\n${c.address || ""}`,
          onclick: () => {
            if (open) this.expanded.delete(c.cluster_id);
            else this.expanded.add(c.cluster_id);
            void this.refresh();
          },
        },
        h("span.dal-chev", open ? "▾" : "▸"),
        h("span.dal-cl-name", c.name || fmt.short(c.cluster_id, 24)),
        statusBadge(c),
        h(
          "button.dal-cl-open",
          {
            title: "Open this cluster",
            onclick: (e: Event) => {
              e.stopPropagation();
              this.open({ clusterId: c.cluster_id, computationId: null });
            },
          },
          "open",
        ),
      );
      const meta = h(
        "div.dal-cl-meta",
        h("span", c.user || ""),
        h("span", fmt.clock(c.started)),
        ended != null
          ? h(
              "span.dal-cl-ended",
              `${status === "lost" ? "last seen" : "ended"} ${fmt.clock(ended)}`,
            )
          : null,
        h("span.dal-cl-uptime", fmt.duration(clusterUptime(c))),
        h(
          "span.dal-cl-size",
          { title: size.peak ? "How big it got (its peak)" : "Now" },
          `${size.peak ? "peak " : ""}${fmt.count(size.workers)} workers · ${fmt.count(size.threads)} threads · ${fmt.bytes(size.memory)}`,
        ),
        h("span", fmt.money(c.cost)),
      );
      const box = h("div.dal-cl", head, meta);
      if (open) {
        const comps = computations[c.cluster_id] || [];
        const inner = h("div.dal-cl-comps");
        if (!comps.length) inner.append(h("div.dal-faint.dal-cl-none", "no computations yet"));
        for (const comp of comps) {
          inner.append(
            computationItem(comp, false, () =>
              this.open({ clusterId: c.cluster_id, computationId: comp.computation_id }),
            ),
          );
        }
        box.append(inner);
      }
      this.list.append(box);
    }
  }
}
