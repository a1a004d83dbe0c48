"""The event reasons: one table in the code, and the README's Events section says the same."""

from __future__ import annotations

import re
from pathlib import Path

from yuniplace.controller.events import NORMAL, WARNING, Reason

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_events() -> dict[str, set[str]]:
    """Reason -> types, from the README's Events table."""
    section = README.read_text().split("\n## Events\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([\w/]+) \|", section, re.MULTILINE)
    return {reason: set(types.split("/")) for reason, types in rows}


def test_every_reason_is_documented_with_its_types_and_nothing_else_is() -> None:
    documented = readme_events()
    assert documented == {reason.value: set(reason.kinds) for reason in Reason}


def test_every_reason_has_an_action_and_a_usual_type() -> None:
    for reason in Reason:
        assert reason.action and reason.action[0].isupper(), reason
        assert reason.kinds and set(reason.kinds) <= {NORMAL, WARNING}, reason
        assert str(reason) == reason.value == reason
