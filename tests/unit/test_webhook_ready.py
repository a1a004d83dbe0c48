"""The chart's post-install hook: it waits while the API server cannot call the webhook, and no longer."""

from __future__ import annotations

from typing import Any

import urllib3

from yuniplace.kube import ApiError, Forbidden, TooManyRequests
from yuniplace.webhook import ready
from yuniplace.webhook.admission import is_gang_pod, problems_of

UNREACHABLE = (
    'Internal error occurred: failed calling webhook "gate.yuniplace.io": failed to call webhook: Post '
    '"https://yuniplace-webhook.yuniplace-system.svc:443/mutate?timeout=5s": dial tcp 10.96.233.171:443: '
    "connect: connection refused"
)


class Answers:
    """A client whose pod creations meet these outcomes in turn (an exception, or None for admitted)."""

    def __init__(self, *outcomes: Exception | None) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[dict[str, Any]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.sent.append({"method": method, "path": path, **kwargs})
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return {}


def test_the_probe_is_a_valid_gang_pod_the_webhook_sees() -> None:
    pod = ready.probe_pod()
    assert is_gang_pod(pod)
    assert problems_of(pod) is None


def test_it_waits_while_the_webhook_cannot_be_called_and_stops_once_it_answers() -> None:
    client = Answers(ApiError(500, "InternalError", UNREACHABLE), None)
    assert not ready.webhook_answers(client, "team-a")  # type: ignore[arg-type]
    assert ready.webhook_answers(client, "team-a")  # type: ignore[arg-type]
    assert all(sent["query"] == {"dryRun": "All"} and sent["retry"] is False for sent in client.sent)
    assert client.sent[0]["path"] == "/api/v1/namespaces/team-a/pods"


def test_a_refusal_after_the_webhook_means_it_answered() -> None:
    """A quota or a Pod Security level refusing the dry-run pod comes after the webhooks were called."""
    client = Answers(Forbidden(403, "Forbidden", 'pods "yuniplace-webhook-ready" is forbidden: exceeded quota'))
    assert ready.webhook_answers(client, "team-a")  # type: ignore[arg-type]


def test_a_busy_or_unreachable_api_server_is_asked_again() -> None:
    client = Answers(
        urllib3.exceptions.ProtocolError("connection reset"),
        TooManyRequests(429, "TooManyRequests", "too many requests"),
        ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request"),
        None,
    )
    assert [ready.webhook_answers(client, "team-a") for _ in range(4)] == [False, False, False, True]  # type: ignore[arg-type]
