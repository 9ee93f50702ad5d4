"""Storing a report and listing stored ones, in `analytics.store` or the store named:
uploaded to a `dask-analytics server`, or written straight into an embedded store.
The link points at the server, or for an embedded store at `analytics.reports.base-url`."""
from __future__ import annotations

import getpass
from typing import Any

from .. import config
from ..readers import open_reader
from ..store.team import TeamStore
from .rows import check_report, make_row, public_row

DEFAULT_BASE_URL = "http://127.0.0.1:8765"


def base_url() -> str:
    """Where an embedded store's report links start (a server or Jupyter serving it)."""
    return (config.get("analytics.reports.base-url") or DEFAULT_BASE_URL).rstrip("/")


def _target(store: str | None) -> tuple[str, Any]:
    """(store URL, reader): an HttpReader for a server, else the embedded Store."""
    url = config.validate_store(store if store is not None else config.get("analytics.store"))
    return url, open_reader(url)


def _is_server(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def publish(html: str, twin: dict, *, filename: str, account: str | None = None, private: bool = False,
            title: str | None = None, store: str | None = None) -> dict:
    """Store one report and its twin; return its row with "url" and "json_url".
    Raises rows.BadReport (a ValueError) saying which argument is wrong."""
    body = {"html": html, "twin": twin, "filename": filename, "private": private, "title": title,
            "cluster_id": twin.get("summary", {}).get("cluster_id") if isinstance(twin, dict) else None}
    if account is not None:
        body["account"] = account
    report = check_report(body)
    url, reader = _target(store)
    if _is_server(url):
        return reader.upload_report(body)  # the server decides the account: a token's own only
    report.update(account=report["account"] or config.get("analytics.account") or "default",
                  user=config.get("analytics.user") or getpass.getuser())
    row = make_row(**report)
    TeamStore(reader).add_report(row)
    return public_row(row, base_url())


def list_performance_reports(*, account: str | None = None, limit: int = 100, store: str | None = None) -> list[dict]:
    """Stored reports, newest first: [{"id", "url", "json_url", "filename", "private", ...}].

    From a server: the token's account's.  From an embedded store: every account's,
    or `account`'s.
    """
    url, reader = _target(store)
    if _is_server(url):
        return reader.list_reports(account=account, limit=limit)
    base = base_url()
    return [public_row(r, base) for r in TeamStore(reader).list_reports(account=account, limit=limit)]
