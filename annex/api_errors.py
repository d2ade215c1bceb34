"""What a Kubernetes API call's failure says: `ApiError` (a non-2xx answer, carrying the API
server's Status), `WatchExpired` (410 Gone), and what callers read of them. Failures before an
answer are `annex.transport_errors`."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A non-2xx answer; `body` is the apiserver's Status object (empty when there was none)."""

    def __init__(self, status: int, body: dict[str, Any] | None = None,
                 retry_after: float | None = None) -> None:
        self.status = status
        self.body: dict[str, Any] = body or {}
        self.retry_after = retry_after
        """Seconds the server asked to wait before trying again (429 or 5xx, Retry-After)."""
        self.reason = str(self.body.get("reason") or "")
        super().__init__(f"{status}: {self.body.get('message') or self.reason or 'no message'}")


def status_of(error: BaseException) -> int | None:
    """The HTTP status of a failed API call, or None for connection-level failures."""
    return error.status if isinstance(error, ApiError) else None


def is_not_found(error: BaseException) -> bool:
    return status_of(error) == 404


def error_message(error: BaseException) -> str:
    """The apiserver's Status message when there is one (what a user should read)."""
    if isinstance(error, ApiError) and error.body.get("message"):
        return str(error.body["message"])
    return str(error) or type(error).__name__


def error_reason(error: BaseException) -> str:
    """The Status reason (NotFound, Forbidden, Invalid…), else the exception's type."""
    if isinstance(error, ApiError) and error.reason:
        return error.reason
    return type(error).__name__


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""
