"""Node filtering and hypothetical placement, as admission uses them."""

from __future__ import annotations

from typing import Any

import pytest

from yuniplace.gang.fit import Constraints, Need, Node, Room, milli

TAINT = {"key": "pool", "value": "gpu", "effect": "NoSchedule"}


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
) -> Node:
    return Node.of(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
        }
    )


def need(count: int, cpu: str = "1", memory: str = "1Gi", **constraints: Any) -> Need:
    return Need(count, {"cpu": milli(cpu), "memory": milli(memory)}, Constraints(**constraints))


def test_quantities_are_milli_units_rounded_up() -> None:
    assert milli("500m") == 500
    assert milli("1Gi") == 2**30 * 1000
    assert milli("0.0001") == 1


def test_node_selector_must_match_every_label() -> None:
    gpu = node("a", labels={"kind": "gpu", "zone": "z1"})
    assert Constraints(node_selector={"kind": "gpu"}).accepts(gpu)
    assert not Constraints(node_selector={"kind": "gpu", "zone": "z2"}).accepts(gpu)


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "pool", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "pool", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"key": "pool", "value": "cpu"}, False),
        ({"key": "pool", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_taints_need_a_matching_toleration(toleration: dict[str, Any], tolerated: bool) -> None:
    assert Constraints(tolerations=(toleration,)).accepts(node("a", taints=[TAINT])) is tolerated


def test_prefer_no_schedule_taints_do_not_block() -> None:
    assert Constraints().accepts(node("a", taints=[{**TAINT, "effect": "PreferNoSchedule"}]))


def test_cordoned_nodes_take_nobody() -> None:
    assert not Constraints().accepts(node("a", unschedulable=True))


@pytest.mark.parametrize(
    ("expression", "holds"),
    [
        ({"key": "zone", "operator": "In", "values": ["z1", "z2"]}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["z1"]}, False),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "rack", "operator": "DoesNotExist"}, True),
        ({"key": "cores", "operator": "Gt", "values": ["16"]}, True),
        ({"key": "cores", "operator": "Lt", "values": ["16"]}, False),
    ],
)
def test_required_node_affinity_expressions(expression: dict[str, Any], holds: bool) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
    assert Constraints(affinity=affinity).accepts(node("a", labels={"zone": "z1", "cores": "32"})) is holds


def test_node_affinity_terms_are_alternatives_and_fields_match_the_name() -> None:
    terms = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]},
    ]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    assert Constraints(affinity=affinity).accepts(node("b"))
    assert not Constraints(affinity=affinity).accepts(node("a"))


def test_room_counts_resources_and_pod_slots_per_node() -> None:
    room = Room([node("a", cpu="4", pods="3"), node("b", cpu="2")], {"a": {"cpu": 1000, "pods": 1000}})
    # a: 3 CPU free but 2 pod slots; b: 2 CPU.
    assert room.take(need(5)) == 4


def test_fits_consumes_only_on_success() -> None:
    room = Room([node("a", cpu="4")], {})
    assert not room.reserve([need(5)])
    assert room.reserve([need(3)])
    assert not room.reserve([need(2)])
    assert room.reserve([need(1)])


def test_constrained_needs_only_use_accepted_nodes() -> None:
    room = Room([node("a", cpu="8", labels={"kind": "gpu"}), node("b", cpu="8")], {})
    assert room.take_all([need(10, node_selector={"kind": "gpu"})]) == [2]


def test_larger_pods_are_placed_first_so_small_ones_do_not_fragment_the_room() -> None:
    room = Room([node("a", cpu="4"), node("b", cpu="4")], {})
    assert room.take_all([need(4, cpu="1"), need(1, cpu="4")]) == [0, 0]
