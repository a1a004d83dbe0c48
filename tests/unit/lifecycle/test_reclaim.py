"""The phase of a gang whose room is taken back (lifecycle/reclaim.py)."""

from __future__ import annotations

from tests.planning import (
    KEY,
    NOW,
    ONE,
    Pod,
    all_placeholders,
    driver,
    executor,
    make_pod,
    names,
    ph_name,
    plan_of,
    reasons,
)
from yuniplace.gang import keys
from yuniplace.gang.application import Application
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits

RECLAIM = "queue root.a takes back room"


def test_a_gang_holding_only_placeholders_has_not_started() -> None:
    pods = [driver(state=AppState.RESERVED, started=NOW - 5), executor(0), executor(1), *all_placeholders(bound=True)]
    assert not Application.of(KEY, pods, limits=Limits()).started()


def test_a_reclaimed_gang_is_evicted_once_and_its_event_counts_its_pods() -> None:
    """`GangPreempted` counts the pods it evicts ("its pod", "its 2 pods"); while they are on their way
    out, a reclaim still in force evicts nothing more and says nothing more."""
    one = [{"name": "solo", "minMember": 1, "minResource": ONE}]

    def gang(members: int, *, deleted: bool = False) -> list[Pod]:
        groups = one if members == 1 else [{"name": "solo", "minMember": members, "minResource": ONE}]
        return [
            make_pod(
                f"m{i}",
                task_groups=groups if i == 0 else None,
                group="solo",
                state=AppState.RUNNING if i == 0 else None,
                gated=False,
                phase="Running",
                node="n1",
                deleted=deleted,
            )
            for i in range(members)
        ]

    for members, counted in ((1, "evicting its pod"), (2, "evicting its 2 pods")):
        plan = plan_of(gang(members), reclaimed=RECLAIM)
        assert [e.note for e in plan.events] == [f"queue root.a takes back room: {counted}"]
        assert len(plan.evict) == members
    gone = plan_of(gang(2, deleted=True), reclaimed=RECLAIM)
    assert (gone.events, gone.evict) == ([], [])


def test_a_gang_reclaimed_while_its_members_swap_in_is_evicted_whole_not_given_back() -> None:
    """Its placeholders were deleted and its members released (each names the placeholder whose place it
    took) when the reclaim came; none is bound yet. Giving the reservation back would leave them to
    bind without it and, after the backoff, reserve a second time beside them: it goes whole instead."""
    pods = [
        driver(
            state=AppState.RESERVED,
            started=NOW - 5,
            first_allocated=NOW - 4,
            gated=False,
            swap_placeholder=ph_name("driver", 0),
        ),
        executor(0, gated=False, swap_placeholder=ph_name("exec", 0)),
        executor(1, gated=False, swap_placeholder=ph_name("exec", 1)),
    ]
    assert Application.of(KEY, pods, limits=Limits()).started()
    plan = plan_of(pods, reclaimed=RECLAIM)
    assert plan.state == AppState.RESERVED and keys.RETRY_AFTER not in plan.annotate
    assert names(plan.evict) == ["driver", "exec-0", "exec-1"]
    assert [e.note for e in plan.events] == ["queue root.a takes back room: evicting its 3 pods"]


def test_a_reclaimed_gang_that_holds_only_placeholders_gives_them_back_and_borrows_afresh() -> None:
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 5, annotations={keys.BORROWED_FROM: "root.b"}),
        executor(0),
        executor(1),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods, reclaimed=RECLAIM)
    assert plan.state == AppState.PENDING and reasons(plan) == ["GangPreempted"]
    assert plan.annotate[keys.BORROWED_FROM] is None and len(plan.delete) == 3


def test_a_reclaimed_gang_whose_pods_are_on_their_way_out_is_left_alone() -> None:
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 5),
        executor(0, gated=False, node="n1", deleted=True),
        executor(1),
    ]
    plan = plan_of(pods, reclaimed=RECLAIM)
    assert plan.state == AppState.RESERVING and plan.events == [] and plan.delete == []


def test_a_reclaimed_gang_whose_record_says_it_runs_is_evicted_though_no_member_is_seated() -> None:
    """Its record says Running (written by hand, or its members since gone) with none of its members
    seated: it is a gang that started all the same, whose room is given back by evicting it, never taken
    back to reserving (a move the table has not from Running)."""
    pods = [driver(state=AppState.RUNNING, started=NOW - 60, gated=False), executor(0, gated=False)]
    pods += all_placeholders(bound=True)
    plan = plan_of(pods, reclaimed=RECLAIM)
    assert plan.state == AppState.RUNNING and names(plan.evict) == ["driver", "exec-0"]
    assert sorted(names(plan.delete)) == sorted(ph_name(g, i) for g, i in (("driver", 0), ("exec", 0), ("exec", 1)))
    assert reasons(plan) == ["GangPreempted"]
