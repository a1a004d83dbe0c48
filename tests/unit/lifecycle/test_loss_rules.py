"""What a degraded gang does (gang/onloss.py, the planner's loss watch) and how its restarts are counted
(controller/restarts.py): the policy read from its pod, restart, release, the backoff, the limit, bare
pods, members never Ready, and the ConfigMap that keeps the counts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.planning import (
    JOB,
    KEY,
    NOW,
    ConfigMaps,
    Pod,
    deleting,
    driver,
    ended,
    executor,
    owned_by,
    placeholder,
    plan_of,
    reasons,
    running_gang,
    unready,
    with_record,
)
from yuniplace.controller.lifecycle import LOSS_GRACE_S
from yuniplace.controller.plan import Outcome, Plan, Settings
from yuniplace.controller.restarts import MEMORY_S, RestartLedger, Restarts
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.losses import Readiness, losses_of
from yuniplace.gang.onloss import LossPolicy, OnLoss
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits, Problem, loss_policy_of
from yuniplace.runtime.store import PodStore
from yuniplace.webhook.admission import problems_of


def degraded_gang(policy: dict[str, str] | None = None, *, owned: bool = True, since: float = NOW - 10) -> list[Pod]:
    """A started gang of 3 whose executor 1 failed, reported degraded since `since`, its pods owned by a
    Job unless `owned` is False, its driver asking `policy`."""
    pods = running_gang(phase="Failed")
    for pod in pods:
        if owned:
            owned_by(pod, JOB)
    pods[0]["metadata"]["annotations"].update(policy or {})
    return with_record(pods, {keys.DEGRADED_SINCE: p.format_time(since), keys.DEGRADED_REPORTED: "true"})


def plan_for(pods: list[Pod], restarts: Restarts | None = None, now: float = NOW, **settings: Any) -> Plan:
    return plan_of(pods, now, Settings(**settings), restarts=restarts)


RESTART = {keys.ON_MEMBER_LOST: "restart"}
RELEASE = {keys.ON_MEMBER_LOST: "release", keys.RECOVERY_TIMEOUT: "30"}


# -- the policy as a pod asks it ---------------------------------------------------------------------


def test_a_policy_not_asked_is_the_default_and_each_annotation_overrides_its_part() -> None:
    default = LossPolicy(OnLoss.RELEASE, 2, 90, 120)
    problems: list[Problem] = []
    assert loss_policy_of({}, default, problems) is default
    asked = {keys.ON_MEMBER_LOST: "Restart", keys.RESTART_LIMIT: "5", keys.READY_TIMEOUT: "30"}
    assert loss_policy_of(asked, default, problems) == LossPolicy(OnLoss.RESTART, 5, 90, 30)
    assert problems == []


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (keys.ON_MEMBER_LOST, "reboot", "must be none, restart or release"),
        (keys.RESTART_LIMIT, "-1", "must be a whole number from 0 to 1000"),
        (keys.RECOVERY_TIMEOUT, "0", "must be a whole number from 1 to 604800"),
        (keys.READY_TIMEOUT, "5m", "must be a whole number from 1 to 604800"),
    ],
)
def test_a_policy_that_cannot_be_read_names_its_annotation_and_the_webhook_refuses_it(
    key: str, value: str, expected: str
) -> None:
    problems: list[Problem] = []
    assert loss_policy_of({key: value}, LossPolicy(), problems) == LossPolicy()
    assert [str(problem) for problem in problems] == [f'{key}: "{value}" {expected}']
    pod = running_gang()[0]
    pod["metadata"]["annotations"][key] = value
    refused = problems_of(pod)
    assert refused is not None and key in refused and expected in refused


def test_the_policy_a_pod_asks_is_the_gangs() -> None:
    pods = degraded_gang(RESTART)
    app = Application.of(KEY, pods, limits=Limits(on_loss=LossPolicy(restart_limit=7)))
    assert app.spec is not None and app.spec.on_loss == LossPolicy(OnLoss.RESTART, restart_limit=7)


# -- restart -----------------------------------------------------------------------------------------


def test_restart_evicts_every_member_still_there_together_and_counts_it() -> None:
    plan = plan_for(degraded_gang(RESTART))
    assert sorted(p.name(pod) for pod in plan.evict) == ["driver", "exec-0"]  # exec-1 failed: gone already
    [event] = [e for e in plan.events if e.reason == "GangRestarting"]
    assert event.note == (
        "1 of its minimum 3 members lost: evicting its 2 pods together for Job train to make them again "
        "(restart 1 of at most 3)"
    )
    assert plan.restarts == Restarts(("job-uid",), 1, NOW) and Outcome.RESTARTED in plan.outcomes
    assert plan.state == AppState.RUNNING


PS_JOB = {**JOB, "name": "train-ps", "uid": "ps-uid"}


def test_a_gang_of_two_jobs_restarted_is_counted_for_both_and_its_next_attempt_is_not_restarted_again() -> None:
    """Either Job may make the pod that carries the next attempt's record. Here the worker on a node
    that no longer answers stays, being deleted, after the restart evicted it, and the parameter
    server's Job made its pod first: the count holds for it, the worker left is of the last attempt,
    no loss of this one, and the gang waits for its room as any."""
    pods = degraded_gang(RESTART)
    owned_by(pods[2], PS_JOB)
    restart = plan_for(pods)
    assert restart.restarts == Restarts(("job-uid", "ps-uid"), 1, NOW), restart.restarts
    ledger = RestartLedger(None, "yuniplace", "restarts", lambda: NOW)
    ledger.record(KEY, restart.restarts)

    left = owned_by(executor(9, gated=False, node="lost", created=NOW - 600, deleted=True), JOB)
    again = running_gang()
    again[2] = executor(1)  # the new attempt's third member waits for the room held for it
    again[0]["metadata"]["annotations"].update(RESTART)
    for pod, owner in zip(again, (PS_JOB, JOB, JOB), strict=True):
        owned_by(pod, owner)
    held = placeholder("exec", 1, node="n2")
    counted = ledger.get(KEY, "ps-uid")
    assert counted == restart.restarts
    plan = plan_for([*again, held, left], counted, now=NOW + 15)
    assert keys.DEGRADED_SINCE not in plan.annotate and not plan.evict, plan


def test_a_gang_being_evicted_is_not_evicted_again() -> None:
    pods = degraded_gang(RESTART)
    for pod in pods[:2]:
        deleting(pod)
    plan = plan_for(pods, Restarts(("job-uid",), 1, NOW - 1))
    assert not plan.evict and plan.restarts is None


def test_the_first_report_says_what_follows_and_restart_follows_at_once() -> None:
    pods = running_gang(phase="Failed")
    for pod in pods:
        owned_by(pod, JOB)
    pods[0]["metadata"]["annotations"].update(RESTART)
    pods = with_record(pods, {keys.DEGRADED_SINCE: p.format_time(NOW - LOSS_GRACE_S)})
    plan = plan_for(pods)
    assert reasons(plan) == ["GangDegraded", "GangRestarting"]
    assert plan.events[0].note.endswith("; restarting it whole (yuniplace.io/on-member-lost: restart)")


def test_restarts_are_spaced_by_a_backoff_that_doubles() -> None:
    waiting = plan_for(degraded_gang(RESTART), Restarts(("job-uid",), 2, NOW - 15), restart_backoff_s=10)
    assert not waiting.evict and waiting.requeue_after_s == pytest.approx(5)  # 10 * 2 after the second
    due = plan_for(degraded_gang(RESTART), Restarts(("job-uid",), 2, NOW - 20), restart_backoff_s=10)
    assert due.evict and due.restarts == Restarts(("job-uid",), 3, NOW)


def test_past_its_limit_the_gang_fails_and_says_why() -> None:
    plan = plan_for(degraded_gang({**RESTART, keys.RESTART_LIMIT: "2"}), Restarts(("job-uid",), 2, NOW - 600))
    assert plan.state == AppState.FAILED and sorted(p.name(pod) for pod in plan.evict) == ["driver", "exec-0"]
    [event] = [e for e in plan.events if e.reason == "ApplicationFailed"]
    assert event.note.startswith("1 of its minimum 3 members lost after 2 restart(s), its limit")
    assert plan.restarts == Restarts(("job-uid",), 2, NOW, failed=True) and Outcome.RESTARTS_EXHAUSTED in plan.outcomes


def test_a_new_attempt_of_a_gang_failed_past_its_limit_fails_at_once() -> None:
    """Its Job made its pods again: they are failed while gated, so the Job sees them fail."""
    pods = [driver(), executor(0), executor(1)]
    plan = plan_for(pods, Restarts(("job-uid",), 3, NOW - 5, failed=True))
    assert plan.state == AppState.FAILED
    assert sorted(p.name(f.pod) for f in plan.fail) == ["driver", "exec-0", "exec-1"]
    assert {f.reason for f in plan.fail} == {"ApplicationFailed"} and not plan.create


def test_a_gang_of_bare_pods_is_reported_never_restarted() -> None:
    pods = running_gang(phase="Failed")
    pods[0]["metadata"]["annotations"].update(RESTART)
    pods = with_record(pods, {keys.DEGRADED_SINCE: p.format_time(NOW - LOSS_GRACE_S)})
    plan = plan_for(pods)
    assert not plan.evict and plan.restarts is None
    [event] = plan.events
    assert event.reason == "GangDegraded" and event.note.endswith(
        "yuniplace.io/on-member-lost is restart, but its pods have no owner to make them again: not restarted"
    )


def test_none_only_reports() -> None:
    plan = plan_for(degraded_gang())
    assert not plan.evict and not plan.events


# -- release -----------------------------------------------------------------------------------------


def test_release_waits_out_its_recovery_timeout_then_evicts_the_gang_whole() -> None:
    early = plan_for(degraded_gang(RELEASE, since=NOW - 10))
    assert not early.evict and early.requeue_after_s == pytest.approx(20)
    late = plan_for(degraded_gang(RELEASE, since=NOW - 30))
    assert sorted(p.name(pod) for pod in late.evict) == ["driver", "exec-0"]
    [event] = [e for e in late.events if e.reason == "GangReleased"]
    assert "past its recovery timeout (30s): evicting its 2 pods to give its room back" in event.note
    assert late.restarts == Restarts(("job-uid",), 1, NOW) and Outcome.RELEASED in late.outcomes


def test_release_evicts_bare_pods_too_and_counts_nothing() -> None:
    plan = plan_for(degraded_gang(RELEASE, owned=False, since=NOW - 31))
    assert plan.evict and plan.restarts is None
    [event] = [e for e in plan.events if e.reason == "GangReleased"]
    assert event.note.endswith("to give its room back")


# -- ready -------------------------------------------------------------------------------------------


def test_a_member_not_ready_past_the_ready_timeout_is_lost() -> None:
    members = running_gang()[1:]
    unready(members[1], NOW - 400)
    lost = losses_of(members, 2, readiness=Readiness(NOW, 300))
    assert [(x.member, x.why) for x in lost.lost] == [("exec-1", "not Ready for 400s")] and lost.degraded
    assert not losses_of(members, 2, readiness=Readiness(NOW, 500)).degraded
    assert not losses_of(members, 2).degraded  # without a timeout, Ready is not asked


def test_a_member_lost_for_not_coming_up_says_what_its_containers_wait_for() -> None:
    members = running_gang()[1:]
    unready(members[1], NOW - 400)["status"]["containerStatuses"] = [
        {"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
    ]
    lost = losses_of(members, 2, readiness=Readiness(NOW, 300))
    assert [x.why for x in lost.lost] == ["not Ready for 400s (main: ImagePullBackOff)"]


def test_a_gang_whose_member_never_came_up_is_degraded_by_its_ready_timeout() -> None:
    pods = running_gang()
    unready(pods[2], NOW - 61)
    pods[0]["metadata"]["annotations"][keys.READY_TIMEOUT] = "60"
    assert keys.DEGRADED_SINCE in plan_for(pods).annotate
    pods[0]["metadata"]["annotations"][keys.READY_TIMEOUT] = "120"
    assert keys.DEGRADED_SINCE not in plan_for(pods).annotate


# -- the counts kept ---------------------------------------------------------------------------------


def test_the_counts_outlive_the_controller_and_belong_to_their_owner() -> None:
    api = ConfigMaps()
    now = [NOW]
    ledger = RestartLedger(api, "yuniplace", "restarts", lambda: now[0])  # type: ignore[arg-type]
    ledger.record(KEY, Restarts(("job-uid",), 1, NOW))
    ledger.record(p.AppKey("other", "weird id/with:chars"), Restarts(("o",), 2, NOW))
    assert api.data is not None and len(api.data) == 2
    assert all(name.replace(".", "").replace("-", "").isalnum() for name in api.data)  # keys a ConfigMap takes
    later = RestartLedger(api, "yuniplace", "restarts", lambda: now[0])  # type: ignore[arg-type]
    later.load()
    assert later.get(KEY, "job-uid") == Restarts(("job-uid",), 1, NOW)
    assert later.get(KEY, "another-job") is None  # submitted again: a new owner starts from nothing
    assert later.get(p.AppKey("other", "weird id/with:chars"), "o") == Restarts(("o",), 2, NOW)


def test_counts_gone_stale_are_forgotten_and_unreadable_ones_count_nothing() -> None:
    api = ConfigMaps()
    api.data = {
        "restarts.a.1": json.dumps(
            {"namespace": "a", "app": "x", "owner": "u", "count": 1, "last_at": NOW - MEMORY_S - 1}
        ),
        "restarts.b.2": "not json",
        "restarts.c.3": json.dumps({"namespace": "c", "app": "y", "owner": "u", "count": 4, "last_at": NOW - 5}),
    }
    ledger = RestartLedger(api, "yuniplace", "restarts", lambda: NOW)  # type: ignore[arg-type]
    ledger.load()
    assert list(api.data) == ["restarts.c.3"]
    assert ledger.get(p.AppKey("a", "x"), "u") is None and ledger.get(p.AppKey("c", "y"), "u") is not None


def test_a_count_an_older_version_kept_is_read_and_one_kept_now_is_read_by_it() -> None:
    """An older version kept one owner ("owner"); this one keeps them all ("owners") and the first as
    "owner" too, which is all the older one reads."""
    api = ConfigMaps()
    api.data = {"restarts.c.3": json.dumps({"namespace": "c", "app": "y", "owner": "u", "count": 4, "last_at": NOW})}
    ledger = RestartLedger(api, "yuniplace", "restarts", lambda: NOW)  # type: ignore[arg-type]
    ledger.load()
    assert ledger.get(p.AppKey("c", "y"), "u") == Restarts(("u",), 4, NOW)
    ledger.record(KEY, Restarts(("job-uid", "ps-uid"), 1, NOW))
    [kept] = [json.loads(value) for value in api.data.values() if json.loads(value)["app"] == KEY.app_id]
    assert kept["owner"] == "job-uid" and kept["owners"] == ["job-uid", "ps-uid"]


@pytest.mark.parametrize(("policy", "taken_in"), [(RESTART, False), ({}, True)], ids=["restart", "none"])
def test_a_gang_that_restarts_takes_no_replacement_in_while_it_is_short(policy: dict[str, str], taken_in: bool) -> None:
    """Its Job made a new pod for the one that failed: a restarting gang keeps it gated, to go with the
    others; any other gang takes it in, which mends it."""
    pods = degraded_gang(policy, since=NOW - 1)
    replacement = owned_by(executor(2, annotations={}, node=None), JOB)
    plan = plan_for([*pods, replacement])
    started = [p.name(swap.member) for swap in plan.swaps] + [p.name(pod) for pod in plan.ungate]
    assert ("exec-2" in started) == taken_in, plan


@pytest.mark.parametrize(("policy", "taken_in"), [(RESTART, False), ({}, True)], ids=["restart", "none"])
def test_a_gang_that_restarts_takes_no_replacement_in_when_the_member_it_lost_is_gone(
    policy: dict[str, str], taken_in: bool
) -> None:
    """The member that failed is gone already (the pod garbage collector took it, say) and the Job's
    replacement waits: a restarting gang is still short, and keeps the replacement gated to go with the
    others; any other gang lets it be scheduled (it counts once it runs)."""
    pods = [pod for pod in degraded_gang(policy, since=NOW - 1) if p.name(pod) != "exec-1"]
    replacement = owned_by(executor(2, annotations={}, node=None, created=NOW - 1), JOB)
    plan = plan_for([*pods, replacement])
    started = [p.name(swap.member) for swap in plan.swaps] + [p.name(pod) for pod in plan.ungate]
    assert ("exec-2" in started) == taken_in, plan


def test_a_member_that_failed_in_an_earlier_attempt_is_no_loss_of_this_one() -> None:
    """The Job keeps the pod that failed before the gang was restarted whole: what the new attempt
    lost is its own."""
    old = executor(9, gated=False, node="n9", phase="Failed", created=NOW - 600)
    pods = with_record([*running_gang(phase="Failed"), old], {keys.DEGRADED_SINCE: p.format_time(NOW - 10)})
    [event] = plan_for(pods, Restarts(("job-uid",), 1, NOW - 300)).events
    assert "lost: exec-1 failed;" in event.note and "exec-9" not in event.note, event.note


def test_a_member_of_an_earlier_attempt_still_going_is_no_loss_of_this_one() -> None:
    """Its node was deleted: the pod stays, being deleted, until the pod garbage collector takes it."""
    going = executor(9, gated=False, node="gone", phase="Running", created=NOW - 600, deleted=True)
    pods = running_gang()
    pods[2] = executor(1)  # the new attempt's third member waits for the room held for it
    pods[0]["metadata"]["annotations"].update(RESTART)
    held = placeholder("exec", 1, node="n2")
    plan = plan_for([*pods, held, going], Restarts(("job-uid",), 1, NOW - 300))
    assert keys.DEGRADED_SINCE not in plan.annotate and not plan.evict


def test_a_new_attempt_beside_a_pod_that_failed_in_the_last_reserves_anew() -> None:
    """The Job made its pods again after a restart, and keeps the one that failed: that pod says
    nothing of where the new attempt stands, which reserves (or starts) whole as any gang."""
    old = executor(9, gated=False, node="n9", phase="Failed", created=NOW - 600)
    fresh = [driver(created=NOW - 5), executor(0, created=NOW - 5), executor(1, created=NOW - 5)]
    plan = plan_for([old, *fresh], Restarts(("job-uid",), 1, NOW - 300))
    assert p.name(plan.originator or {}) == "driver" and plan.state == AppState.RESERVING and len(plan.create) == 3
    assert not plan.ungate and not plan.swaps


def test_a_failed_originator_of_a_restarting_gang_is_a_member_lost() -> None:
    """A Job's pods are alike: the one that carries the record failing is a loss like any, not the end."""
    pods = degraded_gang(RESTART)
    ended(pods[0])
    ended(pods[2], "Running")  # the member that failed came back, as far as this test goes
    plan = plan_for(pods)
    assert [p.name(pod) for pod in plan.evict] == ["exec-0", "exec-1"]
    # The failed pod stays; its record is over (through the table), the next attempt is another's.
    assert plan.state == AppState.PENDING and plan.transition == (AppState.RUNNING, AppState.PENDING)
    assert plan.annotate[keys.STATE] is None


def test_nothing_starts_in_a_gang_whose_originator_is_going() -> None:
    """The gang was evicted whole and its Job already made a pod again: that pod waits for the next
    attempt rather than join, as a late member, a gang on its way out."""
    pods = running_gang()
    for pod in pods:
        deleting(pod)
    plan = plan_for([*pods, executor(5, created=NOW - 1)])
    assert not plan.swaps and not plan.ungate and not plan.evict


def test_a_pod_left_of_an_earlier_attempt_alone_waits_for_the_next_and_records_nothing() -> None:
    """Evicted whole, the gang's pods are gone but the one that failed, which its Job keeps: it is no
    application that completed (that record would make the next attempt's pods run as late members)."""
    left = executor(1, gated=False, node="n2", phase="Failed", created=NOW - 100)
    left["metadata"]["annotations"][keys.TASK_GROUPS] = running_gang()[0]["metadata"]["annotations"][keys.TASK_GROUPS]
    plan = plan_for([left], Restarts(("job-uid",), 1, NOW - 5))
    assert plan.state == AppState.PENDING and not plan.annotate and not plan.events


def test_the_store_chooses_the_originator_as_the_application_does() -> None:
    """A failed pod of an earlier attempt, older, beside the new attempt's pods: a new pod is the originator."""
    store = PodStore()
    left = executor(1, gated=False, node="n2", phase="Failed", created=NOW - 100)
    fresh = driver(created=NOW - 5)
    for pod in (left, fresh):
        pod["metadata"]["annotations"][keys.TASK_GROUPS] = running_gang()[0]["metadata"]["annotations"][
            keys.TASK_GROUPS
        ]
        store.upsert(pod)
    app = store.application(KEY, None, Limits())
    assert app.originator is not None and p.name(app.originator) == "driver"
    assert p.name(Application.of(KEY, [left, fresh]).originator or {}) == "driver"


def test_a_member_not_ready_yet_is_looked_at_again_when_its_ready_timeout_passes() -> None:
    pods = running_gang()
    unready(pods[2], NOW - 20)
    pods[0]["metadata"]["annotations"][keys.READY_TIMEOUT] = "60"
    plan = plan_for(pods)
    assert keys.DEGRADED_SINCE not in plan.annotate and plan.requeue_after_s == pytest.approx(40)


def test_room_still_held_for_a_member_to_come_is_no_loss() -> None:
    """A gang restarted beside a pod still going (its node deleted) holds a placeholder for the member its
    Job makes once that pod is gone: two members up and the third's room held is no gang short."""
    members = running_gang()[1:]
    assert losses_of(members, 3).degraded
    assert not losses_of(members, 3, held=1).degraded


def test_past_the_limit_the_failed_originator_stays_and_the_pods_made_again_fail() -> None:
    left = with_record(running_gang(phase="Failed"), {keys.STATE: AppState.FAILED.value})[0]
    ended(left)
    again = [executor(5, created=NOW - 2), executor(6, created=NOW - 2)]
    plan = plan_for([left, *again], Restarts(("job-uid",), 1, NOW - 5, failed=True))
    assert p.name(plan.originator or {}) == "driver" and plan.state == AppState.FAILED
    assert sorted(p.name(f.pod) for f in plan.fail) == ["exec-5", "exec-6"]


def test_a_release_policy_says_what_follows_when_the_gang_is_degraded() -> None:
    pods = running_gang(phase="Failed")
    pods[0]["metadata"]["annotations"][keys.ON_MEMBER_LOST] = "release"
    pods = with_record(pods, {keys.DEGRADED_SINCE: p.format_time(NOW - 10)})
    plan = plan_of(pods)
    assert reasons(plan) == ["GangDegraded"]
    assert "evicting it whole unless it is back at its minimum within 60s" in plan.events[0].note
