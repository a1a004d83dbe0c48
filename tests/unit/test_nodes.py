from __future__ import annotations

import pytest

from tests.builders import node
from yuniplace.kube.nodes import is_ready
from yuniplace.localcluster.nodes import KWOK_ANNOTATION, NodePool, Taint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu=yes:NoSchedule", Taint("gpu", "yes", "NoSchedule")),
        ("dedicated:NoExecute", Taint("dedicated", "", "NoExecute")),
        ("example.com/x=a:b:PreferNoSchedule", Taint("example.com/x", "a:b", "PreferNoSchedule")),
    ],
)
def test_taints_parse_like_kubectl(text: str, expected: Taint) -> None:
    assert Taint.parse(text) == expected


@pytest.mark.parametrize("text", ["gpu=yes", "gpu=yes:Sometimes", ":NoSchedule", ""])
def test_bad_taints_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="NoSchedule"):
        Taint.parse(text)


def test_node_manifest_is_managed_by_kwok_with_requested_capacity() -> None:
    pool = NodePool(
        count=2,
        cpu="4",
        memory="8Gi",
        pods=20,
        extended={"nvidia.com/gpu": "8"},
        labels={"pool": "gpu"},
        taints=(Taint("gpu", "yes", "NoSchedule"),),
        prefix="gpu",
    )
    assert list(pool.names()) == ["gpu-0", "gpu-1"]
    node = pool.manifest("gpu-0")
    assert node["metadata"]["annotations"][KWOK_ANNOTATION] == "fake"
    assert node["metadata"]["labels"]["pool"] == "gpu"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-0"
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "20", "nvidia.com/gpu": "8"}
    assert node["spec"]["taints"] == [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]


def test_a_node_is_ready_once_it_reports_ready_and_its_not_ready_taint_is_lifted() -> None:
    reporting = node("n1")
    reporting["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert is_ready(reporting)
    assert not is_ready(node("n1"))
    reporting["spec"]["taints"] = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    assert not is_ready(reporting)
