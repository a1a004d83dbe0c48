"""The webhook's HTTPS server: reviews answered over connections the API server keeps open."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from tests import builders
from yuniplace.localcluster.pki import CertificateAuthority
from yuniplace.webhook import server

REVIEW = builders.admission_review(
    builders.pod("plain", namespace="team", uid="u-1", containers=[{"name": "main", "image": "busybox"}])
)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[str, str, str]:
    """A serving pair for 127.0.0.1, and its CA's certificate."""
    ca = CertificateAuthority(tmp_path, "webhook-test-ca")
    pair = ca.issue("webhook", "webhook-test", ip_addresses=("127.0.0.1",))
    return str(pair.cert), str(pair.key), str(ca.pair.cert)


def serving(certificate: tuple[str, str, str]) -> tuple[Any, http.client.HTTPSConnection]:
    """The webhook served on a free port, and a client connection to it that trusts its CA."""
    cert, key, ca = certificate
    running = server.serve("127.0.0.1:0", cert, key, rewrites={})
    context = ssl.create_default_context(cafile=ca)
    return running, http.client.HTTPSConnection("127.0.0.1", running.server_address[1], context=context)


def test_reviews_are_answered_one_after_another_on_one_kept_connection(certificate: tuple[str, str, str]) -> None:
    running, connection = serving(certificate)
    try:
        for _ in range(3):
            connection.request("POST", "/mutate", json.dumps(REVIEW), {"Content-Type": "application/json"})
            answer = connection.getresponse()
            body = json.loads(answer.read())
            assert answer.status == 200
            assert body["response"] == {"uid": "u-1", "allowed": True}
            assert not answer.will_close  # HTTP/1.1: the next review reuses the connection
    finally:
        connection.close()
        running.shutdown()
        running.server_close()


def test_answers_are_not_held_back_by_nagles_algorithm(certificate: tuple[str, str, str]) -> None:
    """With Nagle's algorithm on, an answer's last segment waits for the API server to acknowledge the
    one before it, which its kernel delays (up to 40 ms) on a kept connection: every review paid that."""
    cert, key, _ca = certificate
    listener = server._Server(("127.0.0.1", 0), server.ReloadingContext(cert, key), {})
    client = socket.create_connection(("127.0.0.1", listener.server_address[1]))
    accepted, _address = listener.get_request()
    try:
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        accepted.close()
        client.close()
        listener.server_close()


def test_a_kept_connection_outlives_a_pause_longer_than_a_reviews_own_timeout(
    certificate: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server keeps an idle connection up to 90 s and may send a review down it at any moment:
    closed here first, that review fails ("broken pipe") and so does its pod's admission. A review's own
    timeout is for reading one under way, not for the wait between two."""
    monkeypatch.setattr(server._Handler, "timeout", 0.2)
    running, connection = serving(certificate)
    try:
        for _ in range(2):
            connection.request("POST", "/mutate", json.dumps(REVIEW), {"Content-Type": "application/json"})
            answer = connection.getresponse()
            assert answer.status == 200 and json.loads(answer.read())["response"]["allowed"]
            time.sleep(0.5)  # idle for longer than a review's timeout: the pause itself is what is tested
    finally:
        connection.close()
        running.shutdown()
        running.server_close()
