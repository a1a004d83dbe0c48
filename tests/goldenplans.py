"""Golden plans: every Plan the unit suite makes, recorded once and held to its record on every later run.

The planner is a pure function of an application, the time and its surroundings, and the unit suite
feeds it thousands of such inputs. Each plan it returns is written down in a canonical form (its state,
its events in order, its pod writes by pod name, the annotations it sets, when it looks again, ...) and
kept in `tests/unit/data/plans.jsonl`, one line per test: the test's node id and its plans in the order
it asked for them. A later run compares each plan with the record of the same test and call, so a change
of the planner's code that changes any decision fails the test that made it, with the first difference.

    YUNIPLACE_PLANS=check (the default)  compare every plan with its record
    YUNIPLACE_PLANS=record               write the records anew (only when a change of behaviour is meant)
    YUNIPLACE_PLANS=off                  neither

    YUNIPLACE_PLANS=record scripts/venv-python -m pytest -n 2 tests/unit

A test that makes its plans from random inputs (a property test) is neither recorded nor checked. A test
that makes plans and has no record (a new one) fails, saying how to record it: no plan goes unchecked. A
test that fails is never recorded (its record, if any, stays as it was), and the summary counts them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from yuniplace.controller.plan import Plan
from yuniplace.gang import pods as p

DATA = Path(__file__).parent / "unit" / "data" / "plans.jsonl"
PARTS = DATA.parent / "plans.parts"
MODE_VARIABLE = "YUNIPLACE_PLANS"
CHECKED = "golden plans checked"  # the user property each test reports its count under
REFUSED = "golden plans of failing tests not recorded"
RECORD = f"{MODE_VARIABLE}=record scripts/venv-python -m pytest -n 2 tests/unit"


def mode() -> str:
    value = os.environ.get(MODE_VARIABLE, "check")
    if value not in ("check", "record", "off"):
        raise ValueError(f"{MODE_VARIABLE}={value}: expected check, record or off")
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _names(pods: list[p.Pod]) -> list[str]:
    return [p.name(pod) for pod in pods]


def described(plan: Plan) -> dict[str, Any]:
    """The plan in a canonical form: what it writes, in the order it writes it, with pods by name (a
    placeholder to create by its name and a digest of its manifest); annotations as a map; fields left
    at their defaults are left out."""
    fields: dict[str, Any] = {
        "key": str(plan.key),
        "current": plan.current.value,
        "state": plan.state.value,
        "originator": None if plan.originator is None else p.name(plan.originator),
        "annotate": {key: plan.annotate[key] for key in sorted(plan.annotate)},
        "create": [[p.name(pod), _digest(pod)] for pod in plan.create],
        "delete": _names(plan.delete),
        "swaps": [
            [
                p.name(swap.member),
                None if swap.placeholder is None else p.name(swap.placeholder),
                swap.node,
                swap.group,
                swap.direct,
            ]
            for swap in plan.swaps
        ],
        "ungate": _names(plan.ungate),
        "fail": [[p.name(failure.pod), str(failure.reason), failure.message] for failure in plan.fail],
        "mark_timed_out": _names(plan.mark_timed_out),
        "timed_out_mark": plan.timed_out_mark,
        "evict": _names(plan.evict),
        "events": [[str(event.reason), p.name(event.pod), event.note, event.kind] for event in plan.events],
        "requeue_after_s": None if plan.requeue_after_s is None else round(plan.requeue_after_s, 6),
        "waits_for_nodes": sorted(plan.waits_for_nodes),
        "forget": plan.forget,
        "restarts": None if plan.restarts is None else dataclasses.asdict(plan.restarts),
        "pins": {uid: [dataclasses.asdict(pin) for pin in pins] for uid, pins in sorted(plan.pins.items())},
        "placed_in": None if plan.placed_in is None else plan.placed_in.text(),
        "pod_group_status": plan.pod_group_status,
        "outcomes": [outcome.value for outcome in plan.outcomes],
        "spec": None if plan.spec is None else _digest(repr(plan.spec)),
    }
    kept = {name: value for name, value in fields.items() if value not in (None, [], {}, False)}
    canonical: dict[str, Any] = json.loads(json.dumps(kept))  # as a record reads back: tuples are lists
    return canonical


def load(path: Path = DATA) -> dict[str, list[dict[str, Any]]]:
    """The records: test node id -> its plans, in order."""
    if not path.exists():
        return {}
    records: dict[str, list[dict[str, Any]]] = {}
    with path.open() as lines:
        for line in lines:
            entry = json.loads(line)
            records[entry["test"]] = entry["plans"]
    return records


def write(records: Mapping[str, list[dict[str, Any]]], path: Path = DATA) -> None:
    """Every test's plans, one line each, in the order of the node ids, so a record made again differs
    from the last only where a plan does."""
    with path.open("w") as out:
        for test in sorted(records):
            if records[test]:
                out.write(json.dumps({"test": test, "plans": records[test]}, sort_keys=True, ensure_ascii=False) + "\n")


def difference(test: str, index: int, recorded: dict[str, Any] | None, made: dict[str, Any] | None) -> str:
    """What differs between a plan as recorded and as made now, line by line."""

    def lines(value: dict[str, Any] | None) -> list[str]:
        return ["(no plan)"] if value is None else json.dumps(value, indent=1, sort_keys=True).splitlines()

    diff = difflib.unified_diff(lines(recorded), lines(made), "recorded", "made now", lineterm="", n=2)
    return f"{test}: plan {index} differs from its record ({MODE_VARIABLE}=record records it anew):\n" + "\n".join(diff)


class Watch:
    """The plans one test makes."""

    def __init__(self, test: str) -> None:
        self.test = test
        self.plans: list[dict[str, Any]] = []

    def seen(self, plan: Plan) -> None:
        self.plans.append(described(plan))


_current: Watch | None = None
_records: dict[str, list[dict[str, Any]]] | None = None


def hook(target: object, method: str) -> None:
    """Watch every plan `target.method` returns (once per process)."""
    original: Callable[..., Plan] = getattr(target, method)
    if getattr(original, "_golden", False):
        return

    def watched(*args: Any, **kwargs: Any) -> Plan:
        plan = original(*args, **kwargs)
        if _current is not None:
            _current.seen(plan)
        return plan

    watched._golden = True  # type: ignore[attr-defined]
    setattr(target, method, watched)


@contextlib.contextmanager
def watching(test: str) -> Iterator[Watch]:
    global _current
    _current = Watch(test)
    try:
        yield _current
    finally:
        _current = None


def recorded(test: str) -> list[dict[str, Any]] | None:
    """The test's record (None: it has none), read once per process."""
    global _records
    if _records is None:
        _records = load()
    return _records.get(test)


def check(watch: Watch) -> str | None:
    """The first difference between what the test made and its record, or None."""
    record = recorded(watch.test)
    if record is None:
        return None
    for index in range(max(len(record), len(watch.plans))):
        before = record[index] if index < len(record) else None
        now = watch.plans[index] if index < len(watch.plans) else None
        if before != now:
            return difference(watch.test, index, before, now)
    return None


def unrecorded(watch: Watch) -> str:
    """Why a test that made plans and has no record fails."""
    return (
        f"{watch.test} made {len(watch.plans)} plan(s) and has no golden record: every plan is checked; once "
        f"its plans are as meant, record them ({RECORD} -k {watch.test.rpartition('::')[2].partition('[')[0]}) and commit "
        f"{DATA.relative_to(DATA.parents[3])}"
    )


def conclude(watch: Watch, mode: str, passed: bool) -> tuple[str | None, str | None]:
    """What becomes of a test's plans at its end, and so of the test: in record mode, its plans are
    kept if it passed, and refused if it failed; else they are checked against its record, and one with
    no record fails. Returns the property its plans are counted under (None: not counted) and why the
    test fails (None: it does not)."""
    if mode == "record":
        if passed:
            keep(watch)
            return None, None
        return (REFUSED if watch.plans else None), None
    if recorded(watch.test) is None:
        return None, unrecorded(watch) if watch.plans else None
    return CHECKED, check(watch)


def keep(watch: Watch) -> None:
    """Record mode: add the test's plans to this process's part (merged by `merge` at the end)."""
    PARTS.mkdir(exist_ok=True)
    with (PARTS / f"{os.getpid()}.jsonl").open("a") as out:
        out.write(json.dumps({"test": watch.test, "plans": watch.plans}, ensure_ascii=False) + "\n")


def merge() -> int:
    """Record mode, at the end of the run: the tests run replace their records (one that made no plan
    now loses its record); the records of tests not run stay. Returns the number of tests recorded."""
    if not PARTS.exists():
        return 0
    records = load()
    for part in sorted(PARTS.glob("*.jsonl")):
        for test, plans in load(part).items():
            records[test] = plans
        part.unlink()
    PARTS.rmdir()
    write(records)
    return sum(1 for plans in records.values() if plans)
