"""plan_application when a gang of another dialect times out: each follows its own scheduler's rule
(Koordinator marks its pods and never schedules them, Coscheduling and PodGroups back off and retry),
unless the pod names a YuniKorn style."""

from __future__ import annotations

from tests.planning import (
    NOW,
    apply,
    coscheduling,
    dialect_gang,
    dialect_member,
    koordinator,
    names,
    planned,
    reasons,
    record,
    scheduled,
)
from yuniplace.controller.plan import Outcome
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects import koordinator as koordinator_dialect
from yuniplace.gang.placeholders import placeholder_name
from yuniplace.gang.podshape import member_group
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason

TIMED_OUT = {koordinator_dialect.TIMEOUT: "true"}


# -- Koordinator: marked timed out, never scheduled ------------------------------------------------


def test_a_koordinator_gang_out_of_time_marks_its_pods_and_keeps_them_unscheduled() -> None:
    """Koordinator's waiting-time runs out with 3 of 4 placed: no pod starts or fails, every pod is
    marked gang.scheduling.koordinator.sh/timeout=true, no placeholder is left, and each pod's events
    say what happened and what to do."""
    pods = dialect_gang(koordinator(), "train", record(AppState.RESERVING, started=NOW - 45))
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
    pods = dialect_gang(koordinator(), "train", record(AppState.RESERVING, started=NOW - 45))
    pods = apply(pods, planned("train", pods), NOW)
    assert all(p.annotations_of(pod).get(koordinator_dialect.TIMEOUT) == "true" for pod in pods)
    quiet = planned("train", pods, NOW + 30)
    assert quiet.state == AppState.FAILED and quiet.annotate == {}
    assert (quiet.events, quiet.mark_timed_out, quiet.ungate, quiet.fail, quiet.delete) == ([], [], [], [], [])
    late = dialect_member("train-4", koordinator(), created=NOW + 40)
    again = planned("train", [*pods, late], NOW + 45)
    assert names(again.mark_timed_out) == ["train-4"] and again.ungate == [] and again.fail == []
    assert [(p.name(e.pod), e.reason) for e in again.events] == [("train-4", Reason.GANG_TIMED_OUT)]
    assert again.state == AppState.FAILED and again.outcomes == []


def test_a_koordinator_pod_naming_a_style_follows_that_style() -> None:
    soft = dialect_gang(
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
    pods = dialect_gang(coscheduling(), "mpi", originator)
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
    pods = dialect_gang(coscheduling(), "mpi", record(AppState.RESERVING, started=started), placed=0)
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
        pod["spec"]["nodeName"] = f"n{index}"  # placed, its status not yet Running
        scheduled(pod, NOW + 25)
    reserved = planned("mpi", pods, NOW + 30)
    assert reserved.state == AppState.RESERVED
    assert sorted(p.name(s.member) for s in reserved.swaps) == ["mpi-0", "mpi-1", "mpi-2", "mpi-3"]


def test_a_reserved_coscheduling_gang_whose_pods_do_not_all_exist_in_time_gives_its_reservation_back() -> None:
    """Coscheduling starts no pod before the whole minimum exists, timeout or not: a complete reservation
    still missing a pod at its deadline is given back and tried again, not started in part."""
    originator = record(AppState.RESERVED, started=NOW - 950, **{keys.FIRST_ALLOCATED: p.format_time(NOW - 900)})
    pods = dialect_gang(coscheduling(), "mpi", originator, placed=4)
    three = [pod for pod in pods if p.name(pod) != "mpi-3"]
    plan = planned("mpi", three)
    assert plan.state == AppState.PENDING and plan.swaps == [] and plan.ungate == []
    assert len(plan.delete) == 4 and plan.annotate[keys.RESERVATION_STARTED] is None
    assert reasons(plan) == ["GangReservationReleased"]
    assert plan.events[0].note.startswith(
        "1 of its 4 pods still do not exist after 900s, and Coscheduling starts a gang only once all exist"
    )
    soft = dialect_gang(
        coscheduling(**{keys.SCHEDULING_POLICY_PARAMETERS: "gangSchedulingStyle=Soft"}), "mpi", originator, 4
    )
    started = planned("mpi", [pod for pod in soft if p.name(pod) != "mpi-3"])
    assert started.state == AppState.RESERVED and len(started.swaps) == 3  # Soft: they start as YuniKorn's would


def test_a_gang_out_of_time_waiting_in_its_queue_under_the_retry_rule_waits_again_from_scratch() -> None:
    """Not admitted in time: it goes on waiting, its queue clock started again when it is next first."""
    queued = record(AppState.PENDING, **{keys.QUEUED_SINCE: p.format_time(NOW - 900)})
    pods = [
        dialect_member(f"mpi-{i}", coscheduling(), created=NOW - 960 + i, record=queued if i == 0 else None)
        for i in range(4)
    ]
    plan = planned("mpi", pods)
    assert plan.state == AppState.PENDING and plan.ungate == [] and plan.fail == []
    assert plan.annotate[keys.QUEUED_SINCE] is None and plan.annotate[keys.ATTEMPTS] == "1"
    assert reasons(plan) == ["PlaceholderTimeOut", "GangReservationReleased"]


def test_a_koordinator_gang_says_its_pods_are_marked_if_it_times_out() -> None:
    pods = [dialect_member(f"train-{i}", koordinator(), created=NOW - 60 + i) for i in range(4)]
    plan = planned("train", pods)
    assert "marked gang.scheduling.koordinator.sh/timeout=true" in plan.events[0].note
