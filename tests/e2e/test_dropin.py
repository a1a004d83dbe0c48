"""Where yuniplace used to differ from YuniKorn silently, on the real control plane: pods naming no task
group wait for their gang, placeholders carry YuniKorn's marks, a pod for a scheduler that does not run
is told so, and a pod failed by a Hard timeout shows Failed, not SchedulingGated."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    events_for,
    gang_pod,
    is_failed_and_ungated,
    is_running,
    placeholders,
)
from yuniplace.gang import keys
from yuniplace.localcluster import wait_until


def test_pods_naming_no_task_group_wait_for_the_gang(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
) -> None:
    """A driver that carries the task groups but names none of them, and a pod of the application that
    names none either: both stay gated while the gang is reserving, and start once it is reserved."""
    place = pool(1, cpu="2", memory="8Gi")
    groups = [place.group("executors", 3, cpu="1", memory="1Gi")]
    policy = "placeholderTimeoutInSeconds=600"
    cluster.create_pod(
        namespace, place.pin(gang_pod("driver", "app", None, task_groups=groups, policy=policy, cpu="100m"))
    )
    cluster.create_pod(namespace, place.pin(gang_pod("sidecar-job", "app", None, cpu="100m")))
    for i in range(3):
        cluster.create_pod(namespace, place.pin(gang_pod(f"exec-{i}", "app", "executors", cpu="1", memory="1Gi")))
    wait_until(
        lambda: len(recorder.placeholder_nodes) == 2 and len(recorder.placeholder_uids) == 3, 30
    )  # 2 of 3 placed
    for name in ("driver", "sidecar-job"):
        pod = cluster.get_pod(namespace, name)
        assert pod is not None and pod["spec"].get("schedulingGates") == [{"name": keys.GATE}], f"{name} started early"
    pool(2, cpu="2", memory="8Gi")  # room for the whole gang
    for name in ("driver", "sidecar-job", "exec-0", "exec-1", "exec-2"):
        cluster.wait_pod(namespace, name, is_running)
    with recorder._lock:
        bound = [n for n in ("driver", "sidecar-job") if recorder.latest[n]["spec"].get("nodeName")]
    assert bound == ["driver", "sidecar-job"]
    wait_until(lambda: not placeholders(cluster, namespace), 30)


def test_placeholders_carry_yunikorns_marks(
    cluster: Cluster, namespace: str, controller: ControllerProcess, pool: Callable[..., Placement]
) -> None:
    place = pool(1, cpu="4", memory="8Gi")
    groups = [place.group("workers", 2, cpu="1", memory="1Gi")]
    cluster.create_pod(
        namespace,
        place.pin(
            gang_pod(
                "w-0",
                "marked",
                "workers",
                task_groups=groups,
                policy="placeholderTimeoutInSeconds=600",
                cpu="1",
                memory="1Gi",
            )
        ),
    )
    # Of two placeholders, one is swapped for the only member created: the other stays until the timeout.
    found = wait_until(
        lambda: json.loads(
            cluster.kubectl("get", "pods", "-n", namespace, "-l", "yunikorn.apache.org/app-id=marked", "-o", "json")
        )["items"],
        30,
    )
    for pod in found:
        notes = pod["metadata"]["annotations"]
        assert notes["internal.yunikorn.apache.org/placeholder"] == "true"
        assert notes[keys.TASK_GROUP_NAME] == "workers"
        assert pod["metadata"]["labels"]["yunikorn.apache.org/queue"] == namespace


def test_a_gang_pod_for_a_scheduler_that_does_not_run_is_told_what_to_change(
    cluster: Cluster, namespace: str, controller: ControllerProcess, record_property: Callable[[str, object], None]
) -> None:
    """No webhook rewrites it here: the pod names YuniKorn's scheduler, which does not run."""
    pod = gang_pod(
        "driver",
        "spark-docs",
        "driver",
        gated=False,
        task_groups=[{"name": "driver", "minMember": 1, "minResource": {"cpu": "100m", "memory": "128Mi"}}],
    )
    pod["spec"]["schedulerName"] = "yunikorn"
    cluster.create_pod(namespace, pod)
    [event] = wait_until(lambda: events_for(cluster, namespace, "SchedulerNotRunning"), 60)
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "driver"
    assert "'yunikorn'" in event["message"] and "webhook.rewriteSchedulerName" in event["message"]
    status = subprocess.run(
        [sys.executable, "-m", "yuniplace", "status", f"--kubeconfig={cluster.kubeconfig}", "-n", namespace],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert "spark-docs" in status and "Unscheduled" in status, status
    record_property("figure", f"SchedulerNotRunning: {event['message']}\n{status}")


def test_a_pod_failed_by_a_hard_timeout_shows_failed_not_gated(
    cluster: Cluster, namespace: str, controller: ControllerProcess, pool: Callable[..., Placement]
) -> None:
    place = pool(1, cpu="2", memory="8Gi")
    groups = [place.group("workers", 3, cpu="1", memory="1Gi")]  # 2 of 3 fit
    policy = "placeholderTimeoutInSeconds=5 gangSchedulingStyle=Hard"
    names = [f"w-{i}" for i in range(3)]
    for i, name in enumerate(names):
        cluster.create_pod(
            namespace,
            place.pin(
                gang_pod(
                    name,
                    "hard",
                    "workers",
                    task_groups=groups if i == 0 else None,
                    policy=policy,
                    cpu="1",
                    memory="1Gi",
                )
            ),
        )

    for name in names:
        cluster.wait_pod(namespace, name, is_failed_and_ungated, timeout_s=60)
    shown = cluster.kubectl("get", "pods", "-n", namespace, "--no-headers")
    assert "SchedulingGated" not in shown and "ResourceReservationTimeout" in shown, shown
    assert not any(is_running(cluster.get_pod(namespace, n) or {}) for n in names)
