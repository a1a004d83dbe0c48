"""Each gang dialect's example (examples/dialects) through the whole gang flow on the real control
plane: placeholders, swap onto reserved nodes, the Job complete, nothing left behind."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.support import Cluster, ControllerProcess, NamespaceRecorder, Placement, placeholders
from yuniplace.gang import keys
from yuniplace.gang.dialects import MEMBER_GROUP
from yuniplace.localcluster import wait_until
from yuniplace.tools import status

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "dialects"
CRDS = ROOT / "charts" / "yuniplace" / "crds"


@pytest.fixture(scope="module")
def pod_group_api(cluster: Cluster) -> Iterator[None]:
    """The chart's PodGroup CRD, installed as `helm install` installs it, and served."""
    for crd in sorted(CRDS.glob("*.yaml")):
        cluster.kubectl("apply", "--server-side", "-f", str(crd))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podgroups.scheduling.x-k8s.io")
    wait_until(lambda: cluster.client.get(keys.POD_GROUP_API), 30)
    yield


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def as_submitted(job: dict[str, Any], place: Placement) -> dict[str, Any]:
    """The example's Job on the test's own nodes, its pods gated as yuniplace's webhook gates them."""
    job = copy.deepcopy(job)
    spec = job["spec"]["template"]["spec"]
    spec["nodeSelector"] = dict(place.node_selector)
    spec["tolerations"] = list(place.tolerations)
    spec["schedulingGates"] = [{"name": keys.GATE}]
    return job


@pytest.mark.parametrize("example", ["coscheduling-job.yaml", "koordinator-job.yaml", "podgroup.yaml"])
def test_dialect_example_runs_through_the_gang_flow(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], recorder: NamespaceRecorder,
    pod_group_api: None, tmp_path: Path, example: str
) -> None:
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path)
    process.start()
    try:
        place = pool(4, cpu="4", memory="16Gi")
        pod_group: dict[str, Any] | None = None
        job: dict[str, Any] | None = None
        for document in documents(example):
            if document["kind"] == "PodGroup":
                pod_group = cluster.client.create(f"{keys.POD_GROUP_API}/namespaces/{namespace}/podgroups", document)
            elif document["kind"] == "Job":
                job = as_submitted(document, place)
                cluster.client.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
        assert job is not None
        name, completions = job["metadata"]["name"], job["spec"]["completions"]

        def complete() -> bool:
            status = cluster.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}").get("status", {})
            return status.get("succeeded", 0) == completions

        wait_until(complete, 90)
        assert len(recorder.placeholder_uids) == completions, sorted(recorder.placeholder_uids)
        reserved = recorder.group_nodes(MEMBER_GROUP)
        pods = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={name}")["items"]
        assert len(pods) == completions
        assert all(pod["spec"]["nodeName"] in reserved for pod in pods), "a member ran off the reserved nodes"
        wait_until(lambda: not placeholders(cluster, namespace), 30)
        rows = status.collect(cluster.client, namespace, name)
        assert [(r["application"], r["groups"][0]["name"], r["groups"][0]["required"]) for r in rows] == \
            [(name, MEMBER_GROUP, completions)], rows
        if pod_group is not None:
            path = f"{keys.POD_GROUP_API}/namespaces/{namespace}/podgroups/{pod_group['metadata']['name']}"
            shown = wait_until(lambda: (s := cluster.client.get(path).get("status", {})).get("phase") == "Finished" and s, 30)
            assert shown["succeeded"] == completions and shown["scheduled"] == completions, shown
    finally:
        assert process.stop() == 0, process.log()
