"""yuniplace as users deploy it: its image, installed with its chart's defaults into a kind cluster of
real kubelets (1 control plane, 2 workers). The replicas run in pods, the apiserver reaches the webhook
through its Service, leadership moves between pods, placeholders are real pause containers, and
`helm upgrade` and `helm uninstall` leave nothing of yuniplace behind.

The tests run in file order: the last one upgrades and uninstalls the release the others use.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from tests.kind.support import (
    PAUSE_IMAGE,
    RELEASE,
    RELEASE_NAMESPACE,
    REPO,
    History,
    Kind,
    Pod,
    container_running,
    pause_pod,
    task_group,
    wait,
    wait_landed,
)
from yuniplace.gang import keys
from yuniplace.kube import ApiError


def test_replicas_run_in_pods_on_real_kubelets(installed: Kind) -> None:
    """Two replicas of the image, Ready (their /readyz probed by the kubelet), one per worker (the
    chart's soft spread), as the restricted non-root user, on containerd nodes."""
    deployment = installed.client.get(f"/apis/apps/v1/namespaces/{RELEASE_NAMESPACE}/deployments/{RELEASE}")
    assert deployment["status"].get("readyReplicas") == 2
    pods = installed.controller_pods()
    assert len(pods) == 2 and all(container_running(p) for p in pods), pods
    assert all(p["spec"]["containers"][0]["image"] == "yuniplace:dev" for p in pods)
    assert all(p["spec"]["securityContext"]["runAsUser"] == 65532 for p in pods)
    nodes = {p["spec"]["nodeName"] for p in pods}
    assert len(nodes) == 2, f"both replicas on {nodes}"
    for name in nodes:
        node = installed.client.get(f"/api/v1/nodes/{name}")
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        assert "node-role.kubernetes.io/control-plane" not in node["metadata"]["labels"]


def test_webhook_is_reached_through_its_service(installed: Kind, namespace: str) -> None:
    """The webhook configurations name the Service, whose endpoints are both replicas; a gang pod is
    gated at creation and an invalid one is denied, so the apiserver called them there."""
    webhook = next(
        w
        for w in installed.client.get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")["items"]
        if w["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == RELEASE
    )
    for hook in webhook["webhooks"]:
        assert "url" not in hook["clientConfig"]
        assert hook["clientConfig"]["service"]["name"] == f"{RELEASE}-webhook"
        assert hook["clientConfig"]["service"]["namespace"] == RELEASE_NAMESPACE
    slices = installed.client.get(
        f"/apis/discovery.k8s.io/v1/namespaces/{RELEASE_NAMESPACE}/endpointslices",
        labelSelector=f"kubernetes.io/service-name={RELEASE}-webhook",
    )["items"]
    ready = {
        e["targetRef"]["name"] for s in slices for e in s.get("endpoints") or [] if e.get("conditions", {}).get("ready")
    }
    assert ready == {p["metadata"]["name"] for p in installed.controller_pods()}

    created = installed.client.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pause_pod("gated", "webhook-app", "solo", task_groups=[task_group("solo", 1)]),
    )
    assert {"name": keys.GATE} in created["spec"].get("schedulingGates", [])

    invalid = pause_pod("invalid", "webhook-bad", "solo", task_groups=[task_group("solo", 1)])
    invalid["metadata"]["annotations"][keys.TASK_GROUPS] = '[{"name": "solo", "minMember": 0}]'
    with pytest.raises(ApiError) as denied:
        installed.client.create(f"/api/v1/namespaces/{namespace}/pods", invalid)
    assert "denied the request" in str(denied.value) and "minMember" in str(denied.value)


def test_placeholders_are_pause_containers_under_restricted_pod_security(installed: Kind) -> None:
    """In a namespace enforcing the restricted level, the gang's placeholders are admitted and run as
    real pause containers until the members take their places."""
    namespace = installed.namespace("restricted", restricted=True)
    try:
        groups = [task_group("workers", 3)]
        with History(installed.client, namespace) as history:
            installed.client.create(
                f"/api/v1/namespaces/{namespace}/pods",
                pause_pod("worker-0", "restricted-app", "workers", task_groups=groups),
            )
            installed.wait_running(namespace, "worker-0")
            # Two placeholders hold the room of the members not created yet: they run.
            running = wait(
                lambda: (seen := history.placeholders_seen_running()) and len(seen) >= 2 and seen,
                120,
                "two placeholders running",
            )
            for placeholder in running.values():
                container = placeholder["spec"]["containers"][0]
                assert container["image"] == PAUSE_IMAGE
                assert placeholder["spec"]["securityContext"]["runAsNonRoot"] is True
                assert placeholder["spec"]["securityContext"]["runAsUser"] == 65535
                assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
                assert placeholder["spec"]["nodeName"]
            for member in ("worker-1", "worker-2"):
                installed.client.create(
                    f"/api/v1/namespaces/{namespace}/pods",
                    pause_pod(member, "restricted-app", "workers", task_groups=groups),
                )
            installed.wait_running(namespace, "worker-0", "worker-1", "worker-2")
        wait_landed(installed, namespace, 3)
        wait(lambda: not installed.placeholders(namespace), 60, "no placeholder left")
    finally:
        installed.delete_namespace(namespace)


def test_another_replica_takes_over_and_finishes_an_in_flight_gang(installed: Kind, namespace: str) -> None:
    """Deleting the leading pod hands the Lease to another replica, which swaps in the members of a
    gang the first one had reserved."""
    groups = [task_group("workers", 3)]
    installed.client.create(
        f"/api/v1/namespaces/{namespace}/pods", pause_pod("worker-0", "takeover-app", "workers", task_groups=groups)
    )
    installed.wait_running(namespace, "worker-0")
    wait(lambda: len(installed.placeholders(namespace)) == 2, 60, "two placeholders waiting for members")

    leader = installed.lease_holder()
    replicas = {p["metadata"]["name"] for p in installed.controller_pods()}
    assert leader in replicas and len(replicas) == 2, f"leader {leader!r}, replicas {replicas}"
    installed.kubectl("delete", "pod", "-n", RELEASE_NAMESPACE, leader, "--wait=false")
    # The leader hands the Lease back as it stops; the standby or the replica replacing the deleted
    # one, whichever asks first, takes it.
    new_leader = wait(
        lambda: (holder := installed.lease_holder()) not in ("", leader) and holder, 90, "another replica leads"
    )
    assert new_leader in {p["metadata"]["name"] for p in installed.controller_pods()}

    for member in ("worker-1", "worker-2"):
        installed.client.create(
            f"/api/v1/namespaces/{namespace}/pods", pause_pod(member, "takeover-app", "workers", task_groups=groups)
        )
    installed.wait_running(namespace, "worker-1", "worker-2")
    # worker-0 was swapped in by the first leader; the two created since, by the new one.
    first, *since = wait_landed(installed, namespace, 3)
    assert first["reportingInstance"] == leader and since, (first, since)
    assert all(event["reportingInstance"] == new_leader for event in since), since
    wait(lambda: not installed.placeholders(namespace), 60, "no placeholder left")
    wait(
        lambda: (
            len(installed.controller_pods()) == 2 and all(container_running(p) for p in installed.controller_pods())
        ),
        120,
        "the Deployment back at two running replicas",
    )


def spark_pod(document: Pod) -> Pod:
    """An example Spark pod as it runs here: the pause image instead of apache/spark (no registry),
    and a tenth of its CPU, in its requests and its task groups alike, so that a driver and four
    executors fit on two workers of this machine's cores. Memory, groups and annotations are unchanged."""
    pod = copy.deepcopy(document)
    annotations = pod["metadata"]["annotations"]
    groups = yaml.safe_load(annotations[keys.TASK_GROUPS]) if keys.TASK_GROUPS in annotations else None
    for group in groups or []:
        group["minResource"]["cpu"] = f"{int(group['minResource']['cpu']) * 100}m"
    if groups is not None:
        annotations[keys.TASK_GROUPS] = json.dumps(groups)
    for container in pod["spec"]["containers"]:
        container["image"] = PAUSE_IMAGE
        container.pop("args", None)
        requests = container["resources"]["requests"]
        requests["cpu"] = f"{int(requests['cpu']) * 100}m"
    return pod


def test_spark_example_end_to_end(installed: Kind, namespace: str) -> None:
    """examples/spark: the driver's gang (1 driver + 4 executors) is reserved, the driver swapped in,
    then each executor Spark creates takes an executor placeholder's place."""
    driver = spark_pod(yaml.safe_load((REPO / "examples" / "spark" / "driver-pod.yaml").read_text()))
    executors = [
        spark_pod(doc)
        for doc in yaml.safe_load_all((REPO / "examples" / "spark" / "executor-pods.yaml").read_text())
        if doc
    ]
    assert len(executors) == 4
    installed.client.create(f"/api/v1/namespaces/{namespace}/pods", driver)
    driver_name = driver["metadata"]["name"]
    installed.wait_running(namespace, driver_name)
    for reason in ("TaskGroupMatch", "CreatingPlaceholders", "PlaceholderAllocated", "GangReservationComplete"):
        assert installed.events(namespace, reason), f"no {reason} event"
    wait_landed(installed, namespace, 1)  # the driver

    for executor in executors:
        installed.client.create(f"/api/v1/namespaces/{namespace}/pods", executor)
    names = [e["metadata"]["name"] for e in executors]
    installed.wait_running(namespace, *names)
    wait_landed(installed, namespace, 1 + len(names))
    wait(lambda: not installed.placeholders(namespace), 60, "no placeholder left")


def test_upgrade_and_uninstall_leave_nothing_behind(installed: Kind, namespace: str) -> None:
    """`helm upgrade` rolls the replicas while a gang is reserved, and the new ones finish it;
    `helm uninstall` then leaves no placeholder, webhook configuration, Lease or replica."""
    groups = [task_group("workers", 2)]
    installed.client.create(
        f"/api/v1/namespaces/{namespace}/pods", pause_pod("worker-0", "upgrade-app", "workers", task_groups=groups)
    )
    installed.wait_running(namespace, "worker-0")
    wait(lambda: len(installed.placeholders(namespace)) == 1, 60, "a placeholder waiting for a member")
    before = {p["metadata"]["name"] for p in installed.controller_pods()}

    installed.helm(
        "upgrade",
        RELEASE,
        str(installed.chart),
        "-n",
        RELEASE_NAMESPACE,
        "--reuse-values",
        "--set",
        "logging.level=DEBUG",
        "--wait",
        "--timeout",
        "180s",
    )
    wait(
        lambda: (
            (pods := installed.controller_pods())
            and len(pods) == 2
            and not before & {p["metadata"]["name"] for p in pods}
            and all(container_running(p) for p in pods)
        ),
        120,
        "two new replicas running",
    )
    installed.client.create(
        f"/api/v1/namespaces/{namespace}/pods", pause_pod("worker-1", "upgrade-app", "workers", task_groups=groups)
    )
    installed.wait_running(namespace, "worker-1")
    assert wait_landed(installed, namespace, 2)[-1]["reportingInstance"] not in before
    wait(lambda: not installed.placeholders(), 60, "no placeholder left in any namespace")

    installed.helm("uninstall", RELEASE, "-n", RELEASE_NAMESPACE, "--wait", "--timeout", "180s")
    selector = f"app.kubernetes.io/instance={RELEASE}"
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        left = installed.client.get(f"/apis/admissionregistration.k8s.io/v1/{kind}", labelSelector=selector)["items"]
        assert not left, f"{kind} left: {[w['metadata']['name'] for w in left]}"
    wait(
        lambda: (
            not installed.client.get(f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NAMESPACE}/leases")["items"]
        ),
        60,
        "no Lease left",
    )
    wait(lambda: not installed.controller_pods(), 120, "no replica left")
    assert not installed.placeholders()
