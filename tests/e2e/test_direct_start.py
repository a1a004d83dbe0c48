"""The direct start end to end: a gang whose pods all exist and which fits now starts on the nodes
admission chose, with no placeholder; its room holds against a flood of ordinary pods; and
placeholders are still made where they are needed (members yet to come, a gang that must grow, or
`--placeholders=always`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    events_for,
    gang_job,
    gang_pod,
    is_bound,
    is_running,
    placeholders,
    posted,
)
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.localcluster import wait_until

# CI runs these on every supported Kubernetes version, not only the default.
pytestmark = pytest.mark.every_version


def seat_of(cluster: Cluster, namespace: str, name: str) -> tuple[str | None, str | None]:
    """The seat admission gave the pod, and the node it is bound to."""
    pod = cluster.get_pod(namespace, name)
    assert pod is not None, name
    return (pod["metadata"].get("annotations") or {}).get(keys.SEAT), pod["spec"].get("nodeName")


def started_on_seats(cluster: Cluster, namespace: str, recorder: NamespaceRecorder, place: Placement) -> None:
    """A Job's gang of 8 that fits now runs, every member on the seat admission gave it, no placeholder
    made."""
    names = gang_job(cluster, namespace, place, "trainer", 8)
    for name in names:
        cluster.wait_pod(namespace, name, is_running)
    assert not recorder.placeholder_uids, f"placeholders were created: {sorted(recorder.placeholder_uids)}"
    seats = [seat_of(cluster, namespace, name) for name in names]
    assert all(seat is not None and seat == node for seat, node in seats), seats


def waiting_pods(cluster: Cluster) -> list[str]:
    """The pods of the cluster waiting to be scheduled (pending, ungated, on no node), by name."""
    pods = cluster.client.get("/api/v1/pods", fieldSelector="spec.nodeName=,status.phase=Pending")
    return [pod["metadata"]["name"] for pod in pods["items"] if not pod["spec"].get("schedulingGates")]


def other_applications_pods(cluster: Cluster, namespace: str) -> list[str]:
    """The pods of applications outside `namespace` (an earlier test's, its namespace being deleted), by name."""
    pods = cluster.client.get("/api/v1/pods")["items"]
    return [
        f"{p.namespace(pod)}/{p.name(pod)}"
        for pod in pods
        if p.app_key(pod) is not None and p.namespace(pod) != namespace
    ]


def pod_writes(controller: ControllerProcess) -> float:
    return sum(
        value
        for key, value in controller.metrics().items()
        if key.startswith("yuniplace_api_requests_total{")
        and any(f'resource="{resource}"' in key for resource in ("pods", "pods/status"))
        and any(f'verb="{verb}"' in key for verb in ("post", "patch", "delete"))
    )


def test_a_gang_whose_pods_all_exist_starts_on_the_nodes_admission_chose(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
) -> None:
    started_on_seats(cluster, namespace, recorder, pool(3, cpu="4", memory="16Gi"))
    [starting] = posted(cluster, namespace, "GangStarting")  # posted once the gates are off: may trail the run
    assert "all 8 pods exist and the whole gang fits now" in starting["message"], starting
    [started] = wait_until(lambda: events_for(cluster, namespace, "GangStarted"), 30)
    assert "task group workers: 8 member(s) bound" in started["message"], started
    assert "8 on the nodes admission chose" in started["message"], started
    assert controller.metrics().get('yuniplace_gang_starts_total{path="direct"}') == 1
    writes = pod_writes(controller)
    print(f"\ndirect start: {writes:.0f} pod writes for 8 members")
    # Per member: its nomination (with its seat) and the release of its gate, since a controller of one
    # namespace cannot know that no other pod waits; the originator's record twice (Reserved as it
    # starts, Running once it runs).
    assert writes <= 2 * 8 + 2, writes


def test_a_controller_that_sees_every_pod_starts_a_gang_nobody_else_waits_for_with_one_write_a_member(
    cluster: Cluster,
    namespace: str,
    cluster_wide: Callable[..., ControllerProcess],
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
) -> None:
    """With no pod of another application waiting to be scheduled, no seat needs a nomination to hold
    it: each member is released onto its seat (recorded with it) in one write, once the controller's
    watch has brought the gang's record back and no pod stored before it took a seat."""
    wait_until(lambda: not any(waiting_pods(cluster)), 60)
    # Nor any other application left: the controller sees every pod, and its writes for an earlier test's
    # gang (its nodes gone with that test, say) would be counted here.
    wait_until(lambda: not other_applications_pods(cluster, namespace), 120)
    controller = cluster_wide()
    started_on_seats(cluster, namespace, recorder, pool(3, cpu="4", memory="16Gi"))
    posted(cluster, namespace, "GangStarted")
    nominations = sum(
        value
        for key, value in controller.metrics().items()
        if key.startswith("yuniplace_api_requests_total{") and 'resource="pods/status"' in key and 'verb="patch"' in key
    )
    assert nominations == 0, f"{nominations} nominations though nothing else waited"
    writes = pod_writes(controller)
    print(f"\ndirect start, nothing else waiting: {writes:.0f} pod writes for 8 members")
    # Per member the release of its gate (with its seat); the originator's record twice.
    assert writes <= 8 + 2, writes


def test_with_placeholders_always_the_same_gang_reserves_first(
    cluster: Cluster,
    namespace: str,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    tmp_path: Path,
) -> None:
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, "--placeholders=always")
    process.start()
    try:
        place = pool(3, cpu="4", memory="16Gi")
        names = gang_job(cluster, namespace, place, "trainer", 8)
        for name in names:
            cluster.wait_pod(namespace, name, is_running)
        assert len(recorder.placeholder_uids) == 8, sorted(recorder.placeholder_uids)
        assert all(seat_of(cluster, namespace, name)[0] is None for name in names)
        assert not events_for(cluster, namespace, "GangStarting")
        assert process.metrics().get('yuniplace_gang_starts_total{path="placeholders"}') == 1
    finally:
        assert process.stop() == 0, process.log()


def test_a_gang_started_directly_holds_its_room_against_a_flood(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    record_property: Callable[[str, object], None],
) -> None:
    """12 of 20 CPUs go to a gang started directly; a flood of 60 ordinary pods of the same priority,
    created as its members are nominated and released, competes for them: every member must land on
    its seat (a seat lost to the flood would leave its member nowhere to go, and the gang started in
    part), and the flood gets exactly the 8 CPUs the gang did not take."""
    place = pool(5, cpu="4", memory="16Gi")
    names = gang_job(cluster, namespace, place, "trainer", 12, memory="256Mi")
    wait_until(lambda: events_for(cluster, namespace, "GangStarting"), 30)
    flood = [f"flood-{i}" for i in range(60)]
    for name in flood:
        cluster.create_pod(namespace, place.pin(gang_pod(name, name, None, gated=False, cpu="1", memory="256Mi")))
    for name in names:
        cluster.wait_pod(namespace, name, is_bound)
    seats = [seat_of(cluster, namespace, name) for name in names]
    landed = sum(1 for seat, node in seats if seat is not None and seat == node)
    version = cluster.client.get("/version")["gitVersion"]
    figure = (
        f"Kubernetes {version}: {len(names)} members started directly under a flood of 60 pods, {landed} on their seat"
    )
    record_property("figure", figure)
    print(f"\n{figure}")
    assert landed == len(names), seats

    def flood_bound() -> int:
        return sum(1 for n in flood if is_bound(recorder.latest.get(n, {})))

    wait_until(lambda: flood_bound() == 8, 30)
    assert not recorder.placeholder_uids


def test_a_gang_larger_than_its_nodes_reserves_with_placeholders(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
) -> None:
    """The reservation must grow as nodes are added: its placeholders are what a cluster autoscaler
    sees. Its members stay gated, with no seat."""
    place = pool(2, cpu="2", memory="16Gi")
    names = gang_job(cluster, namespace, place, "big", 6)
    wait_until(lambda: len(placeholders(cluster, namespace)) == 6, 30)
    posted(cluster, namespace, "GangExceedsCapacity")  # posted after the placeholders are made
    assert all(seat_of(cluster, namespace, name) == (None, None) for name in names)
    assert not events_for(cluster, namespace, "GangStarting")
