"""Every plan a unit test makes is held to its record (tests/goldenplans.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import goldenplans
from yuniplace.controller.lifecycle import dispatch

# The one door every plan comes out of.
goldenplans.hook(dispatch, "run")


@pytest.fixture(autouse=True)
def golden_plans(request: pytest.FixtureRequest) -> Iterator[None]:
    mode = goldenplans.mode()
    node = request.node
    if mode == "off" or getattr(getattr(node, "obj", None), "is_hypothesis_test", False):
        yield
        return
    with goldenplans.watching(node.nodeid) as watch:
        yield
    if mode == "record":
        goldenplans.keep(watch)
        return
    if goldenplans.recorded(watch.test) is None:
        node.user_properties.append((goldenplans.UNRECORDED, len(watch.plans)))
        return
    node.user_properties.append((goldenplans.CHECKED, len(watch.plans)))
    difference = goldenplans.check(watch)
    if difference is not None:
        pytest.fail(difference, pytrace=False)
