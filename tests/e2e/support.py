"""Small builders and waits for e2e tests: plain-dict manifests and condition waits with deadlines."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from yuniplace.kube import KubeClient, NotFound
from yuniplace.localcluster import LocalCluster, wait_until

Pod = dict[str, Any]
DEFAULT_WAIT_S = 60.0


def make_pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    gates: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
    extra_resources: Mapping[str, str] | None = None,
) -> Pod:
    requests = {"cpu": cpu, "memory": memory, **(extra_resources or {})}
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if owner is not None:
        metadata["ownerReferences"] = [dict(owner)]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}],
    }
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def condition(pod: Pod, kind: str) -> Mapping[str, Any] | None:
    return next((c for c in pod.get("status", {}).get("conditions", []) if c.get("type") == kind), None)


def is_running(pod: Pod) -> bool:
    return pod.get("status", {}).get("phase") == "Running"


def is_bound(pod: Pod) -> bool:
    return bool(pod.get("spec", {}).get("nodeName"))


def is_unschedulable(pod: Pod) -> bool:
    scheduled = condition(pod, "PodScheduled")
    return scheduled is not None and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable"


class Cluster:
    """The session's cluster as tests use it."""

    def __init__(self, local: LocalCluster) -> None:
        self.local = local
        self.client: KubeClient = local.client()
        self.kubeconfig = local.kubeconfig
        self.bin_dir = local.bin_dir()

    def kubectl(self, *args: str) -> str:
        """Run the built kubectl through the generated kubeconfig, as a user would."""
        result = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result.stdout

    def create_pod(self, namespace: str, pod: Pod) -> Pod:
        return self.client.create(f"/api/v1/namespaces/{namespace}/pods", pod)

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        try:
            return self.client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        except NotFound:
            return None

    def wait_pod(
        self, namespace: str, name: str, predicate: Callable[[Pod], bool], timeout_s: float = DEFAULT_WAIT_S
    ) -> Pod:
        """Wait until the pod satisfies `predicate`; the assertion names the predicate and the last state."""
        last: list[Pod | None] = [None]

        def check() -> Pod | None:
            last[0] = self.get_pod(namespace, name)
            return last[0] if last[0] is not None and predicate(last[0]) else None

        try:
            return wait_until(check, timeout_s)  # type: ignore[no-any-return]
        except TimeoutError:
            status = (last[0] or {}).get("status")
            raise AssertionError(f"pod {namespace}/{name} not {predicate.__name__} within {timeout_s}s: {status}")

    def wait_gone(self, path: str, timeout_s: float = DEFAULT_WAIT_S) -> None:
        def gone() -> bool:
            try:
                self.client.get(path)
            except NotFound:
                return True
            return False

        try:
            wait_until(gone, timeout_s)
        except TimeoutError:
            raise AssertionError(f"{path} still exists after {timeout_s}s") from None
