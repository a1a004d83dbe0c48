"""ai-scheduler's Pools read into the queue model: each Pool a queue owning the nodes it selects and
guaranteed what they hold (when it shares), its switches mapped, the default pool taking every pod that
names no Pool or an unknown one, and every problem named by Pool and field; hostile input is refused,
never a crash."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import builders
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.queues.aischeduler import MAX_POOLS, read_ai_scheduler_pools
from yuniplace.queues.config import merge, place, read_queues_yaml, read_volcano_queues
from yuniplace.queues.model import QueueSpec
from yuniplace.queues.problems import InvalidQueues

GI = 2**30


def pool(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.aibee.cn/v1alpha1", "kind": "Pool", "metadata": {"name": name}, "spec": spec}


def selecting(**labels: str) -> dict[str, Any]:
    return {"matchLabels": labels}


def node(name: str, cpu: str = "4", memory: str = "16Gi", **labels: str) -> dict[str, Any]:
    return builders.node(name, cpu, memory=memory, labels=labels)


# ai-scheduler's two examples (README, deployment/example/masters-pool.yaml).
DEMO = pool(
    "demo",
    nodeSelector=selecting(pool="demo"),
    disablePreemption=False,
    disableBorrowing=False,
    disableSharing=False,
)
MASTERS = pool(
    "masters",
    nodeSelector=selecting(**{"kubernetes.io/role": "master"}),
    disablePreemption=True,
    disableBorrowing=True,
    disableSharing=True,
)
NODES = [
    node("demo-1", pool="demo"),
    node("demo-2", cpu="8", memory="32Gi", pool="demo"),
    node("master-1", **{"kubernetes.io/role": "master"}),
    node("plain-1"),
]


def problems(*pools: Any, nodes: tuple[Any, ...] = ()) -> list[str]:
    with pytest.raises(InvalidQueues) as refused:
        read_ai_scheduler_pools(list(pools), list(nodes))
    return [str(problem) for problem in refused.value.problems]


def placed(config: Any, provided: str | None) -> str | None:
    return place(config, provided_queue=provided, namespace="team", labels={}, service_account=None).queue


def test_the_example_pools_own_their_nodes_and_demo_is_guaranteed_what_they_hold() -> None:
    config = read_ai_scheduler_pools([DEMO, MASTERS], NODES)
    assert list(config.queues) == ["root", "root.demo", "root.masters", "root.default"]
    assert config.names == {"demo": "root.demo", "masters": "root.masters"} and config.rules == ()
    demo, masters = config.queues["root.demo"], config.queues["root.masters"]
    assert demo.node_selector == {"pool": "demo"} and demo.source == "ai-scheduler Pool demo"
    assert demo.guaranteed == {"cpu": 12000, "memory": 48 * GI * 1000, "pods": 220_000} and demo.max is None
    assert (demo.sharing, demo.borrowing, demo.preemption, demo.reclaimable) == (True, True, True, True)
    # Nobody else's gang goes to masters' nodes (it does not share); it is guaranteed them all the same.
    assert masters.node_selector == {"kubernetes.io/role": "master"}
    assert masters.guaranteed == {"cpu": 4000, "memory": 16 * GI * 1000, "pods": 110_000}
    assert (masters.sharing, masters.borrowing, masters.preemption, masters.reclaimable) == (False, False, False, True)
    assert config.warnings == ()
    # The default pool owns the node no Pool selects, and is guaranteed what it holds.
    default = config.queues["root.default"]
    assert default.owns_the_rest and default.home_nodes == ()
    assert default.guaranteed == {"cpu": 4000, "memory": 16 * GI * 1000, "pods": 110_000}
    assert read_ai_scheduler_pools([]).empty


def test_each_switch_turns_its_side_off() -> None:
    config = read_ai_scheduler_pools(
        [
            pool("keeps", nodeSelector=selecting(pool="a"), disablePreemption=True),
            pool("stays", nodeSelector=selecting(pool="b"), disableBorrowing=True),
            pool("away", disableBorrowing=True),
            pool("borrows"),
            pool("alone", nodeSelector=selecting(pool="c"), disableSharing=True, disableBorrowing=True),
        ],
        [node("a-1", pool="a"), node("b-1", pool="b"), node("c-1", pool="c")],
    )
    switches = {path: (q.sharing, q.borrowing, q.preemption) for path, q in config.queues.items()}
    assert switches == {
        "root": (True, True, True),
        "root.alone": (False, False, True),
        "root.away": (True, False, True),
        "root.borrows": (True, True, True),
        "root.keeps": (True, True, False),
        "root.stays": (True, False, True),
        "root.default": (True, True, True),
    }
    # A Pool without a node selector owns no node (its gangs only borrow), as in ai-scheduler.
    assert config.queues["root.borrows"].node_selector == {} and config.queues["root.borrows"].guaranteed == {}
    assert config.queues["root.stays"].guaranteed["cpu"] == 4000


def test_guarantees_follow_the_nodes_and_a_node_two_pools_select_counts_in_neither() -> None:
    gpu = pool("gpu", nodeSelector={"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["true"]}]})
    nodes = [
        *NODES,
        node("both", cpu="64", pool="demo", gpu="true"),
        node("gpu-1", cpu="32", gpu="true"),
        {"metadata": {"name": "capacity-only", "labels": {"gpu": "true"}}, "status": {"capacity": {"cpu": "2"}}},
        {"metadata": {"name": "odd", "labels": {"pool": "demo"}}, "status": {"allocatable": {"cpu": "lots"}}},
    ]
    config = read_ai_scheduler_pools([DEMO, gpu], nodes)
    assert config.queues["root.demo"].guaranteed["cpu"] == 12000  # `both` is the default pool's, `odd` adds nothing
    default = config.queues["root.default"]
    assert default.home_nodes == ("both",) and default.guaranteed["cpu"] == 72000  # both, plain-1, master-1
    assert config.queues["root.gpu"].guaranteed == {"cpu": 34000, "memory": 16 * GI * 1000, "pods": 110_000}
    assert config.queues["root.gpu"].node_selector == {"gpu": "true"}
    assert config.warnings == (
        'ai-scheduler Pool demo: spec.nodeSelector: {"matchLabels": {"pool": "demo"}} selects 1 node(s) Pool gpu '
        "selects too (both): they are the default pool's, as ai-scheduler gives them to it; they count in neither "
        "Pool's guarantee, and the gangs of both may still be placed on them",
        'ai-scheduler Pool gpu: spec.nodeSelector: {"matchExpressions": [{"key": "gpu", "operator": "In", "val… '
        "selects 1 node(s) Pool demo selects too (both): they are the default pool's, as ai-scheduler gives them to "
        "it; they count in neither Pool's guarantee, and the gangs of both may still be placed on them",
    )
    assert read_ai_scheduler_pools([DEMO, gpu]).queues["root.demo"].guaranteed == {}  # no node known yet


def test_a_pool_is_guaranteed_its_nodes_dra_devices_and_a_device_plugins_count_once() -> None:
    gpu = pool("gpu", nodeSelector={"matchLabels": {"gpu": "true"}})
    a100 = "deviceclass.resource.kubernetes.io/a100"
    plugin = node("plugin-1", gpu="true")
    plugin["status"]["allocatable"]["example.com/gpu"] = "4"
    nodes = [node("gpu-1", gpu="true"), node("gpu-2", gpu="true"), plugin, node("both", gpu="true", pool="demo")]
    devices = {
        "gpu-1": {a100: 8000, "example.com/gpu": 8000},
        "gpu-2": {a100: 4000, "example.com/gpu": 4000},
        "plugin-1": {"example.com/gpu": 2000},  # advertised by the node too: its own count stands
        "both": {a100: 8000},
        "gone": {a100: 8000},  # a node not (yet) seen holds nothing
    }
    config = read_ai_scheduler_pools([DEMO, gpu], nodes, devices)
    guaranteed = config.queues["root.gpu"].guaranteed
    assert guaranteed[a100] == 12000 and guaranteed["example.com/gpu"] == 16000
    assert config.queues["root.default"].guaranteed[a100] == 8000 and a100 not in config.queues["root.demo"].guaranteed


def test_pods_name_their_pool_by_its_annotation_and_the_rest_go_to_the_default_pool() -> None:
    config = merge(None, (), read_ai_scheduler_pools([DEMO, MASTERS, pool("a.b", nodeSelector=selecting(x="y"))]))
    assert list(config.queues) == ["root", "root.a_dot_b", "root.demo", "root.masters", "root.default"]
    default = config.queues["root.default"]
    assert default.source == "ai-scheduler's default pool (implicit)" and default.guaranteed == {}
    assert (default.node_selector, default.sharing, default.borrowing, default.preemption) == ({}, True, True, True)
    assert default.owns_the_rest
    annotated = {"metadata": {"annotations": {keys.AI_SCHEDULER_POOL: "demo"}, "labels": {}}}
    assert p.provided_queue(annotated) == "demo"
    assert placed(config, p.provided_queue(annotated)) == "root.demo"
    assert placed(config, "a.b") == "root.a_dot_b"
    assert placed(config, "nowhere") == "root.default"  # an unknown pool: the default pool, not refused
    assert placed(config, None) == "root.default"
    # YuniKorn's queue label, where a pod has both, comes first (the shim's own order).
    both = {"metadata": {"annotations": {keys.AI_SCHEDULER_POOL: "demo"}, "labels": {keys.YUNIKORN_QUEUE: "q"}}}
    assert p.provided_queue(both) == "q"


def test_fields_without_effect_and_unknown_ones_are_warned_of() -> None:
    config = read_ai_scheduler_pools(
        [
            pool(
                "old",
                nodeSelector={"matchLabels": {"pool": "old"}, "matchFields": ["x"]},
                weight={"cpu": 1},
                quota={"cpu": "8"},
                priority=0,
                supportResources=[],
                colour="blue",
            )
        ]
    )
    assert config.warnings == (
        'ai-scheduler Pool old: spec.nodeSelector: ["matchFields"] are not fields of a label selector: they have '
        "no effect",
        'ai-scheduler Pool old: spec.weight: {"cpu": 1} has no effect: a Pool is guaranteed what its nodes hold',
        'ai-scheduler Pool old: spec.quota: {"cpu": "8"} has no effect: a Pool is guaranteed what its nodes hold',
        'ai-scheduler Pool old: spec.colour: "blue" is not a field of ai-scheduler\'s Pool: it has no effect',
    )


def test_malformed_pools_are_refused_naming_the_pool_and_the_field() -> None:
    found = problems(
        pool("flags", nodeSelector=selecting(pool="f"), disableSharing="yes", disablePreemption=1),
        pool("exists", nodeSelector={"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}),
        pool("two", nodeSelector={"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}),
        pool(
            "contradicts",
            nodeSelector={
                "matchLabels": {"zone": "a"},
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}],
            },
        ),
        pool("everything", nodeSelector={}),
        pool("labels", nodeSelector={"matchLabels": {"gpu": True, "bad key!": "x", "zone": "not valid!"}}),
        pool("shape", nodeSelector=["pool=x"]),
        pool("twin", nodeSelector=selecting(pool="f")),
        pool("default", nodeSelector=selecting(pool="d")),
        pool("Not_A_Name"),
        pool("dotted" + ".b" * 12),
        {**pool("spec"), "spec": ["x"]},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}},
        {"metadata": {}},
        "Pool",
        pool("flags"),
    )
    assert found == [
        "ai-scheduler Pool flags: spec.disablePreemption: 1 must be true or false",
        'ai-scheduler Pool flags: spec.disableSharing: "yes" must be true or false',
        'ai-scheduler Pool exists: spec.nodeSelector.matchExpressions[0]: {"key": "gpu", "operator": "Exists"} '
        "cannot be part of a yuniplace pool, which is a set of labels with one value each: use matchLabels (or the "
        "operator In with one value)",
        'ai-scheduler Pool two: spec.nodeSelector.matchExpressions[0]: {"key": "zone", "operator": "In", "values": '
        '["a", "b"]} cannot be part of a yuniplace pool, which is a set of labels with one value each: use '
        "matchLabels (or the operator In with one value)",
        'ai-scheduler Pool contradicts: spec.nodeSelector.matchExpressions[0]: {"key": "zone", "operator": "In", '
        '"values": ["b"]} contradicts spec.nodeSelector.matchLabels.zone: no node has both',
        "ai-scheduler Pool everything: spec.nodeSelector: {} selects every node, which no yuniplace pool can own "
        "beside the others: name its labels in matchLabels, or leave the node selector out for a Pool without nodes",
        "ai-scheduler Pool labels: spec.nodeSelector.matchLabels.gpu: true must be a string (a label value; quote "
        'it: "true")',
        'ai-scheduler Pool labels: spec.nodeSelector.matchLabels: "bad key!" is not a label key',
        'ai-scheduler Pool labels: spec.nodeSelector.matchLabels.zone: "not valid!" is not a label value',
        'ai-scheduler Pool shape: spec.nodeSelector: ["pool=x"] must be a label selector (matchLabels)',
        'ai-scheduler Pool default: metadata.name: "default" is the name of ai-scheduler\'s default pool, which '
        "takes every pod naming no Pool: name the Pool otherwise",
        'ai-scheduler Pool Not_A_Name: metadata.name: "Not_A_Name" is not a Kubernetes object name',
        f'ai-scheduler Pool dotted{".b" * 12}: metadata.name: "dotted{".b" * 12}" is longer than a queue name may '
        "be (64 characters, a dot counting 5)",
        'ai-scheduler Pool spec: spec: ["x"] must be a mapping',
        'ai-scheduler Pool q: kind: "scheduling.volcano.sh/v1beta1 Queue" must be resource.aibee.cn/v1alpha1 Pool',
        "ai-scheduler Pool #13: metadata.name: null must be the Pool's name",
        'ai-scheduler Pool #14: "Pool" must be a Pool object',
        'ai-scheduler Pool flags: metadata.name: "flags" is the name of another Pool',
        'ai-scheduler Pool twin: spec.nodeSelector: {"matchLabels": {"pool": "f"}} selects the same nodes as Pool '
        "flags: ai-scheduler gives them to neither",
    ]


def test_sizes_are_bounded() -> None:
    assert problems(*[pool(f"p{i}") for i in range(MAX_POOLS + 1)]) == [
        f"ai-scheduler Pools: {MAX_POOLS + 1} Pools are more than the limit of {MAX_POOLS}"
    ]
    wide = {f"l{i}": "x" for i in range(17)}
    assert problems(pool("wide", nodeSelector={"matchLabels": wide})) == [
        "ai-scheduler Pool wide: spec.nodeSelector: 17 labels are more than the limit of 16"
    ]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)
FIELDS = st.sampled_from(
    ["nodeSelector", "matchLabels", "matchExpressions", "disableSharing", "disableBorrowing", "key", "operator"]
)
SHAPED = st.recursive(JSON, lambda children: st.dictionaries(FIELDS, children, max_size=3), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(JSON, st.builds(pool, st.sampled_from(["a", "b"]), nodeSelector=SHAPED)), max_size=4))
def test_hostile_pools_are_read_or_refused_never_a_crash(pools: list[Any]) -> None:
    nodes = [node("n", pool="demo"), {"metadata": {"labels": {"pool": ["demo"]}}}, "node", {"status": {}}]
    try:
        config = read_ai_scheduler_pools(pools, nodes)
    except InvalidQueues as error:
        assert error.problems and all(str(problem) for problem in error.problems)
    else:
        assert all(str(warning) for warning in config.warnings)


def test_values_that_are_not_json_are_shown_by_their_kind() -> None:
    assert problems(pool("when", disableSharing=datetime.date(2024, 1, 1))) == [
        'ai-scheduler Pool when: spec.disableSharing: "<date>" must be true or false'
    ]


# --- merging with the other sources ----------------------------------------------------------------


def test_a_queue_or_name_a_pool_shares_with_another_source_is_refused() -> None:
    yunikorn = read_queues_yaml(
        "partitions:\n  - queues:\n      - name: root\n        queues:\n          - name: demo\n"
    )
    with pytest.raises(InvalidQueues) as refused:
        merge(yunikorn, (), read_ai_scheduler_pools([DEMO]))
    assert [str(problem) for problem in refused.value.problems] == [
        'ai-scheduler Pool demo: root.demo: "demo" is also configured in queues.yaml: each queue is configured in '
        "one place"
    ]
    volcano = read_volcano_queues(
        [
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
            for name, spec in (("team", {}), ("demo", {"parent": "team"}))
        ]
    )
    with pytest.raises(InvalidQueues) as refused:
        merge(None, volcano, read_ai_scheduler_pools([DEMO]))
    assert [str(problem) for problem in refused.value.problems] == [
        'Volcano Queue demo: root.team.demo: metadata.name: "demo" is also the name of root.demo in ai-scheduler '
        "Pool demo: an application naming demo could mean either"
    ]


def test_the_default_pool_gives_way_to_a_configured_root_default() -> None:
    pools = read_ai_scheduler_pools([DEMO])
    volcano_default = read_volcano_queues(
        [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}}]
    )
    merged = merge(None, volcano_default, pools)
    assert merged.queues["root.default"].source == "Volcano Queue default"
    assert placed(merged, "nowhere") == "root.default"
    yunikorn = read_queues_yaml(
        "partitions:\n  - queues:\n      - name: root\n        queues:\n          - name: default\n"
    )
    assert merge(yunikorn, (), pools).queues["root.default"].source == "queues.yaml"
    # With a queues.yaml that has no root.default, the default pool still takes what its rules leave.
    bare = read_queues_yaml("partitions:\n  - queues:\n      - name: root\n        submitacl: '*'\n")
    with_pools = merge(bare, (), pools)
    assert with_pools.queues["root.default"].source == "ai-scheduler's default pool (implicit)"
    assert placed(with_pools, "nowhere") == "root.default"
    implicit = merge(None, [QueueSpec("root.x")], pools).queues["root.default"]
    assert implicit.owns_the_rest and implicit.preemption  # it takes back the nodes it owns


def test_borrowing_pools_are_the_pools_a_pool_may_borrow_from() -> None:
    """ai-scheduler's borrowingPools: the Pools a Pool's jobs borrow from (empty: every Pool that shares);
    one that is no Pool, or lends nothing, is warned of and left out."""
    config = read_ai_scheduler_pools(
        [
            pool("a", nodeSelector=selecting(pool="a"), borrowingPools=["b", "masters", "nowhere", "a"]),
            pool("b", nodeSelector=selecting(pool="b")),
            pool("c", nodeSelector=selecting(pool="c"), borrowingPools=[]),
            pool("d", nodeSelector=selecting(pool="d"), disableBorrowing=True, borrowingPools=["b"]),
            MASTERS,
        ]
    )
    assert config.queues["root.a"].lenders == ("root.b",)
    assert config.queues["root.b"].lenders is None and config.queues["root.c"].lenders is None
    assert config.warnings == (
        'ai-scheduler Pool d: spec.borrowingPools: ["b"] has no effect: the Pool does not borrow (disableBorrowing)',
        'ai-scheduler Pool a: spec.borrowingPools: "masters" does not share (disableSharing): it lends nothing',
        'ai-scheduler Pool a: spec.borrowingPools: "nowhere" names no other Pool: it is left out',
        'ai-scheduler Pool a: spec.borrowingPools: "a" names no other Pool: it is left out',
    )
    assert "spec.borrowingPools: 7 must be a list of Pool names" in problems(pool("bad", borrowingPools=7))[0]
