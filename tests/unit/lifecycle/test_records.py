"""The record a gang keeps on its originator is read and written alike by this version of yuniplace and
the last: a controller of one version picks up the gangs of the other where they stand (an upgrade, a
rollback, two replicas of different versions during a rolling update). The values are spelled out
here as the last version wrote them, never taken from the code under test."""

from __future__ import annotations

import pytest

from tests.planning import (
    NOW,
    all_placeholders,
    driver,
    executor,
    names,
    plan_of,
)
from yuniplace.controller.lifecycle.table import TRANSITIONS
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState

# As every earlier version wrote them on the originator.
STATE_KEY = "yuniplace.io/state"
STATES = ("Pending", "Reserving", "Reserved", "Running", "Resuming", "Failed", "Completed")
STARTED_KEY = "yuniplace.io/reservation-started"
FIRST_ALLOCATED_KEY = "yuniplace.io/first-allocated"


def written(state: str, **more: str) -> dict[str, str]:
    """A record as the last version wrote it: its state, and its reservation begun 100s ago."""
    return {STATE_KEY: state, STARTED_KEY: p.format_time(NOW - 100), **more}


def test_the_states_keep_the_values_every_version_writes() -> None:
    assert keys.STATE == STATE_KEY
    assert keys.RESERVATION_STARTED == STARTED_KEY and keys.FIRST_ALLOCATED == FIRST_ALLOCATED_KEY
    assert tuple(state.value for state in AppState) == STATES
    assert all(AppState.parse(text).value == text for text in STATES)
    # Every state this version may write is one the last reads.
    assert {move.to.value for move in TRANSITIONS.values()} <= set(STATES)


@pytest.mark.parametrize("state", STATES)
def test_a_record_of_the_last_version_is_read_as_it_was_written(state: str) -> None:
    pods = [driver(annotations=written(state), gated=False, group=None), executor(0)]
    plan = plan_of(pods)
    assert plan.current.value == state
    assert STATE_KEY not in plan.annotate or plan.annotate[STATE_KEY] in STATES


def test_a_gang_the_last_version_began_to_reserve_is_carried_on_and_its_new_state_written_as_it_reads_it() -> None:
    pods = [driver(annotations=written("Reserving")), executor(0), executor(1), *all_placeholders(bound=True)]
    plan = plan_of(pods)
    assert plan.annotate[STATE_KEY] == "Reserved"
    assert plan.annotate[FIRST_ALLOCATED_KEY] == p.format_time(NOW - 30)
    assert names([swap.member for swap in plan.swaps]) == ["driver", "exec-0", "exec-1"]
    fresh = plan_of([driver(), executor(0), executor(1)])
    assert fresh.annotate == {STATE_KEY: "Reserving", STARTED_KEY: p.format_time(NOW)}


@pytest.mark.parametrize(
    ("state", "late_member"), [("Resuming", "ungate"), ("Completed", "ungate"), ("Failed", "fail")]
)
def test_late_members_of_a_gang_the_last_version_ended_follow_it(state: str, late_member: str) -> None:
    pods = [driver(annotations=written(state), gated=False, node="n0", phase="Running"), executor(0)]
    plan = plan_of(pods)
    assert STATE_KEY not in plan.annotate
    assert (names(plan.ungate), names([f.pod for f in plan.fail])) == (
        (["exec-0"], []) if late_member == "ungate" else ([], ["exec-0"])
    )
