// JupyterLab extension: the Dask-analytics sidebar (left area) and main-area panels
// for a cluster or a computation, over the server extension's JSON API.
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from "@jupyterlab/application";
import { MainAreaWidget, WidgetTracker } from "@jupyterlab/apputils";
import { LabIcon } from "@jupyterlab/ui-components";
import { ComputationPanel } from "./panel";
import { IOpenRequest, Sidebar } from "./sidebar";

const ICON = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
<rect class="jp-icon3" fill="#616161" x="2" y="13" width="4" height="9" rx="1.2"/>
<rect class="jp-icon3" fill="#616161" x="8" y="8" width="4" height="14" rx="1.2"/>
<rect class="jp-icon3" fill="#616161" x="14" y="4" width="4" height="18" rx="1.2"/>
<rect class="jp-icon3" fill="#616161" x="20" y="10" width="3" height="12" rx="1.2"/></svg>`;

export const daskAnalyticsIcon = new LabIcon({ name: "dask-analytics-lab:icon", svgstr: ICON });

const plugin: JupyterFrontEndPlugin<void> = {
  id: "dask-analytics-lab:plugin",
  description: "Dask analytics: clusters, computations, profiles and reports from the store",
  autoStart: true,
  optional: [ILayoutRestorer],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null) => {
    const tracker = new WidgetTracker<MainAreaWidget<ComputationPanel>>({
      namespace: "dask-analytics",
    });

    const open = (req: IOpenRequest) => {
      const existing = tracker.find((w) => w.content.model.get("cluster_id") === req.clusterId);
      if (existing) {
        existing.content.select(req.computationId);
        app.shell.activateById(existing.id);
        return;
      }
      const content = new ComputationPanel(req.clusterId, req.computationId, sidebar.where);
      const widget = new MainAreaWidget({ content });
      widget.id = content.id;
      widget.title.icon = daskAnalyticsIcon;
      widget.title.label = content.title.label;
      content.title.changed.connect(() => {
        widget.title.label = content.title.label;
      });
      widget.title.closable = true;
      void tracker.add(widget);
      app.shell.add(widget, "main");
      app.shell.activateById(widget.id);
    };

    const sidebar = new Sidebar(open);
    sidebar.title.icon = daskAnalyticsIcon;
    sidebar.title.caption = "Dask analytics";
    app.shell.add(sidebar, "left", { rank: 900 });
    if (restorer) restorer.add(sidebar, sidebar.id);

    app.commands.addCommand("dask-analytics:open", {
      label: "Open Dask analytics",
      execute: (args) => {
        if (args.clusterId)
          open({
            clusterId: String(args.clusterId),
            computationId: args.computationId ? String(args.computationId) : null,
          });
        else app.shell.activateById(sidebar.id);
      },
    });
  },
};

export default plugin;
