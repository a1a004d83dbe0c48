"""Plain workloads for benchmarks: many small pods created concurrently, as a controller or a burst
of users would."""

from __future__ import annotations

import time
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


def create_spread(client: KubeClient, namespace: str, pods: Sequence[dict[str, Any]], over_s: float) -> None:
    """The pods one at a time, evenly over `over_s` (the first at once, the last at `over_s`): members a
    launcher or an operator makes over a while rather than in one burst. The pacing is the workload's
    own, not a wait on anything."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    started = time.monotonic()
    step = over_s / max(1, len(pods) - 1)
    for index, pod in enumerate(pods):
        time.sleep(max(0.0, started + index * step - time.monotonic()))
        client.create(path, pod)
