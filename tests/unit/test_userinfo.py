"""The record of a workload's submitter, read back as hostile text: anything the webhook did not write
reads as no record."""

from __future__ import annotations

import json

import pytest

from yuniplace.gang import userinfo
from yuniplace.gang.userinfo import ANNOTATION, UserInfo


def test_what_is_written_reads_back() -> None:
    text = userinfo.encode("alice", ["devs", "system:authenticated"])
    assert json.loads(text) == {"user": "alice", "groups": ["devs", "system:authenticated"]}
    assert userinfo.parse(text) == UserInfo("alice", ("devs", "system:authenticated"))
    assert userinfo.of_object({"metadata": {"annotations": {ANNOTATION: text}}}) == UserInfo(
        "alice", ("devs", "system:authenticated")
    )


def test_yunikorns_own_format_reads_too() -> None:
    """As YuniKorn's documentation writes it: spaces, newlines, groups left out."""
    assert userinfo.parse('\n{\n  "user": "yunikorn",\n  "groups": [\n    "developers", "devops"\n  ]\n}') == UserInfo(
        "yunikorn", ("developers", "devops")
    )
    assert userinfo.parse('{"user": "bob"}') == UserInfo("bob")


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "alice",
        "{",
        "[]",
        '"alice"',
        "null",
        '{"groups": ["devs"]}',
        '{"user": ""}',
        '{"user": 7}',
        '{"user": ["alice"]}',
        '{"user": "alice", "groups": "devs"}',
        '{"user": "alice", "groups": [7]}',
        '{"user": "alice", "groups": [""]}',
        json.dumps({"user": "a" * (userinfo.MAX_NAME + 1)}),
        json.dumps({"user": "alice", "groups": ["g" * (userinfo.MAX_NAME + 1)]}),
        json.dumps({"user": "alice", "groups": [f"g{i}" for i in range(userinfo.MAX_GROUPS + 1)]}),
        json.dumps({"user": "alice", "padding": "x" * userinfo.MAX_TEXT}),
        "[" * 100_000,
    ],
)
def test_anything_else_is_no_record(text: str | None) -> None:
    assert userinfo.parse(text) is None


@pytest.mark.parametrize(
    "obj",
    [{}, {"metadata": None}, {"metadata": {}}, {"metadata": {"annotations": None}}, {"metadata": {"annotations": []}}],
)
def test_objects_without_a_record(obj: dict[str, object]) -> None:
    assert userinfo.of_object(obj) is None


def test_deep_nesting_is_no_record_rather_than_an_error() -> None:
    """A few kilobytes of brackets would make the decoder recurse past Python's limit."""
    assert userinfo.parse("[" * (userinfo.MAX_TEXT - 1)) is None
    assert userinfo.parse('{"user": "alice", "groups": [[["devs"]]]}') is None
