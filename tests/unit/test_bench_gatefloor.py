"""The floor of gating: a gang's gates are lifted, one write each, only once every member is seen, and
never twice."""

from __future__ import annotations

import threading
from typing import Any

from yuniplace.bench.gatefloor import GATE, GateLifter, floor_gang
from yuniplace.kube import JSON_PATCH


class Client:
    def __init__(self) -> None:
        self.patched: list[tuple[str, Any, str | None]] = []
        self.lock = threading.Lock()

    def patch(self, path: str, body: Any, *, content_type: str | None = None, **_: Any) -> dict[str, Any]:
        with self.lock:
            self.patched.append((path, body, content_type))
        return {}


class Cluster:
    def __init__(self) -> None:
        self.api = Client()

    def client(self) -> Client:
        return self.api


def made(pods: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    for pod in pods:
        pod["metadata"]["namespace"] = namespace
    return pods


def test_a_gangs_gates_are_lifted_once_every_member_is_seen_and_only_then() -> None:
    cluster = Cluster()
    lifter = GateLifter(cluster)  # type: ignore[arg-type]  # its watch is not started: pods are handed in
    pods = made(floor_gang("app", 3), "ns")
    other = made(floor_gang("app", 2), "other")  # the same application's name in another namespace
    assert all(pod["spec"]["schedulingGates"] == [{"name": GATE}] for pod in pods)
    lifter._seen(pods[:2] + other[:1])
    lifter._seen([pods[0]])  # seen again (an update): still two of three
    assert cluster.api.patched == []
    lifter._seen([pods[2]])
    lifter._seen(pods)  # every member again, after their gates were lifted: nothing more
    lifter._writes.shutdown(wait=True)  # every lift written
    paths = sorted(path for path, _, _ in cluster.api.patched)
    assert paths == [f"/api/v1/namespaces/ns/pods/app-{i}" for i in range(3)]
    _, body, content_type = cluster.api.patched[0]
    assert content_type == JSON_PATCH
    assert body == [
        {"op": "test", "path": "/spec/schedulingGates/0/name", "value": GATE},
        {"op": "remove", "path": "/spec/schedulingGates/0"},
    ]
