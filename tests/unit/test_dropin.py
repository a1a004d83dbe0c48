"""What a YuniKorn user meets: schedulerName yunikorn rewritten while YuniKorn does not run, a gang pod
no scheduler picks up told so, and `yuniplace status` saying what happened in words."""

from __future__ import annotations

from typing import Any

import pytest

from tests.planning import (
    APP,
    NOW,
    driver,
    executor,
    placeholder,
)
from yuniplace.controller.unserved import UNSERVED_AFTER_S, UnservedPods
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.state import AppState
from yuniplace.kube import Forbidden
from yuniplace.runtime.events import Reason
from yuniplace.tools.status import describe, table
from yuniplace.webhook.rewrite import CACHE_S, Mode, SchedulerNameRewrite

KEY = p.AppKey("default", APP)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pods:
    """The one API call the rewrite makes: the pods labelled as YuniKorn's scheduler."""

    def __init__(self, *phases: str, fail: bool = False) -> None:
        self.phases = list(phases)
        self.fail = fail
        self.calls = 0

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        assert (method, path, kwargs["query"]) == (
            "GET",
            "/api/v1/pods",
            {"labelSelector": "component=yunikorn-scheduler"},
        )
        if self.fail:
            raise Forbidden(403, "Forbidden", "pods is forbidden")
        return {"items": [{"status": {"phase": phase}} for phase in self.phases]}


def rewrite(mode: Mode, pods: Pods, clock: Clock | None = None) -> SchedulerNameRewrite:
    return SchedulerNameRewrite(mode, pods, clock or Clock())  # type: ignore[arg-type]


def test_auto_rewrites_while_no_yunikorn_scheduler_runs() -> None:
    assert rewrite(Mode.AUTO, Pods()).wanted() is True
    assert rewrite(Mode.AUTO, Pods("Pending", "Failed")).wanted() is True
    assert rewrite(Mode.AUTO, Pods("Running")).wanted() is False


def test_auto_rewrites_nothing_when_it_cannot_tell() -> None:
    assert rewrite(Mode.AUTO, Pods(fail=True)).wanted() is False


def test_auto_asks_the_cluster_at_most_every_few_seconds() -> None:
    pods, clock = Pods(), Clock()
    decide = rewrite(Mode.AUTO, pods, clock)
    assert decide.wanted() and decide.wanted() and pods.calls == 1
    pods.phases = ["Running"]
    clock.now += CACHE_S
    assert decide.wanted() is False and pods.calls == 2


@pytest.mark.parametrize(("mode", "expected"), [(Mode.ALWAYS, True), (Mode.NEVER, False)])
def test_always_and_never_ask_nobody(mode: Mode, expected: bool) -> None:
    pods = Pods("Running")
    assert rewrite(mode, pods).wanted() is expected and pods.calls == 0


# -- gang pods nobody schedules --------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def record(self, pod: dict[str, Any], reason: Reason, note: str, *, kind: str | None = None) -> None:
        assert (kind or reason.kinds[0]) == "Warning"
        self.events.append((pod["metadata"]["name"], reason, note))


def for_yunikorn(name: str, **status: Any) -> dict[str, Any]:
    pod = executor(0, group="exec")
    pod["metadata"].update(name=name, uid=f"uid-{name}")
    pod["spec"]["schedulerName"] = "yunikorn"
    pod["status"].update(status)
    return pod


def test_a_gang_pod_no_scheduler_has_looked_at_is_reported_once_with_what_to_change() -> None:
    recorder, clock = Recorder(), Clock()
    unserved = UnservedPods(recorder, p.DEFAULT_SCHEDULERS, clock)  # type: ignore[arg-type]
    unserved.observe("ADDED", for_yunikorn("waiting"))
    assert unserved.report_due() == 0
    clock.now += UNSERVED_AFTER_S
    assert unserved.report_due() == 1 and unserved.report_due() == 0
    [(name, reason, note)] = recorder.events
    assert (name, reason) == ("waiting", "SchedulerNotRunning")
    assert "'yunikorn'" in note and "webhook.rewriteSchedulerName" in note and "--scheduler-name=yunikorn" in note


def test_pods_a_scheduler_looked_at_or_that_are_ours_are_not_reported() -> None:
    recorder, clock = Recorder(), Clock()
    unserved = UnservedPods(recorder, p.DEFAULT_SCHEDULERS, clock)  # type: ignore[arg-type]
    tried = for_yunikorn("tried", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
    ours = executor(1, group="exec")
    plain = for_yunikorn("plain")
    plain["metadata"]["annotations"] = {}
    for pod in (tried, ours, plain):
        unserved.observe("ADDED", pod)
    unserved.observe("ADDED", for_yunikorn("deleted"))
    unserved.observe("DELETED", for_yunikorn("deleted"))
    clock.now += UNSERVED_AFTER_S
    assert unserved.report_due() == 0


# -- yuniplace status ------------------------------------------------------------------------------------


def test_a_member_scheduled_normally_after_a_mismatch_counts_as_having_its_room() -> None:
    origin = driver(
        state=AppState.RUNNING, started=NOW - 60, first_allocated=NOW - 50, gated=False, node="n0", phase="Running"
    )
    larger = executor(0, gated=False, node="n5", phase="Running")  # too large for its placeholder: scheduled normally
    swapped = executor(1, gated=False, node="n2", phase="Running", swap_placeholder="tg-x", nominated_to="n2")
    view = Application.of(
        KEY, [origin, larger, swapped, placeholder("exec", 1, node="n3", scheduled_at=NOW - 50, owner=origin)]
    )
    row = describe(view, NOW)
    assert row is not None
    assert {g["name"]: (g["reserved"], g["required"]) for g in row["groups"]} == {"driver": (1, 1), "exec": (2, 2)}


def test_status_says_when_an_application_fell_back_or_failed() -> None:
    for state, words in ((AppState.RESUMING, "fell back"), (AppState.FAILED, "failed")):
        row = describe(Application.of(KEY, [driver(state=state, started=NOW - 120), executor(0)]), NOW)
        assert row is not None and words in row["note"] and row["time_left_s"] is None
        assert words in table([row])


def test_a_queued_application_shows_the_time_left_before_its_timeout() -> None:
    queued = driver(policy="placeholderTimeoutInSeconds=60", annotations={keys.QUEUED_SINCE: p.format_time(NOW - 20)})
    row = describe(Application.of(KEY, [queued, executor(0)]), NOW)
    assert row is not None and row["state"] == "Pending" and row["time_left_s"] == 40
    assert "waiting for admission" in table([row])
