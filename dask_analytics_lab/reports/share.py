"""The "Share report" buttons (the notebook's monitor and the JupyterLab panel): a report
of one stored computation (render.py), stored like any other (publish.py), and the same
page as a file to download.

With a team server (publish.team_server: `analytics.reports.server`, or a server store)
the report is stored there with `analytics.token` and its link is the server's: a
teammate opens it with a token of the same account (any token, or none, when it is not
private).  When the computation's rows are on that same server (analytics.store is
it), the server makes the report from its own store (POST
/api/computations/{id}/share): nothing is read out and sent back.  Otherwise the twin
is made here from the store's rows (twin.py) and uploaded with its page.  Without one it stays in the embedded store and its link is this Jupyter
server's, which only people who log in to it open: the row's "hint" says how to reach
teammates.  Whatever goes wrong is a ShareError whose message says what to do.
"""

from __future__ import annotations

import getpass
import re
import urllib.parse
from typing import Any

from .. import config
from ..readers import open_reader
from ..store_errors import NotFound, StoreUnavailable
from .publish import publish, team_server
from .render import computation_report

# Shown under a link that only this machine's Jupyter server opens.
NO_TEAM_SERVER = (
    "Only people who can log in to this Jupyter server open this link. To share with your team, "
    "set analytics.reports.server to your `dask-analytics server` URL and analytics.token to a "
    "token of yours, or use Download HTML and send the file."
)


class ShareError(RuntimeError):
    """A report could not be shared; the message says why and what to do."""


def _token_advice() -> str:
    account = config.get("analytics.account") or "default"
    user = config.get("analytics.user") or getpass.getuser()
    return (
        "create one on the server's host with `dask-analytics token create --store DB "
        f"--account {account} --user {user}` (DB: the store the server was started with) "
        "and set analytics.token (or DASK_ANALYTICS__TOKEN) to it"
    )


def _reason(error: Exception, server: str) -> str:
    """The server's reason, without the client's "analytics server <url>: " prefix or the
    server's own how-to (ours names the account and user)."""
    text = str(error).removeprefix(f"analytics server {server}: ")
    return re.split(r" \(|; ", text, maxsplit=1)[0]


def _explain(error: Exception, server: str | None) -> ShareError:
    """`error` as a ShareError naming what to do about it."""
    if isinstance(error, ShareError):
        return error
    if server and isinstance(error, PermissionError):
        if not config.get("analytics.token"):
            return ShareError(
                f"The team server {server} needs a token and analytics.token is not set: "
                f"{_token_advice()}."
            )
        return ShareError(
            f"The team server {server} refused analytics.token ({_reason(error, server)}): "
            f"{_token_advice()}."
        )
    if server and isinstance(error, StoreUnavailable):
        return ShareError(
            f"The team server {server} is not answering ({error}). Start it (`dask-analytics server`) "
            "or correct analytics.reports.server; Download HTML works without it."
        )
    if isinstance(error, NotFound):
        return ShareError(f"This computation is not in the store ({error}); choose another one.")
    if isinstance(error, config.ConfigError):
        return ShareError(str(error))
    return ShareError(f"Could not make the report: {error}")


def _filename(label: str) -> str:
    safe = (
        "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:60].strip("-")
        or "computation"
    )
    return f"dask-report-{safe}.html"


def _rows_on(server: str, store: str | None) -> bool:
    """Whether the computation's rows are on the team server itself (the store is it)."""
    url = config.validate_store(store if store is not None else config.get("analytics.store"))
    return url.rstrip("/") == server.rstrip("/")


def _share_on_server(computation_id: str, server: str, private: bool) -> dict:
    """The team server makes and stores the report from its own rows; its row back."""
    reader: Any = open_reader(server)  # a server's URL opens an HttpReader
    client = reader.client
    # The body is the one option: the server reads everything else from its own store.
    path = f"/api/computations/{urllib.parse.quote(computation_id, safe='')}/share"
    return client.post(path, {"private": private})["report"]


def share_computation(
    computation_id: str, *, store: str | None = None, private: bool = False
) -> dict:
    """Store a report of one computation (read from `store`) where reports go; its row
    with "url", "id", "private", "server" (the team server's URL, or None), "local"
    (True when only this Jupyter server's extension serves the link) and "hint" (how
    to reach teammates, when only this machine serves it).  Raises ShareError."""
    server = None
    try:
        server = team_server(store)
        if server is not None and _rows_on(server, store):
            row = _share_on_server(computation_id, server, private)
        else:
            page, twin, meta = computation_report(computation_id, store=store)
            row = publish(
                page,
                twin,
                filename=_filename(meta["label"]),
                private=private,
                title=meta["title"],
                store=store,
            )
    except Exception as e:
        raise _explain(e, server) from e
    # A server on the same embedded store (analytics.reports.base-url) links for the team too.
    elsewhere = server or config.get("analytics.reports.base-url")
    return dict(
        row,
        private=bool(row.get("private", private)),
        server=server,
        local=not elsewhere,
        hint=None if elsewhere else NO_TEAM_SERVER,
    )


def report_file(computation_id: str, *, store: str | None = None) -> tuple[str, str]:
    """(filename, html) of a computation's report as one self-contained file (Download
    HTML): the page a link opens, stored nowhere.  Raises ShareError."""
    server = None
    try:
        url = config.validate_store(store if store is not None else config.get("analytics.store"))
        if url.startswith(("http://", "https://")):
            # The server holds the rows: it makes the page, one request instead of every read.
            server = url.rstrip("/")
            reader: Any = open_reader(url)
            path = f"/api/computations/{urllib.parse.quote(computation_id, safe='')}/report"
            made = reader.client.get(path)["report"]
            return str(made["filename"]), str(made["html"])
        page, _twin, meta = computation_report(computation_id, store=store)
    except Exception as e:
        raise _explain(e, server) from e
    return _filename(meta["label"]), page
