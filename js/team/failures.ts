// The failures of a cluster or computation: the views' rows (js/common/failures.ts);
// on the Exceptions page each also links the cluster and computation it came from.
import { h } from "../common/dom.js";
import { whole } from "../common/format.js";
import { failureRow as commonFailureRow } from "../common/failures.js";
import { enc, link } from "./api.js";
import type { SentException } from "../common/rows.js";

function failureRow(e: SentException, withLinks: boolean): HTMLElement {
  const row = commonFailureRow(e);
  if (withLinks) {
    row
      .querySelector(".dal-fail-body")!
      .prepend(
        h(
          "p",
          {},
          "Cluster ",
          link(`/clusters/${enc(e.cluster_id)}`, e.cluster_id),
          e.computation_id
            ? [
                ", computation ",
                link(`/computations/${enc(e.computation_id)}`, e.computation_id.slice(0, 12)),
              ]
            : "",
        ),
      );
  }
  return row;
}

export function exceptionsList(exceptions: SentException[], withLinks: boolean): HTMLElement {
  if (!exceptions.length) return h("p", { class: "muted" }, "No failed tasks.");
  return h(
    "div",
    { class: "failures dal-fails" },
    exceptions.map((e) => failureRow(e, withLinks)),
  );
}

/** "2 kinds, 1,500 tasks". */
export function failureCount(exceptions: SentException[]): string {
  const n = exceptions.reduce((a, e) => a + (e.count || 0), 0);
  return `${exceptions.length} kind${exceptions.length === 1 ? "" : "s"}, ${whole(n)} task${n === 1 ? "" : "s"}`;
}
