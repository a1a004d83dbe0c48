"""The pending phase: admission, the start of a reservation, and the direct start (lifecycle/pending.py)."""

from __future__ import annotations

import copy

from tests.planning import (
    APP,
    GROUPS,
    KEY,
    NOW,
    ONE,
    driver,
    executor,
    names,
    nominated,
    ph_name,
    plan_of,
    reasons,
    with_record,
)
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.controller.lifecycle import RESYNC_S, plan_application
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.placeholders import placeholder_pod
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import TaskGroup


def test_waiting_ticket_keeps_the_application_pending_and_announces_why() -> None:
    view = Application.of(KEY, [driver(), executor(0), executor(1)])
    plan = plan_application(view, NOW, ticket=Waiting("waiting for free capacity: position 2 in queue default"))
    assert plan.state == AppState.PENDING and not plan.create and not plan.annotate
    assert reasons(plan) == ["GangWaiting"] and "position 2" in plan.events[0].note
    quiet = plan_application(view, NOW, ticket=Waiting("same", announce=False))
    assert quiet.events == [] and quiet.state == AppState.PENDING


def test_granted_ticket_starts_the_reservation_with_its_warning() -> None:
    view = Application.of(KEY, [driver(), executor(0), executor(1)])
    plan = plan_application(view, NOW, ticket=Granted("the gang needs more than all matching nodes hold"))
    assert plan.state == AppState.RESERVING and len(plan.create) == 3
    assert "GangExceedsCapacity" in reasons(plan)


def test_pending_originator_starts_the_reservation() -> None:
    pods = [driver(), executor(0), executor(1)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING
    assert plan.originator is pods[0]
    assert plan.annotate == {keys.STATE: "Reserving", keys.RESERVATION_STARTED: p.format_time(NOW)}
    assert names(plan.create) == [ph_name("driver", 0), ph_name("exec", 0), ph_name("exec", 1)]
    assert plan.create == [
        placeholder_pod(app_id=APP, group=TaskGroup("driver", 1, ONE), index=0, originator=pods[0]),
        placeholder_pod(app_id=APP, group=TaskGroup("exec", 2, ONE), index=0, originator=pods[0]),
        placeholder_pod(app_id=APP, group=TaskGroup("exec", 2, ONE), index=1, originator=pods[0]),
    ]
    assert reasons(plan) == ["TaskGroupMatch", "CreatingPlaceholders"]
    assert all(event.pod is pods[0] and not event.warning for event in plan.events)
    assert (
        plan.events[0].note
        == f"application {APP}: gang of 3 (driver×1, exec×2), timeout 900s, Soft style, NonStrict mode"
    )
    assert plan.events[1].note == "creating 3 placeholder pods"
    assert (plan.delete, plan.swaps, plan.ungate, plan.fail) == ([], [], [], [])
    assert plan.requeue_after_s == RESYNC_S
    assert not plan.forget


def test_number_of_placeholders_is_the_sum_of_min_members() -> None:
    groups = [{"name": f"g{i}", "minMember": i + 1, "minResource": {"cpu": "100m"}} for i in range(4)]
    plan = plan_of([driver(task_groups=groups, group="g0")])
    assert len(plan.create) == 1 + 2 + 3 + 4
    assert names(plan.create)[:3] == [ph_name("g0", 0), ph_name("g1", 0), ph_name("g1", 1)]


def test_unknown_keys_are_announced_as_warnings() -> None:
    plan = plan_of([driver(task_groups=[{**GROUPS[0], "color": "red"}, GROUPS[1]])])
    assert reasons(plan) == ["TaskGroupMatch", "CreatingPlaceholders", "TaskGroupWarning"]
    assert (
        plan.events[2].note == "task-groups[0].color is not a task-group field and is ignored"
        and plan.events[2].warning
    )


def test_an_ungated_originator_still_drives_the_reservation() -> None:
    plan = plan_of([driver(gated=False, group=None), executor(0), executor(1)])
    assert plan.state == AppState.RESERVING and len(plan.create) == 3
    assert plan.ungate == []


def test_reservation_started_is_written_when_missing() -> None:
    plan = plan_of([driver(state=AppState.RESERVING)])
    assert plan.annotate == {keys.RESERVATION_STARTED: p.format_time(NOW)}
    assert reasons(plan)[:2] == ["TaskGroupMatch", "CreatingPlaceholders"]


def test_a_gang_starting_with_a_member_larger_than_its_group_is_warned_of() -> None:
    pods = [driver(), executor(0, requests={"cpu": "1500m", "memory": "1Gi"}), executor(1)]
    plan = plan_of(pods)
    warned = [e.note for e in plan.events if e.reason == "TaskGroupWarning"]
    assert warned == [
        "task group exec: its members request more than its minResource (cpu 1500m > 1, init containers and "
        "overhead included; pod exec-0 among them): each of its members is reserved that much"
    ]
    assert {ph["spec"]["containers"][0]["resources"]["requests"]["cpu"] for ph in plan.create} == {"1", "1500m"}


def test_a_gang_admitted_onto_a_borrowed_pool_says_so_and_the_next_attempt_forgets_it() -> None:
    view = Application.of(KEY, [driver(), executor(0), executor(1)])
    plan = plan_application(view, NOW, ticket=Granted(lender="root.b"))
    assert plan.annotate[keys.BORROWED_FROM] == "root.b"
    assert "the idle ones of root.b it borrows" in plan.events[1].note
    again = Application.of(KEY, [driver(annotations={keys.BORROWED_FROM: "root.b"}), executor(0), executor(1)])
    assert plan_application(again, NOW, ticket=Granted()).annotate[keys.BORROWED_FROM] is None


def test_a_gang_given_seats_starts_its_members_on_them_without_placeholders() -> None:
    pods = [driver(), executor(0), executor(1), executor(2)]  # one executor more than its group's minimum
    seats = Granted(seats=(("driver", ("node-a",)), ("exec", ("node-b", "node-c"))))
    plan = plan_of(pods, ticket=seats)
    assert plan.state == AppState.RESERVED and not plan.create
    assert [(p.name(s.member), s.node, s.placeholder, s.direct) for s in plan.swaps] == [
        ("driver", "node-a", None, True),
        ("exec-0", "node-b", None, True),
        ("exec-1", "node-c", None, True),
    ]
    assert [s.marker for s in plan.swaps][1] == (keys.SEAT, "node-b")
    assert names(plan.ungate) == ["exec-2"]  # beyond the gang's minimum: scheduled normally
    assert reasons(plan) == ["TaskGroupMatch", "GangStarting"]
    assert "all 3 pods exist and the whole gang fits now: starting them on 3 node(s)" in plan.events[1].note
    assert plan.annotate[keys.STATE] == "Reserved" and keys.RESERVATION_STARTED in plan.annotate


def test_members_held_on_their_seats_go_to_them_on_the_next_look_and_only_to_them() -> None:
    """Members started directly stay nominated and gated until their seats are seen to hold (the executor
    holds them back); the next look sends each to its seat again, never into normal scheduling."""
    pods = [driver(), executor(0), executor(1)]
    seats = Granted(seats=(("driver", ("node-a",)), ("exec", ("node-b", "node-c"))))
    started = plan_of(pods, ticket=seats)
    held = with_record([copy.deepcopy(pod) for pod in pods], started.annotate)
    for swap in started.swaps:  # nominated and marked, still gated
        member = next(pod for pod in held if p.name(pod) == p.name(swap.member))
        nominated(member, swap.node)["metadata"]["annotations"][keys.SEAT] = swap.node
    again = plan_application(Application.of(KEY, held), NOW + 1)
    assert again.state == AppState.RESERVED and not again.create and again.ungate == []
    assert [(p.name(s.member), s.node, s.direct) for s in again.swaps] == [
        ("driver", "node-a", True),
        ("exec-0", "node-b", True),
        ("exec-1", "node-c", True),
    ]


def test_members_nominated_before_their_record_was_written_are_seated_again_as_admission_says_now() -> None:
    """The record of a direct start rides in its originator's nomination (controller/apply.py): a
    controller stopped between the nominations finds members nominated to seats and no record. The gang
    is pending still: nothing of it is released while admission holds it back, and once admitted, each
    member goes to the seat it is given now, in a plan that writes the record again."""
    pods = [driver(), executor(0), executor(1)]
    for pod, node in zip(pods, ("node-a", "node-b", "node-c"), strict=True):
        nominated(pod, node)["metadata"]["annotations"][keys.SEAT] = node
    view = Application.of(KEY, pods)
    held = plan_application(view, NOW, ticket=Waiting("waiting for free capacity"))
    assert held.state == AppState.PENDING and not held.swaps and not held.ungate and not held.create
    seats = Granted(seats=(("driver", ("node-x",)), ("exec", ("node-b", "node-y"))))
    again = plan_application(view, NOW, ticket=seats)
    assert again.state == AppState.RESERVED and not again.ungate and not again.create
    assert [(p.name(s.member), s.node, s.direct) for s in again.swaps] == [
        ("driver", "node-x", True),
        ("exec-0", "node-b", True),
        ("exec-1", "node-y", True),
    ]
    assert again.annotate[keys.STATE] == "Reserved"


def test_a_member_larger_than_its_group_is_seated_as_large_as_it_is() -> None:
    """Admission sized the seats by the group made as large as its largest member: every member starts on
    one, none into normal scheduling."""
    pods = [driver(), executor(0, requests={"cpu": "2", "memory": "1Gi"}), executor(1)]
    seats = Granted(seats=(("driver", ("node-a",)), ("exec", ("node-b", "node-c"))))
    plan = plan_of(pods, ticket=seats)
    assert [p.name(s.member) for s in plan.swaps] == ["driver", "exec-0", "exec-1"] and plan.ungate == []
    assert "TaskGroupResourceMismatch" not in reasons(plan) and "TaskGroupWarning" in reasons(plan)
