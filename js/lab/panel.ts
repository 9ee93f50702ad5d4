// A computation (and its cluster) in the main area: the notebook's monitor view over
// the JSON API.
import { Widget } from "@lumino/widgets";
import type { ClusterRow } from "../common/rows.js";
import monitor from "../widgets/monitor.js";
import { RestModel } from "./model";

export class ComputationPanel extends Widget {
  readonly model: RestModel;
  private cleanup: (() => void) | null = null;

  constructor(clusterId: string, computationId: string | null, where: string) {
    super();
    this.addClass("dal-lab-panel");
    this.id = `dask-analytics-${clusterId}-${computationId ?? "cluster"}`.replace(/[^\w-]/g, "_");
    this.title.closable = true;
    this.model = new RestModel(clusterId, computationId, where);
    this.cleanup = monitor.render({ model: this.model, el: this.node }) as () => void;
    const name = () =>
      (this.model.get("cluster") as ClusterRow | undefined)?.name || clusterId.slice(0, 16);
    this.title.label = computationId ? `Computation · ${name()}` : `Cluster · ${name()}`;
    this.model.on("change:cluster", () => {
      this.title.label = computationId ? `Computation · ${name()}` : `Cluster · ${name()}`;
    });
    if (!computationId) this.model.set("tab", "cluster");
  }

  /** Show another computation of the same cluster in this panel. */
  select(computationId: string | null): void {
    if (computationId) {
      this.model.set("follow", false);
      this.model.set("computation_id", computationId);
      this.model.set("tab", "groups");
    }
  }

  protected onAfterShow(): void {
    this.model.setActive(true);
  }

  protected onAfterHide(): void {
    this.model.setActive(false);
  }

  dispose(): void {
    if (this.isDisposed) return;
    this.model.dispose();
    this.cleanup?.();
    super.dispose();
  }
}
