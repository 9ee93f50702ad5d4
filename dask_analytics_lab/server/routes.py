"""The server's URL table: what `dask-analytics server` serves and what the Jupyter
server extension mounts.

    routes(prefix, settings) -> list of tornado URLSpec

prefix: where everything lives, e.g. "" (the standalone server) or
        url_path_join(base_url, "dask-analytics") (the Jupyter extension).  No trailing "/".

settings (a dict; unknown keys are an error):
  store_url       sqlite:///... or postgresql://... store to serve (opened here, schema
                  upgraded on open).  Or pass `store`, an already open Store.
  token_required  bool, default True.  True: every API call and page needs a token,
                  sent as `Authorization: token <t>` or the login cookie, and sees its
                  own account only; a public report's link opens without one.
                  False (a trusted host such as Jupyter, which authenticates users
                  itself): token-less callers see every account; a call with a token
                  is still confined to its account.
  local_auth      optional callable(handler) -> bool, asked for token-less calls when
                  token_required is False; False answers 403 (e.g. "is the user logged
                  in to Jupyter").
  code_key        Fernet key (str), or several (list, or comma-separated; newest first)
                  encrypting code snippets at rest.  None: snippets received are stored
                  as plain text (a warning is logged).
  public_url      base URL report links start with, e.g. "https://analytics.example.com";
                  default: the scheme and Host of the request, plus prefix.
  allowed_hosts   host names (and addresses) the Host header may name, e.g.
                  ["localhost", "127.0.0.1", "::1", "analytics.example.com"]; "*": any.
                  Another Host is refused (403) on every route: DNS rebinding.  Default:
                  with token_required False and no local_auth, the local names
                  ("localhost", "127.0.0.1", "::1"); otherwise not checked (tokens and
                  the host app protect those).
  session_secret  bytes or str (16 bytes at least) signing login sessions; default: a
                  random one per process (logins then end when the server restarts).
                  `dask-analytics server` keeps one in a file (see server/cli.py).
  auth_failures   failed authentications with one credential (bad token, login,
                  metrics token) from one client address in a minute before that
                  credential gets 429 from there for the rest of that minute, default
                  10; other credentials from the address are not refused.  Each failure
                  is logged (never the token), at most this many lines an address a minute.
  forwarded_allow_ips  reverse proxies (addresses or networks, a list or comma-separated;
                  "*": any) whose X-Forwarded-For names the client: its right-most entry
                  that is not such a proxy; and whose X-Forwarded-Proto and -Host (their
                  right-most entries) name the scheme and host the client used: the
                  login cookie's Secure flag, HSTS and report links follow them, and the
                  forwarded host must pass allowed_hosts as Host does.  Default None: the
                  peer's address, the connection's scheme, the Host header.
  report_url      a second origin ("https://reports.example.com") on which this server
                  serves uploaded reports' own HTML (private ones through a signed link
                  that expires).  Default None: that HTML is served nowhere; a report link
                  opens the page rendered from the report's twin.
  max_body_bytes  largest ingest body as sent, default 16 MiB (gzip'd).
  max_json_bytes  largest ingest body once decompressed, default 32 MiB.
  max_report_bytes largest report upload, as sent and decompressed, default 64 MiB.
  body_memory     memory all request bodies in flight may take, by the server's
                  estimate (body.py), default 320 MiB: a fifth for bodies being received,
                  the rest for parsing and storing them.  One request estimated past
                  that rest is refused (413); others wait their turn.
  body_timeout    seconds a whole body may take to arrive, default 120.
  body_idle_timeout  seconds a body may go without data before the connection is
                  closed, default 10.
  body_queue_timeout seconds a request waits for its share of body_memory before it
                  gets 503 with Retry-After, default 30.
  threads         threads running store reads, default 4 (bodies have 2 of their own).
  max_answer_bytes  largest JSON answer of one read, default 16 MiB; a longer list is
                  cut and its answer says how to get the next page ("next").
  query_timeout   seconds a store read may run before it is cancelled (503), default 30;
                  None or 0: no limit.
  quota_task_stream_bytes, quota_profile_bytes, quota_event_bytes,
  quota_sample_bytes, quota_report_bytes, quota_account_bytes  bytes of task stream,
                  profiles, events and exceptions, samples, reports, and all of these
                  with the rest, one account may keep: default 64, 16, 2, 32, 2 and 128
                  GiB (quota.py); None or 0: no quota.  Counted in the database, so
                  replicas share them.  Past one: 413 (one write larger than the quota)
                  or 507.

JSON API (errors: {"error": message, "status": code}; every read takes `account=`,
which must be the token's own account; lists take `limit=`):
  GET  /api/whoami                                   {"whoami": {account, user, via, token_required}}
  GET  /api/clusters?limit=                          {"clusters": [...]}, newest first; filters (and
       &user=&state=&since=&until=&text=&before=     on the computation lists): filters.py;
                                                     before= a row's `cursor`: the next, older page
  GET  /api/clusters/{id}                            {"cluster": {...}}
  GET  /api/clusters/{id}/computations?limit=        {"computations": [...]}
  GET  /api/clusters/{id}/samples?limit=             {"samples": [...]}, oldest first
  GET  /api/clusters/{id}/profile                    {"profile": tree}
  GET  /api/clusters/{id}/workers?worker=&limit=     {"workers": [...]}: each worker over time, oldest first
  GET  /api/computations?cluster_id=&limit=          {"computations": [...]}
  GET  /api/computations/{id}                        {"computation": {..., "groups": [...], "code": [...]}}
  GET  /api/computations/{id}/groups                 {"groups": [...]}
  GET  /api/computations/{id}/profile?prefix=        {"profile": tree}, of one task prefix with prefix=
  GET  /api/computations/{id}/tasks?limit=           {"tasks": [...]}: its task stream, by start
  GET  /api/computations/{id}/runs?limit=            {"runs": [...]}: the runs of the same code, newest first
  GET  /api/computations/{id}/compare?baseline=      {"compare": {...}} (store/compare.py)
  GET  /api/computations/{id}/summary                {"summary": {...}}: against its baseline, for the views
  GET  /api/computations/{id}/findings               {"findings": [...]}: why it was slow (findings/)
  GET  /api/exceptions?cluster_id=&computation_id=&limit=   {"exceptions": [...]}
  GET  /api/events?cluster_id=&topic=&limit=         {"events": [...]}
  GET  /api/gpu?cluster_id=&monitor_id=&worker=&limit=      {"gpu": [...]}
  GET  /api/costs?by=user|day|month&since=&until=   {"costs": [{key, clusters, computations, core_hours, cost}]}
  GET  /api/export                                   {"export": {table: [rows]}}, streamed
  Lists cut at max_answer_bytes carry "next": {"url", "params", "rows", "why"}; the
  lists without before= take offset= (rows to skip, in the list's own order).
  POST /api/ingest      gzip'd JSON list of messages -> {"stored": n, "received": n}
                        (token checked before the body is read; messages for another
                        account's cluster are dropped, answered as for an unknown id)
  POST /api/reports     {html, twin, filename, private, title?, cluster_id?} -> 201 {"report": {..., url, json_url}}
  GET  /api/reports?limit=                           {"reports": [...]}
  POST /api/computations/{id}/share  {"private"?} -> 201 {"report": {..., url, json_url}}: a report
                        of the token's account's computation, made from this store
  GET  /api/computations/{id}/report                 {"report": {"filename", "html"}}: that page, stored nowhere
Operations (ops.py): GET /health (open, liveness, no database: {"status": "ok", "version"}),
  GET /ready (open, readiness: {"status": "ready", ...}, or 503 {"status": "unavailable",
  "reason"} when the database is unreachable or its schema not at this release's head)
  and GET /metrics (Prometheus text; the operator's metrics_token, see metrics.py).
  metrics_token   the token /metrics wants ('Authorization: Bearer <it>'), 16 characters
                  at least; None: /metrics is open without tokens, refused (403) with them.
  retention       analytics.retention in seconds: `serve` prunes hourly in the background.
Rows are the store's (store/queries.py): every cluster row carries `status` ("live",
"stopped" or "lost"), `ended` and `duration` as the store decides them, and its peak
size; a computation still running on an ended cluster reads state "lost".  With a
token, a cluster's `user` is the token's and `reported_user` what its client said.
Pages: /  /clusters/{id}  /computations/{id}  /exceptions  /reports  /costs  /login
       /reports/{id} (report HTML)  /reports/{id}.json (its twin)
       /reports/{id}/uploaded (to the uploaded HTML on report_url, signed when private)
"""

from __future__ import annotations

from typing import Any

from tornado.web import RedirectHandler, StaticFileHandler, URLSpec

from .body import BodyReader
from .context import Context, make_context
from .ingest import IngestHandler
from .ops import Health, Metrics, Ready
from .query import query_routes
from .report_handlers import (
    ComputationReportFile,
    ReportsApi,
    ReportView,
    ShareComputation,
    UploadedReport,
)
from .web import WIDGETS, LoginHandler, LogoutHandler, NotFoundHandler, PageHandler


def routes(prefix: str, settings: dict) -> list[URLSpec]:
    """Tornado URL specs for the API, reports and web pages under `prefix` (see module doc)."""
    return routes_for(make_context(prefix, settings))


class ReportsUpload(BodyReader, ReportsApi):
    """/api/reports with its POST body read as body.py says (token before body, bounded
    memory, parsed off the loop); ReportsApi's own read_json then takes the parsed body."""

    def body_limits(self) -> tuple[int, int]:
        return self.ctx.max_report_bytes, self.ctx.max_report_bytes

    async def post(self) -> Any:
        if self._finished:
            return None
        # read_json (in ReportsApi.post) takes the body parsed here.
        self.request.dal_json = await self.body_json()  # type: ignore[attr-defined]
        return await ReportsApi.post(self)


def routes_for(ctx: Context) -> list[URLSpec]:
    p = ctx.prefix
    c = {"ctx": ctx}
    seg = "([^/]+)"
    specs = [
        URLSpec(f"{p}/api/ingest", IngestHandler, c),
        URLSpec(f"{p}/api/reports", ReportsUpload, c),
        URLSpec(f"{p}/api/computations/{seg}/share", ShareComputation, c),
        URLSpec(f"{p}/api/computations/{seg}/report", ComputationReportFile, c),
        URLSpec(f"{p}/health", Health, c),
        URLSpec(f"{p}/ready", Ready, c),
        URLSpec(f"{p}/metrics", Metrics, c),
    ]
    specs += [
        URLSpec(f"{p}/api{path}", handler, {**c, **kwargs})
        for path, handler, kwargs in query_routes()
    ]
    if ctx.report_url is not None:  # where uploaded HTML opens: only with a report origin
        specs.append(URLSpec(f"{p}/reports/{seg}/uploaded", UploadedReport, c))
    specs += [
        URLSpec(f"{p}/reports/([^/]+)\\.json", ReportView, {**c, "as_json": True}),
        URLSpec(f"{p}/reports/{seg}", ReportView, c),
        URLSpec(f"{p}/", PageHandler, {**c, "page": "clusters", "title": "Clusters"}),
        URLSpec(f"{p}/clusters/{seg}", PageHandler, {**c, "page": "cluster", "title": "Cluster"}),
        URLSpec(
            f"{p}/computations/{seg}",
            PageHandler,
            {**c, "page": "computation", "title": "Computation"},
        ),
        URLSpec(f"{p}/exceptions", PageHandler, {**c, "page": "exceptions", "title": "Exceptions"}),
        URLSpec(f"{p}/reports", PageHandler, {**c, "page": "reports", "title": "Reports"}),
        URLSpec(f"{p}/costs", PageHandler, {**c, "page": "costs", "title": "Costs"}),
        URLSpec(f"{p}/login", LoginHandler, c),
        URLSpec(f"{p}/logout", LogoutHandler, c),
        # The notebook's views, built from js/widgets at install: the pages reuse them.
        URLSpec(f"{p}/widgets/(.*)", StaticFileHandler, {"path": str(WIDGETS)}),
        URLSpec(f"{p}/.*", NotFoundHandler, c),
    ]
    if p:
        specs.insert(0, URLSpec(p, RedirectHandler, {"url": p + "/"}))
    ctx.metrics.set_routes(p, [spec.regex.pattern for spec in specs])
    return specs
