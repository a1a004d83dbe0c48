"""The fault campaign's invariants over plain observed data: each holds for a well-behaved history and
fails, naming its objects, for the defect it is there to catch."""

from __future__ import annotations

import dataclasses
from typing import Any

from yuniplace.bench import invariants as inv
from yuniplace.bench.invariants import EventSeen, Gang, Observed, PodTrace

APP = "ns/app"
GRACE = 10.0
T0 = 1000.0  # the reservation begins
GANG = Gang(APP, "Soft", 60.0, {"workers": 2}, originator="app-0")


def trace(name: str, **fields: Any) -> PodTrace:
    """A pod of the application, first seen at T0."""
    placeholder = name.startswith("tg-")
    defaults: dict[str, Any] = {"uid": f"uid-{name}", "group": "workers", "first_seen": T0}
    return PodTrace(namespace="ns", name=name, app=APP, placeholder=placeholder, **defaults | fields)


def observed(*pods: PodTrace, now: float = T0 + 500, **more: Any) -> Observed:
    fields: dict[str, Any] = {
        "pods": {p.uid: p for p in pods},
        "events": (),
        "gangs": {APP: GANG},
        "disturbed": {},
        "deleted_by_campaign": frozenset(),
        "now": now,
        "grace_s": GRACE,
        "default_timeout_s": 120.0,
    }
    return Observed(**fields | more)


def originator(**fields: Any) -> PodTrace:
    """The gang's first member, whose record says the reservation began at T0."""
    defaults: dict[str, Any] = {"reservation_starts": [T0], "states": [(T0, "Reserving")], "gated_since": T0}
    return trace("app-0", **defaults | fields)


def swapped(name: str, placeholder: str, at: float) -> tuple[PodTrace, PodTrace]:
    """A placeholder placed at T0 + 5 and the member that took its place at `at`."""
    return (
        trace(placeholder, bound_at=T0 + 5, deleting_at=at - 0.1, gone_at=at - 0.1),
        trace(name, gated_since=T0, ungated_at=at - 0.05, bound_at=at, claims=placeholder),
    )


def healthy() -> list[PodTrace]:
    """A gang of two reserved, swapped in and completed."""
    p0, m0 = swapped("app-0", "tg-app-workers-0", T0 + 8)
    p1, m1 = swapped("app-1", "tg-app-workers-1", T0 + 8)
    m0 = dataclasses.replace(
        m0,
        reservation_starts=[T0],
        states=[(T0, "Reserving"), (T0 + 6, "Reserved"), (T0 + 8, "Running"), (T0 + 30, "Completed")],
        terminal_at=T0 + 30,
        phase="Succeeded",
    )
    m1 = dataclasses.replace(m1, terminal_at=T0 + 29, phase="Succeeded")
    return [p0, m0, p1, m1]


def test_a_healthy_gang_breaks_no_invariant() -> None:
    assert inv.check(observed(*healthy())) == []


def names(violations: list[inv.Violation], invariant: str) -> list[tuple[str, ...]]:
    return [v.objects for v in violations if v.invariant == invariant]


# -- 1 ---------------------------------------------------------------------------------------------------


def test_a_gang_that_starts_one_member_of_two_runs_partly() -> None:
    p0, m0 = swapped("app-0", "tg-app-workers-0", T0 + 8)
    late = trace("app-1", gated_since=T0)
    found = inv.partial_gangs(observed(p0, dataclasses.replace(m0, reservation_starts=[T0]), late))
    assert [(v.invariant, v.objects) for v in found] == [(inv.PARTIAL_GANG, ("app-0",))]
    assert "workers: 1 of 2 started" in found[0].detail


def test_a_gang_evicted_whole_before_its_last_member_started_did_not_run_partly() -> None:
    p0, m0 = swapped("app-0", "tg-app-workers-0", T0 + 8)
    evicted = dataclasses.replace(m0, disruption=inv.EVICTED, deleting_at=T0 + 9, gone_at=T0 + 9)
    held = trace("app-1", gated_since=T0, deleting_at=T0 + 9, gone_at=T0 + 9)
    assert inv.partial_gangs(observed(p0, evicted, held)) == []


def test_a_partial_start_is_judged_only_after_the_timeout_and_grace() -> None:
    p0, m0 = swapped("app-0", "tg-app-workers-0", T0 + 8)
    assert inv.partial_gangs(observed(p0, m0, now=T0 + 8 + GANG.timeout_s + GRACE - 1)) == []


def test_a_gang_that_fell_back_under_soft_may_run_partly() -> None:
    member = trace("app-0", bound_at=T0 + 70, states=[(T0, "Reserving"), (T0 + 60, "Resuming")])
    assert inv.partial_gangs(observed(member, trace("app-1"))) == []


def test_a_gang_the_campaign_took_apart_is_not_judged() -> None:
    member = trace("app-0", bound_at=T0 + 8)
    assert inv.partial_gangs(observed(member, disturbed={APP: T0 + 9})) == []


# -- 2 ---------------------------------------------------------------------------------------------------


def test_a_placeholder_left_after_its_timeout_outlives_it() -> None:
    stuck = trace("tg-app-workers-0", bound_at=T0 + 5)
    found = inv.outlived_placeholders(observed(originator(), stuck))
    assert names(found, inv.PLACEHOLDER_OUTLIVED) == [("tg-app-workers-0",)]
    assert "still there" in found[0].detail


def test_a_placeholder_recreated_does_not_move_the_timeout() -> None:
    """The timeout counts from the reservation's first placement, not the newest placeholder's."""
    first = trace("tg-app-workers-0", bound_at=T0 + 5, deleting_at=T0 + 50, gone_at=T0 + 50)
    again = trace("tg-app-workers-0", uid="uid-again", first_seen=T0 + 51, bound_at=T0 + 52, gone_at=T0 + 110)
    found = inv.outlived_placeholders(observed(originator(), first, again))
    assert names(found, inv.PLACEHOLDER_OUTLIVED) == [("tg-app-workers-0",)]


def test_a_placeholder_outlives_its_application_that_fell_back() -> None:
    ended = originator(states=[(T0, "Reserving"), (T0 + 20, "Resuming")])
    left = trace("tg-app-workers-0", gone_at=T0 + 20 + GRACE + 5)
    assert names(inv.outlived_placeholders(observed(ended, left)), inv.PLACEHOLDER_OUTLIVED) == [("tg-app-workers-0",)]
    gone_in_time = dataclasses.replace(left, gone_at=T0 + 20 + GRACE - 1)
    assert inv.outlived_placeholders(observed(ended, gone_in_time)) == []


def test_a_placeholder_outlives_its_deleted_originator() -> None:
    deleted = originator(deleting_at=T0 + 10, gone_at=T0 + 10)
    left = trace("tg-app-workers-0", bound_at=T0 + 5, gone_at=T0 + 10 + GRACE + 1)
    assert names(inv.outlived_placeholders(observed(deleted, left)), inv.PLACEHOLDER_OUTLIVED) == [
        ("tg-app-workers-0",)
    ]


def test_a_new_incarnation_has_its_own_timeout() -> None:
    """A Job whose pods were all evicted comes back with a new originator and a reservation of its own."""
    old = originator(deleting_at=T0 + 40, gone_at=T0 + 40, states=[(T0, "Reserving"), (T0 + 8, "Running")])
    new = trace(
        "app-0b",
        first_seen=T0 + 200,
        reservation_starts=[T0 + 200],
        states=[(T0 + 200, "Reserving")],
        gated_since=T0 + 200,
    )
    placeholder = trace("tg-app-workers-0", first_seen=T0 + 200, bound_at=T0 + 201)
    job = Gang(APP, "Soft", 60.0, {"workers": 2})
    assert inv.outlived_placeholders(observed(old, new, placeholder, now=T0 + 230, gangs={APP: job})) == []


def test_a_reservation_begun_again_while_released_members_live_keeps_the_first_end() -> None:
    """The gang fell back and its record went with its originator; another pod began a second
    reservation while a member it released still waited: its placeholders outlive the application."""
    fell_back = originator(states=[(T0, "Reserving"), (T0 + 60, "Resuming")], deleting_at=T0 + 70, gone_at=T0 + 70)
    released = trace("app-1", gated_since=T0, ungated_at=T0 + 60)
    again = trace("app-2", first_seen=T0 + 5, reservation_starts=[T0 + 80], states=[(T0 + 80, "Reserving")])
    placeholder = trace("tg-app-workers-0", first_seen=T0 + 80, bound_at=T0 + 81)
    job = Gang(APP, "Soft", 60.0, {"workers": 2})
    found = inv.outlived_placeholders(observed(fell_back, released, again, placeholder, now=T0 + 100, gangs={APP: job}))
    assert names(found, inv.PLACEHOLDER_OUTLIVED) == [("tg-app-workers-0",)]


def test_a_reservation_begun_again_with_a_clock_of_its_own_has_a_fresh_timeout() -> None:
    """Out of time under its dialect's Retry rule (Coscheduling's, say), the gang gave its reservation
    back and its originator began the next attempt with a new start on its record: the new placeholders'
    timeout counts from their own placement."""
    again = originator(
        reservation_starts=[T0, T0 + 70],
        states=[(T0, "Reserving"), (T0 + 62, "New"), (T0 + 70, "Reserving"), (T0 + 160, "Resuming")],
    )
    released = trace("tg-app-workers-0", first_seen=T0, bound_at=T0 + 1, deleting_at=T0 + 62, gone_at=T0 + 62)
    second = trace(
        "tg-app-workers-0",
        uid="ph-second",
        first_seen=T0 + 70,
        bound_at=T0 + 71,
        deleting_at=T0 + 161,
        gone_at=T0 + 161,
    )
    job = Gang(APP, "Soft", 90.0, {"workers": 1})
    assert inv.outlived_placeholders(observed(again, released, second, now=T0 + 200, gangs={APP: job})) == []
    # Read as one reservation (its first start only), the second placeholders would be 71 s late.
    once = dataclasses.replace(again, reservation_starts=[T0])
    late = inv.outlived_placeholders(observed(once, released, second, now=T0 + 200, gangs={APP: job}))
    assert names(late, inv.PLACEHOLDER_OUTLIVED) == [("tg-app-workers-0",)]


# -- 3 ---------------------------------------------------------------------------------------------------


def test_a_member_gated_past_its_reservation_timeout_is_reported() -> None:
    found = inv.gated_past_deadline(observed(originator(), trace("tg-app-workers-0", bound_at=T0 + 5)))
    assert names(found, inv.GATED_PAST_DEADLINE) == [("app-0",)]
    assert "still gated" in found[0].detail


def test_a_member_released_at_its_timeout_is_not() -> None:
    member = originator(ungated_at=T0 + 5 + GANG.timeout_s + 1)
    assert inv.gated_past_deadline(observed(member, trace("tg-app-workers-0", bound_at=T0 + 5))) == []


def test_a_member_waiting_behind_others_in_its_queue_has_no_deadline() -> None:
    waiting = trace("app-0", gated_since=T0)
    assert inv.gated_past_deadline(observed(waiting, now=T0 + 10_000)) == []


def test_a_member_first_in_its_queue_waits_no_longer_than_its_timeout() -> None:
    first = trace("app-0", gated_since=T0, queued_since=T0 + 100)
    assert inv.gated_past_deadline(observed(first, now=T0 + 100 + GANG.timeout_s + GRACE - 1)) == []
    assert names(
        inv.gated_past_deadline(observed(first, now=T0 + 100 + GANG.timeout_s + GRACE + 1)), inv.GATED_PAST_DEADLINE
    ) == [("app-0",)]


def test_members_made_after_their_gang_was_evicted_wait_in_the_queue_as_a_new_gang() -> None:
    """A Job makes its pods again after its gang was evicted whole (a reclaim): they are of a story not
    begun yet, held to their queue's timeout once first there, not to the evicted story's end."""
    evicted = originator(states=[(T0, "Running")], terminal_at=T0 + 20, phase="Failed", ungated_at=T0 + 1)
    again = trace("app-1", first_seen=T0 + 30, gated_since=T0 + 30, ungated_at=T0 + 150)
    assert inv.gated_past_deadline(observed(evicted, again, now=T0 + 400)) == []
    first_in_queue = trace("app-2", first_seen=T0 + 30, gated_since=T0 + 30, queued_since=T0 + 40)
    found = inv.gated_past_deadline(observed(evicted, first_in_queue, now=T0 + 40 + GANG.timeout_s + GRACE + 1))
    assert names(found, inv.GATED_PAST_DEADLINE) == [("app-2",)]


def test_members_of_a_deleted_originator_wait_the_default_timeout_at_most() -> None:
    deleted = trace("app-0", gated_since=T0, deleting_at=T0 + 1, gone_at=T0 + 1)
    executor = trace("app-1", gated_since=T0)
    assert names(inv.gated_past_deadline(observed(deleted, executor, now=T0 + 200)), inv.GATED_PAST_DEADLINE) == [
        ("app-1",)
    ]


# -- 4 ---------------------------------------------------------------------------------------------------


def test_an_application_whose_pods_all_ended_must_read_terminal() -> None:
    stale = originator(states=[(T0, "Running")], terminal_at=T0 + 30, phase="Succeeded")
    found = inv.not_terminal(observed(stale))
    assert names(found, inv.NOT_TERMINAL) == [("app-0",)]
    assert "still Running" in found[0].detail
    done = dataclasses.replace(stale, states=[(T0, "Running"), (T0 + 31, "Completed")])
    assert inv.not_terminal(observed(done)) == []


def test_an_application_with_a_member_still_running_need_not_be_terminal() -> None:
    running = originator(states=[(T0, "Running")], bound_at=T0 + 8)
    assert inv.not_terminal(observed(running)) == []


# -- 5 ---------------------------------------------------------------------------------------------------


def test_a_placeholder_recreated_beside_the_member_in_its_seat_is_a_duplicate() -> None:
    p0, m0 = swapped("app-0", "tg-app-workers-0", T0 + 8)
    again = trace("tg-app-workers-0", uid="uid-again", first_seen=T0 + 20)
    found = inv.duplicate_placeholders(observed(p0, m0, again))
    assert names(found, inv.DUPLICATE_PLACEHOLDER) == [("tg-app-workers-0", "app-0")]


def test_more_placeholders_of_a_group_than_its_seats_are_duplicates() -> None:
    seats = [trace(f"tg-app-workers-{i}") for i in range(3)]
    found = inv.duplicate_placeholders(observed(*seats))
    assert names(found, inv.DUPLICATE_PLACEHOLDER) == [tuple(p.name for p in seats)]


def test_a_placeholder_replaced_after_it_went_is_no_duplicate() -> None:
    first = trace("tg-app-workers-0", gone_at=T0 + 5)
    again = trace("tg-app-workers-0", uid="uid-again", first_seen=T0 + 5)
    assert inv.duplicate_placeholders(observed(first, again, trace("tg-app-workers-1"))) == []


# -- 6 ---------------------------------------------------------------------------------------------------


def test_a_gang_evicted_but_for_one_member_is_evicted_partly() -> None:
    gone = trace("app-0", bound_at=T0 + 8, disruption=inv.EVICTED, deleting_at=T0 + 100)
    kept = trace("app-1", bound_at=T0 + 8)
    found = inv.partial_evictions(observed(gone, kept))
    assert names(found, inv.PARTIAL_EVICTION) == [("app-1",)]
    whole = dataclasses.replace(kept, disruption=inv.EVICTED, deleting_at=T0 + 101)
    assert inv.partial_evictions(observed(gone, whole)) == []


# -- 7 ---------------------------------------------------------------------------------------------------


def test_a_member_failed_without_its_event_is_lost() -> None:
    failed = trace("app-1", phase="Failed", reason="ResourceReservationTimeout", terminal_at=T0 + 70)
    found = inv.lost_members(observed(failed))
    assert names(found, inv.LOST_MEMBER) == [("app-1",)]
    told = EventSeen("ResourceReservationTimeout", "ns", "app-1", "uid-app-1")
    assert inv.lost_members(observed(failed, events=[told])) == []


def test_a_member_deleted_by_no_one_known_is_lost() -> None:
    deleted = trace("app-1", bound_at=T0 + 8, deleting_at=T0 + 50, gone_at=T0 + 50)
    assert names(inv.lost_members(observed(deleted)), inv.LOST_MEMBER) == [("app-1",)]
    assert inv.lost_members(observed(deleted, deleted_by_campaign=frozenset({deleted.uid}))) == []
    assert inv.lost_members(observed(deleted, disturbed={APP: T0 + 49})) == []
    by_node = dataclasses.replace(deleted, disruption="DeletionByPodGC")
    assert inv.lost_members(observed(by_node)) == []


def test_an_evicted_member_needs_its_gangs_preemption_event() -> None:
    evicted = trace("app-1", bound_at=T0 + 8, disruption=inv.EVICTED, deleting_at=T0 + 50)
    assert names(inv.lost_members(observed(evicted)), inv.LOST_MEMBER) == [("app-1",)]
    told = EventSeen("GangPreempted", "ns", "app-1", "uid-app-1")
    assert inv.lost_members(observed(evicted, events=[told])) == []


def test_a_member_that_ended_before_it_was_deleted_is_not_lost() -> None:
    done = trace("app-1", bound_at=T0 + 8, phase="Succeeded", terminal_at=T0 + 9, deleting_at=T0 + 50)
    assert inv.lost_members(observed(done)) == []


# -- 8 ---------------------------------------------------------------------------------------------------

RESTARTING = dataclasses.replace(GANG, groups={"workers": 3}, originator=None, restarts_on_loss=True)


def job_member(name: str, bound: float, **fields: Any) -> PodTrace:
    return trace(name, **{"gated_since": T0, "ungated_at": bound - 0.1, "bound_at": bound, "phase": "Running"} | fields)


def test_a_restarting_gang_evicted_whole_soon_after_a_loss_and_started_again_is_fine() -> None:
    first = [
        job_member("w-0", T0 + 5, phase="Failed", terminal_at=T0 + 50, reason=None),
        job_member("w-1", T0 + 5, deleting_at=T0 + 56, disruption=inv.EVICTED),
        job_member("w-2", T0 + 5, deleting_at=T0 + 56, disruption=inv.EVICTED),
    ]
    # The next attempt's members bind a minute apart (one waits for a pod on a deleted node to go).
    again = [job_member("w-3", T0 + 60), job_member("w-4", T0 + 60), job_member("w-5", T0 + 130)]
    seen = observed(*first, *again, gangs={APP: RESTARTING})
    assert inv.short_restarting_gangs(seen) == []


def test_a_restarting_gang_whose_members_succeed_as_they_are_evicted_is_evicted_whole() -> None:
    """Told to stop, a member's program may end well: evicted, it is no longer up all the same."""
    on_lost_node = job_member("w-0", T0 + 5, node="node-1")
    evicted = [
        job_member(name, T0 + 5, deleting_at=T0 + 66, disruption=inv.EVICTED, phase="Succeeded", terminal_at=T0 + 67)
        for name in ("w-1", "w-2")
    ]
    lost = dataclasses.replace(on_lost_node, deleting_at=T0 + 66, disruption="DeletionByTaintManager")
    again = [job_member(f"w-{i}", T0 + 300) for i in (3, 4, 5)]
    seen = observed(lost, *evicted, *again, gangs={APP: RESTARTING}, node_troubles={"node-1": [(T0 + 60, None)]})
    assert inv.short_restarting_gangs(seen) == []
    assert inv.unreported_losses(seen) == []
    # Left running instead, they keep it short past the bound.
    kept = [dataclasses.replace(p, deleting_at=None, phase="Running", terminal_at=None) for p in evicted]
    left = observed(on_lost_node, *kept, gangs={APP: RESTARTING}, node_troubles={"node-1": [(T0 + 60, None)]})
    assert names(inv.short_restarting_gangs(left), inv.SHORT_TOO_LONG) == [("w-0",)]


def test_a_restarting_gang_left_short_breaks_the_bound() -> None:
    pods = [
        job_member("w-0", T0 + 5, phase="Failed", terminal_at=T0 + 50),
        job_member("w-1", T0 + 5),
        job_member("w-2", T0 + 5),
    ]
    [violation] = inv.short_restarting_gangs(observed(*pods, gangs={APP: RESTARTING}))
    assert violation.invariant == inv.SHORT_TOO_LONG and violation.objects == ("w-0",)
    assert violation.due == T0 + 50 + 5 + GRACE
    # A gang that does not ask to be restarted is only reported, never held to it; nor is one finishing.
    assert inv.short_restarting_gangs(observed(*pods)) == []
    done = [dataclasses.replace(p, phase="Succeeded", terminal_at=T0 + 50 + i) for i, p in enumerate(pods)]
    assert inv.short_restarting_gangs(observed(*done, gangs={APP: RESTARTING})) == []


# -- 8 on real nodes: a node in trouble, a member never Ready, a gang that asks release ---------------------


def test_a_member_on_a_node_in_trouble_is_down_until_the_node_is_back() -> None:
    member = job_member("w-0", T0 + 5)
    troubled = {"node-1": [(T0 + 60, T0 + 120)]}
    member = dataclasses.replace(member, node="node-1", ready_at=T0 + 6)
    assert inv.up_spans(member, RESTARTING, observed(member, node_troubles=troubled)) == [
        (T0 + 5, T0 + 60),
        (T0 + 120, float("inf")),
    ]
    # One that had succeeded before is no loss.
    done = dataclasses.replace(member, phase="Succeeded", terminal_at=T0 + 50)
    assert inv.up_spans(done, RESTARTING, observed(done, node_troubles=troubled)) == [(T0 + 5, float("inf"))]


def test_a_restarting_gang_whose_node_is_lost_must_be_evicted_whole_soon_after() -> None:
    on_lost_node = job_member("w-0", T0 + 5, node="node-1")
    pods = [on_lost_node, job_member("w-1", T0 + 5, node="node-2"), job_member("w-2", T0 + 5, node="node-3")]
    troubled = {"node-1": [(T0 + 60, None)]}
    [violation] = inv.short_restarting_gangs(observed(*pods, gangs={APP: RESTARTING}, node_troubles=troubled))
    assert violation.objects == ("w-0",) and violation.due == T0 + 60 + 5 + GRACE
    # Evicted whole 6 s after its node was marked: answered.
    evicted = [dataclasses.replace(p, deleting_at=T0 + 66, disruption=inv.EVICTED) for p in pods]
    assert inv.short_restarting_gangs(observed(*evicted, gangs={APP: RESTARTING}, node_troubles=troubled)) == []


def test_a_member_never_ready_is_lost_at_its_ready_timeout_where_readiness_is_judged() -> None:
    judged = dataclasses.replace(RESTARTING, ready_timeout_s=30.0)
    pods = [
        job_member("w-0", T0 + 5),
        job_member("w-1", T0 + 5, ready_at=T0 + 6),
        job_member("w-2", T0 + 5, ready_at=T0 + 6),
    ]
    [violation] = inv.short_restarting_gangs(observed(*pods, gangs={APP: judged}))
    assert violation.objects == ("w-0",) and violation.due == T0 + 35 + 5 + GRACE
    assert inv.short_restarting_gangs(observed(*pods)) == []  # RESTARTING does not judge readiness


def test_a_released_gang_is_held_to_its_recovery_timeout() -> None:
    releasing = dataclasses.replace(RESTARTING, restarts_on_loss=False, on_loss="release", recovery_timeout_s=30.0)
    lost = job_member("w-0", T0 + 5, phase="Failed", terminal_at=T0 + 50)
    pods = [lost, job_member("w-1", T0 + 5), job_member("w-2", T0 + 5)]
    [violation] = inv.short_restarting_gangs(observed(*pods, gangs={APP: releasing}))
    assert violation.due == T0 + 50 + 5 + 30 + GRACE
    released = [lost, *(dataclasses.replace(p, deleting_at=T0 + 82, disruption=inv.EVICTED) for p in pods[1:])]
    assert inv.short_restarting_gangs(observed(*released, gangs={APP: releasing})) == []


def test_a_loss_left_without_a_gang_degraded_event_is_unreported_whatever_the_policy() -> None:
    reporting = dataclasses.replace(RESTARTING, restarts_on_loss=False, on_loss="none")
    lost = job_member("w-0", T0 + 5, phase="Failed", terminal_at=T0 + 50)
    pods = [lost, job_member("w-1", T0 + 5), job_member("w-2", T0 + 5)]
    [violation] = inv.unreported_losses(observed(*pods, gangs={APP: reporting}))
    assert violation.invariant == inv.UNREPORTED_LOSS and violation.objects == ("w-0",)
    told = EventSeen("GangDegraded", "ns", "w-1", "uid-w-1", at=T0 + 56)
    assert inv.unreported_losses(observed(*pods, gangs={APP: reporting}, events=[told])) == []
    # An event of an earlier loss does not tell of this one; a gang that asks nothing is not judged.
    earlier = dataclasses.replace(told, at=T0 + 20)
    assert inv.unreported_losses(observed(*pods, gangs={APP: reporting}, events=[earlier]))
    assert inv.unreported_losses(observed(*pods)) == []
    # A loss mended within the loss grace and the grace needs no report.
    mended = [*pods, job_member("w-3", T0 + 60)]
    assert inv.unreported_losses(observed(*mended, gangs={APP: reporting})) == []


def test_a_gang_restarted_more_often_than_its_limit_is_reported_whichever_pod_carried_its_record() -> None:
    """Each restart is announced on the pod that carried the gang's record then: with two Jobs, a
    worker's one time and the parameter server's the next. A refused eviction is no restart."""
    limited = dataclasses.replace(RESTARTING, restart_limit=2)
    pods = [
        job_member("w-0", T0 + 5),
        job_member("ps-0", T0 + 5),
        job_member("w-1", T0 + 70),
        job_member("ps-1", T0 + 70),
    ]
    restarts = [
        EventSeen("GangRestarting", "ns", "w-0", "uid-w-0", at=T0 + 60),
        EventSeen("GangRestarting", "ns", "ps-1", "uid-ps-1", at=T0 + 80),
        EventSeen("GangRestarting", "ns", "w-1", "uid-w-1", at=T0 + 90, note="cannot be evicted whole (pod w-1: …)"),
    ]
    assert inv.restarts_past_limit(observed(*pods, gangs={APP: limited}, events=restarts)) == []
    once_more = [*restarts, EventSeen("GangReleased", "ns", "w-1", "uid-w-1", at=T0 + 100)]
    [violation] = inv.restarts_past_limit(observed(*pods, gangs={APP: limited}, events=once_more))
    assert violation.invariant == inv.RESTARTED_PAST_LIMIT and violation.due == T0 + 100
    assert violation.objects == ("w-0", "ps-1", "w-1") and "3 times, past its limit of 2" in violation.detail
