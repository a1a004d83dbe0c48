"""Room that can come: Karpenter's NodePools and NodeClaims read as nodes yet to come (admission/growth.py),
and admission's decisions over them (a gang that fits only there reserves with placeholders at once,
two gangs never take half of a pool's limit each, a gang no pool can hold waits and names the pool)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tests.unit.test_decision import NOW, RULES, app, nodes, snapshot
from yuniplace.admission.decision import AdmissionRules, decide
from yuniplace.admission.growth import (
    COMING_PREFIX,
    UNBOUNDED,
    Coming,
    Growth,
    is_coming,
)
from yuniplace.admission.snapshot import Snapshot
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.gang.fit import Constraints, Node, Room
from yuniplace.localcluster.karpenter import node_pool

KWOK_CPU = "karpenter.kwok.sh/instance-cpu"


def pool(name: str = "batch", *, cpu: int = 4, limit: int | None = 16, **fields: Any) -> dict[str, Any]:
    """A NodePool as `scripts/cluster up --autoscaler karpenter` makes it: kwok nodes of `cpu` CPUs."""
    return node_pool(name, cpu=cpu, limits={"cpu": str(limit)} if limit is not None else None, **fields)


def claim(name: str, pool_name: str = "batch", *, cpu: str = "4", node: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"capacity": {"cpu": cpu, "memory": "8Gi"}, "allocatable": {"cpu": cpu, "memory": "8Gi"}}
    if node:
        status["nodeName"] = node
    return {
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool_name}},
        "spec": {"requirements": [{"key": KWOK_CPU, "operator": "In", "values": [cpu]}]},
        "status": status,
    }


def coming(
    pools: Sequence[Mapping[str, Any]], claims: Sequence[Mapping[str, Any]] = (), there: frozenset[str] = frozenset()
) -> Coming:
    growth = Growth()
    growth.pools_listed(pools)
    growth.claims_listed(claims)
    return growth.coming(lambda name: name in there)


def test_a_pool_of_known_node_size_can_make_as_many_nodes_as_its_limits_hold() -> None:
    [made] = coming([pool(limit=16)]).pools
    assert made.shape_known and made.template.allocatable["cpu"] == 4000
    assert made.template.allocatable["memory"] == UNBOUNDED  # its requirements bound CPUs alone
    nodes_ = made.coming()
    assert len(nodes_) == 4 and all(is_coming(node.name) and node.coming_from == "batch" for node in nodes_)
    assert made.describe() == "NodePool batch (nodes of cpu 4; cpu limit 16, 0 made)"


def test_what_its_nodeclaims_made_counts_against_its_limits_and_an_unregistered_one_is_room_to_come() -> None:
    """Two NodeClaims of 4 CPUs: one's node is there (room there is), the other's not yet (a node yet to
    come, with its room); the limit of 16 holds two more."""
    seen = coming([pool(limit=16)], [claim("a", node="node-a"), claim("b")], there={"node-a"})
    [made] = seen.pools
    assert made.made["cpu"] == 8000 and made.left() == {"cpu": 8000}
    names = [node.name for node in seen.nodes]
    assert names == [f"{COMING_PREFIX}batch/0", f"{COMING_PREFIX}batch/1", f"{COMING_PREFIX}batch/claim/b"]


def test_a_pool_at_its_limit_makes_no_more_and_one_without_limits_makes_many() -> None:
    full = coming([pool(limit=8)], [claim("a"), claim("b")])
    assert [node.name for node in full.nodes] == [f"{COMING_PREFIX}batch/claim/a", f"{COMING_PREFIX}batch/claim/b"]
    assert len(coming([pool(limit=None)]).nodes) == 1000  # MAX_COMING_PER_POOL


def test_a_pool_whose_node_size_is_unknown_is_one_node_as_large_as_its_limits_leave() -> None:
    unsized = pool(limit=24)
    unsized["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}
    ]
    [node] = coming([unsized]).nodes
    assert node.allocatable["cpu"] == 24000 and node.allocatable["nvidia.com/gpu"] == UNBOUNDED
    assert coming([unsized]).pools[0].describe() == "NodePool batch (nodes of any size; cpu limit 24, 0 made)"


def test_labels_a_pool_leaves_open_accept_any_value_they_may_take() -> None:
    zoned = pool()
    zoned["spec"]["template"]["spec"]["requirements"].append(
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}
    )
    zoned["spec"]["template"]["metadata"]["labels"] = {"team": "ml"}
    [made] = coming([zoned]).pools
    node = made.template
    assert node.labels["team"] == "ml" and node.labels["karpenter.sh/nodepool"] == "batch"
    assert node.labels["kubernetes.io/arch"] == "amd64"  # one value: fixed
    assert Constraints({"topology.kubernetes.io/zone": "b"}).accepts(node)
    assert not Constraints({"topology.kubernetes.io/zone": "c"}).accepts(node)
    assert Constraints({"karpenter.sh/capacity-type": "on-demand"}).accepts(node)
    assert not Constraints({"team": "web"}).accepts(node)

    def affinity(operator: str, values: list[str]) -> Constraints:
        term = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": operator, "values": values}]}
        return Constraints(
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
        )

    assert affinity("In", ["b", "c"]).accepts(node) and not affinity("In", ["c"]).accepts(node)
    assert affinity("NotIn", ["a"]).accepts(node) and not affinity("NotIn", ["a", "b"]).accepts(node)
    assert not affinity("DoesNotExist", []).accepts(node) and affinity("Exists", []).accepts(node)


def test_a_node_pool_that_cannot_be_read_is_left_out_and_breaks_nothing() -> None:
    broken = [
        {"metadata": {}},
        {"metadata": {"name": "x"}, "spec": "nonsense", "status": {"resources": ["no"]}},
        {"metadata": {"name": "y"}, "spec": {"limits": {"cpu": "lots"}, "template": {"spec": {"requirements": "x"}}}},
    ]
    seen = coming(broken, [{"metadata": {"name": "c"}, "status": {"capacity": "?"}}])
    assert [made.name for made in seen.pools] == ["x", "y"]
    assert all(made.limits == {} for made in seen.pools)


# -- admission over nodes yet to come ------------------------------------------------------------------


def with_growth(base: Snapshot, seen: Coming) -> Snapshot:
    """The snapshot as admission reads it where an autoscaler can grow the cluster."""
    view = base.room.with_coming(seen.nodes)
    return replace(base, room=view, empty=base.room.whole_room(seen.nodes), coming=seen)


def full(count: int) -> tuple[list[Node], dict[str, tuple[str, int]]]:
    """`count` nodes of 4 CPUs, 3 of each taken."""
    return nodes(count), {f"busy-{i}": (f"n{i}", 3) for i in range(count)}


def gang_of(name: str, members: int, cpu: int, created: float) -> Any:
    made = app(name, members, created=created, present=members)
    groups = tuple(replace(group, min_resource={"cpu": str(cpu)}) for group in made.spec.groups)
    return replace(made, spec=replace(made.spec, groups=groups))


def test_a_gang_that_fits_only_on_nodes_to_come_reserves_with_placeholders_at_once() -> None:
    cluster, takes = full(2)
    seen = with_growth(snapshot(cluster, [gang_of("a", 2, 3, 1)], takes=takes), coming([pool(limit=16)]))
    ticket = decide(seen, RULES).tickets[seen_key("a")]
    assert ticket == Granted(grows=("batch",))  # placeholders, no seats: nothing to seat it on yet


def test_a_gang_that_fits_the_room_there_is_starts_there_and_counts_on_no_growth() -> None:
    seen = with_growth(snapshot(nodes(2), [gang_of("a", 2, 3, 1)]), coming([pool(limit=16)]))
    ticket = decide(seen, RULES).tickets[seen_key("a")]
    assert isinstance(ticket, Granted) and ticket.seats and not ticket.grows


def test_two_gangs_and_room_to_come_for_one_admit_one_and_the_other_waits_naming_the_pool() -> None:
    cluster, takes = full(2)
    apps = [gang_of("a", 2, 3, 1), gang_of("b", 2, 3, 2)]
    seen = with_growth(snapshot(cluster, apps, takes=takes), coming([pool(limit=8)]))
    tickets = decide(seen, RULES).tickets
    assert tickets[seen_key("a")] == Granted(grows=("batch",))
    waiting = tickets[seen_key("b")]
    assert isinstance(waiting, Waiting) and "b/workers: 0 of 2 pods of (cpu 3) fit" in waiting.message
    assert "NodePool batch (nodes of cpu 4; cpu limit 8, 0 made)" in waiting.message


def test_a_gang_no_pool_could_ever_hold_waits_and_says_which_pools_and_limits() -> None:
    cluster, takes = full(2)
    seen = with_growth(snapshot(cluster, [gang_of("a", 5, 3, 1)], takes=takes), coming([pool(limit=8)]))
    waiting = decide(seen, RULES).tickets[seen_key("a")]
    assert isinstance(waiting, Waiting) and waiting.times_out
    assert waiting.message.startswith(
        "the gang needs more than all matching nodes hold and its node pools can still make"
    )
    assert "NodePool batch (nodes of cpu 4; cpu limit 8, 0 made)" in waiting.message


def test_a_gang_no_pool_takes_is_admitted_anyway_as_without_an_autoscaler() -> None:
    """The pool's nodes are tainted, and the gang does not tolerate it: only the nodes there are count."""
    tainted = pool(limit=64, taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    cluster, takes = full(2)
    seen = with_growth(snapshot(cluster, [gang_of("a", 5, 3, 1)], takes=takes), coming([tainted]))
    ticket = decide(seen, RULES).tickets[seen_key("a")]
    assert isinstance(ticket, Granted) and ticket.warning and not ticket.grows


def test_placeholders_for_an_autoscaler_admission_cannot_read_come_when_their_time_is_up() -> None:
    """--create-placeholders-after: the cycle that creates them is due when the head's time is up, not
    only when room frees."""
    cluster, takes = full(2)
    head = replace(gang_of("a", 2, 3, 1), queued_since=NOW - 4)
    rules = AdmissionRules(placeholders_after_s=10)
    decided = decide(snapshot(cluster, [head], takes=takes), rules)
    assert isinstance(decided.tickets[seen_key("a")], Waiting) and decided.next_cycle_at == NOW + 6
    later = decide(replace(snapshot(cluster, [head], takes=takes), now=NOW + 6), rules)
    ticket = later.tickets[seen_key("a")]
    assert isinstance(ticket, Granted) and "creating its placeholders anyway" in str(ticket.warning)


def seen_key(name: str) -> Any:
    return app(name, 1, created=0).key


def test_room_to_come_never_counts_for_queues_or_ever_as_room_there_is() -> None:
    """Nodes yet to come sort after every node there is, so first fit uses the room there is first."""
    real = Node("zz-last-real-node", {}, (), {"cpu": 4000, "pods": 110_000})
    seen = coming([pool(limit=8)])
    room = Room([real, *seen.nodes], {})
    assert [node.name for node in room.nodes][0] == "zz-last-real-node"
    assert not any(is_coming(node.name) for node in nodes(3))
