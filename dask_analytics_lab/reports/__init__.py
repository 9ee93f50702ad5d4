"""Performance reports you can send as a link.

    from dask_analytics_lab import performance_report, list_performance_reports
    with performance_report(filename="dask-report.html"):   # account=, private=
        df.groupby(...).value.mean().compute()
    # prints: Performance Report Available at: <url>
    list_performance_reports()  # [{"private": False, "filename": ..., "url": ...}, ...]

`performance_report` is distributed's own, so the HTML file is written where you ask,
as always.  On leaving the block it flushes the analytics recorder and makes a
machine-readable twin from what the store holds of the block's window (summary, its
computations with their task groups, task stream, profile, findings and the comparison
with earlier runs of the same code: twin.py, the same kind of twin as the Share
buttons'), and stores both in `analytics.store`:

- a team server (`analytics.reports.server`, else an http(s):// store: a `dask-analytics
  server`): uploaded with `analytics.token`, whatever store the computation is in; the
  link is the server's, and the server decides the account (the token's);
- an embedded SQLite/PostgreSQL store: written straight into it.  The link is one that
  opens (publish.link_base): `analytics.reports.base-url` when set (a `dask-analytics
  server` on the same store); in a kernel of a Jupyter server that serves this store,
  that server's `<url>dask-analytics/reports/<id>`; otherwise the HTML file written
  (file://), with a line on how to get a link a teammate can open.

Public-by-link by default (the id is 128 random bits); `private=True` opens only for
members of the account.  If storing fails the HTML file is still there and a warning
says why: a report never fails the user's computation.

Privacy switches hold here as in the plugin: with `analytics.computation.code.transmit`
false neither the HTML nor the twin holds the calling code; with
`analytics.profile.transmit` false neither holds a profile (the HTML's profile tabs are
empty, the twin's profile an empty tree); `summary.recorded` says which were kept.
BokehJS is embedded in the HTML (mode="inline" unless you pass another mode): a stored
report is served with a policy that lets it load nothing from anywhere else.
At rest the stored copy is encrypted with the code key (rows.py).

A cluster analytics does not record has nothing in the store: its report's twin holds
the block alone (times, code), and its page says that the report holds no cluster record.

Modules: record (the context manager), twin (a report's twin from the store's rows),
twin_page (a report page's state from a twin: every report page's one source), shell
(the page's HTML around that state), render (a stored computation as a report), share
(the Share buttons; with a team server that holds the rows, the server makes the
report itself), publish (storing and listing), rows (a stored report's row, what a
reader sees of it and who may read it), privacy (the switches).  The server, the Jupyter
extension and the API import this package; it imports neither of them.
"""

from __future__ import annotations

from .privacy import privacy_switches
from .publish import list_performance_reports, publish
from .record import performance_report
from .share import share_computation

__all__ = [
    "list_performance_reports",
    "performance_report",
    "privacy_switches",
    "publish",
    "share_computation",
]
