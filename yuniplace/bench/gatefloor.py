"""The floor of holding a gang with a scheduling gate: what any controller that gates a gang's pods and
lifts their gates once all exist pays, whatever else it does. The bench's lifter is that controller with
nothing in it: the pods are made gated in their manifests (no webhook on their creation), and the moment
its watch has seen every member of an application, each gate is lifted by one write, at the controller's
write concurrency. It decides nothing (no admission, no seats, no record, no event), so a peer measured
beside it shows how much of yuniplace's time is the gate's own cost, and how much is yuniplace's."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from yuniplace.bench.subjects import member_pod
from yuniplace.controller.apply import WRITE_CONCURRENCY
from yuniplace.kube import JSON_PATCH, KubeClient
from yuniplace.kube.watch import ListWatch
from yuniplace.localcluster import LocalCluster

GATE = "bench.yuniplace.io/floor"
SIZE_LABEL = "bench.yuniplace.io/floor-gang-size"  # on each member: how many members its application has
APP_LABEL = "applicationId"
SYNC_TIMEOUT_S = 30.0

Pod = dict[str, Any]


def floor_gang(app: str, members: int) -> list[Pod]:
    """The gang's pods as plain pods (the same containers and requests as every peer's), each made with
    the lifter's gate and labelled with its application and its size."""
    pods = []
    for index in range(members):
        pod = member_pod(f"{app}-{index}")
        pod["metadata"]["labels"].update({APP_LABEL: app, SIZE_LABEL: str(members)})
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
        pods.append(pod)
    return pods


class GateLifter:
    """Lifts the gates of every application of floor_gang's pods, cluster-wide, once all its members
    are seen; use as a context manager for a peer's turn."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._client: KubeClient = cluster.client()
        self._lock = threading.Lock()
        self._gated: dict[tuple[str, str], dict[str, Pod]] = defaultdict(dict)  # by (namespace, app), by name
        self._lifted: set[tuple[str, str]] = set()
        self._writes = ThreadPoolExecutor(WRITE_CONCURRENCY, thread_name_prefix="lift")
        self._watch = ListWatch(
            self._client,
            "/api/v1/pods",
            on_list=self._seen,
            on_event=lambda kind, pod: None if kind == "DELETED" else self._seen([pod]),
            selectors={"labelSelector": SIZE_LABEL},
        )
        self._thread = threading.Thread(target=self._watch.run, name="gate-lifter", daemon=True)

    def _seen(self, pods: Iterable[Pod]) -> None:
        whole: list[list[Pod]] = []
        with self._lock:
            for pod in pods:
                metadata = pod["metadata"]
                app = (metadata["namespace"], metadata["labels"].get(APP_LABEL, ""))
                if app in self._lifted or not pod["spec"].get("schedulingGates"):
                    continue
                members = self._gated[app]
                members[metadata["name"]] = pod
                if len(members) >= int(metadata["labels"][SIZE_LABEL]):
                    self._lifted.add(app)
                    whole.append(list(self._gated.pop(app).values()))
        for gang in whole:
            for member in gang:
                self._writes.submit(self._lift, member)

    def _lift(self, pod: Pod) -> None:
        metadata = pod["metadata"]
        path = f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}"
        patch = [
            {"op": "test", "path": "/spec/schedulingGates/0/name", "value": GATE},
            {"op": "remove", "path": "/spec/schedulingGates/0"},
        ]
        self._client.patch(path, patch, content_type=JSON_PATCH)

    def __enter__(self) -> GateLifter:
        self._thread.start()
        if not self._watch.synced.wait(SYNC_TIMEOUT_S):
            raise TimeoutError(f"the gate lifter's pod watch did not sync within {SYNC_TIMEOUT_S:.0f}s")
        return self

    def __exit__(self, *_: object) -> None:
        self._watch.stop()
        self._thread.join(timeout=10)
        self._writes.shutdown(wait=True)
