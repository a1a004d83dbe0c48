"""Kubernetes' own gangs (the Workload API, with its feature gates on) beside yuniplace's, on a cluster
of their own: kube-scheduler's gang plugin binds a native pod group all or nothing while yuniplace
reserves a YuniKorn-style gang in the same queue. Neither is gated or placeheld twice, the native gang
counts against the queue's max, and a pod naming a pod group that does not exist is told so and never
held. Each served shape of the API is written as that version reads it (1.35: a Workload and
spec.workloadRef; 1.36: a Workload, a PodGroup and spec.schedulingGroup; 1.37: a PodGroup)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import queues_yaml
from tests.e2e.conftest import kubernetes_version, skip_without_go
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    chart_installed,
    events_for,
    gang_pod,
    is_bound,
    make_pod,
    put_queues,
)
from tests.e2e.test_queues import configured, waiting
from yuniplace.controller.podgroups import served_native_version
from yuniplace.gang import keys
from yuniplace.kube import workloadapi
from yuniplace.localcluster import LocalCluster, NodePool, wait_until
from yuniplace.localcluster.components import Features

pytestmark = pytest.mark.every_version

QUEUE = {keys.YUNIKORN_QUEUE: "root.shared"}
WAIT_S = 60.0

Pod = dict[str, Any]


@pytest.fixture(scope="module")
def native_cluster() -> Iterator[Cluster]:
    """Two nodes of 8 CPU, with the Workload API and kube-scheduler's gang plugin switched on."""
    skip_without_go()
    version = kubernetes_version()
    local = LocalCluster(f"pytest-native-{os.getpid()}")
    try:
        local.up(
            [NodePool(count=2, cpu="8", memory="32Gi")], kubernetes=version, features=Features.workload_api(version)
        )
        yield Cluster(local)
    finally:
        local.down(quiet=True)


@pytest.fixture
def native_namespace(native_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = request.node.name.replace("_", "-")[:50].rstrip("-").lower()
    native_cluster.local.create_namespace(name)
    yield name
    native_cluster.client.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def native_controller(native_cluster: Cluster, native_namespace: str, tmp_path: Path) -> Iterator[ControllerProcess]:
    """yuniplace installed by its chart (its RBAC, its webhook, which the apiserver calls for the test's
    namespace) and run with the chart's ServiceAccount, managing every namespace with the test's queues."""
    queues = {
        "queues.configMap": "queues",
        "queues.configMapNamespace": native_namespace,
        "extraArgs[0]": f"--queues-configmap={native_namespace}/queues",
    }
    with chart_installed(native_cluster, native_namespace, tmp_path, queues) as controller:
        wait_until(lambda: "became leader" in controller.log_path.read_text(), WAIT_S)
        yield controller


def served(cluster: Cluster) -> workloadapi.ServedVersion:
    version = served_native_version(cluster.client)
    assert version is not None, "the cluster serves no version of the Workload API yuniplace reads"
    return version


def native_group(cluster: Cluster, namespace: str, name: str, min_count: int) -> Callable[[Pod], Pod]:
    """Create a native pod group of `min_count` as the cluster's version of the API has it (1.35: a
    Workload; 1.36: a Workload and a PodGroup; 1.37: a PodGroup); return what makes a pod its member."""
    version = served(cluster)
    for resource, body in workloadapi.manifests(version, name, min_count):
        cluster.client.create(f"{version.api}/namespaces/{namespace}/{resource}", body)

    def member(pod: Pod) -> Pod:
        pod["spec"].update(workloadapi.member_spec(version, name))
        return pod

    return member


def bound(cluster: Cluster, namespace: str, names: list[str]) -> list[Pod]:
    def all_bound() -> list[Pod] | None:
        pods = [cluster.get_pod(namespace, n) for n in names]
        return pods if all(pod is not None and is_bound(pod) for pod in pods) else None  # type: ignore[return-value]

    try:
        return wait_until(all_bound, WAIT_S)  # type: ignore[no-any-return]
    except TimeoutError:
        states = {n: (cluster.get_pod(namespace, n) or {}).get("status", {}).get("phase") for n in names}
        raise AssertionError(f"not all of {names} bound within {WAIT_S}s: {states}") from None


def status(cluster: Cluster, *args: str) -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "yuniplace", "status", f"--kubeconfig={cluster.kubeconfig}", "-o", "json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


def test_a_native_gang_and_a_yunikorn_gang_share_a_queue_each_started_whole_once(
    native_cluster: Cluster,
    native_namespace: str,
    native_controller: ControllerProcess,
    record_property: Callable[[str, object], None],
) -> None:
    """Queue root.shared may hold 8 CPUs; yuniplace runs as its chart installs it (RBAC, webhook). A
    native pod group of 4 × 1 CPU, whose pods also carry YuniKorn's annotations, starts whole through
    kube-scheduler's gang plugin, never gated nor placeheld; a YuniKorn gang of 4 × 1 CPU in the same
    queue is gated by the webhook and started by yuniplace (directly, on the seats admission gave it:
    all its pods exist and fit). A third gang of 2 then waits for the queue's max,
    which the native gang counts against although the cluster has 8 CPUs free, and starts once the
    native gang is gone."""
    cluster, namespace = native_cluster, native_namespace
    put_queues(cluster, namespace, queues_yaml("- name: shared\n  resources:\n    max: {vcore: 8}"))
    configured(cluster, namespace, "QueuesApplied")
    with NamespaceRecorder(cluster.client, namespace) as recorder:
        member = native_group(cluster, namespace, "trainer", 4)
        trainers = [f"trainer-{i}" for i in range(4)]
        groups = [{"name": "workers", "minMember": 4, "minResource": {"cpu": "1", "memory": "1Gi"}}]
        for name in trainers:
            # YuniKorn's annotations too, as a team moving over might leave them: the webhook is called for
            # such a pod, and must neither gate it nor let yuniplace reserve it a second time.
            pod = member(gang_pod(name, "trainer", "workers", task_groups=groups, cpu="1", memory="1Gi", gated=False))
            pod["metadata"]["labels"].update(QUEUE)
            cluster.create_pod(namespace, pod)
        bound(cluster, namespace, trainers)

        spark = [f"spark-{i}" for i in range(4)]
        for name in spark:  # created ungated: the chart's webhook gates them
            pod = gang_pod(name, "spark", "workers", task_groups=groups, cpu="1", memory="1Gi", gated=False)
            pod["metadata"]["labels"].update(QUEUE)
            cluster.create_pod(namespace, pod)
        bound(cluster, namespace, spark)

        late_groups = [{"name": "workers", "minMember": 2, "minResource": {"cpu": "1", "memory": "1Gi"}}]
        for name in ("late-0", "late-1"):
            pod = gang_pod(name, "late", "workers", task_groups=late_groups, cpu="1", memory="1Gi", gated=False)
            pod["metadata"]["labels"].update(QUEUE)
            cluster.create_pod(namespace, pod)
        note = waiting(cluster, namespace, "late", "root.shared")
        rows = {row["application"]: row for row in status(cluster, "-n", namespace)}
        native_row = rows[workloadapi.app_id(served(cluster), "trainer")]
        assert native_row["state"] == "Running", native_row
        assert native_row["groups"] == [{"name": "members", "reserved": 4, "required": 4}], native_row
        native_events = [e["message"] for e in events_for(cluster, namespace, "NativeGang")]
        assert any("trainer" in m and "queue root.shared" in m for m in native_events), native_events

        for name in trainers:
            cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0})
        bound(cluster, namespace, ["late-0", "late-1"])

        gated = {name: sorted(recorder.gates_seen[name]) for name in trainers if recorder.gates_seen[name]}
        spark_gates = {name: sorted(recorder.gates_seen[name]) for name in spark}
        native_placeholders = recorder.placeholders_of(workloadapi.app_id(served(cluster), "trainer"))
        native_placeholders.update(recorder.placeholders_of("trainer"))
        spark_placeholders = recorder.placeholders_of("spark")
        spark_seats = {
            name: (recorder.latest[name]["metadata"].get("annotations") or {}).get(keys.SEAT) for name in spark
        }
        spark_nodes = {name: recorder.latest[name]["spec"].get("nodeName") for name in spark}
    assert not gated, f"native pods were gated: {gated}"
    assert all(gates == [keys.GATE] for gates in spark_gates.values()), spark_gates  # once, by the webhook
    assert not native_placeholders, f"placeholders for the native gang: {native_placeholders}"
    # The YuniKorn gang started on its seats, with no placeholder.
    assert not spark_placeholders and spark_seats == spark_nodes, (spark_placeholders, spark_seats, spark_nodes)
    figure = (
        f"Kubernetes {kubernetes_version()}: native gang of 4 started whole by kube-scheduler (never gated, no "
        f"placeholder); YuniKorn gang of 4 started by yuniplace on its 4 seats; the late gang waited: {note}"
    )
    record_property("figure", figure)
    print(f"\n{figure}")


def test_a_pod_naming_a_missing_native_group_is_told_and_never_held(
    native_cluster: Cluster, native_namespace: str, native_controller: ControllerProcess
) -> None:
    """A pod of a native pod group nobody created: kube-scheduler keeps it unschedulable until the group
    exists; yuniplace says so on the pod and never gates it. Once the group is created, it starts."""
    cluster, namespace = native_cluster, native_namespace
    version = kubernetes_version()
    pod = make_pod("orphan", cpu="1", memory="1Gi")
    pod["spec"].update(workloadapi.member_spec(served(cluster), "nowhere"))
    cluster.create_pod(namespace, pod)

    def told() -> str | None:
        messages = [e["message"] for e in events_for(cluster, namespace, "TaskGroupsError")]
        return next((m for m in messages if "nowhere" in m and "no pod group" in m), None)

    message = wait_until(told, WAIT_S)
    current = cluster.get_pod(namespace, "orphan")
    assert current is not None and not current["spec"].get("schedulingGates"), current
    assert not is_bound(current)
    native_group(cluster, namespace, "nowhere", 1)
    bound(cluster, namespace, ["orphan"])
    print(f"\nKubernetes {version}: {message}")
