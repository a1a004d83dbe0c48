"""plan_application with admission tickets, Strict/NonStrict mode, gang groups and PodGroup status."""

from __future__ import annotations

from typing import Any

from tests.unit.test_plan import APP, NOW, driver, executor, placeholder
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.controller.lifecycle import plan_application
from yuniplace.controller.plan import Settings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import podgroup
from yuniplace.gang.state import AppState

KEY = p.AppKey("default", APP)
PEERS = f'["default/{APP}", "other/eval"]'


def unschedulable(pod: dict[str, Any]) -> dict[str, Any]:
    pod["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu.",
        }
    ]
    return pod


def reasons(plan: Any) -> list[str]:
    return [e.reason for e in plan.events]


def reserving(mode: str, *, started: float = NOW - 30) -> list[dict[str, Any]]:
    origin = driver(state=AppState.RESERVING, started=started, annotations={keys.GANG_MODE: mode})
    return [
        origin,
        executor(0),
        executor(1),
        placeholder("driver", 0, min_member=1, node="n1", scheduled=NOW - 20, owner=origin),
        placeholder("exec", 0, node="n2", scheduled=NOW - 20, owner=origin),
        unschedulable(placeholder("exec", 1, owner=origin)),
    ]


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


def reserved_with_group() -> list[dict[str, Any]]:
    origin = driver(state=AppState.RESERVING, started=NOW - 30, annotations={keys.GANG_GROUP: PEERS})
    return [
        origin,
        executor(0),
        executor(1),
        placeholder("driver", 0, min_member=1, node="n1", scheduled=NOW - 20, owner=origin),
        placeholder("exec", 0, node="n2", scheduled=NOW - 20, owner=origin),
        placeholder("exec", 1, node="n3", scheduled=NOW - 20, owner=origin),
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


def test_pod_group_status_follows_the_gang() -> None:
    pod_group = {"metadata": {"name": APP, "namespace": "default"}, "spec": {"minMember": 3}, "status": {}}
    members = [driver(labels={podgroup.LABEL: APP}, annotations={}, task_groups=None, group=None)]
    members[0]["metadata"]["labels"].pop(keys.APP_ID)
    members += [executor(i, labels={podgroup.LABEL: APP}, group=None) for i in range(2)]
    for m in members[1:]:
        m["metadata"]["labels"].pop(keys.APP_ID)
    plan = plan_application(Application.of(KEY, members, pod_group), NOW)
    assert plan.state == AppState.RESERVING and len(plan.create) == 3
    assert plan.pod_group_status == {
        "phase": "PreScheduling",
        "scheduled": 0,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "scheduleStartTime": p.format_time(NOW),
    }
    for m in members:
        m["spec"]["nodeName"] = "n1"
        m["spec"]["schedulingGates"] = []
        m["status"]["phase"] = "Running"
    members[0]["metadata"]["annotations"][keys.STATE] = "Running"
    running = plan_application(Application.of(KEY, members, pod_group), NOW)
    assert running.pod_group_status is not None and running.pod_group_status["phase"] == "Running"
    assert running.pod_group_status["running"] == 3
    pod_group["status"] = dict(running.pod_group_status)
    assert plan_application(Application.of(KEY, members, pod_group), NOW).pod_group_status is None  # nothing to change


def test_pod_group_members_wait_for_their_pod_group() -> None:
    member = executor(0, labels={podgroup.LABEL: APP}, group=None)
    member["metadata"]["labels"].pop(keys.APP_ID)
    plan = plan_application(Application.of(KEY, [member]), NOW)
    assert plan.state == AppState.PENDING and not plan.create and not plan.ungate
