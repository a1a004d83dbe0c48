"""A gang admitted on nodes an autoscaler is to make (admission's ticket names the node pools): its record
says which, its events say so, and out of time it never falls back to normal scheduling, where it would
start in part on the nodes made for it: Soft gives the room back and waits for the next attempt, Hard
fails it saying where its nodes were to come from."""

from __future__ import annotations

import pytest

from tests.planning import HARD, NOW, Pod, all_placeholders, bind, driver, executor, names, plan_of, reasons
from yuniplace.admission.tickets import Granted
from yuniplace.gang import keys
from yuniplace.gang.record import read_record
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import InvalidGang


def test_a_gang_admitted_on_nodes_to_come_records_the_pools_and_says_so() -> None:
    pods = [driver(), executor(0), executor(1)]
    plan = plan_of(pods, ticket=Granted(grows=("gpu", "batch")))
    assert plan.state == AppState.RESERVING and len(plan.create) == 3
    assert plan.annotate[keys.SCALE_UP] == "gpu,batch"
    [creating] = [e for e in plan.events if e.reason == "CreatingPlaceholders"]
    assert creating.note == (
        "creating 3 placeholder pods; NodePool gpu, batch is to make the nodes for them (its placeholders are what "
        "it makes them for)"
    )


def counted_on_growth(policy: str | None = None) -> list[Pod]:
    """A reservation begun 900 s ago on nodes NodePool gpu was to make, 2 of its 3 placeholders placed."""
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 900, policy=policy, annotations={keys.SCALE_UP: "gpu"}),
        executor(0),
        executor(1),
        *all_placeholders(bound=False),
    ]
    bind(pods[3], "n0", NOW - 600)
    bind(pods[4], "n1", NOW - 600)
    return pods


def test_out_of_time_a_soft_gang_that_counted_on_nodes_to_come_gives_them_back_and_waits_gated() -> None:
    plan = plan_of(counted_on_growth(), now=NOW + 300)
    assert plan.state == AppState.PENDING and plan.ungate == [] and plan.fail == []
    assert len(plan.delete) == 3  # every placeholder: the nodes made for it are given back
    assert reasons(plan) == ["PlaceholderTimeOut", "GangReservationReleased"]
    assert plan.events[0].note == (
        "gang reservation timed out: 2/3 placeholders placed after 900s; its nodes were to come from NodePool gpu, "
        "which made room for part of it"
    )
    assert "where they would start in part on the nodes made for it" in plan.events[1].note
    assert keys.SCALE_UP not in plan.annotate  # kept for its next attempt


def test_out_of_time_a_hard_gang_that_counted_on_nodes_to_come_fails_saying_where_they_were_to_come_from() -> None:
    plan = plan_of(counted_on_growth(HARD), now=NOW + 300)
    assert plan.state == AppState.FAILED and names(plan.ungate) == []
    assert {f.reason for f in plan.fail} == {"ResourceReservationTimeout"}
    assert "its nodes were to come from NodePool gpu, which made room for part of it" in plan.fail[0].message


def test_waiting_again_after_such_a_timeout_it_still_does_not_fall_back() -> None:
    """Its next attempt waits in its queue (the pool cannot make enough now) past its timeout: Soft still
    gives back rather than schedule its pods normally."""
    pods = [
        driver(annotations={keys.SCALE_UP: "gpu", keys.QUEUED_SINCE: "2023-11-14T22:00:00.000Z"}),
        executor(0),
        executor(1),
    ]
    plan = plan_of(pods, now=NOW + 3600)
    assert plan.ungate == [] and reasons(plan)[-1] == "GangReservationReleased"


@pytest.mark.parametrize("written", ["", "GPU", "a,,b", "x" * 254, ",".join(["p"] * 33)])
def test_a_scale_up_record_that_cannot_be_read_is_an_error_naming_it(written: str) -> None:
    with pytest.raises(InvalidGang) as error:
        read_record({keys.SCALE_UP: written})
    assert keys.SCALE_UP in str(error.value)
    plan = plan_of([driver(annotations={keys.SCALE_UP: written}), executor(0), executor(1)])
    [said] = [e for e in plan.events if e.reason == "TaskGroupsError"]
    assert keys.SCALE_UP in said.note  # this application's problem, said on it; no other's
