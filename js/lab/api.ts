// The analytics JSON API that the server extension mounts under {baseUrl}dask-analytics/,
// through JupyterLab's ServerConnection: Jupyter's base URL, login token and XSRF header
// are its business.  (The analytics handlers take only a "dal_..." token from the
// Authorization header; the Jupyter token it carries is left to Jupyter's own login.)
import { URLExt } from "@jupyterlab/coreutils";
import { ServerConnection } from "@jupyterlab/services";
import { errorText, NO_EXTENSION } from "./errors";

export const PREFIX = "dask-analytics";

const settings = ServerConnection.makeSettings();

export function url(path: string): string {
  return URLExt.join(settings.baseUrl, PREFIX, path);
}

/** A failed call: its HTTP status (0: no answer) and, when the extension said, what kind
 *  of problem it was ("unreachable", "token", "not-found", "refused", "config", ...). */
export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
    public problem: string | null = null,
  ) {
    super(message);
  }
}

async function request<T>(path: string, init: RequestInit): Promise<T> {
  let r: Response;
  try {
    // "no-cache", not ServerConnection's "no-store": that adds a cache-busting query
    // parameter, which the analytics API refuses as an unknown one.
    r = await ServerConnection.makeRequest(url(path), { cache: "no-cache", ...init }, settings);
  } catch (e) {
    throw new ApiError(0, `the Jupyter server did not answer (${errorText(e)})`);
  }
  const body: unknown = await r.json().catch(() => ({}));
  if (!r.ok) {
    // The analytics API says why as {"error": "...", "problem"?: "..."}.
    const fields = typeof body === "object" && body !== null ? body : {};
    const said = "error" in fields ? fields.error : null;
    const problem = "problem" in fields && fields.problem ? String(fields.problem) : null;
    // A 404 that is not the extension's own answer: nothing of it is mounted here.
    const missing = r.status === 404 && !said ? NO_EXTENSION : null;
    throw new ApiError(
      r.status,
      said ? String(said) : `${r.status} ${r.statusText}`,
      problem ?? missing,
    );
  }
  // Unchecked: the caller's T says what the route sends.
  return body as T;
}

/** The JSON answer of GET `path`: `T` names the fields the caller reads. */
export function get<T>(path: string): Promise<T> {
  return request<T>(path, { method: "GET", headers: { Accept: "application/json" } });
}

export function post<T>(path: string, payload: unknown): Promise<T> {
  return request<T>(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(payload),
  });
}

/** The link a stored report opens at, in this Jupyter server. */
export function reportUrl(id: string): string {
  return new URL(url(`reports/${id}`), location.href).href;
}
