// GPU utilisation and memory per GPU over time, with the task groups that were running
// on its workers underneath (hover a band for its name).  A GPU is (host, uuid): workers
// that share one make one chart, which names them.
// Traits: gpu_base/gpu_patch (KeyedTable by "id"): rows of dask_analytics_lab.list_gpu_metrics.
import { h, clear, watch, throttle, empty } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { timeChart, type ChartBand } from "../common/chart.js";
import { prefixColor } from "../common/colors.js";
import { readTable, tableTraits } from "../common/table.js";
import { onScreen } from "../common/onscreen.js";
import type { RenderProps } from "../common/model.js";
import type { GpuSample } from "../common/rows.js";

/** Consecutive samples running the same task group -> one band. */
export function groupBands(samples: GpuSample[]): ChartBand[] {
  const bands: ChartBand[] = [];
  const openBands = new Map<string, ChartBand>();
  for (const s of samples) {
    const now = new Set<string>(s.task_groups || []);
    for (const [g, b] of openBands) {
      if (!now.has(g)) {
        bands.push(b);
        openBands.delete(g);
      } else b.t1 = s.time;
    }
    for (const g of now) {
      if (!openBands.has(g))
        openBands.set(g, {
          t0: s.time,
          t1: s.time,
          label: g,
          color: prefixColor(g.replace(/-[0-9a-f]{32}$/, "")),
        });
    }
  }
  return bands.concat([...openBands.values()]);
}

/** One device wherever it is seen: the host and the GPU's UUID (index: an older row). */
export function gpuKey(r: GpuSample): string {
  return `${r.host || r.worker}|${r.gpu_uuid || r.gpu_index}`;
}

/** Who samples a GPU: its one worker, or the workers that share it. */
export function gpuWorkers(samples: GpuSample[]): string {
  const shared = new Set<string>();
  for (const s of samples) for (const w of s.shared_by || []) shared.add(w);
  if (shared.size > 1) return `shared by ${[...shared].sort().join(", ")}`;
  const last = samples[samples.length - 1];
  return last.worker || last.host || "?";
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-gpu");
  el.append(root);
  const draw = throttle(() => {
    const rows = readTable<GpuSample>(model, "gpu", "id");
    clear(root);
    if (!rows.length) {
      root.append(
        empty(
          "No GPU samples for this cluster",
          h(
            "span",
            "Start one with ",
            h("code", "Monitor(client).start()"),
            " on a cluster whose workers have NVIDIA GPUs.",
          ),
        ),
      );
      return;
    }
    const byGpu = new Map<string, GpuSample[]>();
    for (const r of rows) {
      const id = gpuKey(r);
      if (!byGpu.has(id)) byGpu.set(id, []);
      byGpu.get(id)!.push(r);
    }
    const t0 = Math.min(...rows.map((r) => r.time)),
      t1 = Math.max(...rows.map((r) => r.time));
    for (const [, samples] of [...byGpu.entries()].sort()) {
      samples.sort((a, b) => a.time - b.time);
      const last = samples[samples.length - 1];
      const peak = Math.max(...samples.map((s) => s.mem_used || 0));
      const bands = groupBands(samples);
      root.append(
        h(
          "div.dal-section",
          `${last.host ? `${last.host} · ` : ""}GPU ${last.gpu_index ?? "?"}${last.gpu_name ? ` · ${last.gpu_name}` : ""} · ${gpuWorkers(samples)}`,
        ),
        h(
          "div.dal-charts",
          h(
            "div.dal-chart",
            h(
              "div.dal-chart-title",
              h("span", "Utilisation"),
              h(
                "span.dal-faint",
                `compute ${fmt.percent(last.compute_util)} — memory ${fmt.percent(last.mem_util)} ┅`,
              ),
            ),
            timeChart({
              yMax: 100,
              yFormat: (v) => `${Math.round(v)}%`,
              t0,
              t1,
              bands,
              series: [
                {
                  points: samples.map((s) => [s.time, s.compute_util]),
                  color: "#76b900",
                  fill: true,
                },
                { points: samples.map((s) => [s.time, s.mem_util]), color: "#5b8def", dash: true },
              ],
            }),
          ),
          h(
            "div.dal-chart",
            h(
              "div.dal-chart-title",
              h("span", "Memory"),
              h("span.dal-faint", `peak ${fmt.bytes(peak)} of ${fmt.bytes(last.mem_total)}`),
            ),
            timeChart({
              yFormat: fmt.bytes,
              yMax: last.mem_total || null,
              t0,
              t1,
              bands,
              series: [
                { points: samples.map((s) => [s.time, s.mem_used]), color: "#ee6b3b", fill: true },
              ],
            }),
          ),
        ),
      );
    }
  });
  draw();
  const off = watch(model, tableTraits("gpu"), draw);
  return () => {
    off();
    root.remove();
  };
}

export default onScreen({ render });
