// The page of a shared report: the monitor's views over the data stored with it.
// Built as a classic script (IIFE) so the report is one self-contained HTML file that
// also opens from disk; dask_analytics_lab/widgets/report.py inlines it.
import monitor from "../widgets/monitor.js";
import { LocalModel } from "../common/model.js";

export function render(el, state) {
  const model = new LocalModel({ ...state, shareable: false });
  return monitor.render({ model, el });
}
