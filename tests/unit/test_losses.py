"""A started gang that loses members: gang/losses.py counts them, and the planner reports the gang
degraded once it has stayed below its minimum for the grace, and recovered once it is back."""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders
from tests.unit.test_plan import KEY, NOW, driver, executor, plan_of, reasons
from yuniplace.admission.room import ClusterRoom
from yuniplace.controller.plan import Settings, Surroundings
from yuniplace.controller.planner import LOSS_GRACE_S, Planner
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.losses import losses_of
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.store import PodStore

Pod = dict[str, Any]


def running_gang(**exec_1: Any) -> list[Pod]:
    """A started gang of 3 (driver and two executors), each bound; executor 1 as `exec_1` says."""
    return [
        driver(state=AppState.RUNNING, started=NOW - 100, first_allocated=NOW - 90, gated=False, node="n0"),
        executor(0, gated=False, node="n1", phase="Running"),
        executor(1, **{"gated": False, "node": "n2", "phase": "Running", **exec_1}),
    ]


def with_record(pods: list[Pod], annotate: dict[str, str | None]) -> list[Pod]:
    """The pods as the next reconcile sees them once the plan's annotations are on the driver."""
    notes = pods[0]["metadata"]["annotations"]
    for key, value in annotate.items():
        if value is None:
            notes.pop(key, None)
        else:
            notes[key] = value
    return pods


def test_members_up_done_lost_and_coming_are_told_apart() -> None:
    members = [
        executor(0, gated=False, node="n1", phase="Running"),
        executor(1, gated=False, node="n2", phase="Succeeded"),
        executor(2, gated=False, node="n3", phase="Failed"),
        executor(3, gated=False, node="gone-node", phase="Running"),
        executor(4, gated=False, node="n4", phase="Running", deleting=True),
        executor(5),
    ]
    members[2]["status"]["reason"] = "Evicted"
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
    [{"phase": "Failed"}, {"deleting": True}],
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
    around = Surroundings(node_health=lambda node: "is gone" if node == "gone-node" else None)
    plan = Planner(Application.of(KEY, pods, limits=Limits()), NOW, Settings(), around).plan()
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
    swap in is short of nothing: no record is written, nothing reported."""
    on_its_way = executor(0, gated=False, annotations={keys.SEAT: "n1"})
    late = executor(1)  # gated, to be swapped into what is left
    pods = [running_gang()[0], on_its_way, late]
    assert losses_of(pods[1:], 2).up == 1
    plan = plan_of(pods)
    assert keys.DEGRADED_SINCE not in plan.annotate and "GangDegraded" not in reasons(plan)


def test_a_gang_whose_originator_is_being_deleted_is_not_watched() -> None:
    pods = running_gang(phase="Failed")
    pods[0]["metadata"]["deletionTimestamp"] = p.format_time(NOW)
    assert keys.DEGRADED_SINCE not in plan_of(pods).annotate
