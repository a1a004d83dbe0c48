"""yuniplace's own faults are not its users': an error met reading a gang for admission, deciding its
admission, planning its next step or carrying the plan out holds that gang as it is (gated, nothing
failed or released, whatever its style), is logged with its trace, counted by stage and told once on the
gang as yuniplace's own fault, and is tried again after a backoff; every other gang goes on. Invalid task
groups, the user's fault, still fail or fall back by style."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests import builders
from tests.fakeapi import FakeApi
from tests.unit.test_gang_admission import NS, gang
from yuniplace.admission.decision import AdmissionRules, Decision
from yuniplace.admission.snapshot import App, Sources
from yuniplace.admission.tickets import FAULT_RETRY_S, Faulted, Granted
from yuniplace.controller import lifecycle
from yuniplace.controller.controller import Controller
from yuniplace.controller.plan import Plan, Settings, Surroundings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.state import AppState

A, B = p.AppKey(NS, "a"), p.AppKey(NS, "b")
NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def styled(pod: dict[str, Any], style: str) -> dict[str, Any]:
    pod["metadata"]["annotations"][keys.SCHEDULING_POLICY_PARAMETERS] = f"gangSchedulingStyle={style}"
    return pod


class World:
    """A controller with admission on, over an API in memory: two gangs of one pod each, a and b, and room
    for both; its workers and its admission loop driven by hand."""

    def __init__(self, style: str = "Soft") -> None:
        self.clock = Clock()
        pods = [styled(gang("a", 1, created=1), style), styled(gang("b", 1, created=2), style)]
        self.api = FakeApi(pods)
        rules = AdmissionRules(direct_start_wait_s=0.0)
        self.controller = Controller(self.api, clock=self.clock, rules=rules)  # type: ignore[arg-type]
        admission = self.controller.admission
        assert admission is not None
        self.admission = admission
        admission.room.nodes_listed([builders.node("n1", "4", memory="64Gi")])
        self.controller._on_list(list(self.api.pods.values()))
        self.api.watch = self.controller._on_event

    def look(self, *keys: p.AppKey) -> dict[p.AppKey, Plan | None]:
        """Each application's reconcile, as a worker runs it."""
        return {key: self.controller.process(key) for key in keys or (A, B)}

    def settle(self) -> dict[p.AppKey, Plan | None]:
        """Every application asks admission, a cycle decides, and each is reconciled with its ticket."""
        self.look()
        self.admission.turn()
        return self.look()

    def writes_to(self, app: str) -> list[str]:
        return [write for write in self.api.writes if write.split()[1].startswith(f"{app}-")]

    def told(self, reason: str = "InternalError") -> list[str]:
        self.controller.recorder.flush()
        return [e["note"] for e in self.api.events if e["reason"] == reason]

    def faults(self, stage: str) -> float:
        return self.controller.metrics.internal_errors.labels(stage)._value.get()  # type: ignore[no-any-return]


@pytest.fixture
def world() -> Iterator[World]:
    made = World()
    yield made
    made.controller.close()


def held(world: World, plans: dict[p.AppKey, Plan | None]) -> None:
    """a is held as it is: nothing written to its pod, still gated and Pending; b went on and started."""
    assert world.writes_to("a") == []
    assert p.is_gated(world.api.pods["a-0"]) and keys.STATE not in p.annotations_of(world.api.pods["a-0"])
    plan_a = plans[A]
    assert plan_a is None or (plan_a.state == AppState.PENDING and not plan_a.fail and not plan_a.ungate)
    plan_b = plans[B]
    assert plan_b is not None and plan_b.state == AppState.RESERVED and world.writes_to("b")
    assert not p.is_gated(world.api.pods["b-0"])


def reading_fails_for(key: p.AppKey) -> Callable[..., Any]:
    original = Sources._app

    def failing(self: Sources, read: p.AppKey, *args: Any) -> Any:
        if read == key:
            raise KeyError("a fault of yuniplace's own")
        return original(self, read, *args)

    return failing


@pytest.mark.parametrize("style", ["Soft", "Hard"])
def test_a_fault_reading_a_gang_for_admission_holds_it_whatever_its_style(
    style: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(Sources, "_app", reading_fails_for(A))
    world = World(style)
    try:
        plans = world.settle()
        held(world, plans)
        told = world.told()
        assert len(told) == 1 and "could not read the gang for admission" in told[0]
        assert "KeyError" in told[0] and "not a fault of the gang's task groups" in told[0]
        assert not world.told("TaskGroupsError") and not world.told("GangSchedulingFailed")
        assert world.faults("snapshot") == 1
        assert any(r.exc_info and "team/a" in r.getMessage() for r in caplog.records)
    finally:
        world.controller.close()


def test_a_gang_admission_failed_on_is_read_again_only_after_a_backoff_and_told_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[p.AppKey] = []
    original = Sources._app

    def counted(self: Sources, key: p.AppKey, *args: Any) -> Any:
        reads.append(key)
        if key == A:
            raise KeyError("a fault of yuniplace's own")
        return original(self, key, *args)

    monkeypatch.setattr(Sources, "_app", counted)
    world.settle()
    ticket = world.admission.standing(A, pending=True, attempt="uid-a").ticket
    assert isinstance(ticket, Faulted) and ticket.retry_at == NOW + FAULT_RETRY_S
    world.admission.capacity_changed()  # another change: a cycle, which does not read a again yet
    world.admission.turn()
    assert reads.count(A) == 1
    world.clock.now += FAULT_RETRY_S  # its retry is due: its next look asks, and the cycle reads it again
    world.settle()
    assert reads.count(A) == 2
    ticket = world.admission.standing(A, pending=True, attempt="uid-a").ticket
    assert isinstance(ticket, Faulted) and ticket.faults == 2 and ticket.retry_at == world.clock.now + 2 * FAULT_RETRY_S
    assert len(world.told()) == 1 and world.faults("snapshot") == 2  # told once; counted each time
    monkeypatch.setattr(Sources, "_app", original)  # the fault is gone
    world.clock.now += 2 * FAULT_RETRY_S
    plans = world.settle()
    plan_a = plans[A]
    assert plan_a is not None and plan_a.state == AppState.RESERVED and not p.is_gated(world.api.pods["a-0"])


@pytest.mark.parametrize("style", ["Soft", "Hard"])
def test_a_fault_deciding_a_gangs_admission_holds_it_and_admits_the_others(
    style: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Decision.decide

    def failing(self: Decision, unit: Sequence[App]) -> None:
        if any(app.key == A for app in unit):
            raise KeyError("a fault of yuniplace's own")
        original(self, unit)

    monkeypatch.setattr(Decision, "decide", failing)
    world = World(style)
    try:
        held(world, world.settle())
        told = world.told()
        assert len(told) == 1 and "could not decide the gang's admission" in told[0]
        assert world.faults("decide") == 1
    finally:
        world.controller.close()


def test_a_fault_planning_a_gangs_next_step_holds_it_and_retries_with_backoff(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    original = lifecycle.make_plan

    def planned(app: Application, now: float, settings: Settings, around: Surroundings) -> Plan:
        if app.key == A and isinstance(around.ticket, Granted):  # admitted: its next step fails to be planned
            raise KeyError("a fault of yuniplace's own")
        return original(app, now, settings, around)

    monkeypatch.setattr(lifecycle, "make_plan", planned)
    with caplog.at_level(logging.ERROR):
        plans = world.settle()
        held(world, plans)
        assert plans[A] is None
        world.look(A)  # fails again: told once, retried later
    told = world.told()
    assert len(told) == 1 and "could not plan the gang's next step" in told[0]
    assert world.faults("plan") == 2
    failures = [r for r in caplog.records if "reconcile of team/a failed" in r.getMessage()]
    assert [r.exc_info is not None for r in failures] == [True, True]  # with the trace, at ERROR
    assert "retrying in 1.0s" in failures[0].getMessage() and "retrying in 2.0s" in failures[1].getMessage()


def test_a_fault_applying_a_gangs_plan_holds_it_and_says_what_was_done(world: World) -> None:
    world.api.fail_write(when=lambda write: write.endswith(" a-0"))
    plans = world.settle()
    held(world, plans)
    assert world.api.failed and all(write.endswith(" a-0") for write in world.api.failed)
    told = world.told()
    assert len(told) == 1 and "could not carry out the gang's plan" in told[0]
    assert "of its plan, its record not written, 0 of 1 members swapped in or started" in told[0]
    assert not [e for e in world.api.events if e["regarding"]["name"] == "a-0" and e["reason"] == "GangStarting"]
    assert world.faults("apply") == 1
    world.api.fail_write()  # the API is well again: the next look starts it whole
    plan = world.look(A)[A]
    assert plan is not None and plan.state == AppState.RESERVED and not p.is_gated(world.api.pods["a-0"])


def test_a_plan_whose_pod_was_deleted_meanwhile_is_dropped_quietly(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """a's pod goes (its namespace deleted, say) after its store last heard of it: its plan's first write
    finds it gone. No fault of yuniplace's: nothing told or counted, logged without a trace, and b goes on."""
    world.look()
    world.admission.turn()
    del world.api.pods["a-0"]  # the watch has not brought the deletion yet
    caplog.set_level(logging.INFO)
    plans = world.look()
    assert plans[A] is None
    plan_b = plans[B]
    assert plan_b is not None and plan_b.state == AppState.RESERVED
    assert not world.told() and world.faults("apply") == 0
    dropped = [r for r in caplog.records if "plan of team/a dropped: a pod it writes is gone" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in dropped] == [(logging.INFO, None)]


def test_invalid_task_groups_are_the_users_fault_and_fail_a_hard_gang() -> None:
    """Not a fault of yuniplace's: TaskGroupsError, and the gang fails by its style (Hard)."""
    world = World("Hard")
    try:
        world.api.pods["a-0"]["metadata"]["annotations"][keys.TASK_GROUPS] = "[{"
        world.controller._on_list(list(world.api.pods.values()))
        plans = world.settle()
        plan_a = plans[A]
        assert plan_a is not None and plan_a.state == AppState.FAILED
        assert world.told("TaskGroupsError") and not world.told()
        assert world.faults("snapshot") == world.faults("plan") == 0
    finally:
        world.controller.close()
