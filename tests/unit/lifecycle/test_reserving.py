"""The reserving phase: placeholders made, made again, counted; Strict mode (lifecycle/reserving.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.planning import (
    KEY,
    NOW,
    all_placeholders,
    apply,
    bind,
    deleting,
    driver,
    executor,
    names,
    ph_name,
    placeholder,
    plan_of,
    reasons,
    schedule,
    unschedulable,
)
from yuniplace.controller.lifecycle import plan_application
from yuniplace.controller.plan import Settings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.keys import FIRST_ALLOCATED
from yuniplace.gang.state import AppState


def test_planning_again_creates_nothing_twice() -> None:
    pods = [driver(), executor(0), executor(1)]
    first = plan_of(pods)
    pods = apply(pods, first, NOW)
    second = plan_of(pods, NOW + 1)
    assert second.state == AppState.RESERVING
    assert second.create == []
    assert second.annotate == {}
    assert second.events == []
    assert (second.delete, second.swaps, second.ungate) == ([], [], [])
    assert second.requeue_after_s == 899  # until reservation-started + timeout


def test_only_missing_placeholders_are_created() -> None:
    pods = [driver(state=AppState.RESERVING, started=NOW - 10), placeholder("exec", 1)]
    plan = plan_of(pods)
    assert names(plan.create) == [ph_name("driver", 0), ph_name("exec", 0)]


def test_a_failed_placeholder_is_deleted_and_then_recreated() -> None:
    failed = placeholder("exec", 0, phase="Failed")
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 10),
        placeholder("driver", 0, min_member=1),
        failed,
        placeholder("exec", 1),
    ]
    plan = plan_of(pods)
    assert plan.delete == [failed] and plan.create == []
    pods = apply(pods, plan, NOW)
    assert names(plan_of(pods).create) == [ph_name("exec", 0)]


def test_a_placeholder_being_deleted_is_neither_recreated_nor_counted() -> None:
    pods = [driver(state=AppState.RESERVING, started=NOW - 10), *all_placeholders(bound=True)]
    deleting(pods[-1])
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING
    assert plan.create == [] and plan.delete == []


def test_partial_placement_keeps_waiting_until_the_first_placement_times_out() -> None:
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 100),
        executor(0),
        executor(1),
        *all_placeholders(bound=False),
    ]
    bind(pods[3], "n0", NOW - 40)
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING
    assert plan.swaps == [] and plan.ungate == [] and plan.create == []
    assert plan.requeue_after_s == 900 - 40  # counted from the first placement, not the reservation's start


def test_the_first_placement_is_recorded_while_the_reservation_is_partial() -> None:
    pods = [driver(state=AppState.RESERVING, started=NOW - 100), executor(0), *all_placeholders(bound=False)]
    bind(pods[2], "n0", NOW - 40)
    assert plan_of(pods).annotate == {FIRST_ALLOCATED: p.format_time(NOW - 40)}


def test_placeholders_made_again_do_not_move_the_timeout_later() -> None:
    """Placeholders deleted and made again, or a reservation given back to a reclaim and begun again,
    keep the clock of the first placement recorded: a new placement does not give the gang more time."""
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 1000, first_allocated=NOW - 901),
        executor(0),
        *all_placeholders(bound=False),
    ]
    bind(pods[2], "n0", NOW - 5)
    plan = plan_of(pods)
    assert "PlaceholderTimeOut" in reasons(plan)
    assert FIRST_ALLOCATED not in plan.annotate


def test_all_placeholders_placed_means_reserved_and_members_swap_in() -> None:
    members = [driver(state=AppState.RESERVING, started=NOW - 100), executor(0), executor(1), executor(2)]
    phs = all_placeholders(bound=True, scheduled_at=NOW - 30)
    bind(phs[2], "n2", NOW - 20)
    plan = plan_of([*members, *phs])
    assert plan.state == AppState.RESERVED
    assert plan.annotate == {keys.STATE: "Reserved", FIRST_ALLOCATED: p.format_time(NOW - 30)}
    assert reasons(plan) == ["PlaceholderAllocated", "PlaceholderAllocated", "GangReservationComplete"]
    assert [e.note for e in plan.events] == [
        "task group driver: 1/1 placeholders placed on 1 node(s)",
        "task group exec: 2/2 placeholders placed on 2 node(s)",
        "all 3 placeholders are placed; swapping the real pods in",
    ]
    assert all(e.pod is members[0] and not e.warning for e in plan.events)
    swaps = [(p.name(s.member), p.name(s.placeholder) if s.placeholder else None, s.node, s.group) for s in plan.swaps]
    assert swaps == [
        ("driver", ph_name("driver", 0), "n0", "driver"),
        ("exec-0", ph_name("exec", 0), "n1", "exec"),
        ("exec-1", ph_name("exec", 1), "n2", "exec"),
    ]
    for swap in plan.swaps:
        assert swap.placeholder is not None
        assert p.task_group_name(swap.placeholder) == p.task_group_name(swap.member) == swap.group
        assert p.node_name(swap.placeholder) == swap.node
    # A member beyond the reserved count runs normally.
    assert names(plan.ungate) == ["exec-2"]
    assert plan.delete == [] and plan.create == []


def test_placeholders_found_placed_while_pending_go_straight_to_reserved() -> None:
    plan = plan_of([driver(), executor(0), executor(1), *all_placeholders(bound=True)])
    assert plan.state == AppState.RESERVED
    assert plan.annotate[keys.STATE] == "Reserved"
    assert plan.annotate[keys.RESERVATION_STARTED] == p.format_time(NOW)
    assert reasons(plan) == [
        "TaskGroupMatch",
        "CreatingPlaceholders",
        "PlaceholderAllocated",
        "PlaceholderAllocated",
        "GangReservationComplete",
    ]
    assert len(plan.swaps) == 3


def test_a_member_larger_than_its_group_before_the_gang_starts_is_reserved_its_size() -> None:
    """Its task group's placeholders are too small for it: none of the gang starts, they are given back,
    and made again as large as the member (so it never starts alone, into normal scheduling)."""
    big = executor(0, requests={"cpu": "1500m", "memory": "2Gi"})
    pods = [driver(state=AppState.RESERVING, started=NOW - 100), big, executor(1), *all_placeholders(bound=True)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING and plan.swaps == [] and plan.ungate == []
    assert names(plan.delete) == [ph_name("exec", 0), ph_name("exec", 1)]
    assert [e.note for e in plan.events if e.reason == "TaskGroupWarning"] == [
        "task group exec: its members request more than its placeholders hold (cpu 1500m > 1, memory 2Gi > 1Gi, "
        "init containers and overhead included): making them again that large before any member starts"
    ]
    (group,) = [g for g in Application.of(KEY, pods).spec.groups if g.name == "exec"]  # type: ignore[union-attr]
    assert dict(group.min_resource) == {"cpu": "1500m", "memory": "2Gi"}
    gone = apply(pods, plan, NOW)
    again = plan_of(gone)
    assert [ph["spec"]["containers"][0]["resources"]["requests"] for ph in again.create] == [
        {"cpu": "1500m", "memory": "2Gi"},
        {"cpu": "1500m", "memory": "2Gi"},
    ]
    started = plan_of(schedule(apply(gone, again, NOW), NOW))
    assert sorted(p.name(s.member) for s in started.swaps) == ["driver", "exec-0", "exec-1"]
    assert "TaskGroupResourceMismatch" not in reasons(started)


@pytest.mark.parametrize("state", [AppState.RESERVING, AppState.PENDING])
def test_bound_originator_when_the_last_placeholder_is_placed(state: AppState) -> None:
    pods = [
        driver(state=state, started=NOW - 100, gated=False, group=None, node="n9", phase="Running"),
        executor(0),
        executor(1),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert plan.state in (AppState.RESERVED, AppState.RUNNING)
    assert [p.name(s.member) for s in plan.swaps] == ["exec-0", "exec-1"]


def reserving(mode: str, *, started: float = NOW - 30) -> list[dict[str, Any]]:
    origin = driver(state=AppState.RESERVING, started=started, annotations={keys.GANG_MODE: mode})
    return [
        origin,
        executor(0),
        executor(1),
        placeholder("driver", 0, min_member=1, node="n1", scheduled_at=NOW - 20, owner=origin),
        placeholder("exec", 0, node="n2", scheduled_at=NOW - 20, owner=origin),
        unschedulable(placeholder("exec", 1, owner=origin)),
    ]


def test_strict_releases_a_partial_reservation_and_backs_off() -> None:
    view = Application.of(KEY, reserving("Strict"))
    plan = plan_application(view, NOW, Settings(strict_backoff_s=10))
    assert plan.state == AppState.PENDING
    assert sorted(p.name(ph) for ph in plan.delete) == sorted(p.name(ph) for ph in view.placeholders)
    assert plan.annotate[keys.ATTEMPTS] == "1"
    assert plan.annotate[keys.RETRY_AFTER] == p.format_time(NOW + 10)
    assert "GangReservationReleased" in reasons(plan) and "Insufficient cpu" in plan.events[0].note
    assert plan.requeue_after_s == 10


def test_strict_backoff_doubles_and_the_retry_creates_placeholders_again() -> None:
    origin = driver(
        state=AppState.PENDING,
        started=NOW - 60,
        annotations={keys.GANG_MODE: "Strict", keys.ATTEMPTS: "2", keys.RETRY_AFTER: p.format_time(NOW + 5)},
    )
    view = Application.of(KEY, [origin, executor(0), executor(1)])
    early = plan_application(view, NOW)
    assert early.state == AppState.PENDING and not early.create and early.requeue_after_s == 5
    retry = plan_application(view, NOW + 6)
    assert retry.state == AppState.RESERVING and len(retry.create) == 3
    assert keys.RESERVATION_STARTED not in retry.annotate  # the timeout still counts from the first attempt
    assert "attempt 3" in retry.events[0].note


def test_strict_retries_end_at_the_timeout() -> None:
    origin = driver(
        state=AppState.PENDING,
        started=NOW - 1000,
        policy="placeholderTimeoutInSeconds=900",
        annotations={keys.GANG_MODE: "Strict", keys.ATTEMPTS: "4", keys.RETRY_AFTER: p.format_time(NOW + 5)},
    )
    plan = plan_application(Application.of(KEY, [origin, executor(0), executor(1)]), NOW)
    assert plan.state == AppState.RESUMING and "PlaceholderTimeOut" in reasons(plan)


def test_non_strict_holds_the_partial_reservation() -> None:
    plan = plan_application(Application.of(KEY, reserving("NonStrict")), NOW)
    assert plan.state == AppState.RESERVING and not plan.delete
    assert "GangReservationReleased" not in reasons(plan)
