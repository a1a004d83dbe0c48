"""The typed decoder keeps exactly what the trim keeps: a pod decoded from the API's bytes reads the same
as one decoded whole and trimmed, for pods of every dialect and in every part of their life; what
is not kept (managed fields, images, volumes) is never built; an ERROR event keeps its Status whole;
and an object of a shape the types do not expect is read whole rather than lost."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import builders
from yuniplace.gang import keys, watched
from yuniplace.gang import pods as p
from yuniplace.gang.dialects import coscheduling, native

MANAGED = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:containers": {}}}}]


def as_served(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod with what the API server adds that yuniplace never reads."""
    served = json.loads(json.dumps(pod))
    served["apiVersion"], served["kind"] = "v1", "Pod"
    served["metadata"]["managedFields"] = MANAGED
    served["spec"]["volumes"] = [{"name": "token", "projected": {"sources": [{"serviceAccountToken": {}}]}}]
    served["spec"]["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]
    served["spec"]["containers"][0]["image"] = "busybox"
    served.setdefault("status", {})["conditions"] = [
        {"type": "Initialized", "status": "True"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-25T10:00:00Z"},
    ]
    return served


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


PODS = {
    "yunikorn member": builders.member(
        "m", app="a", group="g", task_groups=[builders.task_group("g", 2, {"cpu": "1"})], gates=[keys.GATE]
    ),
    "bound placeholder": builders.pod(
        "tg-a-g-0",
        labels={keys.PLACEHOLDER: "true"},
        annotations={keys.PLACEHOLDER_APP: "a"},
        node="n1",
        phase="Running",
        priority=0,
    ),
    "coscheduling member": builders.pod(
        "c", labels={coscheduling.NAME: "mpi", coscheduling.MIN_AVAILABLE: "3"}, nodeSelector={"rack": "r1"}
    ),
    "native member": builders.pod("w", schedulingGroup={"podGroupName": "pg"}),
    "sidecar and overhead": builders.pod(
        "s",
        initContainers=[{"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
        overhead={"cpu": "10m"},
    ),
}


@pytest.mark.parametrize("pod", PODS.values(), ids=PODS.keys())
def test_a_typed_event_reads_as_the_whole_event_trimmed(pod: dict[str, Any]) -> None:
    served = as_served(pod)
    event = watched.PODS.event(line("MODIFIED", served))
    assert event["type"] == "MODIFIED"
    assert p.trim(event["object"]) == p.trim(served)
    assert "managedFields" not in event["object"]["metadata"] and "volumes" not in event["object"]["spec"]
    assert "image" not in event["object"]["spec"]["containers"][0]


def test_pages_and_write_answers_are_typed_alike() -> None:
    served = as_served(PODS["yunikorn member"])
    page = watched.PODS.page(
        json.dumps({"metadata": {"resourceVersion": "7", "continue": "x"}, "items": [served]}).encode()
    )
    assert page["metadata"] == {"resourceVersion": "7", "continue": "x"}
    assert [p.trim(item) for item in page["items"]] == [p.trim(served)]
    assert p.trim(watched.PODS.object(json.dumps(served).encode())) == p.trim(served)


def test_an_error_event_keeps_its_status_whole() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
    assert watched.PODS.event(line("ERROR", status)) == {"type": "ERROR", "object": status}


def test_an_object_of_an_unexpected_shape_is_read_whole() -> None:
    odd = as_served(PODS["yunikorn member"])
    odd["spec"]["containers"] = "not a list"
    assert watched.PODS.event(line("ADDED", odd))["object"]["spec"]["containers"] == "not a list"


def test_nodes_keep_what_admission_reads() -> None:
    node = builders.node("n1", labels={"rack": "r1"}, taints=[{"key": "k", "effect": "NoSchedule"}])
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    node["status"]["images"] = [{"names": ["busybox"], "sizeBytes": 1}]
    decoded = watched.NODES.event(line("ADDED", node))["object"]
    assert decoded == {
        "metadata": node["metadata"],
        "spec": node["spec"],
        "status": {"allocatable": node["status"]["allocatable"]},
    }


def test_every_dialects_spec_fields_are_decoded() -> None:
    fields = {name: {"x": 1} for name in native.DIALECT.spec_fields}
    pod = as_served(builders.pod("x", **fields))
    spec = watched.PODS.object(json.dumps(pod).encode())["spec"]
    assert {name: spec[name] for name in fields} == {name: pod["spec"][name] for name in fields}
