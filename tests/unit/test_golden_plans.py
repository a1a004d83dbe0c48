"""The golden plans harness (tests/goldenplans.py) catches what it is there to catch."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import goldenplans
from yuniplace.controller.plan import Event, Plan
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason

ORIGINATOR = {"metadata": {"name": "driver", "namespace": "ns", "uid": "u1"}, "spec": {}}


def a_plan(note: str = "creating 3 placeholder pods", **fields: object) -> Plan:
    plan = Plan(p.AppKey("ns", "app"), AppState.RESERVING, ORIGINATOR, current=AppState.PENDING, **fields)  # type: ignore[arg-type]
    plan.events.append(Event(ORIGINATOR, Reason.CREATING_PLACEHOLDERS, note))
    return plan


def test_the_unit_suite_has_its_records() -> None:
    records = goldenplans.load()
    assert sum(len(plans) for plans in records.values()) >= 200
    assert all("::" in test and plans for test, plans in records.items())


def test_a_plan_is_described_as_its_record_reads_back(tmp_path: Path) -> None:
    plan = a_plan(annotate={"b": "2", "a": None}, requeue_after_s=1 / 3)
    described = goldenplans.described(plan)
    assert list(described["annotate"]) == ["a", "b"]
    assert described["requeue_after_s"] == 0.333333
    assert described["events"] == [["CreatingPlaceholders", "driver", "creating 3 placeholder pods", "Normal"]]
    assert "delete" not in described  # what is left at its default is left out
    path = tmp_path / "plans.jsonl"
    goldenplans.write({"t.py::test": [described]}, path)
    assert goldenplans.load(path) == {"t.py::test": [described]}


def test_a_plan_that_differs_from_its_record_is_named_with_the_difference() -> None:
    watch = goldenplans.Watch("t.py::test")
    watch.seen(a_plan())
    goldenplans._records = {"t.py::test": [goldenplans.described(a_plan("creating 2 placeholder pods"))]}
    try:
        difference = goldenplans.check(watch)
        assert difference is not None and "plan 0 differs" in difference
        assert '-   "creating 2 placeholder pods"' in difference and '+   "creating 3 placeholder pods"' in difference
        watch.seen(a_plan())  # one plan more than recorded
        goldenplans._records = {"t.py::test": [goldenplans.described(a_plan())]}
        assert "plan 1 differs" in str(goldenplans.check(watch))
        goldenplans._records = {"t.py::test": watch.plans}
        assert goldenplans.check(watch) is None
    finally:
        goldenplans._records = None


def test_a_test_that_makes_plans_and_has_no_record_fails_naming_how_to_record_it() -> None:
    watch = goldenplans.Watch("tests/unit/t.py::test_new[case]")
    goldenplans._records = {}
    try:
        assert goldenplans.conclude(watch, "check", passed=True) == (None, None)  # no plan, nothing to check
        watch.seen(a_plan())
        counted, failure = goldenplans.conclude(watch, "check", passed=True)
        assert counted is None and failure is not None
        assert "has no golden record" in failure and f"{goldenplans.RECORD} -k test_new)" in failure
        goldenplans._records = {watch.test: watch.plans}
        assert goldenplans.conclude(watch, "check", passed=True) == (goldenplans.CHECKED, None)
    finally:
        goldenplans._records = None


def test_the_plans_of_a_failing_test_are_never_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(goldenplans, "PARTS", tmp_path / "parts")
    failing, passing = goldenplans.Watch("t.py::test_failing"), goldenplans.Watch("t.py::test_passing")
    failing.seen(a_plan("creating 2 placeholder pods"))
    passing.seen(a_plan())
    assert goldenplans.conclude(failing, "record", passed=False) == (goldenplans.REFUSED, None)
    assert goldenplans.conclude(passing, "record", passed=True) == (None, None)
    kept = {test for part in (tmp_path / "parts").glob("*.jsonl") for test in goldenplans.load(part)}
    assert kept == {"t.py::test_passing"}
