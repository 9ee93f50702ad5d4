// The analytics JSON API that the server extension mounts under {baseUrl}dask-analytics/.
// Plain fetch with the Jupyter login cookie (and the XSRF cookie for writes): the
// Jupyter token must not travel in an Authorization header, which the analytics
// handlers read as an analytics token.
import { PageConfig, URLExt } from "@jupyterlab/coreutils";

export const PREFIX = "dask-analytics";

export function url(path: string): string {
  return URLExt.join(PageConfig.getBaseUrl(), PREFIX, path);
}

function xsrf(): string {
  const m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
  return m ? decodeURIComponent(m[1]) : "";
}

export class ApiError extends Error {
  constructor(public status: number, message: string) {
    super(message);
  }
}

export async function get<T = any>(path: string): Promise<T> {
  const r = await fetch(url(path), { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new ApiError(r.status, body.error || `${r.status} ${r.statusText}`);
  return body as T;
}

export async function post<T = any>(path: string, payload: unknown): Promise<T> {
  const r = await fetch(url(path), {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-XSRFToken": xsrf() },
    body: JSON.stringify(payload),
  });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new ApiError(r.status, body.error || `${r.status} ${r.statusText}`);
  return body as T;
}

/** The link a stored report opens at, in this Jupyter server. */
export function reportUrl(id: string): string {
  return `${location.origin}${url(`reports/${id}`)}`;
}
