"""plan_application when a gang of another dialect times out: each follows its own scheduler's rule
(Koordinator marks its pods and never schedules them, Coscheduling and PodGroups back off and retry),
unless the pod names a YuniKorn style."""

from __future__ import annotations

from typing import Any

from tests.unit.test_plan import NOW, apply, assert_consistent, materialize, names, reasons
from yuniplace.controller.lifecycle import plan_application
from yuniplace.controller.plan import Outcome, Plan, Settings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import coscheduling as coscheduling_dialect
from yuniplace.gang.dialects import koordinator as koordinator_dialect
from yuniplace.gang.placeholders import placeholder_name, placeholder_pod
from yuniplace.gang.podshape import member_group
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits, TaskGroup
from yuniplace.runtime.events import Reason

Pod = dict[str, Any]
NS = "default"
ONE = {"cpu": "1", "memory": "1Gi"}
TIMED_OUT = {koordinator_dialect.TIMEOUT: "true"}


def member(
    name: str,
    dialect: dict[str, dict[str, str]],
    *,
    created: float,
    record: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> Pod:
    """A gated member as the store holds it; `record`: the yuniplace annotations of an originator."""
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": p.format_time(created),
            "labels": dict(dialect.get("labels", {})),
            "annotations": {**dialect.get("annotations", {}), **(record or {}), **(extra or {})},
        },
        "spec": {
            "containers": [{"name": "main", "resources": {"requests": dict(ONE)}}],
            "schedulingGates": [{"name": keys.GATE}],
        },
        "status": {"phase": "Pending"},
    }


def koordinator(waiting_time: str = "5s", **more: str) -> dict[str, dict[str, str]]:
    return {
        "annotations": {
            koordinator_dialect.NAME: "train",
            koordinator_dialect.MIN_AVAILABLE: "4",
            koordinator_dialect.WAITING_TIME: waiting_time,
            koordinator_dialect.MODE: "NonStrict",
            **more,
        }
    }


def coscheduling(**annotations: str) -> dict[str, dict[str, str]]:
    return {
        "labels": {coscheduling_dialect.NAME: "mpi", coscheduling_dialect.MIN_AVAILABLE: "4"},
        "annotations": dict(annotations),
    }


def record(state: AppState, started: float | None = None, **more: str) -> dict[str, str]:
    notes = {keys.STATE: state.value, **more}
    if started is not None:
        notes[keys.RESERVATION_STARTED] = p.format_time(started)
    return notes


def seats(app_id: str, originator: Pod, placed: int, total: int = 4) -> list[Pod]:
    """The gang's placeholders, the first `placed` of them bound."""
    group = TaskGroup(member_group(originator), total, ONE)
    return [
        materialize(
            placeholder_pod(app_id=app_id, group=group, index=i, originator=originator),
            created=NOW - 50,
            node=f"n{i}" if i < placed else None,
            scheduled=NOW - 40 if i < placed else None,
        )
        for i in range(total)
    ]


def gang(
    dialect: dict[str, dict[str, str]], app_id: str, originator_record: dict[str, str], placed: int = 3
) -> list[Pod]:
    """Four members (the first the originator) reserving, `placed` of their 4 placeholders bound."""
    pods = [
        member(f"{app_id}-{i}", dialect, created=NOW - 60 + i, record=originator_record if i == 0 else None)
        for i in range(4)
    ]
    return pods + seats(app_id, pods[0], placed)


def planned(app_id: str, pods: list[Pod], now: float = NOW) -> Plan:
    plan = plan_application(Application.of(p.AppKey(NS, app_id), pods, limits=Limits()), now, Settings())
    assert_consistent(plan)
    return plan


# -- Koordinator: marked timed out, never scheduled ------------------------------------------------


def test_a_koordinator_gang_out_of_time_marks_its_pods_and_keeps_them_unscheduled() -> None:
    """Koordinator's waiting-time runs out with 3 of 4 placed: no pod starts or fails, every pod is
    marked gang.scheduling.koordinator.sh/timeout=true, no placeholder is left, and each pod's events
    say what happened and what to do."""
    pods = gang(koordinator(), "train", record(AppState.RESERVING, started=NOW - 45))
    plan = planned("train", pods)
    assert plan.state == AppState.FAILED and Outcome.TIMED_OUT in plan.outcomes
    assert plan.annotate == {keys.STATE: "Failed", **TIMED_OUT}  # the originator's, in one write
    assert names(plan.mark_timed_out) == ["train-1", "train-2", "train-3"]
    assert plan.ungate == [] and plan.fail == [] and plan.swaps == [] and plan.create == []
    assert names(plan.delete) == [placeholder_name("train", member_group(pods[0]), i) for i in range(4)]
    assert [(p.name(e.pod), e.reason) for e in plan.events] == [
        ("train-0", Reason.PLACEHOLDER_TIMEOUT),
        ("train-0", Reason.GANG_TIMED_OUT),
        ("train-1", Reason.GANG_TIMED_OUT),
        ("train-2", Reason.GANG_TIMED_OUT),
        ("train-3", Reason.GANG_TIMED_OUT),
    ]
    assert plan.events[0].note == "gang reservation timed out: 3/4 placeholders placed after 5s"
    assert plan.events[1].note == (
        "gang train timed out (3/4 placeholders placed after 5s): as Koordinator does, its pods are marked "
        "gang.scheduling.koordinator.sh/timeout=true and will not be scheduled; delete them and create them "
        "again to schedule the gang"
    )
    assert "this pod is marked gang.scheduling.koordinator.sh/timeout=true and will not be scheduled" in (
        plan.events[2].note
    )
    assert plan.requeue_after_s is None


def test_a_timed_out_koordinator_gang_stays_over_and_marks_a_member_created_later() -> None:
    """Koordinator schedules no pod of a gang out of time: once marked, later reconciles change nothing,
    and a member created afterwards is marked and kept gated too (never failed, never started)."""
    pods = gang(koordinator(), "train", record(AppState.RESERVING, started=NOW - 45))
    pods = apply(pods, planned("train", pods), NOW)
    assert all(p.annotations_of(pod).get(koordinator_dialect.TIMEOUT) == "true" for pod in pods)
    quiet = planned("train", pods, NOW + 30)
    assert quiet.state == AppState.FAILED and quiet.annotate == {}
    assert (quiet.events, quiet.mark_timed_out, quiet.ungate, quiet.fail, quiet.delete) == ([], [], [], [], [])
    late = member("train-4", koordinator(), created=NOW + 40)
    again = planned("train", [*pods, late], NOW + 45)
    assert names(again.mark_timed_out) == ["train-4"] and again.ungate == [] and again.fail == []
    assert [(p.name(e.pod), e.reason) for e in again.events] == [("train-4", Reason.GANG_TIMED_OUT)]
    assert again.state == AppState.FAILED and again.outcomes == []


def test_a_koordinator_pod_naming_a_style_follows_that_style() -> None:
    soft = gang(
        koordinator(**{keys.SCHEDULING_POLICY_PARAMETERS: "gangSchedulingStyle=Soft"}),
        "train",
        record(AppState.RESERVING, started=NOW - 45),
    )
    plan = planned("train", soft)
    assert plan.state == AppState.RESUMING and plan.mark_timed_out == []
    assert names(plan.ungate) == ["train-0", "train-1", "train-2", "train-3"]


# -- Coscheduling and PodGroups: given back, retried after a backoff --------------------------------


def test_a_coscheduling_gang_out_of_time_gives_its_reservation_back_and_tries_again() -> None:
    """As a timed-out PodGroup backs off: its placeholders go, its pods stay gated (none starts, none
    fails), and it tries again after a backoff with a clock of its own."""
    originator = record(AppState.RESERVING, started=NOW - 45, **{keys.FIRST_ALLOCATED: p.format_time(NOW - 40)})
    pods = gang(coscheduling(), "mpi", originator)
    plan = planned("mpi", pods, NOW - 40 + 900)
    assert plan.state == AppState.PENDING and Outcome.TIMED_OUT in plan.outcomes
    assert plan.ungate == [] and plan.fail == [] and plan.mark_timed_out == []
    assert names(plan.delete) == [placeholder_name("mpi", member_group(pods[0]), i) for i in range(4)]
    assert plan.annotate == {
        keys.STATE: "Pending",
        keys.ATTEMPTS: "1",
        keys.RETRY_AFTER: p.format_time(NOW - 40 + 900 + 10),
        keys.RESERVATION_STARTED: None,
        keys.FIRST_ALLOCATED: None,
    }
    assert reasons(plan) == ["PlaceholderTimeOut", "GangReservationReleased"]
    assert plan.events[1].note == (
        "gang reservation timed out (3/4 placeholders placed after 900s); as a timed-out PodGroup backs off, "
        "its placeholders are removed and its pods wait, still gated, for the next attempt; trying again in 10s "
        "(attempt 1)"
    )
    assert plan.requeue_after_s == 10


def test_the_attempt_after_a_timeout_has_a_whole_timeout_of_its_own_and_can_start_the_gang() -> None:
    """Retried after the backoff, the gang reserves again with its clock started afresh: it does not time
    out again at once, and once its placeholders are placed its members swap in."""
    started = NOW - 900
    pods = gang(coscheduling(), "mpi", record(AppState.RESERVING, started=started), placed=0)
    timed_out = planned("mpi", pods)
    pods = apply(pods, timed_out, NOW)
    assert timed_out.state == AppState.PENDING
    assert keys.RESERVATION_STARTED not in p.annotations_of(pods[0])

    backing_off = planned("mpi", pods, NOW + 5)
    assert backing_off.state == AppState.PENDING and backing_off.create == [] and backing_off.requeue_after_s == 5

    retried = planned("mpi", pods, NOW + 10)
    assert retried.state == AppState.RESERVING and len(retried.create) == 4
    assert retried.annotate[keys.RESERVATION_STARTED] == p.format_time(NOW + 10)
    assert [e.note for e in retried.events] == ["attempt 2: creating 4 placeholder pods again"]
    pods = apply(pods, retried, NOW + 10)

    waiting = planned("mpi", pods, NOW + 20)
    assert waiting.state == AppState.RESERVING and waiting.outcomes == [] and waiting.delete == []
    assert waiting.requeue_after_s == 890  # a whole timeout from the attempt's start
    for index, pod in enumerate(pod for pod in pods if p.is_placeholder(pod)):
        pod["spec"]["nodeName"] = f"n{index}"
        pod["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": p.format_time(NOW + 25)}
        ]
    reserved = planned("mpi", pods, NOW + 30)
    assert reserved.state == AppState.RESERVED
    assert sorted(p.name(s.member) for s in reserved.swaps) == ["mpi-0", "mpi-1", "mpi-2", "mpi-3"]


def test_a_reserved_coscheduling_gang_whose_pods_do_not_all_exist_in_time_gives_its_reservation_back() -> None:
    """Coscheduling starts no pod before the whole minimum exists, timeout or not: a complete reservation
    still missing a pod at its deadline is given back and tried again, not started in part."""
    originator = record(AppState.RESERVED, started=NOW - 950, **{keys.FIRST_ALLOCATED: p.format_time(NOW - 900)})
    pods = gang(coscheduling(), "mpi", originator, placed=4)
    three = [pod for pod in pods if p.name(pod) != "mpi-3"]
    plan = planned("mpi", three)
    assert plan.state == AppState.PENDING and plan.swaps == [] and plan.ungate == []
    assert len(plan.delete) == 4 and plan.annotate[keys.RESERVATION_STARTED] is None
    assert reasons(plan) == ["GangReservationReleased"]
    assert plan.events[0].note.startswith(
        "1 of its 4 pods still do not exist after 900s, and Coscheduling starts a gang only once all exist"
    )
    soft = gang(coscheduling(**{keys.SCHEDULING_POLICY_PARAMETERS: "gangSchedulingStyle=Soft"}), "mpi", originator, 4)
    started = planned("mpi", [pod for pod in soft if p.name(pod) != "mpi-3"])
    assert started.state == AppState.RESERVED and len(started.swaps) == 3  # Soft: they start as YuniKorn's would


def test_a_gang_out_of_time_waiting_in_its_queue_under_the_retry_rule_waits_again_from_scratch() -> None:
    """Not admitted in time: it goes on waiting, its queue clock started again when it is next first."""
    queued = record(AppState.PENDING, **{keys.QUEUED_SINCE: p.format_time(NOW - 900)})
    pods = [
        member(f"mpi-{i}", coscheduling(), created=NOW - 960 + i, record=queued if i == 0 else None) for i in range(4)
    ]
    plan = planned("mpi", pods)
    assert plan.state == AppState.PENDING and plan.ungate == [] and plan.fail == []
    assert plan.annotate[keys.QUEUED_SINCE] is None and plan.annotate[keys.ATTEMPTS] == "1"
    assert reasons(plan) == ["PlaceholderTimeOut", "GangReservationReleased"]
