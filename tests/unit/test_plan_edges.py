"""plan_application on the less travelled paths of a gang's life: a reclaim before it started, a gang
group that gives up while it is reserved, a gang that ends failed with no
record of its own, annotations turning invalid once it is over, a borrowed pool, what a `release`
policy says, and members waiting for an originator that never comes."""

from __future__ import annotations

from tests.unit.test_losses import running_gang, with_record
from tests.unit.test_plan import (
    KEY,
    NOW,
    all_placeholders,
    driver,
    executor,
    make_pod,
    names,
    plan_of,
    reasons,
)
from tests.unit.test_plan_timeout_rules import koordinator, member, planned
from yuniplace.admission.tickets import Granted
from yuniplace.controller.lifecycle import make_plan, plan_application
from yuniplace.controller.plan import Plan, Settings, Surroundings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import podgroup
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.events import Reason

RECLAIM = "queue root.a takes back room"
PEERS = '["default/spark-1", "other/eval"]'


def planned_with(pods: list[dict[str, object]], around: Surroundings, now: float = NOW) -> Plan:
    return make_plan(Application.of(KEY, pods, limits=Limits()), now, Settings(), around)  # type: ignore[arg-type]


def test_a_reclaimed_gang_that_holds_only_placeholders_gives_them_back_and_borrows_afresh() -> None:
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 5, annotations={keys.BORROWED_FROM: "root.b"}),
        executor(0),
        executor(1),
        *all_placeholders(bound=True),
    ]
    plan = planned_with(pods, Surroundings(reclaimed=RECLAIM))
    assert plan.state == AppState.PENDING and reasons(plan) == ["GangPreempted"]
    assert plan.annotate[keys.BORROWED_FROM] is None and len(plan.delete) == 3


def test_a_reclaimed_gang_whose_pods_are_on_their_way_out_is_left_alone() -> None:
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 5),
        executor(0, gated=False, node="n1", deleting=True),
        executor(1),
    ]
    plan = planned_with(pods, Surroundings(reclaimed=RECLAIM))
    assert plan.state == AppState.RESERVING and plan.events == [] and plan.delete == []


def test_a_reserved_member_of_a_gang_group_follows_a_peer_that_failed() -> None:
    pods = [
        driver(
            state=AppState.RESERVED, started=NOW - 30, first_allocated=NOW - 20, annotations={keys.GANG_GROUP: PEERS}
        ),
        executor(0),
        executor(1),
        *all_placeholders(bound=True),
    ]
    view = Application.of(KEY, pods)
    plan = plan_application(view, NOW, peers={"other/eval": AppState.FAILED})
    assert plan.state == AppState.RESUMING and "PlaceholderTimeOut" in reasons(plan)
    late = plan_application(view, NOW + 900, peers={"other/eval": AppState.RESERVING})
    assert late.state == AppState.RESUMING and "still not reserved" in late.events[0].note


def test_a_gang_whose_originator_ended_with_no_record_fails_as_its_pods_did() -> None:
    failed = executor(0, gated=False, phase="Failed")
    failed["status"]["reason"] = str(Reason.RESOURCE_RESERVATION_TIMEOUT)
    pods = [driver(gated=False, phase="Failed", node="n0"), failed, executor(1)]
    plan = plan_of(pods)
    assert plan.state == AppState.FAILED
    assert [(p.name(f.pod), f.reason) for f in plan.fail] == [("exec-1", Reason.APPLICATION_FAILED)]


def test_annotations_turning_invalid_once_it_is_over_release_or_fail_what_is_left() -> None:
    for state, failed in ((AppState.RESUMING, False), (AppState.FAILED, True)):
        pods = [driver(state=state, task_groups="[]", started=NOW - 100, gated=False), executor(0), executor(1)]
        plan = plan_of(pods)
        assert plan.state == state and plan.events == []
        assert (len(plan.fail), len(plan.ungate)) == ((2, 0) if failed else (0, 2))


def test_a_gang_admitted_onto_a_borrowed_pool_says_so_and_the_next_attempt_forgets_it() -> None:
    view = Application.of(KEY, [driver(), executor(0), executor(1)])
    plan = plan_application(view, NOW, ticket=Granted(lender="root.b"))
    assert plan.annotate[keys.BORROWED_FROM] == "root.b"
    assert "the idle ones of root.b it borrows" in plan.events[1].note
    again = Application.of(KEY, [driver(annotations={keys.BORROWED_FROM: "root.b"}), executor(0), executor(1)])
    assert plan_application(again, NOW, ticket=Granted()).annotate[keys.BORROWED_FROM] is None


def test_a_release_policy_says_what_follows_when_the_gang_is_degraded() -> None:
    pods = running_gang(phase="Failed")
    pods[0]["metadata"]["annotations"][keys.ON_MEMBER_LOST] = "release"
    pods = with_record(pods, {keys.DEGRADED_SINCE: p.format_time(NOW - 10)})
    plan = plan_of(pods)
    assert reasons(plan) == ["GangDegraded"]
    assert "evicting it whole unless it is back at its minimum within 60s" in plan.events[0].note


def test_a_koordinator_gang_says_its_pods_are_marked_if_it_times_out() -> None:
    pods = [member(f"train-{i}", koordinator(), created=NOW - 60 + i) for i in range(4)]
    plan = planned("train", pods)
    assert "marked gang.scheduling.koordinator.sh/timeout=true" in plan.events[0].note


def test_members_naming_a_podgroup_that_never_comes_are_scheduled_normally_at_the_timeout() -> None:
    pods = [make_pod(f"w{i}", app=None, labels={podgroup.LABEL: "mpi"}, created=NOW - 1000) for i in range(2)]
    view = Application.of(p.AppKey("default", "mpi"), pods)
    plan = plan_application(view, NOW)
    assert names(plan.ungate) == ["w0", "w1"]
    assert "names no PodGroup mpi of this namespace" in plan.events[0].note
