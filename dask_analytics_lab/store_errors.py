"""What reaching or reading a store raises, an embedded database or a `dask-analytics
server` alike; callers catch these, never SQLAlchemy's or http.client's.

A base module, outside store/: the collector's HTTP sink raises these too, and importing
the store package would load SQLAlchemy into every scheduler that ships over HTTP."""

from __future__ import annotations


class StoreUnavailable(ConnectionError):
    """The store cannot be reached or opened; the text names the URL and what to do.

    A ConnectionError, so a shipper that retries on connection trouble retries on it.
    `retry_after`: seconds the server asked the caller to wait first (a 503's
    Retry-After), or None.
    """

    retry_after: float | None = None


class NotFound(LookupError):
    """An id that is not in the store, or not in the caller's account (the same to them)."""

    def __str__(self) -> str:
        # LookupError's str() of one argument is fine, KeyError's repr-quoting is not wanted.
        return str(self.args[0]) if self.args else ""


def unknown(what: str, ident: object, command: str) -> NotFound:
    return NotFound(f"unknown {what} id {ident!r}; dask-analytics {command} lists the known ones")


class QueryTimeout(StoreUnavailable):
    """A read ran past the store's query time limit and was cancelled (a server answers 503).

    A StoreUnavailable, so callers that already handle an unreachable store (and
    retry) handle this too; the text names the limit and how to raise it."""


class AmbiguousId(NotFound):
    """A short id that starts more than one id: no one id found (a server answers 404
    with the candidates, as for an unknown id)."""


def ambiguous(what: str, prefix: str, candidates: list[str], *, more: bool) -> AmbiguousId:
    listed = ", ".join(candidates) + (", ..." if more else "")
    return AmbiguousId(
        f"{what} id {prefix!r} is ambiguous: it starts {listed}; give more characters"
    )
