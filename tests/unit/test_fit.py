"""Node filtering and hypothetical placement, as admission uses them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import builders
from yuniplace.gang.fit import MAX_REMEMBERED, Constraints, Need, Node, Room, milli

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
        builders.node(
            name, cpu, memory=memory, pods=pods, labels=labels, taints=taints or [], unschedulable=unschedulable
        )
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


def _first_fit(nodes: list[Node], free: dict[str, dict[str, int]], needs: list[Need]) -> list[int]:
    """The placement Room must give, written the plain way: every need, largest first, over every node
    in name order."""
    short = [0] * len(needs)
    for index in sorted(range(len(needs)), key=lambda i: -sum(needs[i].requests.values())):
        left = needs[index].count
        for n in sorted(nodes, key=lambda n: n.name):
            wanted = {**needs[index].requests, "pods": 1000}
            fits = min(free[n.name].get(k, 0) // v for k, v in wanted.items() if v > 0)
            if left and fits > 0 and needs[index].constraints.accepts(n):
                placed = min(left, fits)
                for k, v in wanted.items():
                    free[n.name][k] = free[n.name].get(k, 0) - v * placed
                left -= placed
        short[index] = left
    return short


nodes_strategy = st.lists(
    st.builds(
        node,
        name=st.sampled_from("abcdefgh"),
        cpu=st.sampled_from(["0", "1", "2", "4"]),
        pods=st.sampled_from(["1", "3", "110"]),
        labels=st.sampled_from([{}, {"kind": "gpu"}]),
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda n: n.name,
)
needs_strategy = st.lists(
    st.builds(
        need,
        count=st.integers(0, 6),
        cpu=st.sampled_from(["500m", "1", "2"]),
        memory=st.sampled_from(["1Gi", "0"]),
        node_selector=st.sampled_from([{}, {"kind": "gpu"}]),
    ),
    max_size=4,
)


@given(
    nodes=nodes_strategy,
    used=st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 3000)),
    rounds=st.lists(needs_strategy, max_size=4),
)
def test_room_places_as_plain_first_fit_does_and_copies_stay_apart(
    nodes: list[Node], used: dict[str, int], rounds: list[list[Need]]
) -> None:
    room = Room(nodes, {name: {"cpu": cpu, "pods": 1000} for name, cpu in used.items()})
    expected = {n.name: dict(room.free_of(n.name)) for n in nodes}
    for needs in rounds:
        before = {n.name: dict(room.free_of(n.name)) for n in nodes}
        trial = room.copy()
        assert trial.take_all(needs) == _first_fit(nodes, expected, needs)
        assert {n.name: dict(trial.free_of(n.name)) for n in nodes} == expected
        assert {n.name: dict(room.free_of(n.name)) for n in nodes} == before  # the copy took nothing from it
        room = trial
        selectors = [need.constraints for need in needs] or [Constraints()]
        accepted = [n for n in nodes if any(c.accepts(n) for c in selectors)]
        summed: dict[str, int] = {}
        for n in accepted:
            for k, v in expected[n.name].items():
                summed[k] = summed.get(k, 0) + max(0, v)
        assert room.free_on(selectors) == summed
        assert room.accepting(selectors) == {n.name for n in accepted}


def test_a_room_remembers_a_bounded_number_of_shapes() -> None:
    """Tenants choose their pods' shapes: a room kept between cycles must not grow with every one of them."""
    room = Room([node("a", cpu="1000")], {})
    for millis in range(1, 2 * MAX_REMEMBERED):
        trial = room.copy()
        assert trial.take(Need(1, {"cpu": millis}, Constraints(node_selector={"n": str(millis)}))) == 0
        assert trial.free_on([Constraints(node_selector={"n": str(millis)})]) == {}
        assert trial.take(Need(1, {"cpu": millis}, Constraints())) == 1
    assert len(room._open) <= MAX_REMEMBERED
    assert len(room._accepted) <= MAX_REMEMBERED
    assert len(room._accepted_free) <= MAX_REMEMBERED
