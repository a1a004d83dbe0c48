"""Topology domains on the real control plane: racks of kwok nodes labelled as a cloud provider labels
them, and gangs that require or prefer one rack. Admission chooses the rack before any placeholder
exists; the placeholders and the members are kept in it by kube-scheduler itself. Outcomes (which
nodes, which rack, which gangs were evicted) are asserted, never times."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tests import builders
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    Placement,
    fill,
    gang_pod,
    is_running,
    make_pod,
    posted,
    put_queues,
)
from tests.e2e.test_queues import app_pods, configured, running, waiting
from yuniplace.gang import keys
from yuniplace.gang.topology import KUEUE_REQUIRED, read_domains
from yuniplace.localcluster import wait_until

RACK = "topology.k8s.aws/network-node-layer-3"
BLOCK = "topology.k8s.aws/network-node-layer-2"
WAIT_S = 60.0

Pod = dict[str, Any]
Racks = dict[str, list[str]]  # rack -> its nodes


def racks(pool: Callable[..., Placement], count: int, *, nodes: int = 2, cpu: str = "2") -> tuple[Placement, Racks]:
    """`count` racks r0, r1, ... of `nodes` nodes of `cpu` CPUs, all in one block, as AWS labels its
    instances; the placement selects every node of the test."""
    made = {}
    place = None
    for index in range(count):
        place = pool(nodes, cpu=cpu, memory="16Gi", labels={RACK: f"r{index}", BLOCK: "b0"})
        made[f"r{index}"] = place.nodes
    assert place is not None
    return place, made


def rack_of(nodes: Racks, node: str) -> str:
    return next(rack for rack, names in nodes.items() if node in names)


def gang(
    cluster: Cluster,
    namespace: str,
    place: Placement,
    app: str,
    members: int,
    *,
    annotations: Mapping[str, str],
    node_selector: Mapping[str, str] | None = None,
) -> list[str]:
    """A gang of `members` bare pods of 1 CPU on the test's nodes, each carrying the task groups and the
    `annotations` (as a Job's pod template does); `node_selector` adds to the test's."""
    group = place.group("workers", members, cpu="1", memory="256Mi")
    group["nodeSelector"] = {**group["nodeSelector"], **(node_selector or {})}
    names = [f"{app}-{index}" for index in range(members)]
    for name in names:
        pod = place.pin(gang_pod(name, app, "workers", task_groups=[group], cpu="1", memory="256Mi"))
        pod["spec"]["nodeSelector"].update(node_selector or {})
        pod["metadata"]["annotations"].update(annotations)
        cluster.create_pod(namespace, pod)
    return names


def bound_racks(cluster: Cluster, namespace: str, app: str, members: int, nodes: Racks) -> list[str]:
    """Wait until the gang's members run; the rack of each."""
    pods = running(cluster, namespace, app, members)
    return [rack_of(nodes, pod["spec"]["nodeName"]) for pod in pods]


def recorded(cluster: Cluster, namespace: str, name: str) -> str:
    """The domains recorded on the originator, as `yuniplace status` shows them."""
    pod = cluster.get_pod(namespace, name)
    assert pod is not None
    return str(read_domains(pod["metadata"]["annotations"].get(keys.TOPOLOGY_DOMAIN)))


def required_rack() -> dict[str, str]:
    return {keys.TOPOLOGY: f"required={RACK}"}


@pytest.mark.every_version
def test_a_gang_that_requires_a_rack_lands_wholly_in_the_one_rack_that_holds_it(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], controller: ControllerProcess
) -> None:
    """Three racks of 4 CPUs; ordinary pods take 1 CPU in r0 and 1 in r1, so 10 CPUs are free, spread.
    A gang of 4 that requires a rack goes to r2, the only rack that holds it, placeholders and members
    alike (kube-scheduler alone would spread its pods over the emptiest nodes of every rack), whether it
    reserves with placeholders or starts directly on the nodes admission chose."""
    place, nodes = racks(pool, 3)
    fill(cluster, namespace, place, nodes["r0"][0], "busy-0")
    fill(cluster, namespace, place, nodes["r1"][1], "busy-1")
    gang(cluster, namespace, place, "train", 4, annotations=required_rack())
    assert bound_racks(cluster, namespace, "train", 4, nodes) == ["r2"] * 4
    assert recorded(cluster, namespace, "train-0") == f"{RACK}=r2"

    # Whether it reserved with placeholders or, every member there, started directly: in that rack.
    # A GangStarting is posted after the gates it lifts: it may trail the members' run.
    said = [e["message"] for e in posted(cluster, namespace, ("CreatingPlaceholders", "GangStarting"))]
    assert len(said) == 1 and f"in {RACK}=r2" in said[0], said
    placed = controller.metrics()
    assert placed[f'yuniplace_topology_gangs_placed_total{{level="{RACK}",placement="single"}}'] == 1


@pytest.mark.every_version
def test_a_gang_no_rack_holds_waits_saying_so_and_starts_when_a_rack_frees(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], controller: ControllerProcess
) -> None:
    """Two racks of 4 CPUs with 1 taken in each: 6 CPUs are free, but no rack holds a gang of 4. It waits
    with a GangWaiting event that says how much the largest rack holds, and once r1's pod ends it starts
    whole in r1."""
    place, nodes = racks(pool, 2)
    fill(cluster, namespace, place, nodes["r0"][0], "busy-0")
    fill(cluster, namespace, place, nodes["r1"][0], "busy-1")
    gang(cluster, namespace, place, "train", 4, annotations=required_rack())
    note = waiting(cluster, namespace, "train", f"needs 4 × (cpu 1, memory 256Mi) in one domain ({RACK})")
    assert "the largest free domain holds 3" in note, note
    assert not [p for p in app_pods(cluster, namespace, "train") if p["spec"].get("nodeName")]
    cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/busy-1", {"gracePeriodSeconds": 0})
    assert bound_racks(cluster, namespace, "train", 4, nodes) == ["r1"] * 4


def test_a_gang_that_prefers_a_rack_spreads_only_when_no_rack_holds_it(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], controller: ControllerProcess
) -> None:
    """Two racks of 4 CPUs. A gang of 3 that prefers a rack is kept in one (kube-scheduler alone spreads
    3 pods over the emptiest nodes of both); then a gang of 5 that prefers a rack fits in no rack (1 and
    4 are free), and spreads over both rather than wait."""
    place, nodes = racks(pool, 2)
    preferred = {keys.TOPOLOGY: f"preferred={RACK}"}
    gang(cluster, namespace, place, "small", 3, annotations=preferred)
    assert len(set(bound_racks(cluster, namespace, "small", 3, nodes))) == 1
    gang(cluster, namespace, place, "large", 5, annotations=preferred)
    assert sorted(set(bound_racks(cluster, namespace, "large", 5, nodes))) == ["r0", "r1"]
    assert recorded(cluster, namespace, "large-0") == f"{RACK}=r0,r1"


def test_kueues_annotation_is_honoured_as_kueue_users_write_it(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], controller: ControllerProcess
) -> None:
    """A Coscheduling gang whose pods carry Kueue's `podset-required-topology`, unchanged: it lands wholly
    in the one rack that holds it, as the same gang under Kueue's topology-aware scheduling would."""
    place, nodes = racks(pool, 3)
    fill(cluster, namespace, place, nodes["r0"][0], "busy-0")
    fill(cluster, namespace, place, nodes["r2"][1], "busy-2")
    for index in range(4):
        pod = make_pod(
            f"mpi-{index}",
            cpu="1",
            memory="256Mi",
            gates=[keys.GATE],
            labels={
                "pod-group.scheduling.sigs.k8s.io/name": "mpi",
                "pod-group.scheduling.sigs.k8s.io/min-available": "4",
            },
            annotations={KUEUE_REQUIRED: RACK},
        )
        cluster.create_pod(namespace, place.pin(pod))

    def all_running() -> list[Pod] | None:
        pods = [pod for index in range(4) if (pod := cluster.get_pod(namespace, f"mpi-{index}")) is not None]
        return pods if len(pods) == 4 and all(is_running(pod) for pod in pods) else None

    pods: list[Pod] = wait_until(all_running, WAIT_S)
    assert {rack_of(nodes, pod["spec"]["nodeName"]) for pod in pods} == {"r1"}


@pytest.mark.every_version
def test_reclaim_for_a_gang_that_requires_a_rack_frees_one_rack_not_scattered_nodes(
    cluster: Cluster,
    namespace: str,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
) -> None:
    """Team B is guaranteed all 8 CPUs of two racks; team A, guaranteed nothing, borrows them: gangs g1
    and g3 in r0, g2 in r1 beside an ordinary pod of 2 CPUs. B's gang of 4 requires a rack. Taking back
    the newest borrower first would evict g3, g2 and g1 (no rack holds 4 until all three went); freeing
    one rack evicts g3 and g1 from r0 only. g2 keeps running, and B's gang starts wholly in r0."""
    a, b = tenant("a"), tenant("b")
    put_queues(
        cluster,
        namespace,
        builders.queues_yaml(
            f"- name: {a}",
            f"- name: {b}\n  resources:\n    guaranteed: {{vcore: 8}}",
            rules="- name: tag\n  value: namespace",
        ),
    )
    cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    place, nodes = racks(pool, 2)
    fill(cluster, a, place, nodes["r1"][1], "ordinary", cpu="2")
    for app, rack in (("g1", "r0"), ("g2", "r1"), ("g3", "r0")):
        gang(cluster, a, place, app, 2, annotations={}, node_selector={RACK: rack})
        running(cluster, a, app, 2)
    kept = {pod["metadata"]["uid"] for pod in running(cluster, a, "g2", 2)}

    gang(cluster, b, place, "b-job", 4, annotations=required_rack())
    note = waiting(cluster, b, "b-job", f"taking back room its queue root.{b} lent to root.{a}")
    assert "2 gang(s)" in note, note
    assert bound_racks(cluster, b, "b-job", 4, nodes) == ["r0"] * 4
    preempted = {e["involvedObject"]["name"].rpartition("-")[0] for e in posted(cluster, a, "GangPreempted", count=2)}
    assert preempted == {"g1", "g3"}, preempted
    assert {pod["metadata"]["uid"] for pod in running(cluster, a, "g2", 2)} == kept
