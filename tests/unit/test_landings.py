"""Where handed-off members land: every member counted in the metrics, one event per task group once
all of its members have landed (on the originator, saying how many landed on their node), and an
event per member only when asked for."""

from __future__ import annotations

from typing import Any

from tests import builders
from yuniplace.controller.landings import Landings
from yuniplace.controller.plan import Settings, Swap
from yuniplace.gang import pods as p
from yuniplace.runtime.events import Reason
from yuniplace.runtime.metrics import Metrics

KEY = p.AppKey("ns", "train")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Reason, str]] = []

    def record(self, pod: dict[str, Any], reason: Reason, note: str, **_: Any) -> None:
        self.events.append((p.name(pod), reason, note))


def member(name: str, node: str | None = None) -> dict[str, Any]:
    return builders.pod(name, uid=f"uid-{name}", node=node)


def landings(member_events: bool = False) -> tuple[Landings, Recorder, Metrics]:
    recorder, metrics = Recorder(), Metrics()
    clock = iter(float(t) for t in range(100))
    return Landings(recorder, metrics, Settings(member_events=member_events), lambda: next(clock)), recorder, metrics  # type: ignore[arg-type]


def test_one_event_per_group_once_all_its_members_landed() -> None:
    tracked, recorder, metrics = landings()
    originator = member("w-0")
    for name, node in (("w-0", "n1"), ("w-1", "n1"), ("w-2", "n2")):
        tracked.expect(Swap(member(name), None, node, "workers", direct=True), KEY, originator)
    tracked.observe(member("w-0", node="n1"))
    tracked.observe(member("w-1", node="n3"))  # its seat was taken: it landed elsewhere
    assert recorder.events == []
    tracked.observe(member("w-2", node="n2"))
    [(pod, reason, note)] = recorder.events
    assert (pod, reason) == ("w-0", Reason.GANG_STARTED)
    assert note.startswith("task group workers: 3 member(s) bound in ") and note.endswith(
        ", 2 on the nodes admission chose, 1 elsewhere (their node was taken)"
    )
    assert metrics.swaps.labels("landed")._value.get() == 2 and metrics.swaps.labels("moved")._value.get() == 1


def test_a_member_deleted_on_its_way_is_not_waited_for() -> None:
    tracked, recorder, _ = landings()
    originator = member("d")
    placeholder = builders.pod("tg-0", uid="uid-tg-0")
    tracked.expect(Swap(member("e-0"), placeholder, "n1", "exec"), KEY, originator)
    tracked.expect(Swap(member("e-1"), placeholder, "n2", "exec"), KEY, originator)
    tracked.forget(member("e-1"))
    tracked.observe(member("e-0", node="n1"))
    [(pod, reason, note)] = recorder.events
    assert reason == Reason.PLACEHOLDER_SWAPPED and "1 member(s) bound" in note and "1 on their reserved nodes" in note


def test_an_event_per_member_when_asked() -> None:
    tracked, recorder, _ = landings(member_events=True)
    tracked.expect(Swap(member("w-0"), None, "n1", "workers", direct=True), KEY, member("w-0"))
    tracked.observe(member("w-0", node="n1"))
    assert [reason for _, reason, _ in recorder.events] == [Reason.GANG_STARTED, Reason.GANG_STARTED]
    assert "started on the seat admission chose: bound on its seat n1" in recorder.events[0][2]


def test_landings_of_a_plan_being_applied_are_told_after_its_own_events() -> None:
    """Members can be bound before their plan's writes are all done: their GangStarted waits for the
    plan's GangStarting, posted once its writes are, and then comes in the order they landed."""
    tracked, recorder, _ = landings(member_events=True)
    originator = member("w-0")
    tracked.hold(KEY)
    for name in ("w-0", "w-1"):
        tracked.expect(Swap(member(name), None, "n1", "workers", direct=True), KEY, originator)
    tracked.observe(member("w-0", node="n1"))
    tracked.observe(member("w-1", node="n1"))
    other = p.AppKey("ns", "other")
    tracked.expect(Swap(member("o-0"), None, "n2", "workers", direct=True), other, member("o-0"))
    tracked.observe(member("o-0", node="n2"))  # another application's plan is not being applied: told now
    assert [pod for pod, _, _ in recorder.events] == ["o-0", "o-0"]
    recorder.record(originator, Reason.GANG_STARTING, "the plan's own event")
    tracked.release(KEY)
    assert [(pod, reason) for pod, reason, _ in recorder.events[2:]] == [
        ("w-0", Reason.GANG_STARTING),
        ("w-0", Reason.GANG_STARTED),
        ("w-1", Reason.GANG_STARTED),
        ("w-0", Reason.GANG_STARTED),
    ]
