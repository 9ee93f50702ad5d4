"""The one error type handlers raise for an answer other than 200."""

from __future__ import annotations

from tornado.web import HTTPError


class ApiError(HTTPError):
    """An error answered to the client: status and a message meant for it.

    A tornado HTTPError, so tornado answers it without logging a traceback.
    """

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(status, reason=_reason(status))
        self.message = message
        self.headers = dict(headers or {})  # e.g. Retry-After, set on the answer

    def __str__(self) -> str:
        return f"{self.status_code}: {self.message}"


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
