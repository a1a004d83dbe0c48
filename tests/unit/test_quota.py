"""The arithmetic of queues: limits at every level, borrowing beyond a guarantee, and reclaim of whole
gangs from borrowers only; table-driven cases and hypothesis properties."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from yuniplace.queues.model import QueueConfig, QueueSpec
from yuniplace.queues.quota import Holder, Ledger, reclaim

CPU = "cpu"


def config(*queues: QueueSpec) -> QueueConfig:
    return QueueConfig({q.path: q for q in (QueueSpec("root"), *queues)})


def cores(n: float) -> dict[str, int]:
    return {CPU: int(n * 1000)}


TEAMS = config(
    QueueSpec("root.a", guaranteed=cores(8), max=cores(16)),
    QueueSpec("root.b", guaranteed=cores(8), max=cores(16)),
)


def test_a_queue_at_its_max_is_blocked_and_says_so() -> None:
    ledger = Ledger(TEAMS, {"root.a": cores(14)})
    blocked = ledger.over_max("root.a", cores(4))
    assert (
        blocked is not None and "queue root.a is at its max cpu: 14 of 16 used, and the gang needs 4" == blocked.reason
    )
    assert ledger.over_max("root.a", cores(2)) is None


def test_an_ancestors_max_holds_its_whole_subtree() -> None:
    tree = config(QueueSpec("root.org", max=cores(10)), QueueSpec("root.org.x"), QueueSpec("root.org.y"))
    ledger = Ledger(tree, {"root.org.x": cores(6)})
    blocked = ledger.over_max("root.org.y", cores(5))
    assert blocked is not None and "its parent root.org's max cpu" in blocked.reason
    assert ledger.over_max("root.org.y", cores(4)) is None


def test_a_resource_the_max_leaves_out_is_not_limited() -> None:
    ledger = Ledger(config(QueueSpec("root.a", max={"memory": 1000})), {})
    assert ledger.over_max("root.a", cores(1000)) is None


def test_borrowing_beyond_the_guarantee_needs_the_switch() -> None:
    tree = config(QueueSpec("root.a", guaranteed=cores(4), borrowing=False), QueueSpec("root.b", guaranteed=cores(4)))
    ledger = Ledger(tree, {"root.a": cores(3)})
    assert ledger.borrowing_blocked("root.a", cores(1), cores(10)) is None
    blocked = ledger.borrowing_blocked("root.a", cores(2), cores(10))
    assert blocked is not None and "does not borrow" in blocked.reason


def test_the_idle_guarantee_of_a_queue_that_does_not_share_is_kept_for_it() -> None:
    tree = config(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(8), sharing=False))
    ledger = Ledger(tree, {"root.b": cores(2)})  # 6 of b's guarantee idle and kept for it, of 12 cores free
    assert ledger.borrowing_blocked("root.a", cores(6), cores(12)) is None  # 4 its own, 2 borrowed
    blocked = ledger.borrowing_blocked("root.a", cores(7), cores(12))
    assert blocked is not None and "guaranteed to queues that do not lend" in blocked.reason
    sharing = config(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(8)))
    assert Ledger(sharing, {"root.b": cores(2)}).borrowing_blocked("root.a", cores(12), cores(12)) is None


def holder(key: str, queue: str, n: float, *, priority: int = 0, arrival: float = 0, running: bool = True) -> Holder:
    return Holder(key, queue, cores(n), priority, arrival, running)


def test_reclaim_takes_placeholders_first_then_the_lowest_priority_newest_gang() -> None:
    ledger = Ledger(TEAMS, {"root.a": cores(16)})  # a borrows all of b's guarantee
    holders = [
        holder("a-old", "root.a", 4, arrival=1),
        holder("a-new", "root.a", 4, arrival=2),
        holder("a-important", "root.a", 4, priority=10, arrival=3),
        holder("a-reserving", "root.a", 4, arrival=0, running=False),
    ]
    victims = reclaim(ledger, "root.b", cores(8), holders, lambda taken: sum(h.amounts[CPU] for h in taken) >= 8000)
    assert victims is not None and [v.key for v in victims] == ["a-reserving", "a-new"]
    assert ledger.used["root.a"] == cores(16), "the ledger is left as it was"


def test_no_reclaim_beyond_the_guarantee_or_without_preemption() -> None:
    holders = [holder("a", "root.a", 16)]
    ledger = Ledger(TEAMS, {"root.a": cores(16), "root.b": cores(4)})
    assert reclaim(ledger, "root.b", cores(5), holders, lambda taken: True) is None  # would go beyond b's 8
    assert reclaim(ledger, "root.b", cores(4), holders, lambda taken: True) is not None
    stubborn = config(
        QueueSpec("root.a", guaranteed=cores(8)), QueueSpec("root.b", guaranteed=cores(8), preemption=False)
    )
    assert reclaim(Ledger(stubborn, {"root.a": cores(16)}), "root.b", cores(4), holders, lambda taken: True) is None


def test_a_queue_within_its_guarantee_is_never_a_victim() -> None:
    ledger = Ledger(TEAMS, {"root.a": cores(8)})
    assert reclaim(ledger, "root.b", cores(4), [holder("a", "root.a", 8)], lambda taken: True) is None


# -- properties ---------------------------------------------------------------------------------------

LEAVES = ("root.x.a", "root.x.b", "root.y")
amount = st.integers(0, 20)


@st.composite
def trees(draw: st.DrawFn) -> QueueConfig:
    def spec(path: str) -> QueueSpec:
        guaranteed = draw(amount)
        ceiling = draw(st.one_of(st.none(), st.integers(guaranteed, 40)))
        return QueueSpec(
            path,
            guaranteed=cores(guaranteed),
            max=None if ceiling is None else cores(ceiling),
            sharing=draw(st.booleans()),
            borrowing=draw(st.booleans()),
            preemption=draw(st.booleans()),
        )

    return config(spec("root.x"), *(spec(path) for path in LEAVES))


requests = st.lists(st.tuples(st.sampled_from(LEAVES), st.integers(1, 12)), max_size=25)


@settings(max_examples=300, deadline=None)
@given(trees(), requests)
def test_no_queue_is_ever_above_its_max(tree: QueueConfig, gangs: list[tuple[str, int]]) -> None:
    ledger = Ledger(tree, {})
    for queue, n in gangs:
        if ledger.over_max(queue, cores(n)) is None:
            ledger.take(queue, cores(n))
        for path, spec in tree.queues.items():
            if spec.max is not None:
                assert ledger.used[path].get(CPU, 0) <= spec.max[CPU], (path, ledger.used)


@settings(max_examples=300, deadline=None)
@given(trees(), requests, st.sampled_from(LEAVES), st.integers(1, 12), st.integers(0, 200))
def test_reclaim_takes_whole_gangs_and_only_from_queues_above_their_guarantee(
    tree: QueueConfig, gangs: list[tuple[str, int]], beneficiary: str, need: int, room_needed: int
) -> None:
    holders: list[Holder] = []
    held: dict[str, dict[str, int]] = {}
    for index, (queue, n) in enumerate(gangs):
        holders.append(holder(f"g{index}", queue, n, priority=index % 3, arrival=index, running=index % 2 == 0))
        held.setdefault(queue, {CPU: 0})[CPU] += n * 1000
    ledger = Ledger(tree, held)
    before = copy.deepcopy(ledger.used)

    def enough(taken: Sequence[Holder]) -> bool:
        return sum(h.amounts[CPU] for h in taken) >= room_needed * 100

    victims = reclaim(ledger, beneficiary, cores(need), holders, enough)
    assert ledger.used == before
    if victims is None:
        return
    assert tree.queues[beneficiary].preemption
    assert ledger.used[beneficiary].get(CPU, 0) + need * 1000 <= tree.queues[beneficiary].guaranteed.get(CPU, 0)
    assert len({id(v) for v in victims}) == len(victims) and all(any(v is h for h in holders) for v in victims)
    replay = Ledger(tree, held)
    for victim in victims:
        assert victim.queue != beneficiary
        assert replay.borrowed(victim.queue).get(CPU, 0) > 0, "taken from a queue at or below its guarantee"
        replay.release(victim.queue, victim.amounts)
    assert enough(victims)


def test_the_idle_guarantee_of_a_pool_that_does_not_share_is_kept_by_its_nodes_alone() -> None:
    """Others' gangs are kept off the pool's nodes, so its idle room is not in their free room: it must
    not be held out of it a second time."""
    tree = config(
        QueueSpec("root.a", guaranteed=cores(4)),
        QueueSpec("root.pool", guaranteed=cores(8), node_selector={"pool": "x"}, sharing=False),
        QueueSpec("root.b"),
    )
    ledger = Ledger(tree, {})
    assert ledger.borrowing_blocked("root.b", cores(4), cores(4)) is None
