"""The reads of a team server (`dask-analytics server`) over HTTP: the same Reader as
an embedded store's (reads.py), through remote.py's one HTTP client.

Apart from remote.py so the scheduler's sink, which sends through that client, never
loads the read declarations.
"""

from __future__ import annotations

from typing import Any

from .reader import Reader
from .reads import Read, to_query
from .remote import ServerClient


class HttpReader(Reader):
    """The Store's read methods (reads.py), answered by a server: the token decides the
    account, and the server computes what is made of reads (findings) itself."""

    def __init__(self, url: str, *, token: str | None = None, ca_file: str | None = None):
        self.client = ServerClient(url, token=token, ca_file=ca_file)
        self.url = self.client.url

    def _answer(self, read: Read, args: dict[str, Any]) -> Any:
        path, params = to_query(read, args)
        return self.client.get("/api" + path, **params)[read.key]

    # --- reports (not Store methods: reports.py uses these) -----------------------
    def upload_report(self, body: dict[str, Any]) -> dict[str, Any]:
        report: dict[str, Any] = self.client.post("/api/reports", body)["report"]
        return report

    def list_reports(self, *, account: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        reports: list[dict[str, Any]] = self.client.get(
            "/api/reports", account=account, limit=limit
        )["reports"]
        return reports

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"<HttpReader {self.url}>"
