"""Stored reports as rows: how one is made (gzip'd, encrypted with the code key), what a
reader sees of it, and who may read it.  The same for the team server, the Jupyter
extension and a report written straight into an embedded store.

A report id is 128 random bits: for a public report the link is the permission.  At
rest a report's HTML, its twin and the code in its summary are encrypted with the code
key (codecrypt): the server's, or for an embedded store the writer's
`analytics.code-key-file` / $DASK_ANALYTICS_CODE_KEY when one is set.
"""

from __future__ import annotations

import gzip
import secrets
import time
from typing import Any, Protocol

from ..codecrypt import CodeCipher, local_cipher, reading_cipher
from ..display import dumps
from ..messages import MAX_PROFILE_DEPTH, json_depth
from .offline import inline_bokeh

MAX_FILENAME = 1000
# A twin is parsed and rendered into its page on the server: bound what that costs.  Deep
# enough for profile trees (two levels a frame, MAX_PROFILE_DEPTH frames) in a twin.
MAX_TWIN_BYTES = 32 * 2**20
MAX_TWIN_DEPTH = 2 * MAX_PROFILE_DEPTH + 16
FIELDS = ("html", "twin", "filename", "private", "title", "cluster_id", "account", "user")


class BadReport(ValueError):
    """A report that cannot be stored; the message says what was wrong."""


class Caller(Protocol):
    """Who reads a report: `account` None is a trusted local caller (every account)."""

    @property
    def account(self) -> str | None: ...


def new_report_id() -> str:
    return secrets.token_urlsafe(16)


def report_links(base: str, report_id: str) -> dict:
    return {"url": f"{base}/reports/{report_id}", "json_url": f"{base}/reports/{report_id}.json"}


def writing_cipher(cipher: CodeCipher | None) -> CodeCipher:
    """The cipher a report is stored with: the server's key; else (an embedded store,
    the Jupyter extension) this process's analytics.code-key-file / $DASK_ANALYTICS_CODE_KEY."""
    return cipher if cipher is not None and cipher.enabled else local_cipher(create=True)


def opening_cipher(cipher: CodeCipher | None) -> CodeCipher:
    """The cipher a stored report is read with: the server's key, else this process's."""
    return cipher if cipher is not None and cipher.enabled else reading_cipher()


def _optional_str(body: dict, name: str, most: int = 200) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > most:
        raise BadReport(f"{name} must be a string of at most {most} characters or null")
    return value


def check_report(body: Any) -> dict:
    """A report as uploaded or published ({html, twin, filename, private, title?,
    cluster_id?, account?, user?}), checked: the keyword arguments of make_row but the
    cipher.  Raises BadReport saying what is wrong."""
    if not isinstance(body, dict):
        raise BadReport("the body must be a JSON object with html, twin, filename, private")
    unknown = set(body) - set(FIELDS)
    if unknown:
        raise BadReport(f"unknown report field(s) {sorted(unknown)}")
    html, twin = body.get("html"), body.get("twin")
    if not isinstance(html, str) or not html:
        raise BadReport("html must be the report's HTML, a non-empty string")
    if not isinstance(twin, dict):
        raise BadReport("twin must be a JSON object (summary, task_groups, task_stream, profile)")
    if json_depth(twin) > MAX_TWIN_DEPTH:
        raise BadReport(f"twin must be JSON at most {MAX_TWIN_DEPTH} levels deep")
    private = body.get("private", False)
    if not isinstance(private, bool):
        raise BadReport("private must be true or false")
    return {
        "html": html,
        "twin": twin,
        "private": private,
        "filename": _optional_str(body, "filename", MAX_FILENAME) or "dask-report.html",
        "title": _optional_str(body, "title", MAX_FILENAME),
        "cluster_id": _optional_str(body, "cluster_id"),
        "account": _optional_str(body, "account"),
        "user": _optional_str(body, "user"),
    }


def make_row(
    *,
    html: str,
    twin: dict,
    filename: str,
    private: bool,
    title: str | None,
    cluster_id: str | None,
    account: str | None,
    user: str | None,
    cipher: CodeCipher | None = None,
) -> dict:
    """The row to store for one report (check_report's fields): the HTML with BokehJS
    inline (offline.py), blobs gzip'd, then with the code in its summary, encrypted with
    writing_cipher(cipher) when it has a key."""
    summary = dict(twin["summary"]) if isinstance(twin.get("summary"), dict) else {}
    seal = writing_cipher(cipher)
    if isinstance(summary.get("code"), str):
        summary["code"] = seal.encrypt(summary["code"])
    html_bytes = inline_bokeh(html).encode("utf-8", "replace")
    twin_bytes = dumps(twin).encode()
    if len(twin_bytes) > MAX_TWIN_BYTES:
        raise BadReport(
            f"twin is {len(twin_bytes):,} bytes of JSON, over the maximum of {MAX_TWIN_BYTES:,}: "
            "share a narrower window or fewer task stream rows"
        )
    return {
        "id": new_report_id(),
        "account": account,
        "user": user,
        "filename": filename.replace("\x00", ""),
        "title": (title or "").replace("\x00", "") or None,
        "private": private,
        "created": time.time(),
        "cluster_id": cluster_id,
        "size": len(html_bytes),
        "summary": summary,
        "html_gz": seal.seal_bytes(gzip.compress(html_bytes, 6)),
        "twin_gz": seal.seal_bytes(gzip.compress(twin_bytes, 6)),
    }


def public_row(row: dict, base: str | None = None, cipher: CodeCipher | None = None) -> dict:
    """What a reader sees of a report row: no blobs, the code in its summary readable
    (None and a `code_error` when the key at hand does not open it), and its links
    under `base` (without one, the caller adds the links: publish.py)."""
    out = {
        k: row.get(k)
        for k in (
            "id",
            "account",
            "user",
            "filename",
            "title",
            "private",
            "created",
            "cluster_id",
            "size",
            "summary",
        )
    }
    summary = out.get("summary")
    if isinstance(summary, dict) and "code" in summary:
        code, error = opening_cipher(cipher).open(summary["code"])
        out["summary"] = dict(summary, code=code)
        if error:
            out["code_error"] = error
    if base is not None:
        out.update(report_links(base, row["id"]))
    return out


def may_read(row: dict, caller: Caller | None) -> bool:
    """A public report: anyone with the link; a private one: its account's members
    (and a trusted local caller)."""
    if not row["private"]:
        return True
    return caller is not None and caller.account in (None, row["account"])


def open_blob(row: dict, name: str, cipher: CodeCipher | None = None) -> bytes:
    """A stored report's "html_gz" or "twin_gz", decrypted and decompressed.
    Raises codecrypt.CodeDecryptError when the key at hand does not open it."""
    return gzip.decompress(opening_cipher(cipher).open_bytes(row[name]))
