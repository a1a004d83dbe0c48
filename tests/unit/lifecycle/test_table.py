"""The transitions table, and a gang carried through it plan after plan (lifecycle/table.py, dispatch.py)."""

from __future__ import annotations

import pytest

from tests.planning import (
    APP,
    HARD,
    KEY,
    NOW,
    Pod,
    all_placeholders,
    apply,
    driver,
    executor,
    make_pod,
    plan_of,
    run,
    schedule,
    ungated,
)
from yuniplace.controller.lifecycle import plan_application
from yuniplace.controller.lifecycle.table import TRANSITIONS, reachable
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import podgroup
from yuniplace.gang.state import TERMINAL, AppState


def gang(policy: str | None = None) -> list[Pod]:
    return [driver(policy=policy), executor(0), executor(1)]


def test_happy_path_through_every_state_of_a_successful_gang() -> None:
    states = run(gang(), ["plan", "schedule", "plan", "schedule", "plan", "finish", "plan"])
    assert states == [AppState.RESERVING, AppState.RESERVED, AppState.RUNNING, AppState.COMPLETED]


def test_soft_timeout_path() -> None:
    states = run(gang(), ["plan", "wait:900", "plan", "schedule", "plan", "finish", "plan"])
    assert states == [AppState.RESERVING, AppState.RESUMING, AppState.RESUMING, AppState.COMPLETED]


def test_hard_timeout_path() -> None:
    states = run(gang(HARD), ["plan", "wait:900", "plan", "plan"])
    assert states == [AppState.RESERVING, AppState.FAILED, AppState.FAILED]


def test_every_state_is_reachable_from_pending() -> None:
    reached = {AppState.PENDING}
    reached.update(run(gang(), ["plan", "schedule", "plan", "schedule", "plan", "finish", "plan"]))
    reached.update(run(gang(), ["plan", "wait:900", "plan"]))
    reached.update(run(gang(HARD), ["plan", "wait:900", "plan"]))
    # Pending itself: members waiting for an originator.
    reached.add(plan_of([executor(0)]).state)
    assert reached == set(AppState)


def test_gang_cycle_leaves_nothing_behind() -> None:
    pods = gang()
    now = NOW
    for _ in range(3):
        pods = apply(pods, plan_of(pods, now), now)
        pods = schedule(pods, now)
        now += 1
    assert not any(p.is_placeholder(pod) for pod in pods)
    assert all(not p.is_gated(pod) and p.node_name(pod) for pod in pods)
    # Each member landed where its own group's placeholder was.
    assert {p.name(pod): p.node_name(pod) for pod in pods} == {
        "driver": "node-3",
        "exec-0": "node-4",
        "exec-1": "node-5",
    }


def test_transitions_cover_every_state() -> None:
    sources = {state for state, _ in TRANSITIONS}
    assert sources == set(AppState) - TERMINAL  # nothing leaves a terminal state
    # Every state is reachable from Pending, and every state can end in a terminal one.
    assert reachable(AppState.PENDING) == set(AppState)
    for state in set(AppState) - TERMINAL:
        assert reachable(state) & TERMINAL, state


def test_parse_of_unknown_state_is_pending() -> None:
    assert AppState.parse(None) == AppState.PENDING
    assert AppState.parse("Bogus") == AppState.PENDING
    assert AppState.parse("reserved") == AppState.PENDING
    assert all(AppState.parse(s.value) == s for s in AppState)


@pytest.mark.parametrize(
    ("state", "policy", "member"),
    [
        (AppState.RESERVING, HARD, make_pod("loner", created=NOW - 90)),
        (AppState.RESERVING, HARD, executor(7, group="executors")),
        (AppState.RESERVING, None, make_pod("loner", created=NOW - 90)),
        (AppState.RESUMING, None, make_pod("loner", created=NOW - 90)),
    ],
    ids=["hard-timeout-no-group", "hard-timeout-unknown-group", "soft-timeout-no-group", "resuming-no-group"],
)
def test_each_member_gets_one_fate(state: AppState, policy: str | None, member: Pod) -> None:
    pods = [driver(state=state, started=NOW - 1000, policy=policy), executor(0), member, *all_placeholders(bound=False)]
    plan_of(pods)  # assert_consistent: at most one of ungate / fail / swap per pod


def test_originator_without_task_group_name_completes_its_reservation() -> None:
    pods = [driver(group=None), executor(0), executor(1)]
    states = run(pods, ["plan", "schedule", "plan"])
    assert states[0] == AppState.RESERVING
    assert states[1] in (AppState.RESERVED, AppState.RUNNING)


def test_pod_group_status_follows_the_gang() -> None:
    pod_group = {"metadata": {"name": APP, "namespace": "default"}, "spec": {"minMember": 3}, "status": {}}
    members = [driver(app=None, labels={podgroup.LABEL: APP}, annotations={}, task_groups=None, group=None)]
    members += [executor(i, app=None, labels={podgroup.LABEL: APP}, group=None) for i in range(2)]
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
    for m in members:  # released and bound (kube-scheduler's PodScheduled condition not yet seen)
        ungated(m)["spec"]["nodeName"] = "n1"
        m["status"]["phase"] = "Running"
    members[0]["metadata"]["annotations"][keys.STATE] = "Running"
    running = plan_application(Application.of(KEY, members, pod_group), NOW)
    assert running.pod_group_status is not None and running.pod_group_status["phase"] == "Running"
    assert running.pod_group_status["running"] == 3
    pod_group["status"] = dict(running.pod_group_status)
    assert plan_application(Application.of(KEY, members, pod_group), NOW).pod_group_status is None  # nothing to change
