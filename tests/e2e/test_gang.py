"""The reservation controller end to end: task groups -> placeholders -> timeout -> swap or Soft/Hard
fallback -> cleanup, each asserted on the real cluster's state."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.support import (
    START_PATHS,
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    assert_on_held_room,
    assert_started_whole,
    events_for,
    finish,
    gang_pod,
    is_bound,
    is_failed,
    is_running,
    is_unschedulable,
    members_landed,
    placeholders,
    posted,
)
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.localcluster import wait_until

# CI runs these on every supported Kubernetes version, not only the default.
pytestmark = pytest.mark.every_version

# Sizes a real Spark job asks for: spark.driver.memory=2g and spark.executor.memory=4g plus Spark's
# memory overhead (max(384Mi, 10%)), spark.executor.cores=2.
DRIVER = {"cpu": "1", "memory": "2432Mi"}
EXECUTOR = {"cpu": "2", "memory": "4505Mi"}


def landed_rate(cluster: Cluster, namespace: str, recorder: NamespaceRecorder, names: list[str]) -> float:
    """Share of the named pods bound to the node of the placeholder whose place they took (the pod
    names it in yuniplace.io/swap-placeholder; the recorder saw where that placeholder was)."""
    landed = 0
    for name in names:
        pod = cluster.get_pod(namespace, name)
        assert pod is not None and is_bound(pod), f"{name} is not bound"
        taken = (pod["metadata"].get("annotations") or {}).get(keys.SWAP_PLACEHOLDER)
        assert taken is not None, f"{name} did not take a placeholder's place"
        landed += pod["spec"]["nodeName"] == recorder.placeholder_node(taken)[1]
    return landed / len(names)


def wait_no_placeholders(cluster: Cluster, namespace: str, timeout_s: float = 60) -> None:
    try:
        wait_until(lambda: not placeholders(cluster, namespace), timeout_s)
    except TimeoutError:
        left = [p["metadata"]["name"] for p in placeholders(cluster, namespace)]
        raise AssertionError(f"placeholders left after {timeout_s}s: {left}") from None


def app_state(cluster: Cluster, namespace: str, originator: str) -> str | None:
    pod = cluster.get_pod(namespace, originator)
    return None if pod is None else (pod["metadata"].get("annotations") or {}).get(keys.STATE)


def test_spark_application_gang(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    record_property: Callable[[str, object], None],
) -> None:
    place = pool(4, cpu="8", memory="32Gi")
    groups = [place.group("spark-driver", 1, **DRIVER), place.group("spark-executor", 8, **EXECUTOR)]
    driver = gang_pod(
        "spark-pi-driver",
        "spark-pi",
        "spark-driver",
        task_groups=groups,
        policy="placeholderTimeoutInSeconds=120",
        **DRIVER,
    )
    cluster.create_pod(namespace, place.pin(driver))
    cluster.wait_pod(namespace, "spark-pi-driver", is_running)

    # Spark creates executors once its driver runs.
    executors = [f"spark-pi-exec-{i}" for i in range(1, 9)]
    for name in executors:
        cluster.create_pod(namespace, place.pin(gang_pod(name, "spark-pi", "spark-executor", **EXECUTOR)))
    for name in executors:
        cluster.wait_pod(namespace, name, is_running)

    assert len(recorder.placeholder_uids) == 9, sorted(recorder.placeholder_uids)
    assert all(len(uids) == 1 for uids in recorder.placeholder_uids.values()), "a placeholder was created twice"
    driver_pod = cluster.get_pod(namespace, "spark-pi-driver")
    assert driver_pod is not None and driver_pod["spec"]["nodeName"] in recorder.group_nodes("spark-driver")
    for name in executors:
        pod = cluster.get_pod(namespace, name)
        assert pod is not None and pod["spec"]["nodeName"] in recorder.group_nodes("spark-executor"), name
    rate = landed_rate(cluster, namespace, recorder, ["spark-pi-driver", *executors])
    record_property("landed_rate", rate)
    print(f"\nspark application: landed-rate {rate:.0%} (9 members on their own placeholder's node)")
    assert rate == 1.0
    wait_no_placeholders(cluster, namespace)

    for name in ["spark-pi-driver", *executors]:
        finish(cluster, namespace, name)
    wait_until(lambda: app_state(cluster, namespace, "spark-pi-driver") == "Completed", 30)
    assert not placeholders(cluster, namespace)

    def writes(resource: str) -> float:
        return sum(
            value
            for key, value in controller.metrics().items()
            if key.startswith("yuniplace_api_requests_total{")
            and f'resource="{resource}"' in key
            and any(f'verb="{verb}"' in key for verb in ("post", "patch", "delete"))
        )

    # The task groups' PlaceholderSwapped events, saying all 9 landed, are posted (asynchronously) before counting.
    wait_until(lambda: members_landed(events_for(cluster, namespace, "PlaceholderSwapped")) == 9, 30)
    pod_writes = writes("pods") + writes("pods/status")
    record_property("pod_writes_per_member", round(pod_writes / 9, 2))
    print(
        f"API writes for 9 members: {pod_writes:.0f} on pods ({pod_writes / 9:.2f} per member), "
        f"{writes('events'):.0f} events ({writes('events') / 9:.2f} per member)"
    )


YUNIKORN_BATCH_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: batch-sleep-job-9
spec:
  completions: 2
  parallelism: 2
  template:
    metadata:
      labels:
        app: sleep
        applicationId: "batch-sleep-job-9"
        queue: root.sandbox
      annotations:
        yunikorn.apache.org/task-group-name: task-group-example
        yunikorn.apache.org/task-groups: |-
          [{
              "name": "task-group-example",
              "minMember": 2,
              "minResource": {
                "cpu": "100m",
                "memory": "50M"
              },
              "nodeSelector": {},
              "tolerations": [],
              "affinity": {},
              "topologySpreadConstraints": []
          }]
    spec:
      schedulerName: default-scheduler
      schedulingGates: [{name: yuniplace.io/gang}]
      restartPolicy: Never
      containers:
        - name: sleep30
          image: "alpine:latest"
          command: ["sleep", "30"]
          resources:
            requests:
              cpu: "100m"
              memory: "50M"
"""


@pytest.mark.parametrize("start", START_PATHS)
def test_yunikorn_documentation_batch_job(
    cluster: Cluster, namespace: str, recorder: NamespaceRecorder, tmp_path: Path, start: str
) -> None:
    """YuniKorn's gang-scheduling example, with `schedulerName: yunikorn` changed to the default
    scheduler (and the gate the admission webhook adds written in): both pods exist and fit, so they
    start directly, or (placeholders always) as YuniKorn starts them."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, *START_PATHS[start])
    process.start()
    manifest = tmp_path / "job.yaml"
    manifest.write_text(YUNIKORN_BATCH_JOB)
    cluster.kubectl("apply", "-n", namespace, "-f", str(manifest))

    def complete() -> bool:
        job = cluster.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/batch-sleep-job-9")
        return any(
            c["type"] == "Complete" and c["status"] == "True" for c in job.get("status", {}).get("conditions", [])
        )

    try:
        wait_until(complete, 90)
        pods = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector="job-name=batch-sleep-job-9")[
            "items"
        ]
        assert len(pods) == 2
        assert_started_whole(start, recorder, pods, "task-group-example")
        wait_no_placeholders(cluster, namespace)
    finally:
        assert process.stop() == 0, process.log()


@pytest.mark.parametrize("style", ["Soft", "Hard"])
def test_gang_larger_than_the_cluster_times_out(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    style: str,
) -> None:
    place = pool(4, cpu="8", memory="32Gi")
    # Six members of 7 CPU on four 8-CPU nodes: four placeholders fit, two never will.
    groups = [place.group("workers", 6, cpu="7", memory="1Gi")]
    names = [f"worker-{i}" for i in range(6)]
    for i, name in enumerate(names):
        pod = gang_pod(
            name,
            "big",
            "workers",
            task_groups=groups if i == 0 else None,
            policy=f"placeholderTimeoutInSeconds=8 gangSchedulingStyle={style}",
            cpu="7",
            memory="1Gi",
        )
        cluster.create_pod(namespace, place.pin(pod))

    wait_until(lambda: len(recorder.placeholder_nodes) == 4, 30)  # four placed, two cannot be
    wait_until(lambda: app_state(cluster, namespace, "worker-0") in ("Resuming", "Failed"), 60)
    wait_no_placeholders(cluster, namespace)
    assert len(recorder.placeholder_uids) == 6

    timeouts = posted(cluster, namespace, "PlaceholderTimeOut")  # posted after the placeholders are deleted
    assert timeouts and timeouts[0]["type"] == "Warning" and "4/6 placeholders placed" in timeouts[0]["message"]
    if style == "Soft":
        for name in names:
            cluster.wait_pod(
                namespace,
                name,
                lambda pod: not any(g["name"] == keys.GATE for g in pod["spec"].get("schedulingGates") or []),
            )
        wait_until(
            lambda: sum(is_running(p) for p in recorder.latest.values() if p["metadata"]["name"] in names) == 4, 30
        )
        stuck = [n for n in names if not is_running(recorder.latest[n])]
        for name in stuck:
            cluster.wait_pod(namespace, name, is_unschedulable)
        failed = posted(cluster, namespace, "GangSchedulingFailed")
        assert failed and failed[0]["type"] == "Warning"
        assert "Soft style" in failed[0]["message"]
        assert "GangSchedulingFailed" in cluster.kubectl("get", "events", "-n", namespace)
    else:
        for name in names:
            pod = cluster.wait_pod(namespace, name, is_failed)
            assert pod["status"]["reason"] == "ResourceReservationTimeout"
            assert "gang reservation timed out (4/6 placeholders placed after 8s)" in pod["status"]["message"]
            assert not pod["spec"].get("nodeName")
        posted(cluster, namespace, "ApplicationFailed")  # posted after the pods are failed


def test_deleting_the_originator_while_reserving_removes_every_placeholder(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
) -> None:
    place = pool(1, cpu="4", memory="16Gi")
    groups = [place.group("g", 5, cpu="1", memory="1Gi")]  # 4 fit, 1 never does: stays Reserving
    cluster.create_pod(
        namespace,
        place.pin(gang_pod("origin", "doomed", "g", task_groups=groups, policy="placeholderTimeoutInSeconds=600")),
    )
    wait_until(lambda: len(recorder.placeholder_nodes) == 4 and len(recorder.placeholder_uids) == 5, 30)
    assert app_state(cluster, namespace, "origin") == "Reserving"
    cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/origin")
    wait_no_placeholders(cluster, namespace, 30)


@pytest.mark.parametrize("start", START_PATHS)
def test_extra_members_are_scheduled_normally_once_the_gang_is_reserved(
    cluster: Cluster,
    namespace: str,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    tmp_path: Path,
    start: str,
) -> None:
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, *START_PATHS[start])
    process.start()
    place = pool(2)
    groups = [place.group("workers", 2, cpu="1", memory="1Gi")]
    names = [f"w-{i}" for i in range(5)]
    for i, name in enumerate(names):
        cluster.create_pod(
            namespace,
            place.pin(
                gang_pod(name, "extra", "workers", task_groups=groups if i == 0 else None, cpu="1", memory="1Gi")
            ),
        )
    for name in names:
        cluster.wait_pod(namespace, name, is_running)
    handed = [n for n in names if p.is_handed_off(recorder.latest[n])]
    assert len(handed) == 2, "exactly minMember members are handed room: a placeholder's, or a seat"
    assert len(recorder.placeholder_uids) == (2 if start == "placeholders" else 0)
    wait_no_placeholders(cluster, namespace)
    assert process.stop() == 0, process.log()


def test_a_member_larger_than_its_group_before_the_gang_starts_is_reserved_its_size(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
) -> None:
    """Both members exist before the gang starts: the group is made as large as the larger one (a
    TaskGroupWarning says so), and both start on room of their own size; none is released alone."""
    place = pool(2)
    groups = [place.group("executors", 2, cpu="1", memory="1Gi")]
    cluster.create_pod(
        namespace, place.pin(gang_pod("small", "mismatch", "executors", task_groups=groups, cpu="1", memory="1Gi"))
    )
    cluster.create_pod(namespace, place.pin(gang_pod("large", "mismatch", "executors", cpu="1", memory="1408Mi")))
    running = [cluster.wait_pod(namespace, name, is_running) for name in ("small", "large")]
    assert not events_for(cluster, namespace, "TaskGroupResourceMismatch")
    # Posted after its plan's writes (started directly: the members' release), so it may trail their run.
    posted(
        cluster,
        namespace,
        "TaskGroupWarning",
        saying=lambda note: "task group executors" in note and "memory 1408Mi > 1Gi" in note,
    )
    assert_on_held_room(recorder, running)
    wait_no_placeholders(cluster, namespace)


def test_a_member_larger_than_its_placeholder_after_the_gang_started_reports_a_mismatch_and_still_runs(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
) -> None:
    """YuniKorn's rule for a member that comes once its gang runs (a Spark executor): it does not fit
    its placeholder, releases one, and is scheduled normally."""
    place = pool(2)
    groups = [place.group("driver", 1, cpu="1", memory="1Gi"), place.group("executors", 1, cpu="1", memory="1Gi")]
    cluster.create_pod(
        namespace, place.pin(gang_pod("driver", "mismatch", "driver", task_groups=groups, cpu="1", memory="1Gi"))
    )
    cluster.wait_pod(namespace, "driver", is_running)
    cluster.create_pod(namespace, place.pin(gang_pod("large", "mismatch", "executors", cpu="1", memory="1408Mi")))
    cluster.wait_pod(namespace, "large", is_running)
    mismatch = posted(cluster, namespace, "TaskGroupResourceMismatch")  # posted after its gate is lifted
    assert len(mismatch) == 1 and mismatch[0]["involvedObject"]["name"] == "large"
    assert "minResource (memory 1408Mi > 1Gi)" in mismatch[0]["message"]
    wait_no_placeholders(cluster, namespace)


@pytest.mark.parametrize("style", ["Soft", "Hard"])
def test_invalid_annotations_are_reported_and_follow_the_style(
    cluster: Cluster, namespace: str, controller: ControllerProcess, recorder: NamespaceRecorder, style: str
) -> None:
    bad = [{"name": "Executors_1", "minMember": 0, "minResource": {"cpu": "lots"}}]
    cluster.create_pod(
        namespace, gang_pod("bad-driver", "bad", "Executors_1", task_groups=bad, policy=f"gangSchedulingStyle={style}")
    )
    errors = wait_until(lambda: events_for(cluster, namespace, "TaskGroupsError"), 30)
    message = errors[0]["message"]
    assert errors[0]["type"] == "Warning"
    assert 'task-groups[0].name: "Executors_1" must be a DNS-1123 label' in message
    assert "minMember: 0 must be an integer from 1 to 1000" in message
    assert 'minResource.cpu: "lots" is not a valid quantity' in message
    if style == "Soft":
        cluster.wait_pod(namespace, "bad-driver", is_running)
    else:
        pod = cluster.wait_pod(namespace, "bad-driver", is_failed)
        assert pod["status"]["reason"] == "TaskGroupsError"
    assert not recorder.placeholder_uids


def test_controller_killed_while_reserving_and_while_swapping_recovers(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    record_property: Callable[[str, object], None],
) -> None:
    place = pool(1, cpu="4", memory="16Gi")  # room for the driver's group only, for now
    groups = [place.group("driver", 1, cpu="1", memory="1Gi"), place.group("executors", 40, cpu="250m", memory="256Mi")]
    cluster.create_pod(
        namespace,
        place.pin(
            gang_pod(
                "driver",
                "restart",
                "driver",
                task_groups=groups,
                policy="placeholderTimeoutInSeconds=300",
                cpu="1",
                memory="1Gi",
            )
        ),
    )
    # Killed mid-reservation: every placeholder exists, not all are placed.
    wait_until(lambda: len(recorder.placeholder_uids) == 41 and 0 < len(recorder.placeholder_nodes) < 41, 30)
    controller.kill()
    more = pool(2, cpu="4", memory="16Gi")  # now the rest fits (same label and taint as `place`)
    assert more.node_selector == place.node_selector
    controller.start()
    cluster.wait_pod(namespace, "driver", is_running)

    # Killed mid-swap: the moment the first executor takes a placeholder's place, with 39 more to go.
    executors = [f"exec-{i}" for i in range(40)]
    kill_once: list[bool] = []

    def claimed(pod: dict) -> bool:
        return keys.SWAP_PLACEHOLDER in (pod["metadata"].get("annotations") or {})

    def kill_at_first_swap(pod: dict) -> None:
        if pod["metadata"]["name"].startswith("exec-") and claimed(pod) and not kill_once:
            kill_once.append(True)
            controller.kill()

    recorder.callbacks.append(kill_at_first_swap)
    for name in executors:
        cluster.create_pod(namespace, place.pin(gang_pod(name, "restart", "executors", cpu="250m", memory="256Mi")))
    wait_until(lambda: kill_once, 30)
    in_flight = sum(1 for n in executors if n in recorder.latest and claimed(recorder.latest[n]))
    controller.start()
    for name in executors:
        cluster.wait_pod(namespace, name, is_running)

    assert len(recorder.placeholder_uids) == 41, "a placeholder beyond the gang's 41 was created"
    duplicates = {name: uids for name, uids in recorder.placeholder_uids.items() if len(uids) > 1}
    assert not duplicates, f"placeholders created twice: {duplicates}"
    executor_nodes = recorder.group_nodes("executors")
    assert all(recorder.latest[n]["spec"]["nodeName"] in executor_nodes for n in executors)
    rate = landed_rate(cluster, namespace, recorder, ["driver", *executors])
    record_property("landed_rate", rate)
    print(f"\nrestarts: {in_flight} executors swapped when killed; landed-rate {rate:.0%}")
    wait_no_placeholders(cluster, namespace)
    finish(cluster, namespace, "driver")
    wait_until(lambda: app_state(cluster, namespace, "driver") == "Completed", 30)


def test_contention_every_member_ends_bound(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    record_property: Callable[[str, object], None],
) -> None:
    """While a gang swaps in, a flood of ordinary pods (same priority, same nodes) competes for every
    CPU the swaps free: each member must land on the node its placeholder reserved, on every supported
    Kubernetes release (the hand-off is a nomination, which kube-scheduler must honour for a pod whose
    gate is lifted). A seat lost to the flood would leave its member with nowhere to go."""
    place = pool(5, cpu="4", memory="16Gi")  # 20 CPU
    groups = [place.group("driver", 1, cpu="1", memory="1Gi"), place.group("executors", 12, cpu="1", memory="1Gi")]
    cluster.create_pod(
        namespace,
        place.pin(
            gang_pod(
                "driver",
                "contended",
                "driver",
                task_groups=groups,
                policy="placeholderTimeoutInSeconds=300",
                cpu="1",
                memory="1Gi",
            )
        ),
    )
    cluster.wait_pod(namespace, "driver", is_running)
    executors = [f"exec-{i}" for i in range(12)]
    flood = [f"flood-{i}" for i in range(60)]
    # Interleaved, so flood pods are pending and retrying exactly while the swaps free room.
    for i in range(60):
        cluster.create_pod(
            namespace, place.pin(gang_pod(flood[i], f"flood-{i}", None, gated=False, cpu="1", memory="1Gi"))
        )
        if i % 5 == 0 and i // 5 < len(executors):
            cluster.create_pod(
                namespace, place.pin(gang_pod(executors[i // 5], "contended", "executors", cpu="1", memory="1Gi"))
            )
    for name in executors:
        cluster.wait_pod(namespace, name, is_bound)
    rate = landed_rate(cluster, namespace, recorder, executors)
    record_property("landed_rate", rate)
    version = cluster.client.get("/version")["gitVersion"]
    figure = (
        f"Kubernetes {version}: {len(executors)} members swapped under a flood of {len(flood)} pods, "
        f"{round(rate * len(executors))} landed on their reserved node"
    )
    record_property("figure", figure)
    print(f"\n{figure}")
    assert rate == 1.0, f"on Kubernetes {version} only {rate:.0%} of the members landed on their reserved node"

    def flood_bound() -> int:
        return sum(1 for n in flood if is_bound(recorder.latest.get(n, {})))

    # 20 CPU: 13 reserved by the gang, so the flood gets exactly the 7 it did not reserve.
    wait_until(lambda: flood_bound() == 7, 30)
    print(f"contention: none stuck; {flood_bound()}/60 flood pods bound")
    wait_no_placeholders(cluster, namespace)
