from __future__ import annotations

import json

import pytest

from yuniplace.kube import errors


def status_body(reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "reason": reason, "message": message}).encode()


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (404, "NotFound", errors.NotFound),
        (409, "Conflict", errors.Conflict),
        (409, "AlreadyExists", errors.AlreadyExists),
        (410, "Expired", errors.Gone),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.TooManyRequests),
        (500, "InternalError", errors.ServerError),
        (503, "ServiceUnavailable", errors.ServerError),
        (403, "Forbidden", errors.Forbidden),
        (418, "Teapot", errors.ApiError),
    ],
)
def test_status_codes_map_to_types(status: int, reason: str, expected: type[errors.ApiError]) -> None:
    error = errors.error_from_response(status, status_body(reason, "the message"))
    assert type(error) is expected
    assert error.status == status and error.reason == reason and error.message == "the message"


def test_already_exists_is_a_conflict() -> None:
    assert isinstance(errors.error_from_response(409, status_body("AlreadyExists", "x")), errors.Conflict)


def test_retry_after_is_read_and_garbage_ignored() -> None:
    assert errors.error_from_response(429, b"{}", "3").retry_after_s == 3.0
    assert errors.error_from_response(429, b"{}", "soon").retry_after_s is None


def test_non_json_body_becomes_the_message() -> None:
    error = errors.error_from_response(502, b"<html>bad gateway</html>")
    assert isinstance(error, errors.ServerError) and "bad gateway" in error.message
