"""The event reasons: one table in the code, and the docs' reference of events says the same."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from yuniplace.runtime.events import NORMAL, WARNING, EventRecorder, Reason

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
