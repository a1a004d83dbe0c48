"""The local control plane is the real thing: kube-scheduler binds, controller-manager reconciles,
garbage collection runs, scheduling gates hold, and kubectl sees it all."""

from __future__ import annotations

import json

import pytest

from tests.e2e.support import (
    Cluster,
    Pod,
    condition,
    finish,
    is_bound,
    is_running,
    is_succeeded,
    is_unschedulable,
    make_pod,
)
from yuniplace.localcluster import wait_until
from yuniplace.localcluster.components import KEEPS_RUNNING_ANNOTATION

# CI runs these on every supported Kubernetes version, not only the default.
pytestmark = pytest.mark.every_version

NODE_PREFIX = "kwok-node-"


def test_plain_pod_is_bound_by_kube_scheduler_and_runs(cluster: Cluster, namespace: str) -> None:
    cluster.create_pod(namespace, make_pod("plain"))
    pod = cluster.wait_pod(namespace, "plain", is_running)
    assert pod["spec"]["nodeName"].startswith(NODE_PREFIX)
    assert condition(pod, "PodScheduled")["status"] == "True"  # type: ignore[index]
    assert pod["status"]["podIP"]


def test_pod_that_fits_nowhere_stays_pending_unschedulable(cluster: Cluster, namespace: str) -> None:
    cluster.create_pod(namespace, make_pod("huge", cpu="1000"))
    pod = cluster.wait_pod(namespace, "huge", is_unschedulable)
    assert pod["status"]["phase"] == "Pending"
    assert not pod["spec"].get("nodeName")
    assert "Insufficient cpu" in condition(pod, "PodScheduled")["message"]  # type: ignore[index]


def test_batch_job_pods_are_created_and_complete(cluster: Cluster, namespace: str) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch"},
        "spec": {
            "completions": 2,
            "parallelism": 2,
            "template": {"spec": make_pod("unused")["spec"]},
        },
    }
    cluster.client.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

    def job_complete() -> bool:
        status = cluster.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/batch").get("status", {})
        return any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions", []))

    wait_until(job_complete, 60)
    pods = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector="job-name=batch")["items"]
    assert len(pods) == 2
    assert all(p["status"]["phase"] == "Succeeded" and p["spec"]["nodeName"] for p in pods)


def test_a_job_pod_annotated_to_keep_running_runs_until_it_is_ended(cluster: Cluster, namespace: str) -> None:
    """The one exception to kwok's lifecycle that tests use for long-lived Job pods (executors, workers)."""
    template = make_pod("unused")
    template["metadata"] = {"annotations": {KEEPS_RUNNING_ANNOTATION: "never"}}
    for name, pod_template in [("lasting", template), ("brief", {"spec": make_pod("unused")["spec"]})]:
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {"completions": 1, "template": pod_template},
        }
        cluster.client.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

    def pod_of(job: str) -> Pod | None:
        pods = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={job}")["items"]
        return pods[0] if pods else None

    # The brief Job's pod, created after the lasting one's, has gone through its whole life: kwok has
    # passed the lasting pod by, not merely not reached it yet.
    wait_until(lambda: (p := pod_of("brief")) is not None and is_succeeded(p), 60)
    lasting = cluster.wait_pod(namespace, pod_of("lasting")["metadata"]["name"], is_running)  # type: ignore[index]
    assert condition(lasting, "Ready")["status"] == "True"  # type: ignore[index]
    assert lasting["status"]["podIP"]
    finish(cluster, namespace, lasting["metadata"]["name"])
    wait_until(
        lambda: (
            (cluster.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/lasting").get("status", {})).get(
                "succeeded"
            )
            == 1
        ),
        60,
    )


def test_deleting_an_owner_garbage_collects_the_owned_pod(cluster: Cluster, namespace: str) -> None:
    owner = cluster.client.create(
        f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "owner"}, "data": {}}
    )
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    cluster.create_pod(namespace, make_pod("owned", owner=reference))
    cluster.wait_pod(namespace, "owned", is_bound)
    cluster.client.delete(f"/api/v1/namespaces/{namespace}/configmaps/owner")
    cluster.wait_gone(f"/api/v1/namespaces/{namespace}/pods/owned")


def test_scheduling_gate_holds_the_pod_until_removed(cluster: Cluster, namespace: str) -> None:
    cluster.create_pod(namespace, make_pod("gated", gates=["example.com/hold"]))
    # A pod created after the gated one is bound: the scheduler has been through its queue, and
    # the gated pod was not in it.
    cluster.create_pod(namespace, make_pod("witness"))
    cluster.wait_pod(namespace, "witness", is_bound)
    gated = cluster.get_pod(namespace, "gated")
    assert gated is not None and not is_bound(gated)
    assert condition(gated, "PodScheduled")["reason"] == "SchedulingGated"  # type: ignore[index]

    cluster.client.patch(
        f"/api/v1/namespaces/{namespace}/pods/gated",
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        content_type="application/json-patch+json",
    )
    pod = cluster.wait_pod(namespace, "gated", is_running)
    assert pod["spec"]["nodeName"].startswith(NODE_PREFIX)


def test_kubectl_get_events_shows_the_schedulers_events(cluster: Cluster, namespace: str) -> None:
    cluster.create_pod(namespace, make_pod("observed"))
    pod = cluster.wait_pod(namespace, "observed", is_bound)

    def scheduled_event() -> dict | None:
        events = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json"))["items"]
        return next(
            (e for e in events if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "observed"), None
        )

    event = wait_until(scheduled_event, 30)
    assert event["reportingComponent"] == "default-scheduler"
    assert pod["spec"]["nodeName"] in event["message"]
    table = cluster.kubectl("get", "events", "-n", namespace)
    assert "Scheduled" in table and "Successfully assigned" in table
