"""Kueue, the bench's peer, as the bench runs it: its manager built from its Go module, out of cluster on a
cluster of its own, its webhooks called on loopback. A pod group is held whole until its last pod
exists, then admitted against the ClusterQueue and bound by kube-scheduler."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import kubernetes_version, skip_without_go
from tests.e2e.support import Cluster, is_bound
from yuniplace.bench.kueue import KueueManager, kueue_gang, managed_namespace
from yuniplace.bench.subjects import delete_namespace
from yuniplace.kube import NotFound
from yuniplace.localcluster import LocalCluster, NodePool, wait_until
from yuniplace.localcluster import kueue as kq

WAIT_S = 60.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A cluster of its own: Kueue's webhooks and CRDs stay off the session's cluster."""
    skip_without_go()
    local = LocalCluster(f"pytest-kueue-{os.getpid()}")
    try:
        local.up([NodePool(count=2, cpu="8", memory="32Gi", pods=110)], kubernetes=kubernetes_version())
        yield Cluster(local)
    finally:
        local.down(quiet=True)


@pytest.fixture(scope="module")
def kueue(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KueueManager]:
    work = tmp_path_factory.mktemp("kueue")
    with KueueManager(cluster.local, kq.ensure_kueue(quiet=True), work, work / "kueue.log") as manager:
        yield manager


def _events(cluster: Cluster, namespace: str, reason: str) -> list[str]:
    items = cluster.client.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [event["message"] for event in items if event.get("reason") == reason]


def test_kueue_holds_a_pod_group_until_its_last_pod_and_then_starts_it_whole(
    cluster: Cluster, kueue: KueueManager
) -> None:
    namespace = "kueue-group"
    managed_namespace(cluster.local, namespace)
    try:
        first, second, last = kueue_gang("group", 3)
        for pod in (first, second):
            created = cluster.create_pod(namespace, pod)
            # Its admission gate (and its topology gate, TopologyAwareScheduling being on by default).
            assert kq.ADMISSION_GATE in [g["name"] for g in created["spec"]["schedulingGates"]]
        # Kueue has seen the group short of a pod (its warning says so) and made no Workload for it.
        wait_until(lambda: _events(cluster, namespace, "ErrWorkloadCompose"), WAIT_S)
        workloads = f"{kq.API}/namespaces/{namespace}/workloads"
        assert cluster.client.get(workloads)["items"] == []
        pods = [cluster.get_pod(namespace, p["metadata"]["name"]) for p in (first, second)]
        assert not any(pod is not None and is_bound(pod) for pod in pods)

        cluster.create_pod(namespace, last)

        def all_bound() -> bool:
            found = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
            return len(found) == 3 and all(is_bound(pod) for pod in found)

        wait_until(all_bound, WAIT_S)
        workload = cluster.client.get(f"{workloads}/group")
        assert kq.condition_true(workload, "Admitted")
        assert workload["status"]["admission"]["clusterQueue"] == kq.CLUSTER_QUEUE
        assert [podset["count"] for podset in workload["spec"]["podSets"]] == [3]
    finally:
        # Kueue takes its finalizers off the pods, so the namespace goes.
        delete_namespace(cluster.local, namespace, timeout_s=WAIT_S)
    with pytest.raises(NotFound):
        cluster.client.get(f"/api/v1/namespaces/{namespace}")
