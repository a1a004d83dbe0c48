"""The phases that seat members: a reserved gang (and its gang group), late members (lifecycle/swapping.py, seats.py)."""

from __future__ import annotations

from typing import Any

from tests.planning import (
    APP,
    KEY,
    NOW,
    NS,
    ONE,
    Pod,
    all_placeholders,
    bind,
    deleting,
    driver,
    executor,
    make_pod,
    materialize,
    names,
    ph_name,
    placeholder,
    plan_of,
    reasons,
)
from yuniplace.controller.lifecycle import IN_FLIGHT_RECHECK_S, plan_application
from yuniplace.controller.plan import Plan, SeatsToRelease
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import coscheduling
from yuniplace.gang.placeholders import placeholder_pod
from yuniplace.gang.podshape import member_group
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits, TaskGroup
from yuniplace.runtime.events import Reason


def test_members_arriving_after_the_reservation_swap_into_what_is_left() -> None:
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False, group=None),
        executor(0),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVED
    assert [(p.name(s.member), s.node) for s in plan.swaps] == [("exec-0", "n1")]
    # The unused ones are kept until the timeout, counted from the first allocation.
    assert plan.delete == []
    assert plan.requeue_after_s == 870


def test_a_seat_left_on_a_member_of_a_gang_holding_placeholders_is_passed_over() -> None:
    """A seat is a direct start's: a gang that reserves with placeholders swaps its members into them,
    whatever seat an earlier attempt left on one."""
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False, group=None),
        executor(0, annotations={keys.SEAT: "n9"}),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert [(p.name(s.member), s.node, s.direct) for s in plan.swaps] == [("exec-0", "n1", False)]


def test_a_late_member_written_with_a_seat_of_its_own_is_scheduled_normally() -> None:
    """`yuniplace.io/seat` is yuniplace's record of a seat it gave, with the nomination it wrote: a pod
    created with one names no seat, and a member that comes after its gang started directly runs
    normally, as any beyond its reserved count."""
    pods = [
        driver(state=AppState.RUNNING, started=NOW - 100, first_allocated=NOW - 30, gated=False, node="n0"),
        executor(0, gated=False, node="n1"),
        executor(1, gated=False, node="n2"),
        executor(2, annotations={keys.SEAT: "nowhere"}),
    ]
    plan = plan_of(pods)
    assert plan.swaps == [] and names(plan.ungate) == ["exec-2"]


def test_a_gang_started_directly_is_released_onto_the_seats_its_last_reconcile_left_it() -> None:
    """The reconcile that wrote a direct start's record left its members gated, for this one to release
    on their seats once the pod watch has brought the record back (plan.SeatsToRelease)."""
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 1, first_allocated=NOW - 1),
        executor(0),
        executor(1),
    ]
    seats = {"uid-driver": "n1", "uid-exec-0": "n2", "uid-exec-1": "n2"}
    given = SeatsToRelease(seats, recorded_at=41, deadline=NOW)
    plan = plan_of(pods, seats_to_release=given)
    assert sorted((p.name(s.member), s.node, s.direct) for s in plan.swaps) == [
        ("driver", "n1", True),
        ("exec-0", "n2", True),
        ("exec-1", "n2", True),
    ]
    assert plan.seats_given == given and plan.ungate == []
    # With none left it (a controller restarted in between), they go to kube-scheduler unsteered.
    plan = plan_of(pods)
    assert plan.swaps == [] and names(plan.ungate) == ["driver", "exec-0", "exec-1"]
    assert plan.seats_given is None


def test_unused_placeholders_are_released_after_the_timeout() -> None:
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 2000, first_allocated=NOW - 901, gated=False, group=None),
        executor(0),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert [(p.name(s.member), s.node) for s in plan.swaps] == [("exec-0", "n1")]
    assert names(plan.delete) == [ph_name("driver", 0), ph_name("exec", 1)]
    assert reasons(plan) == ["PlaceholderTimeOut"]
    assert plan.events[0].note == "releasing 2 unused placeholders after 900s"


def test_running_originator_moves_reserved_to_running() -> None:
    pods = [
        driver(
            state=AppState.RESERVED,
            started=NOW - 100,
            first_allocated=NOW - 30,
            gated=False,
            node="n0",
            phase="Running",
        ),
        executor(0),
        executor(1),
        *all_placeholders(bound=True)[1:],
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.RUNNING
    assert plan.annotate == {keys.STATE: "Running"}
    assert [p.name(s.member) for s in plan.swaps] == ["exec-0", "exec-1"]


def test_a_member_larger_than_its_placeholders_after_the_gang_started_releases_one_and_runs_normally() -> None:
    """YuniKorn's rule for a late member (the gang runs already): it does not fit its placeholder."""
    big = executor(0, requests={"cpu": "1500m", "memory": "2Gi"})
    running = driver(state=AppState.RUNNING, started=NOW - 100, first_allocated=NOW - 30, gated=False, node="n9")
    pods = [running, big, executor(1), *all_placeholders(bound=True)[1:]]
    plan = plan_of(pods)
    mismatch = [e for e in plan.events if e.reason == "TaskGroupResourceMismatch"]
    assert len(mismatch) == 1 and mismatch[0].pod is big and mismatch[0].warning
    assert mismatch[0].note == (
        "requests more than task group exec's minResource (cpu 1500m > 1, memory 2Gi > 1Gi); "
        "releasing one of its placeholders and scheduling this pod normally"
    )
    assert plan.ungate == [big]
    assert names(plan.delete) == [ph_name("exec", 1)]
    assert [(p.name(s.member), p.name(s.placeholder) if s.placeholder else None) for s in plan.swaps] == [
        ("exec-1", ph_name("exec", 0)),
    ]


def test_a_resource_missing_from_min_resource_is_a_mismatch() -> None:
    gpu = executor(0, requests={"cpu": "1", "nvidia.com/gpu": "1"})
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False, node="n9"),
        gpu,
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert plan.ungate == [gpu]
    assert "nvidia.com/gpu 1 > 0" in plan.events[0].note


def test_member_with_smaller_request_swaps() -> None:
    small = executor(0, requests={"cpu": "100m"})
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        small,
        *all_placeholders(bound=True),
    ]
    assert [p.name(s.member) for s in plan_of(pods).swaps] == ["exec-0"]


def test_interrupted_swap_resumes_with_its_placeholder() -> None:
    phs = all_placeholders(bound=True)
    resumed = executor(0, nominated_to="n2", swap_placeholder=ph_name("exec", 1))
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        resumed,
        executor(1),
        *phs,
    ]
    plan = plan_of(pods)
    assert [(p.name(s.member), p.name(s.placeholder) if s.placeholder else None, s.node) for s in plan.swaps] == [
        ("exec-0", ph_name("exec", 1), "n2"),
        ("exec-1", ph_name("exec", 0), "n1"),
    ]


def test_interrupted_swap_whose_placeholder_is_gone_resumes_without_one() -> None:
    phs = [ph for ph in all_placeholders(bound=True) if p.name(ph) != ph_name("exec", 1)]
    resumed = executor(0, nominated_to="n2", swap_placeholder=ph_name("exec", 1))
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        resumed,
        executor(1),
        *phs,
    ]
    plan = plan_of(pods)
    assert [(p.name(s.member), s.placeholder, s.node) for s in plan.swaps][0] == ("exec-0", None, "n2")
    assert [(p.name(s.member), s.node) for s in plan.swaps] == [("exec-0", "n2"), ("exec-1", "n1")]


def test_interrupted_swap_whose_placeholder_is_being_deleted_resumes_without_one() -> None:
    phs = all_placeholders(bound=True)
    deleting(phs[2])
    resumed = executor(0, nominated_to="n2", swap_placeholder=ph_name("exec", 1))
    pods = [driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False), resumed, *phs]
    plan = plan_of(pods)
    assert [(p.name(s.member), s.placeholder, s.node) for s in plan.swaps] == [("exec-0", None, "n2")]


def test_no_new_swap_onto_a_node_with_a_member_in_flight() -> None:
    in_flight = executor(0, gated=False, nominated_to="n1", swap_placeholder=ph_name("exec", 0))
    phs = [placeholder("exec", 1, node="n1", scheduled_at=NOW - 30)]
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        in_flight,
        executor(1),
        *phs,
    ]
    plan = plan_of(pods)
    assert plan.swaps == [] and plan.ungate == [] and plan.delete == []
    assert plan.requeue_after_s == IN_FLIGHT_RECHECK_S
    # Once the first member is bound the node takes the next swap.
    bind(pods[1], "n1", NOW)
    assert [(p.name(s.member), s.node) for s in plan_of(pods).swaps] == [("exec-1", "n1")]


def test_a_swap_held_back_by_another_applications_member_names_the_node_it_waits_for() -> None:
    """The other member's binding is not this application's event: the controller wakes it through
    the node named here, rather than after the recheck."""
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False, node="n0"),
        executor(0),
        placeholder("exec", 0, node="n1", scheduled_at=NOW - 30),
    ]
    held = plan_application(Application.of(KEY, pods), NOW, nodes_in_flight=frozenset({"n1"}))
    assert held.swaps == [] and held.waits_for_nodes == {"n1"}
    assert held.requeue_after_s == IN_FLIGHT_RECHECK_S
    free = plan_application(Application.of(KEY, pods), NOW)
    assert [(p.name(s.member), s.node) for s in free.swaps] == [("exec-0", "n1")] and not free.waits_for_nodes


def test_a_coscheduling_gang_starts_only_once_its_whole_minimum_of_pods_exists() -> None:
    """Coscheduling (and Koordinator, and a PodGroup) turn a gang's pods away while fewer than its minimum
    exist: with all 3 placeholders placed and 2 of 3 members created, none starts; the third's arrival
    starts all three. YuniKorn's task groups keep their rule: members start as they arrive."""
    app_key = p.AppKey(NS, "mpi")

    def member(index: int) -> Pod:
        pod = make_pod(
            f"mpi-{index}",
            app=None,
            labels={coscheduling.NAME: "mpi", coscheduling.MIN_AVAILABLE: "3"},
            state=AppState.RESERVING if index == 0 else None,
            started=NOW - 20 if index == 0 else None,
            created=NOW - 60 + index,
        )
        return pod

    def seats(originator: Pod) -> list[Pod]:
        group = TaskGroup(member_group(originator), 3, ONE)
        return [
            materialize(
                placeholder_pod(app_id="mpi", group=group, index=i, originator=originator),
                created=NOW - 50,
                node=f"n{i}",
                scheduled_at=NOW - 30,
            )
            for i in range(3)
        ]

    def planned(pods: list[Pod]) -> Plan:
        return plan_application(Application.of(app_key, pods, limits=Limits()), NOW)

    first, second, third = member(0), member(1), member(2)
    two = planned([first, second, *seats(first)])
    assert two.swaps == [] and two.ungate == []
    [complete] = [e.note for e in two.events if e.reason == Reason.GANG_RESERVATION_COMPLETE]
    assert (
        complete
        == "all 3 placeholders are placed; the real pods start once all 3 exist (2 so far), as Coscheduling starts a gang"
    )
    all_three = planned([first, second, third, *seats(first)])
    assert sorted(p.name(s.member) for s in all_three.swaps) == ["mpi-0", "mpi-1", "mpi-2"]


PEERS = f'["default/{APP}", "other/eval"]'


def reserved_with_group() -> list[dict[str, Any]]:
    origin = driver(state=AppState.RESERVING, started=NOW - 30, annotations={keys.GANG_GROUP: PEERS})
    return [
        origin,
        executor(0),
        executor(1),
        placeholder("driver", 0, min_member=1, node="n1", scheduled_at=NOW - 20, owner=origin),
        placeholder("exec", 0, node="n2", scheduled_at=NOW - 20, owner=origin),
        placeholder("exec", 1, node="n3", scheduled_at=NOW - 20, owner=origin),
    ]


def test_gang_group_member_waits_reserved_for_the_others() -> None:
    view = Application.of(KEY, reserved_with_group())
    plan = plan_application(view, NOW, peers={"other/eval": AppState.RESERVING})
    assert plan.state == AppState.RESERVED and not plan.swaps and not plan.ungate
    assert "GangGroupWaiting" in reasons(plan) and "other/eval" in plan.events[-1].note


def test_gang_group_swaps_once_every_member_is_reserved() -> None:
    plan = plan_application(Application.of(KEY, reserved_with_group()), NOW, peers={"other/eval": AppState.RESERVED})
    assert len(plan.swaps) == 3


def test_gang_group_follows_a_member_that_failed() -> None:
    pods = reserved_with_group()
    pods[0]["metadata"]["annotations"][keys.SCHEDULING_POLICY_PARAMETERS] = "gangSchedulingStyle=Hard"
    plan = plan_application(Application.of(KEY, pods), NOW, peers={"other/eval": AppState.FAILED})
    assert plan.state == AppState.FAILED and not plan.swaps
    assert {f.reason for f in plan.fail} == {"ResourceReservationTimeout"}
    assert "other/eval could not be reserved" in plan.fail[0].message


def test_a_reserved_member_of_a_gang_group_follows_a_peer_that_failed() -> None:
    pods = [
        driver(
            state=AppState.RESERVED, started=NOW - 30, first_allocated=NOW - 20, annotations={keys.GANG_GROUP: PEERS}
        ),
        executor(0),
        executor(1),
        *all_placeholders(bound=True),
    ]
    view = Application.of(KEY, pods)
    plan = plan_application(view, NOW, peers={"other/eval": AppState.FAILED})
    assert plan.state == AppState.RESUMING and "PlaceholderTimeOut" in reasons(plan)
    late = plan_application(view, NOW + 900, peers={"other/eval": AppState.RESERVING})
    assert late.state == AppState.RESUMING and "still not reserved" in late.events[0].note
