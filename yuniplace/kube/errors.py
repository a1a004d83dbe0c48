"""API failures as types, so callers branch on what happened rather than on status codes."""

from __future__ import annotations

import json


class ApiError(Exception):
    """A non-2xx answer from the API server, with the server's own Status message."""

    status: int = 0

    def __init__(self, status: int, reason: str, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after_s = retry_after_s


class BadRequest(ApiError):
    """400: the request itself is malformed."""


class Unauthorized(ApiError):
    """401: credentials missing or rejected."""


class Forbidden(ApiError):
    """403: RBAC (or an admission webhook) said no."""


class NotFound(ApiError):
    """404: the object is gone; for deletes this is success."""


class Conflict(ApiError):
    """409: resourceVersion or UID precondition failed; re-read and decide again."""


class AlreadyExists(Conflict):
    """409 AlreadyExists: a create found the name taken (deterministic names make this benign)."""


class Gone(ApiError):
    """410: the watch's resourceVersion is too old; the caller must re-list."""


class Invalid(ApiError):
    """422: the object failed validation."""


class TooManyRequests(ApiError):
    """429: throttled by API priority and fairness; retry after the server's hint."""


class ServerError(ApiError):
    """5xx: the server or something behind it failed; retrying may help."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_from_response(status: int, body: bytes, retry_after: str | None = None) -> ApiError:
    """Build the typed error from an API server answer (a metav1.Status body when there is one)."""
    reason, message = "", body.decode("utf-8", "replace")[:1000]
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        reason = str(parsed.get("reason", ""))
        message = str(parsed.get("message", message))
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    if status == 409 and reason == "AlreadyExists":
        cls = AlreadyExists
    retry_after_s: float | None = None
    if retry_after:
        try:
            retry_after_s = float(retry_after)
        except ValueError:
            retry_after_s = None
    return cls(status, reason, message, retry_after_s=retry_after_s)
