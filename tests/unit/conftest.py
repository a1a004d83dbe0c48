"""Every plan a unit test makes is held to its record (tests/goldenplans.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import goldenplans
from yuniplace.controller.lifecycle import dispatch

# The one door every plan comes out of.
goldenplans.hook(dispatch, "run")


REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """Each phase's report, kept on the test for its golden plans to know whether it passed."""
    report: pytest.TestReport = yield
    item.stash.setdefault(REPORTS, {})[report.when] = report
    return report


@pytest.fixture(autouse=True)
def golden_plans(request: pytest.FixtureRequest) -> Iterator[None]:
    mode = goldenplans.mode()
    node = request.node
    if mode == "off" or getattr(getattr(node, "obj", None), "is_hypothesis_test", False):
        yield
        return
    with goldenplans.watching(node.nodeid) as watch:
        yield
    reports = node.stash.get(REPORTS, {})
    passed = all(reports[when].passed for when in ("setup", "call") if when in reports)
    counted, failure = goldenplans.conclude(watch, mode, passed)
    if counted is not None:
        node.user_properties.append((counted, len(watch.plans)))
    if failure is not None:
        pytest.fail(failure, pytrace=False)
