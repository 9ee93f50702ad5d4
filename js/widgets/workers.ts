// Workers over time, in the Cluster tab: each worker's memory as Dask splits it (managed
// and unmanaged stacked: the process, what its limit bounds; spilled, on disk, a line of
// its own) against its limit, its CPU and tasks
// processing, the computations that ran marked under the time axis, and when workers
// joined, left and died.  It answers "which worker ran out of memory, when, during which
// computation": the worst worker is the one shown first, and the summary says it.
// Data: rows of list_worker_samples, events on the worker-joined / worker-left topics
// ({topic, time, msg} as stored, or already flat), and the cluster's computations.
import { h } from "../common/dom.js";
import * as fmt from "../common/format.js";
import { timeChart, type ChartBand, type ChartMark } from "../common/chart.js";
import { prefixColor } from "../common/colors.js";
import { now as clockNow } from "../common/clock.js";
import type { ComputationRow, MemoryReading, WorkerSample } from "../common/rows.js";

const MAX_POINTS = 400; // per worker and chart: about one per pixel
const COLORS = {
  managed: "#2fa572",
  unmanaged: "#5b8def",
  spilled: "#b197fc",
  limit: "#e5484d",
  cpu: "#ee6b3b",
  processing: "#f5a524",
  joined: "#2fa572",
  left: "#8c959f",
  died: "#e5484d",
};

export interface WorkerEvent {
  topic: string;
  time: number;
  worker: string;
  name?: string | null;
  reason?: string;
  died?: boolean;
  why?: string;
  rss?: number | null;
  already_running?: boolean;
  memory_limit?: number | null;
}

/** A lifecycle event as stored ({topic, time, msg}), or already flat. */
export interface RawWorkerEvent extends Partial<WorkerEvent> {
  msg?: Partial<WorkerEvent> | null;
}

/** Events as stored ({topic, time, msg}) or flat, on the two lifecycle topics, by time. */
export function workerEvents(events: RawWorkerEvent[]): WorkerEvent[] {
  return (events || [])
    .map((e) =>
      e && e.msg && typeof e.msg === "object"
        ? { ...e.msg, topic: e.topic, time: e.time ?? e.msg.time }
        : e,
    )
    .filter(
      (e): e is WorkerEvent =>
        !!e && (e.topic === "worker-joined" || e.topic === "worker-left") && !!e.worker,
    )
    .sort((a, b) => a.time - b.time);
}

// The worker process's memory, what its limit bounds (spilled data is on disk).
const total = (r: Pick<MemoryReading, "managed" | "unmanaged">) =>
  (r.managed || 0) + (r.unmanaged || 0);

/** At most about `most` rows: of each stretch, the ones with the most memory, CPU and
 *  tasks processing, so a thinned series keeps every peak it is looked at for. */
export function peaks(rows: WorkerSample[], most = MAX_POINTS): WorkerSample[] {
  if (rows.length <= most) return rows;
  const out: WorkerSample[] = [];
  const step = rows.length / most;
  const top = (part: WorkerSample[], key: (r: WorkerSample) => number) =>
    part.reduce((a, b) => (key(b) > key(a) ? b : a));
  for (let i = 0; i < most; i++) {
    const part = rows.slice(Math.floor(i * step), Math.floor((i + 1) * step));
    if (!part.length) continue;
    const kept = new Set([
      top(part, total),
      top(part, (r) => r.cpu ?? 0),
      top(part, (r) => r.processing ?? 0),
    ]);
    out.push(...[...kept].sort((a, b) => a.time - b.time));
  }
  return out;
}

interface WorkerSummary {
  worker: string;
  name: string;
  rows: WorkerSample[];
  limit: number | null;
  peak: MemoryReading | null;
  share: number | null;
  cpu: number | null;
  processing: number;
  joined?: WorkerEvent;
  left?: WorkerEvent;
}

function summarise(samples: WorkerSample[], events: WorkerEvent[]): WorkerSummary[] {
  const by = new Map<string, WorkerSummary>();
  const get = (worker: string, name?: string | number | null) => {
    if (!by.has(worker))
      by.set(worker, {
        worker,
        name: name != null ? String(name) : "",
        rows: [],
        limit: null,
        peak: null,
        share: null,
        cpu: null,
        processing: 0,
      });
    return by.get(worker)!;
  };
  for (const r of samples) get(r.worker, r.name).rows.push(r);
  for (const e of events) {
    const w = get(e.worker, e.name);
    if (e.topic === "worker-joined") w.joined = w.joined || e;
    else w.left = e;
  }
  for (const w of by.values()) {
    w.rows.sort((a, b) => a.time - b.time);
    for (const r of w.rows) {
      if (!w.peak || total(r) > total(w.peak)) w.peak = r;
      if (r.memory_limit) w.limit = r.memory_limit;
      if (r.cpu != null) w.cpu = Math.max(w.cpu ?? 0, r.cpu);
      w.processing = Math.max(w.processing, r.processing || 0);
      if (!w.name && r.name != null) w.name = String(r.name);
    }
    if (w.left?.rss && (!w.peak || w.left.rss > total(w.peak))) {
      // Killed between two samples: what the nanny measured is the true peak.
      w.peak = {
        time: w.left.time,
        managed: null,
        unmanaged: w.left.rss,
        spilled: null,
        killed: true,
      };
    }
    w.share = w.peak && w.limit ? total(w.peak) / w.limit : null;
  }
  // The worst first: killed for its memory, then died, then by peak share of its limit.
  const rank = (w: WorkerSummary) =>
    (w.left?.reason === "memory" ? 3 : w.left?.died ? 2 : 0) + (w.share ?? 0);
  return [...by.values()].sort((a, b) => rank(b) - rank(a) || a.worker.localeCompare(b.worker));
}

// A worker's death ends the computation it ran (its task errs as the worker is removed),
// a moment before the departure is recorded.
const ENDED_BY = 2;

/** The computation that was running at `t` (the newest that started before it). */
function during(computations: ComputationRow[], t: number, end: number): ComputationRow | null {
  let found: ComputationRow | null = null,
    foundStart = -Infinity;
  for (const c of computations) {
    if (
      c.start != null &&
      c.start <= t &&
      (c.stop ?? end) + ENDED_BY >= t &&
      c.start > foundStart
    ) {
      found = c;
      foundStart = c.start;
    }
  }
  return found;
}

const compLabel = (c: ComputationRow) =>
  c.label || `computation ${String(c.computation_id || "").slice(0, 8)}`;
const workerLabel = (w: { name?: string | number | null; worker: string }) =>
  w.name && w.name !== w.worker ? `${w.name} (${fmt.short(w.worker)})` : fmt.short(w.worker);

function leftText(e: WorkerEvent): string {
  if (e.reason === "memory")
    return `killed by its nanny for its memory${e.rss ? ` (${fmt.bytes(e.rss)})` : ""}`;
  if (e.reason === "died") return "died";
  if (e.reason === "retired") return "retired";
  return "closed";
}

function headline(w: WorkerSummary, computations: ComputationRow[], end: number): HTMLElement {
  const t = w.left?.died ? w.left.time : w.peak?.time;
  const c = t != null ? during(computations, t, end) : null;
  const when = t != null ? ` at ${fmt.clock(t)}` : "";
  const where = c
    ? [", during ", h("b", compLabel(c))]
    : t != null
      ? ", while no computation ran"
      : "";
  if (w.left?.died) {
    return h(
      "div.dal-workers-alert",
      { role: "alert" },
      h("b", workerLabel(w)),
      ` ${leftText(w.left)}${when}`,
      where,
      w.peak && w.limit
        ? ` (peak ${fmt.bytes(total(w.peak))} of its ${fmt.bytes(w.limit)} limit).`
        : ".",
    );
  }
  return h(
    "div.dal-workers-peak",
    "Most memory: ",
    h("b", workerLabel(w)),
    ` held ${fmt.bytes(total(w.peak || {}))}`,
    w.limit ? ` of its ${fmt.bytes(w.limit)} limit (${fmt.percent(100 * (w.share || 0))})` : "",
    when,
    where,
    ".",
  );
}

function marksFor(events: WorkerEvent[], worker: string | null): ChartMark[] {
  return events
    .filter((e) => !worker || e.worker === worker)
    .filter((e) => !e.already_running)
    .map((e) => {
      const left = e.topic === "worker-left";
      const kind = !left ? "joined" : e.died ? "died" : "left";
      return {
        t: e.time,
        color: COLORS[kind],
        cls: `dal-mark-${kind}`,
        label: `${fmt.clock(e.time)} ${workerLabel(e)} ${left ? leftText(e) : "joined"}${e.why ? `: ${e.why}` : ""}`,
      };
    });
}

function memoryChart(
  w: WorkerSummary,
  t0: number,
  t1: number,
  bands: ChartBand[],
  marks: ChartMark[],
): SVGElement {
  const rows = peaks(w.rows);
  const m = rows.map((r) => r.managed ?? 0),
    u = rows.map((r, i) => m[i] + (r.unmanaged ?? 0));
  const s = rows.map((r) => r.spilled ?? 0);
  let peak = Math.max(w.left?.rss || 0, w.limit || 0);
  for (let i = 0; i < rows.length; i++) peak = Math.max(peak, u[i], s[i]);
  const at = (vals: number[]) => rows.map((r, i) => [r.time, vals[i]] as [number, number]);
  return timeChart({
    yFormat: fmt.bytes,
    yMax: peak ? peak * 1.15 : null,
    t0,
    t1,
    bands,
    marks,
    label: `Memory of ${workerLabel(w)} over time: peak ${fmt.bytes(total(w.peak || {}))}${w.limit ? ` of ${fmt.bytes(w.limit)}` : ""}`,
    series: [
      {
        points: at(m),
        base: rows.map(() => 0),
        color: COLORS.managed,
        fill: true,
        opacity: 0.35,
        label: "managed",
      },
      {
        points: at(u),
        base: m,
        color: COLORS.unmanaged,
        fill: true,
        opacity: 0.3,
        label: "unmanaged",
      },
      // On disk, not in the process: a line of its own, drawn only when something was spilled.
      ...(rows.some((r) => r.spilled)
        ? [{ points: at(s), color: COLORS.spilled, label: "spilled" }]
        : []),
      ...(w.limit
        ? [
            {
              points: [
                [t0, w.limit],
                [t1, w.limit],
              ] as [number, number][],
              color: COLORS.limit,
              dash: true,
              label: "limit",
            },
          ]
        : []),
      // The nanny's reading as it killed the worker: often between two samples.
      ...(w.left?.rss
        ? [
            {
              points: [[w.left.time, w.left.rss]] as [number, number][],
              color: COLORS.died,
              label: "killed at",
            },
          ]
        : []),
    ],
  });
}

/** A whole, even axis top above `n` (its middle line is a whole number of tasks too). */
function evenTop(n: number): number {
  const top = Math.max(2, Math.ceil(n * 1.1));
  return top % 2 ? top + 1 : top;
}

function legend(items: [string, string][]): HTMLElement {
  return h(
    "span.dal-faint.dal-workers-legend",
    items.map(([label, color]) => h("span", h("i", { style: { background: color } }), label)),
  );
}

/** The view: summary, a worker picker, the chosen worker's charts, one row per worker.
 *  `picked` keeps the chosen worker across redraws (the caller's object). */
export function workersView(
  samples: WorkerSample[],
  rawEvents: RawWorkerEvent[],
  computations: ComputationRow[] = [],
  picked: { worker?: string | null } = {},
): HTMLElement {
  const events = workerEvents(rawEvents);
  const workers = summarise(samples || [], events);
  const box = h("div.dal-workers");
  if (!(samples || []).length) {
    box.append(
      h(
        "p.dal-faint",
        "No worker samples recorded (analytics.workers.transmit off, or recorded before workers were sampled).",
      ),
    );
    return box;
  }
  // A loop, not Math.min(...times): a long cluster has more samples than a call takes arguments.
  let t0 = Infinity,
    t1 = -Infinity;
  for (const x of [samples, events])
    for (const r of x) {
      t0 = Math.min(t0, r.time);
      t1 = Math.max(t1, r.time);
    }
  const end = clockNow();
  const bands: ChartBand[] = computations
    .filter(
      (c): c is ComputationRow & { start: number } =>
        c.start != null && c.start <= t1 && (c.stop ?? end) >= t0,
    )
    .map((c) => ({
      t0: Math.max(c.start, t0),
      t1: Math.min(c.stop ?? end, t1),
      color: prefixColor(compLabel(c)),
      label: `${compLabel(c)}: ${fmt.clock(c.start)} – ${c.stop ? fmt.clock(c.stop) : "running"}`,
    }));
  if (!workers.some((w) => w.worker === picked.worker)) picked.worker = workers[0].worker;
  const died = workers.filter((w) => w.left?.died);
  box.append(
    h(
      "div.dal-workers-summary",
      died.slice(0, 5).map((w) => headline(w, computations, end)),
      workers[0].peak && !workers[0].left?.died ? headline(workers[0], computations, end) : null,
      h(
        "div.dal-faint",
        `${workers.length} worker${workers.length === 1 ? "" : "s"} seen, ${died.length} died; `,
        "computations are marked under the time axis; joins, departures and deaths as vertical lines.",
      ),
    ),
  );

  const charts = h("div.dal-workers-charts");
  const select = h(
    "select.dal-input.dal-workers-pick",
    {
      "aria-label": "Worker",
      onchange: () => {
        picked.worker = select.value;
        draw();
      },
    },
    workers.map((w) =>
      h(
        "option",
        { value: w.worker, selected: w.worker === picked.worker },
        `${workerLabel(w)}${w.share != null ? ` · peak ${fmt.percent(100 * w.share)}` : ""}${w.left ? ` · ${leftText(w.left)}` : ""}`,
      ),
    ),
  );
  const draw = () => {
    const w = workers.find((x) => x.worker === picked.worker) || workers[0];
    const marks = marksFor(events, w.worker);
    const rows = peaks(w.rows);
    charts.replaceChildren(
      h(
        "div.dal-chart.dal-workers-memory",
        h(
          "div.dal-chart-title",
          h("span", `Memory · ${workerLabel(w)}`),
          legend([
            ["managed", COLORS.managed],
            ["unmanaged", COLORS.unmanaged],
            ["spilled", COLORS.spilled],
            ["limit ┅", COLORS.limit],
          ]),
        ),
        memoryChart(w, t0, t1, bands, marks),
      ),
      h(
        "div.dal-charts",
        h(
          "div.dal-chart",
          h(
            "div.dal-chart-title",
            h("span", "CPU"),
            h("span.dal-faint", `peak ${fmt.percent(w.cpu)}`),
          ),
          timeChart({
            yFormat: (v) => `${Math.round(v)}%`,
            yMax: Math.max(100, (w.cpu ?? 0) * 1.1),
            t0,
            t1,
            bands,
            marks,
            label: `CPU of ${workerLabel(w)} over time`,
            series: [{ points: rows.map((r) => [r.time, r.cpu]), color: COLORS.cpu, fill: true }],
          }),
        ),
        h(
          "div.dal-chart",
          h(
            "div.dal-chart-title",
            h("span", "Tasks processing"),
            h("span.dal-faint", `at most ${fmt.count(w.processing)}`),
          ),
          timeChart({
            yFormat: (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1)),
            yMax: evenTop(w.processing),
            t0,
            t1,
            bands,
            marks,
            label: `Tasks processing on ${workerLabel(w)} over time`,
            series: [
              {
                points: rows.map((r) => [r.time, r.processing]),
                color: COLORS.processing,
                fill: true,
              },
            ],
          }),
        ),
      ),
    );
    for (const tr of table.querySelectorAll("tr[data-worker]"))
      tr.classList.toggle("selected", (tr as HTMLElement).dataset.worker === w.worker);
  };
  const table = h(
    "table.dal-table.dal-workers-table",
    h(
      "thead",
      h(
        "tr",
        ["Worker", "Joined", "Left", "Peak memory", "of limit", "Peak CPU", "Most tasks"].map(
          (c, i) => h(i > 2 ? "th.dal-num.num" : "th", c),
        ),
      ),
    ),
    h(
      "tbody",
      workers.map((w) =>
        h(
          "tr",
          {
            "data-worker": w.worker,
            class: `dal-row${w.left?.died ? " died" : ""}`,
            onclick: () => {
              picked.worker = w.worker;
              select.value = w.worker;
              draw();
            },
          },
          h("td", workerLabel(w)),
          h(
            "td",
            w.joined
              ? w.joined.already_running
                ? "before recording"
                : fmt.clock(w.joined.time)
              : "–",
          ),
          h(
            "td",
            { title: w.left?.why || null },
            w.left ? `${fmt.clock(w.left.time)} · ${leftText(w.left)}` : "",
          ),
          h("td.dal-num.num", w.peak ? fmt.bytes(total(w.peak)) : "–"),
          h("td.dal-num.num", w.share != null ? fmt.percent(100 * w.share) : "–"),
          h("td.dal-num.num", fmt.percent(w.cpu)),
          h("td.dal-num.num", fmt.count(w.processing)),
        ),
      ),
    ),
  );
  box.append(h("div.dal-workers-bar", h("label", "Worker ", select)), charts, table);
  draw();
  return box;
}
