"""Plain workloads for benchmarks: many small pods created concurrently, as a controller or a burst
of users would."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from yuniplace.kube import KubeClient

CREATE_CONCURRENCY = 16


def plain_pod(
    name: str, *, cpu: str = "10m", memory: str = "16Mi", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}
            ],
        },
    }


def create_pods(client: KubeClient, namespace: str, pods: Sequence[dict[str, Any]]) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    with ThreadPoolExecutor(CREATE_CONCURRENCY) as executor:
        list(executor.map(lambda pod: client.create(path, pod), pods))
