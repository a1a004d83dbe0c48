"""A started gang that loses a member is reported (gang/losses.py): its node deleted, or the member
failed, brings a GangDegraded warning on the originator naming the member and why, `yuniplace status`
shows it Degraded and the yuniplace_degraded_applications gauge counts it; nothing is evicted (the
report is all yuniplace does yet). A replacement that runs brings it back: GangRecovered."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    Placement,
    events_for,
    finish,
    gang_job,
    gang_pod,
    is_running,
)
from tests.e2e.test_native_gangs import status
from yuniplace.localcluster import wait_until

WAIT_S = 60.0


def started_gang(cluster: Cluster, namespace: str, place: Placement, members: int) -> list[str]:
    """A gang of `members` × 3 CPUs on nodes of 4: one member per node."""
    names = gang_job(cluster, namespace, place, "train", members, cpu="3")
    for name in names:
        cluster.wait_pod(namespace, name, is_running, timeout_s=WAIT_S)
    return names


def degraded_event(cluster: Cluster, namespace: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        return next(iter(events_for(cluster, namespace, "GangDegraded")), None)

    return wait_until(found, WAIT_S)  # type: ignore[no-any-return]


def status_row(cluster: Cluster, namespace: str) -> dict[str, Any]:
    [row] = [row for row in status(cluster, "-n", namespace) if row["application"] == "train"]
    return row  # type: ignore[no-any-return]


def test_a_member_whose_node_is_deleted_makes_its_gang_degraded(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    record_property: Callable[[str, object], None],
) -> None:
    place = pool(3, cpu="4")
    names = started_gang(cluster, namespace, place, 3)
    lost = cluster.get_pod(namespace, names[1])
    assert lost is not None
    node = lost["spec"]["nodeName"]
    deleted_at = time.monotonic()
    cluster.client.delete(f"/api/v1/nodes/{node}")
    event = degraded_event(cluster, namespace)
    seen_after = time.monotonic() - deleted_at
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == names[0], event
    assert f"{names[1]} (its node {node} is gone)" in event["message"], event
    assert "2 of its minimum 3 members up, 1 short" in event["message"], event
    row = status_row(cluster, namespace)
    assert row["state"] == "Degraded", row
    wait_until(lambda: controller.metrics().get("yuniplace_degraded_applications") == 1.0, WAIT_S)
    for name in (names[0], names[2]):  # nothing of the gang is evicted: reporting is all it does
        pod = cluster.get_pod(namespace, name)
        assert pod is not None and is_running(pod), pod
    record_property("figure", f"node deleted: GangDegraded {seen_after:.1f} s later: {event['message']}")


def test_a_failed_member_makes_its_gang_degraded_until_a_replacement_runs(
    cluster: Cluster, namespace: str, controller: ControllerProcess, pool: Callable[..., Placement]
) -> None:
    place = pool(3, cpu="4")
    names = started_gang(cluster, namespace, place, 3)
    finish(cluster, namespace, names[1], "Failed")
    event = degraded_event(cluster, namespace)
    assert f"lost: {names[1]} failed" in event["message"], event
    groups = [place.group("workers", 3, cpu="3", memory="1Gi")]
    replacement = place.pin(gang_pod("train-3", "train", "workers", task_groups=groups, cpu="3", memory="1Gi"))
    cluster.create_pod(namespace, replacement)
    cluster.wait_pod(namespace, "train-3", is_running, timeout_s=WAIT_S)

    def recovered() -> str | None:
        return next((e["message"] for e in events_for(cluster, namespace, "GangRecovered")), None)

    note = wait_until(recovered, WAIT_S)
    assert "back at its minimum after" in note and "3 of 3 members up" in note, note
    assert status_row(cluster, namespace)["state"] == "Running"
