// The state badges of the team pages: a cluster's lifecycle as the store decided it
// (store/queries.py, read with js/common/lifecycle.ts) and a computation's state.
import { h } from "../common/dom.js";
import { datetime } from "../common/format.js";
import { clusterEnded as ended, clusterStatus as status } from "../common/lifecycle.js";
import type { ClusterRow } from "../common/rows.js";

/** Why a cluster reads live, stopped or lost, with the full date (the notebook's says the time). */
export function statusTitle(c: ClusterRow): string {
  const st = status(c);
  if (st === "lost")
    return `its scheduler went silent without saying it stopped; last seen ${datetime(ended(c))}`;
  if (st === "stopped")
    return `stopped ${datetime(ended(c))}${c.stop_reason ? ` (${c.stop_reason})` : ""}`;
  return "its scheduler is sending heartbeats";
}

export const clusterBadge = (c: ClusterRow) =>
  h("span", { class: `state ${status(c)}`, title: statusTitle(c) }, status(c));

export const stateBadge = (state: string) => h("span", { class: `state ${state}` }, state);
