"""Storing a report and listing stored ones, in `analytics.store` or the store named:
uploaded to a `dask-analytics server`, or written straight into an embedded store.
Every link follows one rule (`link_base`): it opens, or there is none.

With a team server (`team_server`: `analytics.reports.server`, or a server store) a
report is uploaded to it with `analytics.token`, whatever store the computation is in:
its link is the server's, for the token's account."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

from .. import config
from ..readers import open_reader
from ..store.team import TeamStore
from . import kernel_server
from .rows import check_report, make_row, public_row, report_links

# Printed under a file:// link: how to get one a teammate can open.
SHARE_HINT = (
    "Only this machine opens that file. For a link a teammate can open, set analytics.reports.server "
    "to a `dask-analytics server` (with analytics.token), or record to it with analytics.store."
)


def link_base(store_url: str) -> str | None:
    """Where links to reports in the embedded store `store_url` start: the configured
    `analytics.reports.base-url` (a server on this store); else, in a kernel of a Jupyter
    server whose extension serves this store, `<server url>dask-analytics`; else None:
    nothing serves them here, and a report's link is its file (file_link).

    (A server store, http(s)://, makes its own links: the server knows its address.)"""
    configured = config.get("analytics.reports.base-url")
    if configured:
        return str(configured).rstrip("/")
    return kernel_server.report_base(store_url)


def file_link(filename: str) -> str | None:
    """file:// URL of a report's HTML written on this machine, if it is there and a
    browser shows it (not compressed, not on another filesystem); else None."""
    if "://" in filename and not filename.startswith("file://"):
        return None
    path = Path(filename.removeprefix("file://")).expanduser().absolute()
    if path.suffix.lower() not in (".html", ".htm") or not path.is_file():
        return None
    return path.as_uri()


def _local_path(filename: str) -> str:
    """An embedded store keeps a local file's absolute path: its file:// link then
    does not depend on the directory a later listing runs in."""
    if "://" in filename:
        return filename
    return str(Path(filename).expanduser().absolute())


def _with_links(row: dict, base: str | None) -> dict:
    if base is not None:
        return dict(row, **report_links(base, row["id"]))
    return dict(row, url=file_link(row["filename"]), json_url=None)


def team_server(store: str | None = None) -> str | None:
    """The team server reports go to: `analytics.reports.server` when set, else the
    store (`store`, or `analytics.store`) when it is a server; None: reports stay in an
    embedded store, and only people who reach this machine open their links."""
    configured = config.get("analytics.reports.server")
    if configured:
        url = config.validate_store(configured, "analytics.reports.server")
        if not _is_server(url):
            raise config.ConfigError(
                f"analytics config: analytics.reports.server = {configured!r} is not valid; "
                "expected the http(s):// URL of a `dask-analytics server`"
            )
        return url.rstrip("/")
    url = config.validate_store(store if store is not None else config.get("analytics.store"))
    return url if _is_server(url) else None


def _target(store: str | None) -> tuple[str, Any]:
    """(URL, reader) reports are stored through: the team server's HttpReader (team_server)
    with `analytics.token`, else the embedded Store."""
    url = team_server(store) or config.validate_store(
        store if store is not None else config.get("analytics.store")
    )
    return url, open_reader(url)


def _is_server(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def publish(
    html: str,
    twin: dict,
    *,
    filename: str,
    account: str | None = None,
    private: bool = False,
    title: str | None = None,
    store: str | None = None,
) -> dict:
    """Store one report and its twin; return its row with "url" and "json_url" (link_base's
    rule: None both when nothing serves the store and no HTML file of it is here).
    Raises rows.BadReport (a ValueError) saying which argument is wrong."""
    body = {
        "html": html,
        "twin": twin,
        "filename": filename,
        "private": private,
        "title": title,
        "cluster_id": twin.get("summary", {}).get("cluster_id") if isinstance(twin, dict) else None,
    }
    if account is not None:
        body["account"] = account
    report = check_report(body)
    url, reader = _target(store)
    if _is_server(url):
        return reader.upload_report(body)  # the server decides the account: a token's own only
    report.update(
        account=report["account"] or config.get("analytics.account") or "default",
        user=config.get("analytics.user") or getpass.getuser(),
        filename=_local_path(report["filename"]),
    )
    row = make_row(**report)
    TeamStore(reader).add_report(row)
    return _with_links(public_row(row), link_base(url))


def list_performance_reports(
    *, account: str | None = None, limit: int = 100, store: str | None = None
) -> list[dict]:
    """Stored reports, newest first: [{"id", "url", "json_url", "filename", "private", ...}].

    From a server: the token's account's.  From an embedded store: every account's,
    or `account`'s, each linked as `publish` links it.
    """
    url, reader = _target(store)
    if _is_server(url):
        return reader.list_reports(account=account, limit=limit)
    base = link_base(url)
    return [
        _with_links(public_row(r), base)
        for r in TeamStore(reader).list_reports(account=account, limit=limit)
    ]
