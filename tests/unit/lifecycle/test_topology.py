"""plan_application for gangs that ask for topology domains: the domains admission chose are written on
the originator and kept by every placeholder, a restarted controller keeps them, members are kept in
a required domain wherever they start, and a gang that requires a domain and holds none is never
started spread out, whatever its style."""

from __future__ import annotations

from typing import Any

from tests.planning import (
    NOW,
    all_placeholders,
    driver,
    executor,
    names,
    unschedulable,
)
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.controller.lifecycle import plan_application
from yuniplace.controller.plan import Plan
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.state import AppState
from yuniplace.gang.topology import Domains, Pin, pinned
from yuniplace.runtime.events import Reason
from yuniplace.tools.status import describe, table

RACK = "topology.k8s.aws/network-node-layer-3"
BLOCK = "topology.k8s.aws/network-node-layer-2"
IN_RACK_7 = Domains((Pin(RACK, ("rack-7",), True),))
KEY = p.AppKey("default", "spark-1")


def plan_of(pods: list[dict[str, Any]], ticket: Any = None, now: float = NOW) -> Plan:
    return plan_application(Application.of(KEY, pods), now, ticket=ticket)


def asking(topology: str, **fields: Any) -> dict[str, Any]:
    """The originator, asking for `topology` for the whole gang."""
    return driver(annotations={keys.TOPOLOGY: topology, **fields.pop("annotations", {})}, **fields)


def reserved_in(domains: Domains, topology: str, *, started: float = NOW - 30) -> list[dict[str, Any]]:
    """Reserving since `started` in `domains`, as its record says."""
    origin = asking(
        topology,
        state=AppState.RESERVING,
        started=started,
        annotations={keys.TOPOLOGY_DOMAIN: domains.text()},
    )
    return [origin, executor(0), executor(1)]


def test_the_reservation_begins_in_the_domain_admission_chose_and_records_it() -> None:
    pods = [asking(f"required={RACK}"), executor(0), executor(1)]
    plan = plan_of(pods, Granted(domains=IN_RACK_7))
    assert plan.state == AppState.RESERVING and plan.placed_in == IN_RACK_7
    assert plan.annotate[keys.TOPOLOGY_DOMAIN] == IN_RACK_7.text()
    assert len(plan.create) == 3
    for placeholder in plan.create:
        assert placeholder["spec"]["affinity"] == pinned(None, IN_RACK_7.gang)
    created = next(e for e in plan.events if e.reason == Reason.CREATING_PLACEHOLDERS)
    assert created.note == f"creating 3 placeholder pods in {RACK}=rack-7"


def test_a_restarted_controller_creates_what_is_missing_in_the_recorded_domain() -> None:
    pods = reserved_in(IN_RACK_7, f"required={RACK}")
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING and keys.TOPOLOGY_DOMAIN not in plan.annotate
    assert [ph["spec"]["affinity"] for ph in plan.create] == [pinned(None, IN_RACK_7.gang)] * 3


def test_a_task_groups_own_domain_is_kept_by_its_placeholders_alone() -> None:
    groups = [
        {"name": "driver", "minMember": 1, "minResource": {"cpu": "1", "memory": "1Gi"}},
        {
            "name": "exec",
            "minMember": 2,
            "minResource": {"cpu": "1", "memory": "1Gi"},
            keys.TOPOLOGY: f"required={RACK}",
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]
                    }
                }
            },
        },
    ]
    chosen = Domains((), (("exec", (Pin(RACK, ("rack-2",), True),)),))
    plan = plan_of([driver(task_groups=groups), executor(0), executor(1)], Granted(domains=chosen))
    by_group = {ph["metadata"]["labels"][keys.PLACEHOLDER_GROUP]: ph["spec"].get("affinity") for ph in plan.create}
    assert by_group["driver"] is None
    assert by_group["exec"] == pinned(groups[1]["affinity"], chosen.of("exec"))


def test_swapped_members_are_kept_in_a_required_domain_and_free_under_a_preferred_one() -> None:
    placed = all_placeholders(bound=True)
    required = plan_of([*reserved_in(IN_RACK_7, f"required={RACK}"), *placed])
    assert required.state == AppState.RESERVED and len(required.swaps) == 3
    assert {p.name(s.member): required.pins[p.uid(s.member)] for s in required.swaps} == dict.fromkeys(
        ("driver", "exec-0", "exec-1"), IN_RACK_7.gang
    )
    preferred_rack = Domains((Pin(RACK, ("rack-7",), False),))
    preferred = plan_of([*reserved_in(preferred_rack, f"preferred={RACK}"), *placed])
    assert len(preferred.swaps) == 3 and preferred.pins == {}


def test_a_soft_timeout_releases_members_into_the_domain_they_require() -> None:
    pods = [*reserved_in(IN_RACK_7, f"required={RACK}", started=NOW - 900), *all_placeholders(bound=False)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert names(plan.ungate) == ["driver", "exec-0", "exec-1"]
    assert all(plan.pins[p.uid(member)] == IN_RACK_7.gang for member in plan.ungate)


def test_a_soft_timeout_releases_members_anywhere_when_the_domain_was_only_preferred() -> None:
    preferred_rack = Domains((Pin(RACK, ("rack-7",), False),))
    pods = [*reserved_in(preferred_rack, f"preferred={RACK}", started=NOW - 900), *all_placeholders(bound=False)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING and len(plan.ungate) == 3 and plan.pins == {}


def test_a_gang_that_requires_a_domain_and_holds_none_waits_again_rather_than_start_spread_out() -> None:
    queued = asking(
        f"required={RACK}",
        policy="placeholderTimeoutInSeconds=60",
        annotations={keys.QUEUED_SINCE: p.format_time(NOW - 60)},
    )
    plan = plan_of([queued, executor(0), executor(1)], Waiting("no rack holds it", announce=False, times_out=True))
    assert plan.state == AppState.PENDING and plan.ungate == [] and plan.fail == []
    assert plan.annotate[keys.ATTEMPTS] == "1" and plan.annotate[keys.QUEUED_SINCE] is None
    released = next(e for e in plan.events if e.reason == Reason.GANG_RESERVATION_RELEASED)
    assert "rather than schedule them spread out (Soft style)" in released.note


def test_a_gang_that_only_prefers_a_domain_falls_back_as_its_style_says() -> None:
    queued = asking(
        f"preferred={RACK}",
        policy="placeholderTimeoutInSeconds=60",
        annotations={keys.QUEUED_SINCE: p.format_time(NOW - 60)},
    )
    plan = plan_of([queued, executor(0), executor(1)], Waiting("waiting", announce=False, times_out=True))
    assert plan.state == AppState.RESUMING and len(plan.ungate) == 3


def test_hard_style_still_fails_a_gang_that_requires_a_domain_and_holds_none() -> None:
    queued = asking(
        f"required={RACK}",
        policy="placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard",
        annotations={keys.QUEUED_SINCE: p.format_time(NOW - 60)},
    )
    plan = plan_of([queued, executor(0), executor(1)], Waiting("no rack holds it", announce=False, times_out=True))
    assert plan.state == AppState.FAILED and len(plan.fail) == 3


def test_a_reservation_given_back_gives_its_domain_back_too() -> None:
    origin = asking(
        f"required={RACK}",
        state=AppState.RESERVING,
        started=NOW - 30,
        annotations={keys.TOPOLOGY_DOMAIN: IN_RACK_7.text(), keys.GANG_MODE: "Strict"},
    )
    stuck = all_placeholders(bound=False)
    unschedulable(stuck[0], "no room")
    plan = plan_of([origin, executor(0), executor(1), *stuck])
    assert plan.state == AppState.PENDING
    assert keys.TOPOLOGY_DOMAIN in plan.annotate and plan.annotate[keys.TOPOLOGY_DOMAIN] is None


def test_without_admission_the_topology_is_ignored_with_a_warning() -> None:
    plan = plan_of([asking(f"required={BLOCK}"), executor(0), executor(1)])
    assert plan.state == AppState.RESERVING and keys.TOPOLOGY_DOMAIN not in plan.annotate
    warnings = [e.note for e in plan.events if e.reason == Reason.TASK_GROUP_WARNING]
    assert warnings == ["its topology domains are ignored: admission, which chooses them, is off (--admission=off)"]


def test_status_shows_the_domains_a_reservation_holds() -> None:
    row = describe(Application.of(KEY, reserved_in(IN_RACK_7, f"required={RACK}")), NOW)
    assert row is not None and row["domain"] == f"{RACK}=rack-7"
    shown = table([row])
    assert "DOMAIN" in shown.splitlines()[0] and f"{RACK}=rack-7" in shown
    pending = describe(Application.of(KEY, [asking(f"required={RACK}"), executor(0)]), NOW)
    assert pending is not None and pending["domain"] is None


def test_a_gang_started_directly_records_its_domain_and_keeps_its_members_in_it() -> None:
    pods = [asking(f"required={RACK}"), executor(0), executor(1)]
    seats = Granted(seats=(("driver", ("r7-a",)), ("exec", ("r7-b", "r7-c"))), domains=IN_RACK_7)
    plan = plan_of(pods, seats)
    assert plan.state == AppState.RESERVED and not plan.create and plan.placed_in == IN_RACK_7
    assert plan.annotate[keys.TOPOLOGY_DOMAIN] == IN_RACK_7.text()
    assert all(swap.direct for swap in plan.swaps) and len(plan.swaps) == 3
    assert {p.name(s.member): plan.pins[p.uid(s.member)] for s in plan.swaps} == dict.fromkeys(
        ("driver", "exec-0", "exec-1"), IN_RACK_7.gang
    )
    started = next(e for e in plan.events if e.reason == Reason.GANG_STARTING)
    assert f"admission chose in {RACK}=rack-7, without placeholders" in started.note
