// The monitor's model, filled from the JSON API instead of a kernel: the panels in
// the main area reuse the notebook views (js/widgets/*) unchanged.
import { Poll } from "@lumino/polling";
import { LocalModel } from "../common/model.js";
import { clusterStatus } from "../common/lifecycle.js";
import type {
  ClusterRow,
  ClusterSample,
  ComputationRow,
  EventRow,
  ExceptionRow,
  GpuSample,
  SentComputation,
  SentDetail,
  StreamRow,
  WorkerSample,
} from "../common/rows.js";
import type { RunSummary } from "../common/runs.js";
import type { Finding } from "../widgets/findings.js";
import type { ProfileNode } from "../widgets/flamegraph.js";
import { get, post, reportUrl } from "./api";
import { BACKOFF, errorText, trouble } from "./errors";
import { RULES, Kept, everyPolls, historyPeriod, type Stored } from "./polling";

// How often and how much it reads, and what it keeps of each series: the notebook
// monitor's rules (dask_analytics_lab/polling.json, through ./polling).
const LIVE = RULES.poll.live; // seconds between polls while something runs
const FAST = 1000 * LIVE;
const SLOW = 1000 * historyPeriod(LIVE); // ... once everything shown is history
const FINAL_AFTER = RULES.profile.final_after; // seconds after its stop by which a computation's final profile has landed
const due = (polls: number, seconds: number): boolean => polls % everyPolls(seconds, LIVE) === 0;

/** What a view asks of its model (widgets/share.ts): {type: "share", private} or
 *  {type: "download"}. */
function viewRequest(msg: unknown): { type: unknown; private: boolean } {
  if (typeof msg !== "object" || msg === null) return { type: undefined, private: false };
  return { type: "type" in msg ? msg.type : undefined, private: "private" in msg && !!msg.private };
}

/** POST lab/share's answer (lab/serverext.py ShareHandler). */
interface SharedReport {
  id: string;
  url: string | null;
  local: boolean | null;
  private: boolean | null;
  server: string | null;
  hint: string | null;
}

export class RestModel extends LocalModel {
  private polls = 0;
  private loadedProfile: string | null = null;
  private shownProfile = ""; // computation, prefix and sample count of the profile shown
  private detailUpdated: number | null | undefined = null;
  private loadedStream: string | null = null; // the computation whose whole task stream is shown
  // What is kept of the cluster's series (thinned as the notebook's feed thins them), and
  // where each next read starts; seriesOf: the cluster they are of.
  private samples = new Kept<Stored<ClusterSample>>("samples");
  private samplesTime: number | null | undefined = undefined; // the cluster row's sample_time at the last read
  private workers = new Kept<Stored<WorkerSample>>("workers");
  private gpu = new Kept<Stored<GpuSample>>("gpu");
  private events = new Map<string, Kept<Stored<EventRow>>>();
  private seriesOf: string | null = null;
  private active = true;
  // Fast while something runs, slow once all shown is history; asleep while the panel
  // is not on screen or the browser tab is hidden; after a failed read, longer waits
  // (up to a minute) until one succeeds.
  private poll = new Poll({
    factory: () => this.tick(),
    frequency: { interval: FAST, backoff: BACKOFF.growth, max: Math.max(SLOW, BACKOFF.max) },
    standby: () => !this.active || "when-hidden",
    name: "dask-analytics:panel",
  });

  constructor(clusterId: string, computationId: string | null, where: string) {
    super({
      title: "Dask analytics",
      where,
      cluster_id: clusterId,
      computation_id: computationId,
      follow: !computationId,
      tab: "groups",
      cluster: {},
      computation: {},
      exceptions: [],
      code: [],
      metrics: [],
      stream_base: { v: 0, rows: [] },
      profile: {},
      profile_title: "",
      runs: {},
      findings: {},
      profile_prefixes: [],
      profile_prefix: "",
      share: { state: "idle" },
      error: "",
      computations_base: { v: 0, rows: [] },
      groups_base: { v: 0, rows: [] },
      samples_base: { v: 0, rows: [] },
      gpu_base: { v: 0, rows: [] },
      workers_base: { v: 0, rows: [] },
      worker_events: [],
    });
    this.onSend = (msg: unknown) => {
      const asked = viewRequest(msg);
      if (asked.type === "share") void this.share(asked.private);
      else if (asked.type === "download") void this.download();
    };
    this.on("change:computation_id", () => this.selected());
    this.on("change:follow", () => {
      if (this.get("follow")) this.poke();
    });
    this.on("change:profile_prefix", () => {
      this.loadedProfile = null;
      this.poke();
    });
  }

  /** Poll only while the panel is on screen. */
  setActive(active: boolean): void {
    this.active = active;
    if (active) this.poke();
  }

  poke(): void {
    void this.poll.refresh();
  }

  dispose(): void {
    this.poll.dispose();
  }

  private selected(): void {
    this.loadedProfile = null;
    this.detailUpdated = null;
    this.loadedStream = null;
    this.update({
      computation: {},
      groups_base: { v: Date.now(), rows: [] },
      code: [],
      metrics: [],
      stream_base: { v: Date.now(), rows: [] },
      exceptions: [],
      profile: {},
      runs: {},
      findings: {},
      profile_prefixes: [],
      profile_prefix: "",
      share: { state: "idle" },
    });
    this.poke();
  }

  private async tick(): Promise<void> {
    let live: boolean;
    try {
      live = await this.load();
      this.update({ error: "" });
    } catch (e) {
      const said = trouble(e);
      this.update({
        error: said.problem === "other" ? errorText(e) : `${said.title}: ${said.hint}`,
      });
      throw e; // the Poll backs off
    }
    this.polls++;
    const interval = live ? FAST : SLOW;
    if (this.poll.frequency.interval !== interval)
      this.poll.frequency = { ...this.poll.frequency, interval };
  }

  private async load(): Promise<boolean> {
    const cid = this.get("cluster_id");
    const [{ cluster }, { computations }] = await Promise.all([
      get<{ cluster: ClusterRow }>(`api/clusters/${encodeURIComponent(cid)}`),
      get<{ computations: SentComputation[] }>(
        `lab/computations?cluster_id=${encodeURIComponent(cid)}&limit=${RULES.computations.limit}`,
      ),
    ]);
    const values: Record<string, unknown> = { cluster, title: cluster.name || cid };
    const rows = computations.map((c) => ({ ...c, label: c.label ?? null }));
    values.computations_base = { v: 0, rows };
    Object.assign(values, await this.loadSeries(cid, cluster));
    this.update(values);
    if (
      (this.get("follow") || !this.get("computation_id")) &&
      rows.length &&
      rows[0].computation_id !== this.get("computation_id")
    ) {
      this.set("computation_id", rows[0].computation_id); // -> selected() -> poke()
      return true;
    }
    const compId = this.get("computation_id");
    let running = rows.some((r) => r.state === "running");
    if (compId) {
      const listed = rows.find((r) => r.computation_id === compId);
      if (!listed || listed.updated !== this.detailUpdated) {
        const { computation } = await get<{ computation: SentDetail }>(
          `api/computations/${encodeURIComponent(compId)}`,
        );
        const { groups = [], code = [], metrics = [], ...detail } = computation;
        // The last metrics land after the stop: read it again until they have.
        const late =
          detail.state !== "running" &&
          detail.stop &&
          Date.now() / 1000 - detail.stop < RULES.metrics.after;
        this.detailUpdated = late ? null : detail.updated;
        if (late) running = true;
        const update: Record<string, unknown> = {
          computation: detail,
          groups_base: { v: 0, rows: groups },
          code: code.filter((c) => c.text),
          metrics,
          profile_prefixes: [...new Set(groups.map((g) => g.prefix || g.name))].sort(),
        };
        if (detail.n_erred) {
          const { exceptions } = await get<{ exceptions: ExceptionRow[] }>(
            `api/exceptions?computation_id=${encodeURIComponent(compId)}&limit=${RULES.exceptions.limit}`,
          );
          update.exceptions = exceptions;
        }
        if (detail.state !== "running") {
          // Against the earlier runs of the same code (store/compare.py run_summary).
          // And why it was slow (findings/): from the whole record, so only once it ended;
          // read again with the late metrics, which some findings rest on.
          const [{ summary }, { findings }] = await Promise.all([
            get<{ summary: RunSummary | null }>(
              `api/computations/${encodeURIComponent(compId)}/summary`,
            ),
            get<{ findings: Finding[] }>(`api/computations/${encodeURIComponent(compId)}/findings`),
          ]);
          update.runs = summary;
          update.findings = { computation_id: compId, findings };
        }
        this.update(update);
        running = running || detail.state === "running";
      }
      const detail: ComputationRow = this.get("computation") || {};
      // A running computation's profile grows (the scheduler records it every few
      // seconds); a finished one's final profile lands a profile cycle after its end.
      const settled =
        detail.state &&
        detail.state !== "running" &&
        detail.stop &&
        Date.now() / 1000 - detail.stop > FINAL_AFTER;
      const profileDue = detail.state !== "running" || due(this.polls, RULES.profile.every);
      if (detail.state && profileDue && this.loadedProfile !== compId) {
        const prefix = this.get("profile_prefix") || "";
        const { profile } = await get<{ profile: ProfileNode | null }>(
          `api/computations/${encodeURIComponent(compId)}/profile` +
            (prefix ? `?prefix=${encodeURIComponent(prefix)}` : ""),
        );
        const key = `${compId} ${prefix} ${profile?.count}`;
        if (key !== this.shownProfile) {
          this.shownProfile = key;
          this.update({ profile, profile_title: compId });
        }
        if (profile?.count && settled) this.loadedProfile = compId;
        else if (detail.state !== "running") running = true; // the final one is on its way
      }
      // The task stream grows while it runs; its last rows land a collector tick after the stop.
      if (
        detail.state &&
        this.loadedStream !== compId &&
        (detail.state !== "running" || due(this.polls, RULES.stream.every))
      ) {
        // Ended and no more to come: no stop recorded (nothing will land), or its last tick is past.
        const done =
          detail.state !== "running" &&
          (!detail.stop || Date.now() / 1000 - detail.stop > FINAL_AFTER);
        const { tasks } = await get<{ tasks: StreamRow[] }>(
          `api/computations/${encodeURIComponent(compId)}/tasks?limit=${RULES.stream.limit}`,
        );
        if (this.get("computation_id") !== compId) return true; // another one was chosen meanwhile
        this.update({ stream_base: { v: 0, rows: tasks } });
        if (done) this.loadedStream = compId;
        else if (detail.state !== "running") running = true;
      }
    }
    // Poll fast while the store says the cluster is live; a stopped or lost one is history.
    return running || clusterStatus(cluster) === "live";
  }

  /** The cluster's series, each read when its rule says, from where its last read ended,
   *  and thinned: the traits that changed. */
  private async loadSeries(cid: string, cluster: ClusterRow): Promise<Record<string, unknown>> {
    if (this.seriesOf !== cid) {
      this.seriesOf = cid;
      this.samples = new Kept("samples");
      this.samplesTime = undefined;
      this.workers = new Kept("workers");
      this.gpu = new Kept("gpu");
      this.events = new Map(RULES.events.topics.map((topic) => [topic, new Kept("events")]));
    }
    const at = encodeURIComponent(cid);
    // The store stores a cluster's end after its last rows: one read after it has them all.
    const ended = clusterStatus(cluster) !== "live";
    const values: Record<string, unknown> = {};
    const reads: Promise<void>[] = [];
    const { samples, workers, gpu, events } = this;
    if (cluster.sample_time !== this.samplesTime) {
      reads.push(
        get<{ samples: Stored<ClusterSample>[] }>(
          `api/clusters/${at}/samples?${samples.query()}`,
        ).then(({ samples: read }) => {
          values.samples_base = { v: 0, rows: samples.merge(read) };
          this.samplesTime = cluster.sample_time;
        }),
      );
    }
    if (workers.due(this.polls, LIVE, ended)) {
      reads.push(
        get<{ workers: Stored<WorkerSample>[] }>(
          `api/clusters/${at}/workers?${workers.query()}`,
        ).then(({ workers: read }) => {
          values.workers_base = { v: 0, rows: workers.merge(read, ended) };
        }),
      );
    }
    if (gpu.due(this.polls, LIVE, ended)) {
      reads.push(
        get<{ gpu: Stored<GpuSample>[] }>(`api/gpu?cluster_id=${at}&${gpu.query()}`).then(
          ({ gpu: read }) => {
            values.gpu_base = { v: 0, rows: gpu.merge(read, ended) };
          },
        ),
      );
    }
    let eventsRead = false;
    for (const [topic, kept] of events) {
      if (!kept.due(this.polls, LIVE, ended)) continue;
      eventsRead = true;
      reads.push(
        get<{ events: Stored<EventRow>[] }>(
          `api/events?cluster_id=${at}&topic=${encodeURIComponent(topic)}&${kept.query()}`,
        ).then(({ events: read }) => {
          kept.merge(read, ended);
        }),
      );
    }
    await Promise.all(reads);
    if (eventsRead)
      values.worker_events = [...events.values()]
        .flatMap((k) => k.rows)
        .sort((a, b) => a.time - b.time);
    return values;
  }

  private async share(isPrivate: boolean): Promise<void> {
    const compId = this.get("computation_id");
    if (!compId) return;
    this.set("share", { state: "working", private: isPrivate });
    try {
      // Uploaded to the team server when this Jupyter server has one configured; the
      // server's answer says where, and what to do when it cannot.
      const { report } = await post<{ report: SharedReport }>("lab/share", {
        computation_id: compId,
        private: isPrivate,
      });
      this.set("share", {
        state: "done",
        url: report.local ? reportUrl(report.id) : report.url,
        id: report.id,
        local: false,
        private: report.private,
        server: report.server,
        message: report.hint || "",
      });
    } catch (e) {
      this.set("share", { state: "error", private: isPrivate, message: errorText(e) });
    }
  }

  /** "Download HTML": the report as one file, answered as the kernel answers a widget. */
  private async download(): Promise<void> {
    const compId = this.get("computation_id");
    try {
      if (!compId) throw new Error("Choose a computation first.");
      const { filename, html } = await post<{ filename: string; html: string }>("lab/report-file", {
        computation_id: compId,
      });
      this.trigger("msg:custom", { type: "download", filename, html });
    } catch (e) {
      this.trigger("msg:custom", { type: "download", error: errorText(e) });
    }
  }
}
