// What the sidebar and the panels say went wrong: its own module, so that the tests'
// stand-in for ./api (tests/unit/test_polling.py) need not provide it.

/** An error's message, or what was thrown when it has none. */
export function errorText(e: unknown): string {
  const message = typeof e === "object" && e !== null && "message" in e ? e.message : null;
  return String(message || e);
}

/** How every poll of the Lab backs off after a failed read (Lumino's Poll: each wait
 *  up to `growth` times the last, at most `max` ms); the next good read resets it. */
export const BACKOFF = { growth: 3, max: 60_000 } as const;

/** ApiError's problem for a 404 that the extension did not answer. */
export const NO_EXTENSION = "no-extension";

/** What the sidebar says about a failed read: a short title and what to do. */
export interface Trouble {
  problem: string;
  title: string;
  hint: string;
}

/** `e` (an ApiError or anything thrown) in words; `where`: the extension's URL. */
export function trouble(e: unknown, where = "dask-analytics/"): Trouble {
  const fields = typeof e === "object" && e !== null ? (e as Record<string, unknown>) : {};
  const problem = typeof fields.problem === "string" ? fields.problem : "";
  const status = typeof fields.status === "number" ? fields.status : null;
  const text = errorText(e);
  if (problem === NO_EXTENSION)
    return {
      problem,
      title: "The dask-analytics server extension is not running",
      hint:
        `Nothing answers at ${where} in this Jupyter server. Enable the extension ` +
        "(jupyter server extension enable dask_analytics_lab.lab) and restart Jupyter; " +
        "if it is enabled, Jupyter's log says why it did not load.",
    };
  if (problem === "unreachable")
    return { problem, title: "The team server is not reachable", hint: text };
  if (problem === "token")
    return { problem, title: "The team server refused the token", hint: text };
  if (problem === "config") return { problem, title: "Analytics is not configured", hint: text };
  if (status === 0) return { problem: "jupyter", title: "Jupyter is not answering", hint: text };
  return { problem: problem || "other", title: "Analytics not available", hint: text };
}
