"""What the kind tests share: the session's kind cluster as tests use it (API, kubectl, helm), pods
that pass the restricted Pod Security level, and a record of every state a namespace's pods went
through, so tests can assert on history (a placeholder that ran) and not only on the end."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from yuniplace.gang import keys
from yuniplace.kube import KubeClient, NotFound
from yuniplace.kube.watch import ListWatch
from yuniplace.localcluster import wait_until
from yuniplace.localcluster.kind import KindCluster

Pod = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
RELEASE = "yuniplace"
RELEASE_NAMESPACE = "yuniplace-system"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
WAIT_S = 120.0
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 65535,
    "seccompProfile": {"type": "RuntimeDefault"},
}


class Kind:
    """The session's kind cluster: its API, and kubectl and helm as a user runs them."""

    def __init__(self, cluster: KindCluster) -> None:
        self.cluster = cluster
        self.client: KubeClient = cluster.client()
        self.chart = REPO / "charts" / "yuniplace"

    def run(
        self, tool: str, *args: str, check: bool = True, timeout_s: float = 300
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.cluster.images.env(), "KUBECONFIG": str(self.cluster.kubeconfig)}
        result = subprocess.run(
            [tool, *args], capture_output=True, text=True, env=env, timeout=timeout_s, check=False, cwd=REPO
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{tool} {' '.join(args)} failed ({result.returncode}):\n{result.stderr}{result.stdout}"
            )
        return result

    def kubectl(self, *args: str) -> str:
        return self.run("kubectl", *args).stdout

    def helm(self, *args: str) -> str:
        return self.run("helm", *args).stdout

    def namespace(self, prefix: str, *, restricted: bool = False) -> str:
        """A fresh namespace; `restricted` enforces the restricted Pod Security level in it."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        labels = {"pod-security.kubernetes.io/enforce": "restricted"} if restricted else {}
        self.client.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
        )
        wait(
            lambda: self._exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
            30,
            f"default ServiceAccount of {name}",
        )
        return name

    def _exists(self, path: str) -> bool:
        try:
            self.client.get(path)
        except NotFound:
            return False
        return True

    def pod(self, namespace: str, name: str) -> Pod | None:
        try:
            return self.client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        except NotFound:
            return None

    def wait_running(self, namespace: str, *names: str, timeout_s: float = WAIT_S) -> list[Pod]:
        """Every named pod Running with its container started, on a node."""

        def all_running() -> list[Pod] | None:
            pods = []
            for name in names:
                pod = self.pod(namespace, name)
                if pod is None or not container_running(pod):
                    return None
                pods.append(pod)
            return pods

        found: list[Pod] = wait(all_running, timeout_s, f"pods {names} in {namespace} running")
        return found

    def placeholders(self, namespace: str | None = None) -> list[Pod]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return list(self.client.get(path, labelSelector=f"{keys.PLACEHOLDER}=true")["items"])

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        """events.k8s.io Events of a reason, as yuniplace posts them."""
        items = self.client.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        return [e for e in items if e.get("reason") == reason]

    def controller_pods(self) -> list[Pod]:
        selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/name=yuniplace"
        pods = self.client.get(f"/api/v1/namespaces/{RELEASE_NAMESPACE}/pods", labelSelector=selector)["items"]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def lease_holder(self) -> str:
        lease = self.client.get(f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NAMESPACE}/leases/{RELEASE}")
        return str(lease.get("spec", {}).get("holderIdentity") or "")

    def delete_namespace(self, name: str) -> None:
        self.client.delete(f"/api/v1/namespaces/{name}")


def wait(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """wait_until, failing with what was awaited."""
    try:
        return wait_until(condition, timeout_s, interval_s=0.5)
    except TimeoutError:
        raise AssertionError(f"not within {timeout_s:.0f}s: {what}") from None


def container_running(pod: Pod) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return (
        pod.get("status", {}).get("phase") == "Running"
        and bool(statuses)
        and all("running" in (s.get("state") or {}) for s in statuses)
    )


def task_group(name: str, members: int, cpu: str = "100m", memory: str = "64Mi") -> dict[str, Any]:
    return {"name": name, "minMember": members, "minResource": {"cpu": cpu, "memory": memory}}


def pause_pod(
    name: str,
    app: str,
    group: str,
    *,
    task_groups: list[dict[str, Any]] | None = None,
    cpu: str = "100m",
    memory: str = "64Mi",
) -> Pod:
    """A gang member running the pause image, as the restricted Pod Security level requires it."""
    annotations = {keys.TASK_GROUP_NAME: group}
    if task_groups is not None:
        annotations[keys.TASK_GROUPS] = json.dumps(task_groups)
    requests = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {keys.APP_ID: app}, "annotations": annotations},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": PAUSE_IMAGE,
                    "resources": {"requests": requests, "limits": requests},
                    "securityContext": dict(RESTRICTED_CONTAINER),
                }
            ],
        },
    }


LANDED = re.compile(r"task group \S+: (\d+) member\(s\) bound in [0-9.]+s, (\d+) on their reserved nodes")


def landed_on_reserved_nodes(kind: Kind, namespace: str) -> list[tuple[int, dict[str, Any]]]:
    """The task groups' PlaceholderSwapped events of the namespace, oldest first, each with how many
    members it says were bound, when all of them were bound on their reserved nodes."""
    found = []
    for event in kind.events(namespace, "PlaceholderSwapped"):
        match = LANDED.match(event.get("note", ""))
        if match and match[1] == match[2]:
            found.append((int(match[1]), event))
    return sorted(found, key=lambda landed: landed[1]["eventTime"])


def wait_landed(kind: Kind, namespace: str, members: int) -> list[dict[str, Any]]:
    """Wait until the events say `members` members were swapped in, each on its reserved node; return
    those events."""

    def landed() -> list[tuple[int, dict[str, Any]]] | None:
        found = landed_on_reserved_nodes(kind, namespace)
        return found if sum(count for count, _ in found) >= members else None

    found: list[tuple[int, dict[str, Any]]] = wait(landed, 60, f"{members} members swapped in on their reserved nodes")
    return [event for _, event in found]


class History:
    """Every state the pods of a namespace were seen in, from a watch."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self._lock = threading.Lock()
        self.running_placeholders: dict[str, Pod] = {}  # name -> the placeholder as seen running
        self.bound_placeholders: dict[str, Pod] = {}  # name -> the placeholder as first seen on a node
        self._watch = ListWatch(
            client,
            f"/api/v1/namespaces/{namespace}/pods",
            on_list=self._seen,
            on_event=lambda _kind, pod: self._seen([pod]),
        )
        self._thread = threading.Thread(target=self._watch.run, daemon=True)

    def _seen(self, pods: list[Pod]) -> None:
        with self._lock:
            for pod in pods:
                labels = pod["metadata"].get("labels") or {}
                if labels.get(keys.PLACEHOLDER) != "true":
                    continue
                if container_running(pod):
                    self.running_placeholders[pod["metadata"]["name"]] = pod
                if pod["spec"].get("nodeName"):
                    self.bound_placeholders.setdefault(pod["metadata"]["name"], pod)

    def placeholders_seen_running(self) -> dict[str, Pod]:
        with self._lock:
            return dict(self.running_placeholders)

    def placeholders_seen_bound(self) -> dict[str, Pod]:
        with self._lock:
            return dict(self.bound_placeholders)

    def __enter__(self) -> Self:
        self._thread.start()
        wait(self._watch.synced.is_set, 30, "pod watch synced")
        return self

    def __exit__(self, *_: object) -> None:
        self._watch.stop()


KIND_PAGE = REPO / "docs" / "getting-started" / "kind.md"


def kind_page_block() -> str:
    """The shell block of the docs' "On kind, with Helm" page, as written."""
    return KIND_PAGE.read_text().split("```sh\n", 1)[1].split("```", 1)[0]
