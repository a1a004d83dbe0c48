"""The event reasons: one table in the code, and the docs' reference of events says the same."""

from __future__ import annotations

import re
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from yuniplace.runtime.events import NORMAL, POSTERS, WARNING, EventRecorder, Reason

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "events.md"


def documented_events() -> dict[str, set[str]]:
    """Reason -> types, from the docs' table of events."""
    rows = re.findall(r"^\| `(\w+)` \| ([\w/]+) \|", PAGE.read_text(), re.MULTILINE)
    return {reason: set(types.split("/")) for reason, types in rows}


def test_every_reason_is_documented_with_its_types_and_nothing_else_is() -> None:
    documented = documented_events()
    assert documented == {reason.value: set(reason.kinds) for reason in Reason}


def test_every_reason_has_an_action_and_a_usual_type() -> None:
    for reason in Reason:
        assert reason.action and reason.action[0].isupper(), reason
        assert reason.kinds and set(reason.kinds) <= {NORMAL, WARNING}, reason
        assert str(reason) == reason.value == reason


class PostedEvents:
    """Stands in for the API: keeps what is posted."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return body


def test_an_objects_events_are_named_in_the_order_they_happened() -> None:
    """`kubectl get events` lists by name: named by a strictly increasing time, a pod's events list in order."""
    api = PostedEvents()
    recorder = EventRecorder(api)  # type: ignore[arg-type]
    pod = {"metadata": {"name": "driver", "namespace": "team", "uid": "u1"}}
    flow = [Reason.TASK_GROUP_MATCH, Reason.CREATING_PLACEHOLDERS, Reason.PLACEHOLDER_ALLOCATED] * 50
    for reason in flow:
        recorder.record(pod, reason, "note")
    recorder.flush()
    names = [body["metadata"]["name"] for body in api.bodies]
    assert len(set(names)) == len(flow)
    by_name = [body["reason"] for body in sorted(api.bodies, key=lambda body: body["metadata"]["name"])]
    assert by_name == [reason.value for reason in flow]


def test_each_objects_events_are_posted_in_the_order_they_happened() -> None:
    """Events are posted by several threads, but one object's always by the same one, in order: `kubectl get
    events -w` never shows a gang's GangStarted before its GangStarting."""
    api = PostedEvents()
    recorder = EventRecorder(api)  # type: ignore[arg-type]
    pods = [{"metadata": {"name": f"driver-{i}", "namespace": "team", "uid": f"u{i}"}} for i in range(20)]
    flow = [Reason.TASK_GROUP_MATCH, Reason.GANG_STARTING, Reason.GANG_STARTED] * 5
    for reason in flow:
        for pod in pods:
            recorder.record(pod, reason, "note")
    recorder.flush()
    assert len(api.bodies) == len(pods) * len(flow)
    for pod in pods:
        posted = [body["reason"] for body in api.bodies if body["regarding"]["name"] == pod["metadata"]["name"]]
        assert posted == [reason.value for reason in flow]


class SlowPosts(PostedEvents):
    """An API server that answers the posts of the events of one object only once let go."""

    def __init__(self, slow: str) -> None:
        super().__init__()
        self.slow = slow
        self.let_go = threading.Event()

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if body["regarding"]["name"] == self.slow:
            assert self.let_go.wait(30)
        return super().create(path, body)


def test_an_event_answered_late_does_not_hold_back_the_events_of_others() -> None:
    api = SlowPosts("slow")
    recorder = EventRecorder(api)  # type: ignore[arg-type]
    slow = {"metadata": {"name": "slow", "namespace": "team", "uid": "u0"}}
    # Pods whose events another poster than the slow pod's posts (posters are chosen by the object's name).
    others = [
        {"metadata": {"name": name, "namespace": "team", "uid": name}}
        for name in (f"pod-{i}" for i in range(40))
        if zlib.crc32(f"team/{name}".encode()) % POSTERS != zlib.crc32(b"team/slow") % POSTERS
    ]
    recorder.record(slow, Reason.GANG_STARTING, "note")
    for pod in others:
        recorder.record(pod, Reason.GANG_STARTING, "note")
    deadline = time.monotonic() + 30
    while len(api.bodies) < len(others) and time.monotonic() < deadline:
        recorder.flush(timeout_s=0.1)
    assert sorted(body["regarding"]["name"] for body in api.bodies) == sorted(p["metadata"]["name"] for p in others)
    api.let_go.set()
    recorder.flush()
    assert len(api.bodies) == len(others) + 1
