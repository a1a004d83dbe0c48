"""Running yuniplace as operators do: two replicas under leader election, and the metrics a
dashboard reads."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    gang_pod,
    is_running,
    placeholders,
)
from yuniplace.localcluster import wait_until

LEASE_DURATION_S = 6


def lease_holder(cluster: Cluster, namespace: str) -> str | None:
    try:
        lease = cluster.client.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/yuniplace-controller")
    except Exception:  # noqa: BLE001 - not created yet
        return None
    return lease["spec"].get("holderIdentity") or None


def test_standby_takes_over_a_killed_leader_and_finishes_its_reservation(
    cluster: Cluster,
    namespace: str,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    election = (
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        f"--lease-duration={LEASE_DURATION_S}",
        "--renew-deadline=4",
        "--retry-period=1",
    )
    replicas = {
        name: ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, *election, name=name)
        for name in ("replica-a", "replica-b")
    }
    try:
        for replica in replicas.values():
            replica.start()  # both become ready (their stores sync); one leads
        leader_name = wait_until(lambda: lease_holder(cluster, namespace), 30)
        leader = replicas[leader_name]
        standby = next(r for n, r in replicas.items() if n != leader_name)

        # An in-flight reservation: 6 placeholders, room for 3 of them.
        place = pool(1, cpu="3", memory="12Gi")
        groups = [place.group("workers", 6, cpu="1", memory="1Gi")]
        for i in range(6):
            cluster.create_pod(
                namespace,
                place.pin(
                    gang_pod(
                        f"w-{i}",
                        "ha",
                        "workers",
                        task_groups=groups if i == 0 else None,
                        policy="placeholderTimeoutInSeconds=300",
                        cpu="1",
                        memory="1Gi",
                    )
                ),
            )
        wait_until(lambda: len(recorder.placeholder_uids) == 6 and len(recorder.placeholder_nodes) == 3, 30)

        leader.kill()
        killed_at = time.monotonic()
        wait_until(lambda: lease_holder(cluster, namespace) == standby.name, LEASE_DURATION_S + 10)
        takeover_s = time.monotonic() - killed_at
        record_property("takeover_s", round(takeover_s, 1))
        print(
            f"\nleader election: {standby.name} took over {takeover_s:.1f}s after {leader.name} was killed "
            f"(lease duration {LEASE_DURATION_S}s)"
        )

        pool(1, cpu="3", memory="12Gi")  # room for the rest: the new leader must finish the swap
        for i in range(6):
            cluster.wait_pod(namespace, f"w-{i}", is_running)
        assert len(recorder.placeholder_uids) == 6, "the new leader created placeholders again"
        wait_until(lambda: not placeholders(cluster, namespace), 30)
        assert "became leader" in standby.log()
    finally:
        for replica in replicas.values():
            replica.stop()
    assert lease_holder(cluster, namespace) is None, "a leader stopping with SIGTERM releases its lease"


def test_metrics_follow_a_gang_through_its_life(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
) -> None:
    def sample(name: str) -> float:
        return controller.metrics().get(name, 0.0)

    assert sample('yuniplace_applications{state="Reserving"}') == 0
    place = pool(1, cpu="2", memory="8Gi")
    groups = [place.group("workers", 4, cpu="1", memory="1Gi")]
    for i in range(4):
        cluster.create_pod(
            namespace,
            place.pin(
                gang_pod(f"m-{i}", "observed", "workers", task_groups=groups if i == 0 else None, cpu="1", memory="1Gi")
            ),
        )
    # Reserving: two placeholders placed, two pending.
    wait_until(
        lambda: (
            sample('yuniplace_placeholders{state="placed"}') == 2
            and sample('yuniplace_placeholders{state="pending"}') == 2
        ),
        30,
    )
    assert sample('yuniplace_applications{state="Reserving"}') == 1
    assert sample("yuniplace_placeholders_created_total") == 4

    # `yuniplace status` reads the same from the cluster, not from the controller.
    status = subprocess.run(
        [sys.executable, "-m", "yuniplace", "status", f"--kubeconfig={cluster.kubeconfig}", "-n", namespace],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    header, row = status.strip().splitlines()
    assert header.split()[:3] == ["NAMESPACE", "APPLICATION", "STATE"]
    assert row.split()[:5] == [namespace, "observed", "Reserving", "workers", "2/4"]
    assert row.split()[-1].endswith("s") and row.split()[-1] != "expired", "time left before the 900s timeout"

    pool(1, cpu="2", memory="8Gi")
    for i in range(4):
        cluster.wait_pod(namespace, f"m-{i}", is_running)
    wait_until(lambda: sample('yuniplace_applications{state="Running"}') == 1, 30)
    wait_until(lambda: sample('yuniplace_placeholders{state="placed"}') == 0, 30)
    metrics = controller.metrics()
    assert metrics['yuniplace_applications{state="Reserving"}'] == 0
    assert metrics['yuniplace_swaps_total{outcome="landed"}'] == 4
    assert metrics['yuniplace_placeholders_deleted_total{reason="swapped"}'] == 4
    assert metrics["yuniplace_reservation_duration_seconds_count"] == 1
    assert metrics["yuniplace_swap_duration_seconds_count"] == 4
    assert metrics['yuniplace_api_requests_total{code="201",resource="pods",verb="post"}'] == 4
    assert metrics['yuniplace_events_total{reason="GangReservationComplete",type="Normal"}'] == 1
