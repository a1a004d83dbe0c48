"""The waiting phase: members without an originator, and an originator taking up where the last left (lifecycle/waiting.py)."""

from __future__ import annotations

from typing import Any

from tests.planning import (
    APP,
    GROUPS,
    KEY,
    NOW,
    Pod,
    all_placeholders,
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
from yuniplace.controller.lifecycle import plan_application
from yuniplace.controller.plan import Settings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import podgroup
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.events import Reason


def test_app_view_splits_and_orders_pods() -> None:
    pods = [
        executor(1, created=NOW - 5),
        placeholder("exec", 0),
        executor(0, created=NOW - 5),
        driver(created=NOW - 100),
    ]
    view = Application.of(KEY, pods)
    assert names(view.members) == ["driver", "exec-0", "exec-1"]
    assert names(view.placeholders) == [ph_name("exec", 0)]
    assert view.originator is not None and p.name(view.originator) == "driver"


def test_app_view_originator_prefers_the_pod_carrying_the_state() -> None:
    first = make_pod("a", task_groups=GROUPS, created=NOW - 10)
    second = make_pod("b", task_groups=GROUPS, created=NOW - 10, state=AppState.RESERVING)
    assert p.name(Application.of(KEY, [first, second]).originator or {}) == "b"
    assert (
        p.name(Application.of(KEY, [first, make_pod("b", task_groups=GROUPS, created=NOW - 10)]).originator or {})
        == "a"
    )


def test_members_without_originator_wait_for_the_default_timeout() -> None:
    pods = [executor(0, created=NOW - 100), executor(1, created=NOW - 10)]
    plan = plan_of(pods)
    assert plan.originator is None
    assert plan.state == AppState.PENDING
    assert plan.ungate == [] and plan.events == [] and plan.create == []
    assert plan.requeue_after_s == 800  # from the oldest gated member
    assert not plan.forget


def test_members_without_originator_are_ungated_after_the_default_timeout() -> None:
    pods = [executor(0, created=NOW - 900), executor(1, created=NOW - 10)]
    plan = plan_of(pods)
    assert names(plan.ungate) == ["exec-0", "exec-1"]
    assert reasons(plan) == ["GangSchedulingFailed", "GangSchedulingFailed"]
    assert plan.events[0].note == (
        f"no pod of application {APP} defines yunikorn.apache.org/task-groups after 900s; scheduling this pod normally"
    )
    assert [e.pod for e in plan.events] == plan.ungate
    assert plan.state == AppState.PENDING


def test_default_timeout_without_originator_comes_from_settings() -> None:
    settings = Settings(limits=Limits(default_timeout_s=30))
    assert names(plan_of([executor(0, created=NOW - 30)], settings=settings).ungate) == ["exec-0"]


def test_orphaned_placeholders_are_deleted() -> None:
    phs = all_placeholders(bound=True)
    plan = plan_of([*phs, placeholder("exec", 5, deleted=True)])
    assert plan.delete == phs
    assert plan.state == AppState.PENDING and not plan.forget
    assert plan_of([placeholder("exec", 5, deleted=True)]).forget is False


def test_nothing_left_is_forgotten() -> None:
    plan = plan_of([executor(0, gated=False, phase="Running", node="n1")])
    assert plan.forget and plan.state == AppState.COMPLETED
    assert plan_of([]).forget


def test_members_naming_a_podgroup_that_never_comes_fail_at_the_timeout_never_started_in_part() -> None:
    """Their gang's minimum is unknown (no PodGroup, maybe not even its CRD): released one by one, they
    could start it in part, so they fail, saying what to create."""
    pods = [make_pod(f"w{i}", app=None, labels={podgroup.LABEL: "mpi"}, created=NOW - 1000) for i in range(2)]
    view = Application.of(p.AppKey("default", "mpi"), pods)
    plan = plan_application(view, NOW)
    assert plan.ungate == []
    assert names([f.pod for f in plan.fail]) == ["w0", "w1"]
    assert {f.reason for f in plan.fail} == {Reason.RESOURCE_RESERVATION_TIMEOUT}
    note = plan.fail[0].message
    assert "names no PodGroup mpi of this namespace after 900s: failed rather than started without its gang" in note
    assert "its CRD, scheduling.x-k8s.io/v1alpha1" in note


def test_members_waiting_for_their_podgroup_are_held_until_the_timeout() -> None:
    pods = [make_pod(f"w{i}", app=None, labels={podgroup.LABEL: "mpi"}, created=NOW - 100) for i in range(2)]
    plan = plan_application(Application.of(p.AppKey("default", "mpi"), pods), NOW)
    assert plan.ungate == [] and plan.fail == [] and plan.requeue_after_s == 800


def test_pod_group_members_wait_for_their_pod_group() -> None:
    member = executor(0, labels={podgroup.LABEL: APP}, group=None)
    member["metadata"]["labels"].pop(keys.APP_ID)
    plan = plan_application(Application.of(KEY, [member]), NOW)
    assert plan.state == AppState.PENDING and not plan.create and not plan.ungate


def test_a_deleting_originator_is_no_originator() -> None:
    pods = [driver(deleted=True), executor(0)]
    plan = plan_of(pods)
    assert plan.originator is None
    assert plan.state == AppState.PENDING


def worker(name: str, **overrides: Any) -> Pod:
    """A pod of a Job gang: every pod carries the task groups, so any may be the originator."""
    fields: dict[str, Any] = {"task_groups": GROUPS, "group": "exec"}
    return make_pod(name, **fields | overrides)


def test_a_started_gang_whose_originator_went_runs_on_without_reserving_again() -> None:
    """The pod with the record is gone (its Job deleted, say); the next pod with the task groups has no
    record of its own. Its gang started: no second reservation beside the members in their seats, and a
    member still held (the Job's replacement of a pod that went) starts as a late member."""
    gone = worker("w-0", state=AppState.RUNNING, started=NOW - 60, gated=False, node="n0", deleted=True)
    running = worker("w-1", gated=False, phase="Running", node="n1", created=NOW - 59)
    replacement = worker("w-2", created=NOW - 5)
    plan = plan_of([gone, running, replacement])
    assert plan.originator is not None and p.name(plan.originator) == "w-1"
    assert plan.state == AppState.RUNNING and plan.annotate == {keys.STATE: "Running"}
    assert plan.create == [] and "TaskGroupMatch" not in reasons(plan)
    assert names(plan.ungate) == ["w-2"]


def test_a_gang_evicted_whole_whose_job_makes_its_pods_again_is_a_new_attempt() -> None:
    """A reclaim evicted the running gang whole; its Job makes the pods again while the old ones still
    terminate on their nodes. The new pods are a new attempt, held for admission, not late members of a
    gang that runs."""
    evicted = [
        worker(f"w-{i}", gated=False, node=f"n{i}", phase="Running", deleted=True, created=NOW - 60) for i in range(2)
    ]
    evicted[0]["metadata"]["annotations"][keys.STATE] = AppState.RUNNING.value
    again = [worker(f"w-{i}", created=NOW - 2) for i in range(2, 4)]
    plan = plan_of([*evicted, *again])
    assert p.name(plan.originator or {}) == "w-2"
    assert plan.ungate == [] and plan.swaps == []


def test_a_fallen_back_gang_whose_originator_went_stays_fallen_back() -> None:
    """Its Job deleted, its pods go one by one: the next has no record, its fellows were released without
    starting (no room: they fell back). No second reservation, no second timeout."""
    gone = worker("w-0", state=AppState.RESUMING, started=NOW - 200, gated=False, deleted=True)
    released = worker("w-1", gated=False, created=NOW - 199)
    held = worker("w-2", created=NOW - 5)
    plan = plan_of([gone, released, held])
    assert p.name(plan.originator or {}) == "w-1"
    assert plan.state == AppState.RESUMING and plan.create == [] and reasons(plan) == []
    assert names(plan.ungate) == ["w-2"]


def test_a_failed_gang_whose_originator_went_fails_its_new_pods_too() -> None:
    gone = worker("w-0", state=AppState.FAILED, started=NOW - 200, gated=False, phase="Failed", deleted=True)
    failed = ended(worker("w-1", gated=False, created=NOW - 199), reason="ResourceReservationTimeout")
    replacement = worker("w-2", created=NOW - 5)
    plan = plan_of([gone, failed, replacement])
    assert p.name(plan.originator or {}) == "w-2"  # the oldest pod with the task groups that has not ended
    assert plan.state == AppState.FAILED and plan.create == []
    assert [(p.name(f.pod), f.reason) for f in plan.fail] == [("w-2", "ApplicationFailed")]


def test_a_gang_whose_pods_all_came_back_is_reserved_again() -> None:
    """A Job whose every pod was evicted comes back with new pods, none started: a reservation anew."""
    pods = [worker(f"w-{i}", created=NOW - 5) for i in range(2)] + [driver(created=NOW - 4)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING and len(plan.create) == 3
    assert "TaskGroupMatch" in reasons(plan)
