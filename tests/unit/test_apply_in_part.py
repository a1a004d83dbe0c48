"""A plan the API carries out only in part (its n-th write fails): the plan stops there, each of its events
is posted only once the writes it tells of are done, what was done is said, and the gang's next look
makes the rest again, ending where the whole plan would have."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakeapi import FakeApi
from tests.planning import HARD, NOW, all_placeholders, driver, executor, plan_of
from yuniplace.admission.tickets import Granted
from yuniplace.controller.apply import Executor
from yuniplace.controller.faults import PartlyApplied
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.runtime.metrics import Metrics
from yuniplace.runtime.store import PodStore

Pod = dict[str, Any]
SEATS = Granted(seats=(("driver", ("n0",)), ("exec", ("n1", "n2"))))


class Recorder:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def record(self, pod: Pod, reason: str, note: str, *, kind: str | None = None) -> None:
        self.reasons.append(str(reason))


class Landings:
    def expect(self, *_: Any) -> None: ...

    def hold(self, *_: Any) -> None: ...

    def release(self, *_: Any) -> None: ...


def carry_out(api: FakeApi, plan: Any) -> tuple[list[str], PartlyApplied | None]:
    """The plan carried out one write at a time (so that the n-th is always the same), with the events
    it posted and what the executor raised."""
    recorder = Recorder()
    executor = Executor(api, PodStore(), recorder, Metrics(), Landings(), concurrency=1)  # type: ignore[arg-type]
    try:
        executor.apply(plan)
    except PartlyApplied as error:
        return recorder.reasons, error
    finally:
        executor.close()
    return recorder.reasons, None


def settle(api: FakeApi, **surroundings: Any) -> list[str]:
    """Look again and carry each plan out until there is nothing left to write; the events posted."""
    told: list[str] = []
    for _ in range(5):
        plan = plan_of(list(api.pods.values()), NOW + 1, **surroundings)
        if not plan.writes():
            return told
        reasons, error = carry_out(api, plan)
        assert error is None
        told += reasons
    raise AssertionError("the plans never settled")


def timed_out_hard() -> list[Pod]:
    """A Hard gang reserving for 1000 s, none of its 3 placeholders placed: out of time."""
    return [driver(state=AppState.RESERVING, started=NOW - 1000, policy=HARD), executor(0), executor(1)] + (
        all_placeholders(bound=False)
    )


def the_end(api: FakeApi) -> dict[str, str]:
    return {name: pod["status"].get("phase", "") for name, pod in sorted(api.pods.items())}


# Its record (1), its 3 placeholders deleted (2-4), its 3 members failed (5-7): what is told after each.
TIMEOUT_TOLD = {
    1: ([], "its record not written, 0 of 3 placeholders deleted, 0 of 3 pods failed"),
    2: ([], "its record written, 2 of 3 placeholders deleted, 0 of 3 pods failed"),
    4: ([], "its record written, 2 of 3 placeholders deleted, 0 of 3 pods failed"),
    5: (["PlaceholderTimeOut"], "its record written, 3 of 3 placeholders deleted, 2 of 3 pods failed"),
    7: (["PlaceholderTimeOut"], "its record written, 3 of 3 placeholders deleted, 2 of 3 pods failed"),
}


@pytest.mark.parametrize("n", sorted(TIMEOUT_TOLD))
def test_a_hard_timeout_applied_in_part_tells_only_what_was_done_and_ends_at_the_next_look(n: int) -> None:
    whole = FakeApi(timed_out_hard())
    told_whole, error = carry_out(whole, plan_of(timed_out_hard()))
    assert error is None and "PlaceholderTimeOut" in told_whole and "ApplicationFailed" in told_whole
    api = FakeApi(timed_out_hard())
    api.fail_write(n)
    told, error = carry_out(api, plan_of(timed_out_hard()))
    expected, done = TIMEOUT_TOLD[n]
    assert error is not None and error.done == done
    assert [r for r in told if r != "ResourceReservationTimeout"] == expected
    assert told.count("ResourceReservationTimeout") == sum(w.startswith("fail ") for w in api.writes)
    api.fail_write()  # well again
    settle(api)
    assert the_end(api) == the_end(whole) == {"driver": "Failed", "exec-0": "Failed", "exec-1": "Failed"}


# Its members nominated to their seats, the first carrying its record (1-3), then released (4-6).
DIRECT_TOLD = {
    1: ([], "its record not written, 0 of 3 members swapped in or started"),
    2: (["TaskGroupMatch"], "its record written, 0 of 3 members swapped in or started"),
    4: (["TaskGroupMatch"], "its record written, 2 of 3 members swapped in or started"),
    6: (["TaskGroupMatch"], "its record written, 2 of 3 members swapped in or started"),
}


@pytest.mark.parametrize("n", sorted(DIRECT_TOLD))
def test_a_direct_start_applied_in_part_never_says_the_gang_is_starting_and_starts_at_the_next_look(n: int) -> None:
    gang = [driver(), executor(0), executor(1)]
    api = FakeApi(gang)
    api.fail_write(n)
    told, error = carry_out(api, plan_of(gang, ticket=SEATS))
    expected, done = DIRECT_TOLD[n]
    assert error is not None and error.done == done
    assert told == expected
    api.fail_write()
    settle(api, ticket=SEATS)
    # Every member released: one whose nomination failed after the record was written goes unnominated.
    assert all(not p.is_gated(pod) for pod in api.pods.values())


def test_a_whole_plan_tells_everything_after_its_writes() -> None:
    gang = [driver(), executor(0), executor(1)]
    api = FakeApi(gang)
    told, error = carry_out(api, plan_of(gang, ticket=SEATS))
    assert error is None and told == ["TaskGroupMatch", "GangStarting"]
    assert all(not p.is_gated(pod) for pod in api.pods.values())
