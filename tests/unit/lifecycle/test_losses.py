"""A started gang that loses members: gang/losses.py counts them, and the planner reports the gang
degraded once it has stayed below its minimum for the grace, and recovered once it is back."""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders
from tests.planning import (
    KEY,
    NOW,
    Pod,
    bind,
    deleting,
    ended,
    executor,
    placeholder,
    plan_of,
    reasons,
    running_gang,
    unschedulable,
    with_record,
)
from yuniplace.admission.room import ClusterRoom
from yuniplace.controller.lifecycle import LOSS_GRACE_S
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.losses import losses_of
from yuniplace.gang.state import AppState
from yuniplace.runtime.store import PodStore


def test_members_up_done_lost_and_coming_are_told_apart() -> None:
    members = [
        executor(0, gated=False, node="n1", phase="Running"),
        executor(1, gated=False, node="n2", phase="Succeeded"),
        executor(2, gated=False, node="n3", phase="Failed"),
        executor(3, gated=False, node="gone-node", phase="Running"),
        executor(4, gated=False, node="n4", phase="Running", deleted=True),
        executor(5),
    ]
    ended(members[2], reason="Evicted")
    losses = losses_of(members, 6, lambda node: "is gone" if node == "gone-node" else None)
    assert (losses.up, losses.done, losses.coming) == (1, 1, 1)
    assert [(lost.member, lost.why) for lost in losses.lost] == [
        ("exec-2", "failed (Evicted)"),
        ("exec-3", "(its node gone-node is gone)"),
        ("exec-4", "is being deleted"),
    ]
    assert losses.degraded
    assert losses.describe() == (
        "1 of its minimum 6 members up and 1 done, 4 short; lost: exec-2 failed (Evicted); exec-3 (its node "
        "gone-node is gone); exec-4 is being deleted; 1 waiting to be scheduled"
    )


def test_members_that_finished_are_no_loss_and_deleted_ones_are_counted() -> None:
    done = [executor(0, gated=False, node="n1", phase="Succeeded"), executor(1, gated=False, node="n2")]
    assert not losses_of(done, 2).degraded
    one_left = losses_of([executor(0, gated=False, node="n1", phase="Running")], 3)
    assert one_left.describe() == "1 of its minimum 3 members up, 2 short; 2 no longer exist (deleted)"


@pytest.mark.parametrize(
    "exec_1",
    [{"phase": "Failed"}, {"deleted": True}],
    ids=["failed", "deleted"],
)
def test_a_gang_below_its_minimum_is_reported_after_the_grace_and_once(exec_1: dict[str, Any]) -> None:
    first = plan_of(running_gang(**exec_1))
    assert "GangDegraded" not in reasons(first)
    assert keys.DEGRADED_SINCE in first.annotate and first.requeue_after_s == LOSS_GRACE_S
    pods = with_record(running_gang(**exec_1), first.annotate)
    still = plan_of(pods, now=NOW + 1)
    assert "GangDegraded" not in reasons(still) and still.requeue_after_s == pytest.approx(LOSS_GRACE_S - 1)
    reported = plan_of(pods, now=NOW + LOSS_GRACE_S)
    [event] = [e for e in reported.events if e.reason == "GangDegraded"]
    assert event.warning and p.name(event.pod) == "driver"
    assert event.note.startswith("the gang is degraded: 2 of its minimum 3 members up, 1 short; lost: exec-1 ")
    assert reported.annotate[keys.DEGRADED_REPORTED] == "true" and reported.state == AppState.RUNNING
    pods = with_record(pods, reported.annotate)
    assert "GangDegraded" not in reasons(plan_of(pods, now=NOW + 30))  # said once


def test_a_member_on_a_node_gone_is_lost_as_admissions_view_of_the_nodes_says() -> None:
    pods = running_gang(node="gone-node")
    plan = plan_of(pods, node_health=lambda node: "is gone" if node == "gone-node" else None)
    assert keys.DEGRADED_SINCE in plan.annotate


def test_a_gang_back_at_its_minimum_is_recovered_and_its_record_cleared() -> None:
    degraded = {keys.DEGRADED_SINCE: p.format_time(NOW - 40), keys.DEGRADED_REPORTED: "true"}
    failed = executor(1, gated=False, node="n2", phase="Failed")
    replacement = executor(2, gated=False, node="n3", phase="Running")
    pods = with_record([*running_gang()[:2], failed, replacement], degraded)
    plan = plan_of(pods)
    [event] = [e for e in plan.events if e.reason == "GangRecovered"]
    assert event.note == "back at its minimum after 40s degraded: 3 of 3 members up"
    assert plan.annotate[keys.DEGRADED_SINCE] is None and plan.annotate[keys.DEGRADED_REPORTED] is None


def test_a_loss_mended_within_the_grace_is_never_reported() -> None:
    """A Job replaces a failed member at once: the gang was below its minimum for a moment only."""
    pods = with_record(running_gang(phase="Failed"), {keys.DEGRADED_SINCE: p.format_time(NOW - 1)})
    pods.append(executor(2, gated=False, node="n3", phase="Running"))
    plan = plan_of(pods)
    assert not {"GangDegraded", "GangRecovered"} & set(reasons(plan))
    assert plan.annotate[keys.DEGRADED_SINCE] is None


def test_a_gang_not_started_is_never_degraded() -> None:
    pods = running_gang(phase="Failed")
    pods[0]["metadata"]["annotations"][keys.STATE] = AppState.RESERVED.value
    assert keys.DEGRADED_SINCE not in plan_of(pods).annotate


def test_admissions_view_says_which_nodes_are_gone_or_in_trouble() -> None:
    room = ClusterRoom()
    assert room.node_health("n1") is None  # nothing listed yet: nothing is said to be gone
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    room.nodes_listed([builders.node("n1"), builders.node("n2", taints=[unreachable]), builders.node("n3")])
    room.node_event("MODIFIED", builders.node("n3", unschedulable=True))  # cordoned: its pods run on
    room.node_event("DELETED", builders.node("n1"))
    assert [room.node_health(name) for name in ("n1", "n2", "n3")] == ["is gone", "is unreachable", None]


def test_the_store_finds_the_applications_on_a_node() -> None:
    store = PodStore()
    for pod in running_gang():
        store.upsert(pod)
    assert store.apps_on("n1") == {KEY} and store.apps_on("n7") == set()


def test_members_still_on_their_way_are_no_loss() -> None:
    """A gang starting (a member released onto its seat, not bound yet) or with late members still to
    swap into the room its placeholders hold is short of nothing: no record is written, nothing
    reported."""
    on_its_way = executor(0, gated=False, annotations={keys.SEAT: "n1"})
    late = executor(1)  # gated, to be swapped into the room held for it
    held = placeholder("exec", 1, node="n2")
    pods = [running_gang()[0], on_its_way, late, held]
    assert losses_of(pods[1:3], 2).up == 1
    plan = plan_of(pods)
    assert keys.DEGRADED_SINCE not in plan.annotate and "GangDegraded" not in reasons(plan)


STARTED = NOW - 100  # running_gang()'s reservation began then


@pytest.mark.parametrize(
    ("case", "members", "held", "counts", "degraded"),
    [
        # Starting: a member on its way to its seat is up; one of the start not bound yet (a scheduler
        # binding it now) and room held for one to come are coming. Nothing is lost.
        (
            "starting",
            [
                executor(0, created=STARTED - 10, gated=False, annotations={keys.SEAT: "n1"}),
                executor(1, created=STARTED - 9, gated=False),
            ],
            1,
            (1, 0, 2, 0),
            False,
        ),
        # Late members made since the start, gated or released onto the room their placeholders hold.
        (
            "late members",
            [
                executor(0, gated=False, node="n1", phase="Running"),
                executor(1, created=STARTED + 30, gated=False, swap_placeholder="tg-1", nominated_to="n2"),
                executor(2, created=STARTED + 31),
            ],
            1,
            (2, 0, 1, 1),
            False,
        ),
        # Running, a member lost and no replacement yet.
        (
            "lost, no replacement",
            [
                executor(0, gated=False, node="n1", phase="Running"),
                executor(1, gated=False, node="gone-node", phase="Running"),
            ],
            0,
            (1, 1, 0, 0),
            True,
        ),
        # The lost member gone, and its Job's replacement made but not placed: it waits, and the gang
        # stays below its minimum.
        (
            "replacement pending",
            [executor(0, gated=False, node="n1", phase="Running"), executor(2, created=STARTED + 70, gated=False)],
            0,
            (1, 0, 0, 1),
            True,
        ),
        # Bound but not running yet: still not up.
        (
            "replacement bound, not running",
            [
                executor(0, gated=False, node="n1", phase="Running"),
                executor(2, created=STARTED + 70, gated=False, node="n3", phase="Pending"),
            ],
            0,
            (1, 0, 0, 1),
            True,
        ),
        # The replacement runs: whole again.
        (
            "replacement running",
            [
                executor(0, gated=False, node="n1", phase="Running"),
                executor(2, created=STARTED + 70, gated=False, node="n3", phase="Running"),
            ],
            0,
            (2, 0, 0, 0),
            False,
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_who_counts_as_up(case: str, members: list[Pod], held: int, counts: tuple[int, ...], degraded: bool) -> None:
    """(up, lost, coming, waiting) of a gang of minimum 2 started at STARTED: members of its start are
    up once seated and coming until then; members made since count once they run."""
    health = lambda node: "is gone" if node == "gone-node" else None  # noqa: E731
    losses = losses_of(members, 2, health, held=held, started_at=STARTED)
    assert (losses.up, len(losses.lost), losses.coming, losses.waiting) == counts, case
    assert losses.degraded == degraded, case


def test_a_replacement_that_cannot_be_placed_leaves_the_gang_degraded_until_it_runs() -> None:
    """A member's node deleted, the pod garbage collector took the pod, the Job made a replacement that
    fits nowhere: the gang stays Degraded, nothing says it recovered, and the event says what waits.
    Once the replacement runs, GangRecovered."""
    degraded = {keys.DEGRADED_SINCE: p.format_time(NOW - 65), keys.DEGRADED_REPORTED: "true"}
    replacement = unschedulable(executor(2, created=NOW - 2, gated=False), "0/2 nodes are available")
    pods = with_record([*running_gang()[:2], replacement], degraded)
    plan = plan_of(pods)
    assert not {"GangRecovered", "GangDegraded"} & set(reasons(plan))
    assert keys.DEGRADED_SINCE not in plan.annotate and plan.state == AppState.RUNNING
    losses = losses_of(pods, 3, started_at=STARTED)
    assert losses.describe() == "2 of its minimum 3 members up, 1 short; 1 made since it started, not running yet"
    bind(replacement, "n3", NOW + 3)
    [event] = [e for e in plan_of(pods, now=NOW + 4).events if e.reason == "GangRecovered"]
    assert event.note == "back at its minimum after 69s degraded: 3 of 3 members up"


def test_once_degraded_room_held_for_a_member_to_come_does_not_mend_it() -> None:
    """Coming members make a gang that is starting whole; they do not bring back one that lost members:
    that takes members that run."""
    degraded = {keys.DEGRADED_SINCE: p.format_time(NOW - 20), keys.DEGRADED_REPORTED: "true"}
    pods = with_record([*running_gang()[:2], placeholder("exec", 1, node="n2")], degraded)
    plan = plan_of(pods)
    assert "GangRecovered" not in reasons(plan) and keys.DEGRADED_SINCE not in plan.annotate


def test_a_gang_whose_originator_is_being_deleted_is_not_watched() -> None:
    pods = running_gang(phase="Failed")
    deleting(pods[0])
    assert keys.DEGRADED_SINCE not in plan_of(pods).annotate
