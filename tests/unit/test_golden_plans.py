"""The golden plans harness (tests/goldenplans.py) catches what it is there to catch."""

from __future__ import annotations

from pathlib import Path

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
