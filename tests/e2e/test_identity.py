"""Who created each gang workload, recorded by the webhook the chart installs, against the real apiserver
and its real controllers: users act through `kubectl --as` (the e2e kubeconfig is cluster-admin, which
may impersonate), so the requester the webhook sees is the one the apiserver authenticated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import builders
from tests.e2e.support import Cluster, ControllerProcess, chart_installed, editors
from tests.e2e.test_chart import container_args, one, refused_render, render
from yuniplace.gang import keys, userinfo
from yuniplace.gang.userinfo import ANNOTATION, UserInfo
from yuniplace.localcluster import wait_until

TASK_GROUPS = builders.task_groups(builders.task_group("workers", 2, {"cpu": "100m", "memory": "64Mi"}))
ALICE = UserInfo("alice", ("devs", "system:authenticated"))
BOB = UserInfo("bob", ("system:authenticated",))


def gang_template(app: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {"app": app, "applicationId": app},
            "annotations": {keys.TASK_GROUPS: TASK_GROUPS, keys.TASK_GROUP_NAME: "workers", **(annotations or {})},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
            ],
        },
    }


def gang_pod(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod = {"apiVersion": "v1", "kind": "Pod", **gang_template(name, annotations)}
    pod["metadata"]["name"] = name
    return pod


def job(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"parallelism": 2, "completions": 2, "template": gang_template(name, annotations)},
    }


def deployment(name: str) -> dict[str, Any]:
    template = gang_template(name)
    template["spec"]["restartPolicy"] = "Always"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": template},
    }


class As:
    """kubectl as a user the apiserver authenticates by impersonation."""

    def __init__(self, cluster: Cluster, namespace: str, workdir: Path, user: UserInfo) -> None:
        self.cluster, self.namespace, self.workdir, self.user = cluster, namespace, workdir, user

    def kubectl(self, *args: str) -> str:
        groups = [f"--as-group={group}" for group in self.user.groups if group != "system:authenticated"]
        return self.cluster.kubectl(f"--as={self.user.user}", *groups, "-n", self.namespace, *args)

    def create(self, manifest: dict[str, Any]) -> None:
        path = self.workdir / f"{self.user.user}-{manifest['metadata']['name']}.json"
        path.write_text(json.dumps(manifest))
        self.kubectl("create", "-f", str(path))


@pytest.fixture
def installed(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[ControllerProcess]:
    """yuniplace as the chart installs it, its webhooks sent this namespace only; alice and bob may edit
    in it (the `edit` ClusterRole)."""
    editors(cluster, namespace, "alice", "bob")
    with chart_installed(cluster, namespace, tmp_path / "chart") as controller:
        yield controller


def recorded(obj: dict[str, Any] | None) -> UserInfo | None:
    assert obj is not None
    return userinfo.of_object(obj)


def pods_of(cluster: Cluster, namespace: str, selector: str, count: int) -> list[dict[str, Any]]:
    def created() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = cluster.client.get(
            f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector
        )["items"]
        return items if len(items) >= count else None

    found: list[dict[str, Any]] = wait_until(created, 60)
    return found


def test_each_gang_workload_is_recorded_as_its_creator_and_nobody_can_forge_it(
    cluster: Cluster, namespace: str, tmp_path: Path, installed: ControllerProcess
) -> None:
    alice = As(cluster, namespace, tmp_path, ALICE)
    bob = As(cluster, namespace, tmp_path, BOB)

    # A pod bob creates is recorded as bob.
    bob.create(gang_pod("bobs"))
    assert recorded(cluster.get_pod(namespace, "bobs")) == BOB

    # A Job alice creates: recorded on its template, and its pods, created by the job-controller, keep it.
    alice.create(job("alices-job"))
    stored = cluster.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/alices-job")
    assert recorded(stored["spec"]["template"]) == ALICE
    for pod in pods_of(cluster, namespace, "job-name=alices-job", 2):
        assert recorded(pod) == ALICE, pod["metadata"]

    # bob cannot forge alice's record: not on a pod, not on a Job, and not by editing his pod.
    forged = {ANNOTATION: userinfo.encode(ALICE.user, ALICE.groups)}
    with pytest.raises(AssertionError, match="only the webhook and trusted requesters"):
        bob.create(gang_pod("forged", forged))
    with pytest.raises(AssertionError, match="its pod template: only the webhook and trusted requesters"):
        bob.create(job("forged-job", forged))
    with pytest.raises(AssertionError, match="may not be changed or removed by bob"):
        bob.kubectl("annotate", "pod", "bobs", "--overwrite", f"{ANNOTATION}={forged[ANNOTATION]}")
    with pytest.raises(AssertionError, match="may not be changed or removed by bob"):
        bob.kubectl("annotate", "pod", "bobs", f"{ANNOTATION}-")
    assert cluster.get_pod(namespace, "forged") is None
    assert recorded(cluster.get_pod(namespace, "bobs")) == BOB


def test_a_deployments_record_reaches_its_pods_and_survives_updates(
    cluster: Cluster, namespace: str, tmp_path: Path, installed: ControllerProcess
) -> None:
    """Through the deployment and replicaset controllers; the ReplicaSet is left as its Deployment says
    (anything added would make the Deployment controller create ReplicaSets endlessly)."""
    alice = As(cluster, namespace, tmp_path, ALICE)
    bob = As(cluster, namespace, tmp_path, BOB)
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/alices"
    alice.create(deployment("alices"))
    for pod in pods_of(cluster, namespace, "app=alices", 2):
        assert recorded(pod) == ALICE, pod["metadata"]

    # bob may edit the Deployment, but not its record: a change is refused, a removal is put back.
    record_path = "/spec/template/metadata/annotations/" + ANNOTATION.replace("/", "~1")
    with pytest.raises(AssertionError, match="may not be changed or removed by bob"):
        bob.kubectl(
            "patch",
            "deployment",
            "alices",
            "--type=json",
            "-p",
            json.dumps([{"op": "replace", "path": record_path, "value": userinfo.encode("bob", [])}]),
        )
    bob.kubectl(
        "patch",
        "deployment",
        "alices",
        "--type=json",
        "-p",
        json.dumps(
            [
                {"op": "remove", "path": record_path},
                {"op": "add", "path": "/spec/template/metadata/labels/tier", "value": "b"},
            ]
        ),
    )
    stored = cluster.client.get(path)
    assert stored["spec"]["template"]["metadata"]["labels"]["tier"] == "b"
    assert recorded(stored["spec"]["template"]) == ALICE
    # The rollout's first pod (the rest wait on it: a gang of two is not ready with one).
    for pod in pods_of(cluster, namespace, "app=alices,tier=b", 1):
        assert recorded(pod) == ALICE, pod["metadata"]

    # Two templates, two ReplicaSets: none was made again and again.
    replica_sets = cluster.client.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]
    assert len(replica_sets) == 2, [r["metadata"]["name"] for r in replica_sets]
    assert all(recorded(r["spec"]["template"]) == ALICE for r in replica_sets)


def test_the_chart_sends_gang_workloads_and_maps_access_control_to_flags(cluster: Cluster, namespace: str) -> None:
    manifests = render(cluster, "yp", namespace)
    gate, _native, templates, cron_jobs = one(manifests, "MutatingWebhookConfiguration")["webhooks"]
    assert (templates["name"], cron_jobs["name"]) == ("identity.yuniplace.io", "cronjob-identity.yuniplace.io")
    assert templates["rules"] == [
        {
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments", "replicasets", "statefulsets", "daemonsets"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["jobs"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        },
    ]
    assert cron_jobs["rules"][0]["resources"] == ["cronjobs"]
    for hook, template in ((templates, "object.spec.template"), (cron_jobs, "object.spec.jobTemplate.spec.template")):
        for field in ("failurePolicy", "timeoutSeconds", "namespaceSelector", "objectSelector", "clientConfig"):
            assert hook[field] == gate[field], field
        [condition] = hook["matchConditions"]
        assert f"'yunikorn.apache.org/task-groups' in {template}.metadata.annotations" in condition["expression"]
    assert "'ai-scheduler'" in gate["matchConditions"][0]["expression"]
    [pods] = one(manifests, "ValidatingWebhookConfiguration")["webhooks"]
    assert f"'{ANNOTATION}' in oldObject.metadata.annotations" in pods["matchConditions"][1]["expression"]

    values = {
        "webhook.accessControl.trustControllers": "false",
        "webhook.accessControl.externalUsers": "{^carol$}",
        "webhook.accessControl.externalGroups": "^team-a$\\, ^team-b$",
    }
    args = container_args(render(cluster, "yp", namespace, values))
    identity = [
        a
        for a in args
        if a.split("=")[0] in ("--no-trust-controllers", "--system-users", "--external-users", "--external-groups")
    ]
    assert identity == [
        "--no-trust-controllers",
        "--system-users=^system:serviceaccount:kube-system:",
        "--system-users=^system:kube-controller-manager$",
        "--external-users=^carol$",
        "--external-groups=^team-a$",
        "--external-groups=^team-b$",
    ]
    assert "an empty pattern would match every name" in refused_render(
        cluster, namespace, "--set", "webhook.accessControl.externalUsers[0]="
    )
    assert "trustControllers must be true or false" in refused_render(
        cluster, namespace, "--set-string", "webhook.accessControl.trustControllers=maybe"
    )
