// The server's JSON API as the team pages call it, and links under the server's prefix
// (server/web.py puts the prefix on <body data-prefix>).
import type { Child } from "../common/dom.js";
import { h } from "../common/dom.js";

export const PREFIX = document.body.dataset.prefix || "";

/** The message of the error a call throws after it sent the browser to log in. */
export const NOT_LOGGED_IN = "not logged in";

let redirecting = false;

/** GET {PREFIX}/api{path}?params (null and undefined left out): the JSON answer, or the
 *  server's error as an Error. */
export async function api<T>(path: string, params?: Record<string, unknown>): Promise<T> {
  const given = Object.entries(params || {})
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => [k, String(v)]);
  const q = params ? "?" + new URLSearchParams(given) : "";
  const response = await fetch(`${PREFIX}/api${path}${q}`, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  });
  if (response.status === 401) {
    if (!redirecting) {
      // several calls fail at once: navigate once
      redirecting = true;
      location.replace(`${PREFIX}/login?next=${enc(location.pathname)}`);
    }
    throw new Error(NOT_LOGGED_IN);
  }
  let data: unknown = null;
  try {
    data = await response.json();
  } catch {
    /* not JSON */
  }
  if (!response.ok)
    throw new Error(
      (data as { error?: string } | null)?.error || `${response.status} ${response.statusText}`,
    );
  return data as T;
}

export const enc = encodeURIComponent;

/** A link to one of this server's pages. */
export const link = (path: string, text: Child) => h("a", { href: PREFIX + path }, text);

/** Go to this page with these query parameters (empty ones left out): the filters and
 *  the page live in the URL (?user=ann&state=live&before=...), so a filtered page is a
 *  link to share, and Back goes to the page before. */
export function visit(params: Record<string, string | null | undefined>): void {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  location.assign(location.pathname + (q.toString() ? `?${q}` : ""));
}
