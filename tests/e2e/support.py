"""Small builders and waits for e2e tests: plain-dict manifests and condition waits with deadlines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tests import builders
from yuniplace.gang import keys
from yuniplace.gang.placeholders import label_value
from yuniplace.gang.pods import format_time
from yuniplace.kube import KubeClient, NotFound
from yuniplace.kube.watch import ListWatch
from yuniplace.localcluster import LocalCluster, chartinstall, wait_until
from yuniplace.localcluster.components import KEEPS_RUNNING_ANNOTATION
from yuniplace.localcluster.nodes import ready_node_names
from yuniplace.localcluster.ports import free_ports

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
    """A pod manifest to create in a namespace: a busybox that ends at once when deleted, limited to what
    it requests so that it is placed by exactly that."""
    requests = {"cpu": cpu, "memory": memory, **(extra_resources or {})}
    pod = builders.pod(
        name,
        namespace=None,
        labels=labels or {},
        annotations=annotations or {},
        owner=owner,
        container="main",
        requests=requests,
        gates=gates or None,
        restartPolicy="Never",
        terminationGracePeriodSeconds=0,
    )
    container = pod["spec"]["containers"][0]
    container["image"] = "busybox"
    container["resources"]["limits"] = requests
    return {"apiVersion": "v1", "kind": "Pod", **pod}


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
            raise AssertionError(
                f"pod {namespace}/{name} not {predicate.__name__} within {timeout_s}s: {status}"
            ) from None

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


def free_port() -> int:
    """A port no other process of this machine is given meanwhile (the other worker's clusters and
    controllers among them): see yuniplace.localcluster.ports."""
    (port,) = free_ports(1)
    return port


def is_ready(port: int) -> bool:
    """Whether a yuniplace process answers 200 on /readyz at `port` (not yet listening: no)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


class ControllerProcess:
    """`yuniplace controller` as a real process, as it runs in a cluster: started, killed, restarted."""

    running: ClassVar[list[ControllerProcess]] = []
    """The processes started and not yet stopped or killed, for a test's setup to wait on."""

    def __init__(self, args: Sequence[str], log_dir: Path, *, name: str = "controller") -> None:
        self.args = list(args)
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.starts = 0

    @classmethod
    def for_namespace(
        cls, kubeconfig: Path, namespace: str, log_dir: Path, *extra_args: str, name: str = "controller"
    ) -> ControllerProcess:
        """A controller watching one namespace, with the admin's kubeconfig."""
        return cls([f"--kubeconfig={kubeconfig}", f"--namespace={namespace}", *extra_args], log_dir, name=name)

    def start(self) -> None:
        self.port = free_port()
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts}\n".encode())
            self.process = subprocess.Popen(
                [sys.executable, "-m", "yuniplace", "controller", f"--http-address=127.0.0.1:{self.port}", *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "POD_NAME": self.name},
            )
        wait_until(self._ready, 30)
        ControllerProcess.running.append(self)

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"controller exited ({self.process.returncode}):\n{self.log()}")
        return is_ready(self.port)

    def metrics(self) -> dict[str, float]:
        """The controller's Prometheus samples, keyed `name{labels}`."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
            text = response.read().decode()
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                samples[key] = float(value)
        return samples

    @classmethod
    def wait_all_see_nodes(cls, client: KubeClient) -> None:
        """Until every running controller's admission sees as many nodes taking pods as the API shows.
        Nodes a test has just added (and the lifting of their not-ready taint) reach a controller through
        its node watch, which may deliver them after the pods the test creates next; a gang admitted in
        between would be judged against fewer nodes."""

        def seen() -> bool:
            count = len(ready_node_names(client))
            alive = [process for process in cls.running if process.process and process.process.poll() is None]
            return all(process.metrics().get("yuniplace_nodes_taking_pods", count) == count for process in alive)

        wait_until(seen, 30)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, as when a node dies."""
        assert self.process is not None
        self._forget()
        self.process.kill()
        self.process.wait(10)

    def _forget(self) -> None:
        if self in ControllerProcess.running:
            ControllerProcess.running.remove(self)

    def stop(self) -> int:
        self._forget()
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"controller ignored SIGTERM for 30s:\n{self.log()}") from None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]


def editors(cluster: Cluster, namespace: str, *users: str) -> None:
    """Let these users (as `kubectl --as` names them) edit in the namespace: the `edit` ClusterRole."""
    cluster.client.create(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "editors"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user} for user in users],
        },
    )


@contextmanager
def chart_installed(
    cluster: Cluster, workloads: str, workdir: Path, values: Mapping[str, str] | None = None
) -> Iterator[ControllerProcess]:
    """yuniplace installed with its Helm chart and `values`, its webhooks sent only the pods of namespace
    `workloads`, and the controller with the webhook running out of cluster as the chart's Deployment
    would run it (its ServiceAccount, its certificate, the flags its values give the webhook, its
    extraArgs); all removed afterwards."""
    suffix = uuid.uuid4().hex[:6]
    system = f"yuniplace-system-{suffix}"
    cluster.local.create_namespace(system)
    port = free_port()
    installation = chartinstall.install(
        cluster.local,
        release=f"yp-{suffix}",
        namespace=system,
        webhook_port=port,
        workdir=workdir,
        values={r"webhook.namespaceSelector.matchLabels.kubernetes\.io/metadata\.name": workloads, **(values or {})},
    )
    controller = ControllerProcess(installation.controller_args(f"127.0.0.1:{port}"), workdir, name="chart-sa")
    try:
        controller.start()
        yield controller
    finally:
        controller.stop()
        chartinstall.uninstall(cluster.local, installation)
        cluster.client.delete(f"/api/v1/namespaces/{system}")


class NamespaceRecorder:
    """Everything a namespace's pods went through, from a watch: every placeholder ever created
    (by name and UID) and where each pod was bound, so tests can assert on history, not just on
    the final state."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self._lock = threading.Lock()
        self.placeholder_uids: dict[str, set[str]] = defaultdict(set)
        self.placeholder_nodes: dict[str, tuple[str, str]] = {}  # name -> (group, node)
        self.latest: dict[str, Pod] = {}
        self.gates_seen: dict[str, set[str]] = defaultdict(set)  # every scheduling gate each pod ever had
        self.callbacks: list[Callable[[Pod], None]] = []
        self._watch = ListWatch(
            client,
            f"/api/v1/namespaces/{namespace}/pods",
            on_list=self._seen_all,
            on_event=lambda _kind, pod: self._seen_all([pod]),
        )
        self._thread = threading.Thread(target=self._watch.run, daemon=True)

    def _seen_all(self, pods: list[Pod]) -> None:
        with self._lock:
            for pod in pods:
                name = pod["metadata"]["name"]
                self.latest[name] = pod
                self.gates_seen[name].update(g.get("name", "") for g in pod["spec"].get("schedulingGates") or [])
                labels = pod["metadata"].get("labels") or {}
                if labels.get(keys.PLACEHOLDER) == "true":
                    self.placeholder_uids[name].add(pod["metadata"]["uid"])
                    node = pod["spec"].get("nodeName")
                    if node:
                        self.placeholder_nodes[name] = (labels[keys.PLACEHOLDER_GROUP], node)
            callbacks = list(self.callbacks)
        for pod in pods:
            for callback in callbacks:
                callback(pod)

    def placeholder_node(self, name: str, timeout_s: float = 30) -> tuple[str, str]:
        """The group and node of placeholder `name` once this watch has seen it bound: the watch may
        trail by a moment what a read of the API already shows (the pod that took its place running)."""

        def seen() -> tuple[str, str] | None:
            with self._lock:
                return self.placeholder_nodes.get(name)

        found: tuple[str, str] = wait_until(seen, timeout_s)
        return found

    def wait_seen(self, names: Iterable[str], timeout_s: float = 30) -> None:
        """Until this watch has seen each of these pods, which a read of the API may show first."""
        wanted = set(names)

        def all_seen() -> bool:
            with self._lock:
                return wanted <= self.latest.keys()

        wait_until(all_seen, timeout_s)

    def placeholders_of(self, app: str) -> dict[str, set[str]]:
        """Every placeholder ever created for the application: name -> the UIDs it had (one, unless it
        was created again)."""
        with self._lock:
            return {
                name: set(uids)
                for name, uids in self.placeholder_uids.items()
                if (self.latest[name]["metadata"].get("labels") or {}).get(keys.PLACEHOLDER_APP) == label_value(app)
            }

    def group_nodes(self, group: str) -> set[str]:
        with self._lock:
            return {node for g, node in self.placeholder_nodes.values() if g == group}

    def __enter__(self) -> NamespaceRecorder:
        self._thread.start()
        wait_until(self._watch.synced.is_set, 30)
        return self

    def __exit__(self, *_: object) -> None:
        self._watch.stop()


def gang_pod(
    name: str,
    app: str,
    group: str | None,
    *,
    task_groups: list[dict[str, Any]] | None = None,
    policy: str | None = None,
    cpu: str = "100m",
    memory: str = "128Mi",
    gated: bool = True,
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> Pod:
    """A real pod of application `app` (label spark-app-selector, as Spark sets it), gated as
    yuniplace's webhook would gate it."""
    pod = make_pod(
        name,
        cpu=cpu,
        memory=memory,
        gates=[keys.GATE] if gated else (),
        labels={"spark-app-selector": app},
        annotations=builders.gang_annotations(group=group, task_groups=task_groups, policy=policy),
    )
    if node_selector:
        pod["spec"]["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod["spec"]["tolerations"] = tolerations
    return pod


def gang_job(
    cluster: Cluster,
    namespace: str,
    place: Placement,
    app: str,
    members: int,
    *,
    policy: str | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority_class: str | None = None,
) -> list[str]:
    """A job of `members` bare pods of `cpu` and `memory` on the test's nodes, each carrying the task
    groups (as a Job's pod template does), the extra labels and annotations and the priority class;
    returns their names. Bare pods: an evicted one is gone, none comes back in its place."""
    groups = [place.group("workers", members, cpu=cpu, memory=memory)]
    names = [f"{app}-{i}" for i in range(members)]
    for name in names:
        pod = gang_pod(name, app, "workers", task_groups=groups, cpu=cpu, memory=memory, policy=policy)
        pod["metadata"]["labels"].update(labels or {})
        pod["metadata"]["annotations"].update(annotations or {})
        if priority_class:
            pod["spec"]["priorityClassName"] = priority_class
        cluster.create_pod(namespace, place.pin(pod))
    return names


def put_queues(cluster: Cluster, namespace: str, text: str, name: str = "queues") -> None:
    """Create or replace the queues ConfigMap, as `kubectl apply` of an edited file does."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"queues.yaml": text}}
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        cluster.client.patch(f"{path}/{name}", {"data": body["data"]})
    except NotFound:
        cluster.client.create(path, body)


def events_for(cluster: Cluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    """Events of a reason as `kubectl get events` shows them through the generated kubeconfig."""
    items = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json"))["items"]
    return [e for e in items if e["reason"] == reason]


def posted(
    cluster: Cluster,
    namespace: str,
    reason: str | tuple[str, ...],
    *,
    on: str = "",
    saying: Callable[[str], bool] = lambda _note: True,
    count: int = 1,
    timeout_s: float = DEFAULT_WAIT_S,
) -> list[dict[str, Any]]:
    """The events of a reason (or of any of several), on objects whose names begin with `on` and whose
    notes say what `saying` looks for, once `count` of them are there. yuniplace posts an event after the
    writes it tells of, so what a test sees of those writes (a gang's pods evicted or bound, another gang
    running on the room the first evictions freed) can come before it: a test waits for the event
    rather than reading the events once."""
    reasons = (reason,) if isinstance(reason, str) else reason

    def all_of_them() -> list[dict[str, Any]]:
        return [e for one in reasons for e in events_for(cluster, namespace, one)]

    def found() -> list[dict[str, Any]] | None:
        events = [
            e for e in all_of_them() if e["involvedObject"]["name"].startswith(on) and saying(e.get("message", ""))
        ]
        return events if len(events) >= count else None

    try:
        return wait_until(found, timeout_s)  # type: ignore[no-any-return]
    except TimeoutError:
        notes = [e.get("message", "") for e in all_of_them()]
        raise AssertionError(
            f"not {count} {' or '.join(reasons)} event(s) on {on or 'any'}* saying what was looked for in "
            f"{namespace}: {notes}"
        ) from None


def is_succeeded(pod: Pod) -> bool:
    return pod.get("status", {}).get("phase") == "Succeeded"


def is_failed(pod: Pod) -> bool:
    return pod.get("status", {}).get("phase") == "Failed"


def is_failed_and_ungated(pod: Pod) -> bool:
    """A held pod yuniplace failed, as it ends: its phase is written first and its gate removed after,
    so a wait for the phase alone may see the gate still there."""
    return is_failed(pod) and not pod["spec"].get("schedulingGates")


def gang_as_job(
    cluster: Cluster,
    namespace: str,
    place: Placement,
    app: str,
    members: int,
    annotations: Mapping[str, str] | None = None,
    *,
    cpu: str = "1",
    memory: str = "256Mi",
) -> None:
    """A Job of `members` pods of `cpu` and `memory` that run until ended, gated as the webhook gates
    them; evictions do not count against its backoffLimit (the podFailurePolicy the README recommends).
    `annotations`: more on its pods (an ai-scheduler pool, a policy for lost members, say)."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": app},
        "spec": {
            "completions": members,
            "parallelism": members,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": _gang_template(place, app, members, annotations, cpu=cpu, memory=memory),
        },
    }
    cluster.client.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)


def gang_as_replicaset(
    cluster: Cluster,
    namespace: str,
    place: Placement,
    app: str,
    members: int,
    annotations: Mapping[str, str] | None = None,
    *,
    cpu: str = "1",
    memory: str = "256Mi",
) -> None:
    """A ReplicaSet of `members` such pods: unlike a Job, which waits a backoff before it replaces a
    pod that failed, it makes a pod lost again at once."""
    template = _gang_template(place, app, members, annotations, cpu=cpu, memory=memory)
    template["spec"]["restartPolicy"] = "Always"
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": app},
        "spec": {
            "replicas": members,
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": template,
        },
    }
    cluster.client.create(f"/apis/apps/v1/namespaces/{namespace}/replicasets", replica_set)


def _gang_template(
    place: Placement, app: str, members: int, annotations: Mapping[str, str] | None, *, cpu: str, memory: str
) -> Pod:
    """The pod template of a gang of `members` in one task group, on the test's nodes; `annotations`
    on its pods besides the gang's."""
    groups = [place.group("workers", members, cpu=cpu, memory=memory)]
    pod = place.pin(gang_pod("unused", app, "workers", task_groups=groups, cpu=cpu, memory=memory))
    pod["metadata"]["annotations"].update({KEEPS_RUNNING_ANNOTATION: "never", **(annotations or {})})
    return {
        "metadata": {"labels": pod["metadata"]["labels"], "annotations": pod["metadata"]["annotations"]},
        "spec": pod["spec"],
    }


def finish(cluster: Cluster, namespace: str, name: str, phase: str = "Succeeded") -> None:
    """End a pod as its program would: kwok only completes Job pods on its own."""
    cluster.client.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": {"phase": phase}})


def make_unready(cluster: Cluster, namespace: str, name: str) -> None:
    """What a kubelet writes of a running pod whose readiness probe fails: Ready and ContainersReady
    False since now (kwok leaves a running pod's status alone)."""
    pod = cluster.get_pod(namespace, name)
    assert pod is not None, name
    unready = {"status": "False", "lastTransitionTime": format_time(time.time())}
    conditions = [
        {**c, **unready} if c["type"] in ("Ready", "ContainersReady") else c for c in pod["status"]["conditions"]
    ]
    cluster.client.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": {"conditions": conditions}})


def fill(cluster: Cluster, namespace: str, place: Placement, node: str, name: str, cpu: str = "1") -> None:
    """An ordinary pod bound straight to `node`, taking `cpu` of its room."""
    pod = place.pin(make_pod(name, cpu=cpu, memory="64Mi"))
    pod["spec"]["nodeName"] = node
    cluster.create_pod(namespace, pod)
    cluster.wait_pod(namespace, name, is_running)


def assert_on_held_room(recorder: NamespaceRecorder, pods: list[Pod]) -> None:
    """Every pod was held by yuniplace's gate, and ran where yuniplace held room of its size for it: its
    seat, or the node of the placeholder whose place it took."""
    recorder.wait_seen(pod["metadata"]["name"] for pod in pods)
    for pod in pods:
        name = pod["metadata"]["name"]
        assert keys.GATE in recorder.gates_seen[name], f"{name} was never gated"
        notes = pod["metadata"].get("annotations") or {}
        held = notes.get(keys.SEAT) or recorder.placeholder_node(notes[keys.SWAP_PLACEHOLDER])[1]
        assert pod["spec"]["nodeName"] == held, (name, pod["spec"]["nodeName"], held)


START_PATHS = {"direct": (), "placeholders": ("--placeholders=always",)}
"""The controller's arguments for each way a gang may start: directly on the nodes admission chose
(the default), or through placeholders first (YuniKorn's way)."""


def assert_started_whole(start: str, recorder: NamespaceRecorder, pods: list[Pod], group: str) -> None:
    """The gang's pods ran where their start path put them: on their seats, no placeholder ever made;
    or on nodes their group's placeholders held, one placeholder per pod."""
    if start == "direct":
        assert not recorder.placeholder_uids, sorted(recorder.placeholder_uids)
        seats = [(pod["metadata"].get("annotations") or {}).get(keys.SEAT) for pod in pods]
        assert seats == [pod["spec"]["nodeName"] for pod in pods], "a member ran off its seat"
    else:
        assert len(recorder.placeholder_uids) == len(pods), sorted(recorder.placeholder_uids)
        reserved = recorder.group_nodes(group)
        assert all(pod["spec"]["nodeName"] in reserved for pod in pods), "a member ran off the reserved nodes"


def members_landed(events: list[dict[str, Any]], reason: str = "PlaceholderSwapped") -> int:
    """How many members the task groups' landing events (one per task group, or per batch of it) say
    were bound."""
    counts = (
        re.match(r"task group \S+: (\d+) member\(s\) bound", e.get("message") or e.get("note") or "") for e in events
    )
    return sum(
        int(found[1]) for event, found in zip(events, counts, strict=True) if found and event["reason"] == reason
    )


def placeholders(cluster: Cluster, namespace: str) -> list[Pod]:
    return cluster.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{keys.PLACEHOLDER}=true")["items"]


POOL_LABEL = "e2e.yuniplace.io/pool"


@dataclass(frozen=True)
class Placement:
    """Where a test's pods may go: only the test's own nodes (a label to select, a taint to tolerate),
    so capacity assertions do not depend on what other tests left running."""

    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    nodes: list[str]

    def group(self, name: str, min_member: int, cpu: str, memory: str) -> dict[str, Any]:
        return builders.task_group(
            name,
            min_member,
            {"cpu": cpu, "memory": memory},
            nodeSelector=self.node_selector,
            tolerations=self.tolerations,
        )

    def pin(self, pod: Pod) -> Pod:
        pod["spec"]["nodeSelector"] = dict(self.node_selector)
        pod["spec"]["tolerations"] = list(self.tolerations)
        return pod
