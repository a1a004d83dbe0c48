"""A gang started directly: its members are released only once their seats are seen to hold (apply.py,
seatcheck.py, and the room's count of a seat taken)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import pytest

from yuniplace.admission.room import RoomView
from yuniplace.controller.apply import Executor, Refusals
from yuniplace.controller.plan import Plan, SeatsToRelease, Swap
from yuniplace.controller.seatcheck import CATCH_UP_S, HOLD_LIMIT_S, Clearance, SeatCheck, WatchProgress
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.fit import Constraints, Node, amounts
from yuniplace.gang.state import AppState
from yuniplace.runtime.metrics import Metrics

KEY = p.AppKey("ns", "train")


def member(name: str, cpu: str = "2") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "10", "annotations": {}},
        "spec": {
            "schedulingGates": [{"name": keys.GATE}],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
        "status": {"phase": "Pending"},
    }


def view(free_cpu: str, competing: tuple[Constraints, ...] = ()) -> RoomView:
    allocatable = amounts({"cpu": "4", "memory": "16Gi", "pods": "110"})
    node = Node("n1", {}, (), allocatable)
    return RoomView([node], {"n1": {**allocatable, "cpu": amounts({"cpu": free_cpu})["cpu"]}}, {}, competing)


def test_a_seat_is_taken_once_its_node_no_longer_holds_every_member_seated_there() -> None:
    assert view("4").seats_taken([("n1", member("a")), ("n1", member("b"))]) == []
    assert view("3").seats_taken([("n1", member("a")), ("n1", member("b"))]) == ["n1"]
    assert view("4").seats_taken([("gone", member("a"))]) == ["gone"]  # its node went meanwhile


class Api:
    """Answers the executor's writes with the pod as written, each at a newer resourceVersion."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.annotations: dict[str, dict[str, Any]] = {}  # by pod, as its merge patches wrote them
        self._versions = itertools.count(11)

    def patch(self, path: str, body: Any, **_: Any) -> dict[str, Any]:
        name = path.split("/")[6]
        verb = "release" if isinstance(body, list) else "nominate" if path.endswith("/status") else "annotate"
        self.writes.append(f"{verb} {name}")
        if isinstance(body, dict):
            self.annotations.setdefault(name, {}).update(body["metadata"]["annotations"])
        pod = member(name)
        pod["metadata"]["resourceVersion"] = str(next(self._versions))
        return pod

    def delete(self, path: str, _body: Any = None, **_: Any) -> dict[str, Any]:
        self.writes.append("delete " + path.split("/")[6])
        return {}


class Store:
    def upsert(self, _pod: Any) -> None: ...

    def delete(self, _pod: Any) -> None: ...


class Landings:
    def expect(self, *_: Any) -> None: ...

    def hold(self, *_: Any) -> None: ...

    def release(self, *_: Any) -> None: ...


def run(hold: bool) -> tuple[list[str], bool, list[int]]:
    api, asked = Api(), []

    def seats_hold(key: p.AppKey, swaps: Sequence[Swap], version: int) -> bool:
        asked.append(version)
        return hold

    executor = Executor(api, Store(), None, Metrics(), Landings(), seats_hold=seats_hold)  # type: ignore[arg-type]
    swaps = [Swap(member(name), None, node, "workers", direct=True) for name, node in (("a", "n1"), ("b", "n2"))]
    try:
        refused = executor.apply(Plan(KEY, AppState.RESERVED, swaps=swaps))
    finally:
        executor.close()
    return sorted(api.writes), refused.seats_held, asked


def test_members_started_directly_are_released_only_once_their_seats_are_seen_to_hold() -> None:
    writes, held, asked = run(hold=True)
    assert writes == ["nominate a", "nominate b", "release a", "release b"] and not held
    assert asked == [12]  # the newest nomination's version, for the watch to bring back first


def test_members_whose_seats_are_not_seen_to_hold_stay_nominated_and_gated() -> None:
    writes, held, _ = run(hold=False)
    assert writes == ["nominate a", "nominate b"] and held


def _started_directly(
    plan_delete: list[dict[str, Any]],
    *,
    contended: bool = True,
    clear: Clearance = Clearance.CONTENDED,
    asked: list[int] | None = None,
    given: SeatsToRelease | None = None,
    now: float = 100.0,
) -> tuple[Api, Refusals]:
    """A gang started directly whose originator, member a, gets the gang's record in the same plan (or
    got it from an earlier reconcile, which left it the seats `given`); `contended`: whether a pod of
    another application waits; `clear`: what the seat check says of the seats without nominations (the
    versions it is asked of go into `asked`); `now`: the executor's clock."""
    api = Api()
    a, b = member("a"), member("b")
    swaps = [Swap(pod, None, node, "workers", direct=True) for pod, node in ((a, "n1"), (b, "n2"))]
    record: dict[str, str | None] = {keys.STATE: AppState.RESERVED.value, keys.QUEUED_SINCE: None}
    plan = Plan(KEY, AppState.RESERVED, originator=a, swaps=swaps, annotate=record, delete=plan_delete)
    if given is not None:
        plan.annotate, plan.seats_given = {}, given

    def seats_clear(_swaps: Sequence[Swap], version: int) -> Clearance:
        (asked if asked is not None else []).append(version)
        return clear

    executor = Executor(
        api,  # type: ignore[arg-type]
        Store(),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        Metrics(),
        Landings(),  # type: ignore[arg-type]
        contended=lambda _key: contended,
        seats_clear=seats_clear,
        clock=lambda: now,
    )
    try:
        refused = executor.apply(plan)
    finally:
        executor.close()
    return api, refused


def test_the_gangs_record_goes_in_its_originators_nomination_when_nominations_are_the_first_writes() -> None:
    api, _ = _started_directly([])
    assert sorted(api.writes) == ["nominate a", "nominate b", "release a", "release b"]  # no write of its own
    assert api.annotations["a"] == {keys.SEAT: "n1", keys.STATE: AppState.RESERVED.value, keys.QUEUED_SINCE: None}
    assert api.annotations["b"] == {keys.SEAT: "n2"}


def test_the_gangs_record_is_written_first_when_the_plan_deletes_or_creates_before_it_nominates() -> None:
    api, _ = _started_directly([member("old-placeholder")])
    assert api.writes[:2] == ["annotate a", "delete old-placeholder"]
    assert sorted(api.writes[2:]) == ["nominate a", "nominate b", "release a", "release b"]


def test_seats_no_other_pod_waits_for_go_without_nominations_once_the_record_is_seen_back() -> None:
    asked: list[int] = []
    api, _ = _started_directly([], contended=False, clear=Clearance.CLEAR, asked=asked)
    assert api.writes[0] == "annotate a" and sorted(api.writes[1:]) == ["release a", "release b"]
    assert asked == [11]  # the record's version, for the watch to bring back first
    assert api.annotations["a"] == {keys.STATE: AppState.RESERVED.value, keys.QUEUED_SINCE: None}


def test_seats_not_seen_clear_are_nominated_after_all() -> None:
    api, _ = _started_directly([], contended=False, clear=Clearance.CONTENDED)
    assert api.writes[0] == "annotate a"
    assert sorted(api.writes[1:]) == ["nominate a", "nominate b", "release a", "release b"]
    assert api.annotations["b"] == {keys.SEAT: "n2"}


GIVEN = SeatsToRelease({"a": "n1", "b": "n2"}, recorded_at=11, deadline=100.0 + CATCH_UP_S)


def test_a_record_the_watch_has_not_brought_back_leaves_the_members_to_the_next_reconcile() -> None:
    """No worker waits for the watch: the record written, the members stay gated, unnominated, and
    their seats go back to the controller for the reconcile the watch wakes once it has the record."""
    api, refused = _started_directly([], contended=False, clear=Clearance.UNSEEN)
    assert api.writes == ["annotate a"]
    assert refused.seats_to_release == GIVEN
    assert not refused.seats_held


def test_seats_left_by_the_last_reconcile_are_released_once_the_watch_brings_its_record() -> None:
    asked: list[int] = []
    api, refused = _started_directly([], contended=False, clear=Clearance.CLEAR, asked=asked, given=GIVEN)
    assert sorted(api.writes) == ["release a", "release b"]  # no record again, no nomination
    assert asked == [11]  # the record written then
    assert refused.seats_to_release is None


def test_seats_left_by_the_last_reconcile_wait_again_for_the_watch_until_their_deadline() -> None:
    api, refused = _started_directly([], contended=False, clear=Clearance.UNSEEN, given=GIVEN, now=101.0)
    assert api.writes == [] and refused.seats_to_release == GIVEN
    # Past it, nominated: never a gang held gated for good behind a watch that does not come.
    api, refused = _started_directly([], contended=False, clear=Clearance.UNSEEN, given=GIVEN, now=GIVEN.deadline)
    assert sorted(api.writes) == ["nominate a", "nominate b", "release a", "release b"]
    assert refused.seats_to_release is None


def test_seats_clear_once_the_watch_brought_the_record_and_nothing_may_take_them() -> None:
    started = time.monotonic()
    assert checked(view("4"))[0].clear(SEATED, 12) is Clearance.CLEAR
    assert checked(view("4"), watched_up_to=11)[0].clear(SEATED, 12) is Clearance.UNSEEN
    assert time.monotonic() - started < CATCH_UP_S  # answered at once, never waiting for the watch
    assert checked(view("3"))[0].clear(SEATED, 12) is Clearance.CONTENDED  # a seat taken
    # A pod yet to be tried may take one.
    assert checked(view("4", (ANYWHERE,)))[0].clear(SEATED, 12) is Clearance.CONTENDED


def test_a_plan_with_nothing_to_swap_is_carried_out_as_ever() -> None:
    executor = Executor(Api(), Store(), None, None, Landings())  # type: ignore[arg-type]
    try:
        assert executor.apply(Plan(KEY, AppState.RESERVING)).seats_held is False
    finally:
        executor.close()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str | None]] = []

    def record(self, pod: dict[str, Any], reason: str, note: str, *, kind: str | None = None) -> None:
        self.events.append((p.name(pod), reason, note, kind))


def checked(room: RoomView, *, watched_up_to: int = 12, recorder: Recorder | None = None) -> tuple[SeatCheck, Clock]:
    progress, clock = WatchProgress(), Clock()
    progress.saw(watched_up_to)
    return SeatCheck(lambda: room, progress, recorder, clock), clock  # type: ignore[arg-type]


SEATED = [Swap(member("a"), None, "n1", "workers", direct=True), Swap(member("b"), None, "n1", "workers", direct=True)]
ANYWHERE = Constraints.of_pod({})  # a pod kube-scheduler has yet to try, which may go to any node


def test_seats_hold_once_the_watch_brought_the_nominations_and_nothing_may_take_them() -> None:
    check, _ = checked(view("4"))
    assert check.holds(KEY, SEATED, 12)


def test_seats_are_not_trusted_before_the_watch_brings_the_nominations_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("yuniplace.controller.seatcheck.CATCH_UP_S", 0.01)
    check, _ = checked(view("4"), watched_up_to=11)
    assert not check.holds(KEY, SEATED, 12)


def test_a_pod_yet_to_be_tried_holds_the_members_back_for_a_moment_only() -> None:
    check, clock = checked(view("4", (ANYWHERE,)))
    assert not check.holds(KEY, SEATED, 12)
    clock.now += HOLD_LIMIT_S / 2
    assert not check.holds(KEY, SEATED, 12)
    clock.now += HOLD_LIMIT_S / 2
    assert check.holds(KEY, SEATED, 12)  # a pod no scheduler ever tries holds no gang for good


def test_a_seat_taken_holds_the_members_back_for_a_moment_then_each_member_there_is_told_why() -> None:
    recorder = Recorder()
    check, clock = checked(view("3"), recorder=recorder)
    assert not check.holds(KEY, SEATED, 12) and recorder.events == []
    clock.now += HOLD_LIMIT_S
    assert check.holds(KEY, SEATED, 12)  # waiting does not give a seat back: released, not stuck
    assert [(name, reason, kind) for name, reason, _, kind in recorder.events] == [
        ("a", "GangStarting", "Warning"),
        ("b", "GangStarting", "Warning"),
    ]
    assert "its seat on node n1 was taken by another pod" in recorder.events[0][2]
