"""The phases of a gang that reserves no more: out of time, invalid, ended, fallen back (lifecycle/ending.py)."""

from __future__ import annotations

import pytest

from tests.planning import (
    HARD,
    NOW,
    ONE,
    Pod,
    all_placeholders,
    bind,
    driver,
    ended,
    executor,
    make_pod,
    names,
    ph_name,
    placeholder,
    plan_of,
    reasons,
)
from yuniplace.controller.lifecycle.table import moves
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason


def reserving_nothing_placed(started: float, policy: str | None = None) -> list[Pod]:
    return [
        driver(state=AppState.RESERVING, started=started, policy=policy),
        executor(0),
        executor(1),
        *all_placeholders(bound=False),
    ]


def test_just_before_the_timeout_keeps_waiting() -> None:
    plan = plan_of(reserving_nothing_placed(NOW - 899))
    assert plan.state == AppState.RESERVING
    assert plan.requeue_after_s == 1
    assert plan.delete == [] and plan.ungate == [] and plan.events == []


def test_soft_timeout_resumes_normal_scheduling() -> None:
    pods = reserving_nothing_placed(NOW - 900)
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert plan.annotate == {keys.STATE: "Resuming"}
    assert names(plan.delete) == [ph_name("driver", 0), ph_name("exec", 0), ph_name("exec", 1)]
    assert names(plan.ungate) == ["driver", "exec-0", "exec-1"]
    assert plan.fail == [] and plan.swaps == [] and plan.create == []
    assert reasons(plan) == ["PlaceholderTimeOut", "GangSchedulingFailed"]
    assert all(e.warning and e.pod is pods[0] for e in plan.events)
    assert plan.events[0].note == "gang reservation timed out: 0/3 placeholders placed after 900s"
    assert plan.events[1].note == (
        "gang reservation timed out (0/3 placeholders placed after 900s); Soft style: placeholders removed, pods scheduled normally"
    )


def test_custom_timeout_is_honoured() -> None:
    assert plan_of(reserving_nothing_placed(NOW - 59, "placeholderTimeoutInSeconds=60")).state == AppState.RESERVING
    assert plan_of(reserving_nothing_placed(NOW - 60, "placeholderTimeoutInSeconds=60")).state == AppState.RESUMING


def test_hard_timeout_fails_the_members() -> None:
    pods = reserving_nothing_placed(NOW - 901, f"{HARD} placeholderTimeoutInSeconds=900")
    bind(pods[3], "n0", NOW - 950)  # the timeout counts from this first placement: it ended at NOW - 50
    plan = plan_of(pods)
    assert plan.state == AppState.FAILED
    assert plan.annotate == {keys.STATE: "Failed"}
    assert names(plan.delete) == [ph_name("driver", 0), ph_name("exec", 0), ph_name("exec", 1)]
    assert plan.ungate == []
    message = "gang reservation timed out (1/3 placeholders placed after 900s); Hard style fails the application"
    assert [(p.name(f.pod), f.reason, f.message) for f in plan.fail] == [
        (name, "ResourceReservationTimeout", message) for name in ("driver", "exec-0", "exec-1")
    ]
    assert reasons(plan) == ["PlaceholderTimeOut", "ApplicationFailed"]
    assert plan.requeue_after_s is None


def test_failed_application_stays_failed_and_fails_late_members() -> None:
    pods = [driver(state=AppState.FAILED, policy=HARD, phase="Failed"), executor(5)]
    plan = plan_of(pods)
    assert plan.state == AppState.FAILED and plan.annotate == {}
    assert [(p.name(f.pod), f.reason) for f in plan.fail] == [("exec-5", "ApplicationFailed")]
    assert plan.requeue_after_s is None


def test_resuming_releases_everything_left() -> None:
    pods = [
        driver(state=AppState.RESUMING, gated=False, node="n0", phase="Running"),
        executor(0),
        placeholder("exec", 0, node="n1"),
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert names(plan.ungate) == ["exec-0"]
    assert names(plan.delete) == [ph_name("exec", 0)]


def test_invalid_task_groups_soft_schedule_normally() -> None:
    pods = [driver(task_groups="not json"), executor(0), executor(1)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert plan.annotate == {keys.STATE: "Resuming"}
    assert plan.create == []
    assert names(plan.ungate) == ["driver", "exec-0", "exec-1"]
    assert reasons(plan) == ["TaskGroupsError"]
    event = plan.events[0]
    assert event.pod is pods[0] and event.warning
    assert event.note == (
        'invalid gang annotations: yunikorn.apache.org/task-groups: "not json" is not valid JSON '
        "(Expecting value: line 1 column 1 (char 0)); scheduling its pods normally (Soft style)"
    )


def test_invalid_task_groups_hard_fail_the_application() -> None:
    bad = [{"name": "Driver", "minMember": 0, "minResource": ONE}]
    pods = [driver(task_groups=bad, policy=HARD), executor(0)]
    plan = plan_of(pods)
    assert plan.state == AppState.FAILED
    assert plan.create == [] and plan.ungate == []
    detail = "task-groups[0].name: \"Driver\" must be a DNS-1123 label (lower-case letters, digits, '-'; at most 63); task-groups[Driver].minMember: 0 must be an integer from 1 to 1000"
    assert [(p.name(f.pod), f.reason, f.message) for f in plan.fail] == [
        (name, "TaskGroupsError", f"invalid gang annotations: {detail}") for name in ("driver", "exec-0")
    ]
    assert plan.events[0].note == f"invalid gang annotations: {detail}; failing the application (Hard style)"


def test_invalid_policy_keeps_a_hard_request_hard() -> None:
    plan = plan_of([driver(policy=f"{HARD} placeholderTimeoutInSeconds=0"), executor(0)])
    assert plan.state == AppState.FAILED
    assert "placeholderTimeoutInSeconds" in plan.events[0].note


def test_invalid_task_groups_while_reserving_remove_the_placeholders() -> None:
    pods = [
        driver(task_groups="[]", state=AppState.RESERVING, started=NOW - 10),
        executor(0),
        *all_placeholders(bound=False),
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert len(plan.delete) == 3


def test_member_naming_an_unknown_group_soft() -> None:
    stray = executor(7, group="executors")
    pods = [driver(), executor(0), stray]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING
    errors = [e for e in plan.events if e.reason == "TaskGroupsError"]
    assert len(errors) == 1 and errors[0].pod is stray and errors[0].warning
    assert errors[0].note == (
        'yunikorn.apache.org/task-group-name: "executors" is not a task group of this application (groups: driver, exec); '
        "scheduling it normally"
    )
    assert plan.ungate == [stray]


def test_member_naming_an_unknown_group_hard() -> None:
    stray = executor(7, group="executors")
    plan = plan_of([driver(policy=HARD), stray])
    assert [(f.pod, f.reason) for f in plan.fail] == [(stray, "TaskGroupsError")]
    assert (
        plan.fail[0].message
        == 'yunikorn.apache.org/task-group-name: "executors" is not a task group of this application (groups: driver, exec)'
    )
    assert plan.ungate == []


def test_member_naming_no_group_waits_for_its_gang_then_runs_normally() -> None:
    """As in YuniKorn: every pod of the application is held until its placeholders are all placed."""
    loner = make_pod("loner")
    plan = plan_of([driver(), loner])
    assert plan.ungate == []
    assert [e.reason for e in plan.events] == ["TaskGroupMatch", "CreatingPlaceholders"]
    reserving = [driver(state=AppState.RESERVING, started=NOW - 10), loner, *all_placeholders(bound=False)]
    assert plan_of(reserving).ungate == []
    reserved = [driver(state=AppState.RESERVING, started=NOW - 10), loner, *all_placeholders(bound=True)]
    plan = plan_of(reserved)
    assert plan.state == AppState.RESERVED and loner in plan.ungate and not any(s.member is loner for s in plan.swaps)


@pytest.mark.parametrize("state", [AppState.RESERVED, AppState.RUNNING])
@pytest.mark.parametrize("policy", [None, HARD])
def test_annotations_turning_invalid_after_the_reservation(state: AppState, policy: str | None) -> None:
    pods = [
        driver(state=state, task_groups="[]", policy=policy, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        executor(0),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert plan.state == state or (state, plan.state) in moves()


def test_annotations_turning_invalid_once_it_is_over_release_or_fail_what_is_left() -> None:
    for state, failed in ((AppState.RESUMING, False), (AppState.FAILED, True)):
        pods = [driver(state=state, task_groups="[]", started=NOW - 100, gated=False), executor(0), executor(1)]
        plan = plan_of(pods)
        assert plan.state == state and plan.events == []
        assert (len(plan.fail), len(plan.ungate)) == ((2, 0) if failed else (0, 2))


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
@pytest.mark.parametrize(
    "state", [AppState.PENDING, AppState.RESERVING, AppState.RESERVED, AppState.RUNNING, AppState.RESUMING]
)
def test_finished_originator_completes_and_removes_every_placeholder(phase: str, state: AppState) -> None:
    pods = [
        driver(state=state, phase=phase, gated=False, started=NOW - 10),
        executor(0),
        *all_placeholders(bound=True),
        placeholder("exec", 5, deleted=True),
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.COMPLETED
    assert plan.annotate == ({keys.STATE: "Completed"})
    assert names(plan.delete) == [ph_name("driver", 0), ph_name("exec", 0), ph_name("exec", 1)]
    assert names(plan.ungate) == ["exec-0"]
    assert plan.create == [] and plan.fail == [] and plan.swaps == []
    assert plan.requeue_after_s is None


def test_completed_stays_completed() -> None:
    plan = plan_of([driver(state=AppState.COMPLETED, phase="Succeeded", gated=False)])
    assert plan.state == AppState.COMPLETED and plan.annotate == {} and plan.requeue_after_s is None


def test_a_gang_whose_originator_ended_with_no_record_fails_as_its_pods_did() -> None:
    failed = ended(executor(0, gated=False), reason=str(Reason.RESOURCE_RESERVATION_TIMEOUT))
    pods = [driver(gated=False, phase="Failed", node="n0"), failed, executor(1)]
    plan = plan_of(pods)
    assert plan.state == AppState.FAILED
    assert [(p.name(f.pod), f.reason) for f in plan.fail] == [("exec-1", Reason.APPLICATION_FAILED)]
