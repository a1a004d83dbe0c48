"""plan_application: the reconciler's pure decision function, driven with plain dicts and a fixed clock."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from tests import builders
from yuniplace.admission.tickets import Granted
from yuniplace.controller.lifecycle import IN_FLIGHT_RECHECK_S, RESYNC_S, make_plan, plan_application
from yuniplace.controller.lifecycle.table import TRANSITIONS, moves, reachable
from yuniplace.controller.plan import Plan, Settings, Surroundings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import coscheduling
from yuniplace.gang.keys import FIRST_ALLOCATED
from yuniplace.gang.placeholders import placeholder_name, placeholder_pod
from yuniplace.gang.podshape import member_group
from yuniplace.gang.state import TERMINAL, AppState
from yuniplace.gang.taskgroups import Limits, TaskGroup
from yuniplace.runtime.events import Reason

Pod = dict[str, Any]
NOW = 1_700_000_000.0
APP = "spark-1"


def ph_name(group: str, index: int) -> str:
    return placeholder_name(APP, group, index)


NS = "default"
KEY = p.AppKey(NS, APP)
ONE = {"cpu": "1", "memory": "1Gi"}
GROUPS = [
    {"name": "driver", "minMember": 1, "minResource": ONE},
    {"name": "exec", "minMember": 2, "minResource": ONE},
]
HARD = "gangSchedulingStyle=Hard"


# -- builders -------------------------------------------------------------------------------------


def make_pod(
    name: str,
    *,
    app: str | None = APP,
    uid: str | None = None,
    rv: str = "1",
    created: float = NOW - 60,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    task_groups: Any = None,
    group: str | None = None,
    policy: str | None = None,
    state: AppState | None = None,
    started: float | None = None,
    first_allocated: float | None = None,
    gated: bool = True,
    phase: str = "Pending",
    node: str | None = None,
    scheduled: float | None = None,
    nominated: str | None = None,
    swap_placeholder: str | None = None,
    requests: dict[str, str] | None = None,
    deleting: bool = False,
) -> Pod:
    """A pod as the store holds it."""
    notes = {**builders.gang_annotations(group=group, task_groups=task_groups, policy=policy), **(annotations or {})}
    if state is not None:
        notes[keys.STATE] = state.value
    if started is not None:
        notes[keys.RESERVATION_STARTED] = p.format_time(started)
    if first_allocated is not None:
        notes[FIRST_ALLOCATED] = p.format_time(first_allocated)
    if swap_placeholder is not None:
        notes[keys.SWAP_PLACEHOLDER] = swap_placeholder
    made = builders.pod(
        name,
        namespace=NS,
        uid=uid or f"uid-{name}",
        rv=rv,
        created=p.format_time(created),
        labels={**(labels or {}), **({keys.APP_ID: app} if app is not None else {})},
        annotations=notes,
        container="main",
        requests=requests if requests is not None else ONE,
        gates=[keys.GATE] if gated else [],
        node=node,
        phase=phase,
    )
    if deleting:
        made["metadata"]["deletionTimestamp"] = p.format_time(NOW)
    if scheduled is not None:
        made["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": p.format_time(scheduled)}
        ]
    if nominated is not None:
        made["status"]["nominatedNodeName"] = nominated
    return made


def driver(**overrides: Any) -> Pod:
    fields: dict[str, Any] = {"task_groups": GROUPS, "group": "driver", "created": NOW - 120}
    fields.update(overrides)
    return make_pod("driver", **fields)


def executor(index: int, **overrides: Any) -> Pod:
    fields: dict[str, Any] = {"group": "exec", "created": NOW - 100 + index}
    fields.update(overrides)
    return make_pod(f"exec-{index}", **fields)


def placeholder(
    group: str,
    index: int,
    *,
    node: str | None = None,
    scheduled: float | None = None,
    min_member: int = 2,
    deleting: bool = False,
    phase: str | None = None,
    created: float = NOW - 50,
    owner: Pod | None = None,
) -> Pod:
    """A placeholder as the cluster shows it after our create, optionally bound to `node`."""
    source = owner or driver()
    manifest = placeholder_pod(app_id=APP, group=TaskGroup(group, min_member, ONE), index=index, originator=source)
    return materialize(manifest, created=created, node=node, scheduled=scheduled, deleting=deleting, phase=phase)


def materialize(
    manifest: Pod,
    *,
    created: float,
    node: str | None = None,
    scheduled: float | None = None,
    deleting: bool = False,
    phase: str | None = None,
) -> Pod:
    pod = copy.deepcopy(manifest)
    meta = pod["metadata"]
    meta["uid"] = f"uid-{meta['name']}"
    meta["resourceVersion"] = "1"
    meta["creationTimestamp"] = p.format_time(created)
    if deleting:
        meta["deletionTimestamp"] = p.format_time(NOW)
    pod["status"] = {"phase": phase or ("Running" if node else "Pending")}
    if node is not None:
        bind(pod, node, scheduled if scheduled is not None else created + 1)
    return pod


def bind(pod: Pod, node: str, at: float) -> None:
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": p.format_time(at)}]


def all_placeholders(*, bound: bool, scheduled: float = NOW - 30) -> list[Pod]:
    """driver-0 on n0, exec-0 on n1, exec-1 on n2 (when bound)."""
    nodes = iter(["n0", "n1", "n2"])
    return [
        placeholder(
            group,
            index,
            node=next(nodes) if bound else None,
            scheduled=scheduled if bound else None,
            min_member=1 if group == "driver" else 2,
        )
        for group, index in (("driver", 0), ("exec", 0), ("exec", 1))
    ]


def plan_of(pods: list[Pod], now: float = NOW, settings: Settings = Settings()) -> Plan:
    plan = plan_application(Application.of(KEY, pods, limits=settings.limits), now, settings)
    assert_consistent(plan)
    return plan


def names(pods: list[Pod]) -> list[str]:
    return [p.name(pod) for pod in pods]


def reasons(plan: Plan) -> list[str]:
    return [event.reason for event in plan.events]


def assert_consistent(plan: Plan) -> None:
    """Whatever the case: every pod gets at most one fate, and every proposed state is allowed."""
    fates = Counter(
        [p.uid(m) for m in plan.ungate] + [p.uid(f.pod) for f in plan.fail] + [p.uid(s.member) for s in plan.swaps]
    )
    assert all(count == 1 for count in fates.values()), fates
    deleted = [p.uid(ph) for ph in plan.delete] + [
        p.uid(s.placeholder) for s in plan.swaps if s.placeholder is not None
    ]
    assert len(deleted) == len(set(deleted)), deleted
    assert len(names(plan.create)) == len(set(names(plan.create)))
    if plan.state in TERMINAL:
        assert plan.create == [] and plan.swaps == []


# -- a tiny cluster, to run plans one after another -------------------------------------------------


def apply(pods: list[Pod], plan: Plan, now: float) -> list[Pod]:
    """The cluster after `plan` is carried out (what Executor.apply does, without the API)."""
    result = {p.uid(pod): copy.deepcopy(pod) for pod in pods}
    if plan.annotate and plan.originator is not None:
        notes = result[p.uid(plan.originator)]["metadata"]["annotations"]
        for key, value in plan.annotate.items():  # a merge patch: None removes
            if value is None:
                notes.pop(key, None)
            else:
                notes[key] = value
    for pod in plan.mark_timed_out:
        assert plan.timed_out_mark is not None
        result[p.uid(pod)]["metadata"]["annotations"][plan.timed_out_mark] = "true"
    for manifest in plan.create:
        created = materialize(manifest, created=now)
        result[p.uid(created)] = created
    gone = [p.uid(ph) for ph in plan.delete] + [p.uid(s.placeholder) for s in plan.swaps if s.placeholder is not None]
    for uid in gone:
        result.pop(uid, None)
    for swap in plan.swaps:
        member = result[p.uid(swap.member)]
        member["status"]["nominatedNodeName"] = swap.node
        if swap.marker is not None:  # the placeholder it replaces, or its seat
            key, value = swap.marker
            member["metadata"]["annotations"][key] = value
        member["spec"]["schedulingGates"] = []
    for pod in plan.ungate:
        result[p.uid(pod)]["spec"]["schedulingGates"] = []
    for failure in plan.fail:
        result[p.uid(failure.pod)]["status"].update(phase="Failed", reason=failure.reason)
    return list(result.values())


def schedule(pods: list[Pod], now: float, *, placeholders: bool = True) -> list[Pod]:
    """kube-scheduler: binds every ungated pending pod (members to their nominated node)."""
    result = copy.deepcopy(pods)
    for index, pod in enumerate(result):
        if p.is_gated(pod) or p.node_name(pod) or p.is_terminal(pod):
            continue
        if p.is_placeholder(pod) and not placeholders:
            continue
        bind(pod, p.nominated_node(pod) or f"node-{index}", now)
    return result


# -- reservation ----------------------------------------------------------------------------------


def test_pending_originator_starts_the_reservation() -> None:
    pods = [driver(), executor(0), executor(1)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING
    assert plan.originator is pods[0]
    assert plan.annotate == {keys.STATE: "Reserving", keys.RESERVATION_STARTED: p.format_time(NOW)}
    assert names(plan.create) == [ph_name("driver", 0), ph_name("exec", 0), ph_name("exec", 1)]
    assert plan.create == [
        placeholder_pod(app_id=APP, group=TaskGroup("driver", 1, ONE), index=0, originator=pods[0]),
        placeholder_pod(app_id=APP, group=TaskGroup("exec", 2, ONE), index=0, originator=pods[0]),
        placeholder_pod(app_id=APP, group=TaskGroup("exec", 2, ONE), index=1, originator=pods[0]),
    ]
    assert reasons(plan) == ["TaskGroupMatch", "CreatingPlaceholders"]
    assert all(event.pod is pods[0] and not event.warning for event in plan.events)
    assert (
        plan.events[0].note
        == f"application {APP}: gang of 3 (driver×1, exec×2), timeout 900s, Soft style, NonStrict mode"
    )
    assert plan.events[1].note == "creating 3 placeholder pods"
    assert (plan.delete, plan.swaps, plan.ungate, plan.fail) == ([], [], [], [])
    assert plan.requeue_after_s == RESYNC_S
    assert not plan.forget


def test_number_of_placeholders_is_the_sum_of_min_members() -> None:
    groups = [{"name": f"g{i}", "minMember": i + 1, "minResource": {"cpu": "100m"}} for i in range(4)]
    plan = plan_of([driver(task_groups=groups, group="g0")])
    assert len(plan.create) == 1 + 2 + 3 + 4
    assert names(plan.create)[:3] == [ph_name("g0", 0), ph_name("g1", 0), ph_name("g1", 1)]


def test_unknown_keys_are_announced_as_warnings() -> None:
    plan = plan_of([driver(task_groups=[{**GROUPS[0], "color": "red"}, GROUPS[1]])])
    assert reasons(plan) == ["TaskGroupMatch", "CreatingPlaceholders", "TaskGroupWarning"]
    assert (
        plan.events[2].note == "task-groups[0].color is not a task-group field and is ignored"
        and plan.events[2].warning
    )


def test_an_ungated_originator_still_drives_the_reservation() -> None:
    plan = plan_of([driver(gated=False, group=None), executor(0), executor(1)])
    assert plan.state == AppState.RESERVING and len(plan.create) == 3
    assert plan.ungate == []


def test_planning_again_creates_nothing_twice() -> None:
    pods = [driver(), executor(0), executor(1)]
    first = plan_of(pods)
    pods = apply(pods, first, NOW)
    second = plan_of(pods, NOW + 1)
    assert second.state == AppState.RESERVING
    assert second.create == []
    assert second.annotate == {}
    assert second.events == []
    assert (second.delete, second.swaps, second.ungate) == ([], [], [])
    assert second.requeue_after_s == 899  # until reservation-started + timeout


def test_only_missing_placeholders_are_created() -> None:
    pods = [driver(state=AppState.RESERVING, started=NOW - 10), placeholder("exec", 1)]
    plan = plan_of(pods)
    assert names(plan.create) == [ph_name("driver", 0), ph_name("exec", 0)]


def test_a_failed_placeholder_is_deleted_and_then_recreated() -> None:
    failed = placeholder("exec", 0, phase="Failed")
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 10),
        placeholder("driver", 0, min_member=1),
        failed,
        placeholder("exec", 1),
    ]
    plan = plan_of(pods)
    assert plan.delete == [failed] and plan.create == []
    pods = apply(pods, plan, NOW)
    assert names(plan_of(pods).create) == [ph_name("exec", 0)]


def test_a_placeholder_being_deleted_is_neither_recreated_nor_counted() -> None:
    pods = [driver(state=AppState.RESERVING, started=NOW - 10), *all_placeholders(bound=True)]
    pods[-1]["metadata"]["deletionTimestamp"] = p.format_time(NOW)
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING
    assert plan.create == [] and plan.delete == []


def test_reservation_started_is_written_when_missing() -> None:
    plan = plan_of([driver(state=AppState.RESERVING)])
    assert plan.annotate == {keys.RESERVATION_STARTED: p.format_time(NOW)}
    assert reasons(plan)[:2] == ["TaskGroupMatch", "CreatingPlaceholders"]


def test_partial_placement_keeps_waiting_until_the_first_placement_times_out() -> None:
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 100),
        executor(0),
        executor(1),
        *all_placeholders(bound=False),
    ]
    bind(pods[3], "n0", NOW - 40)
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING
    assert plan.swaps == [] and plan.ungate == [] and plan.create == []
    assert plan.requeue_after_s == 900 - 40  # counted from the first placement, not the reservation's start


def test_the_first_placement_is_recorded_while_the_reservation_is_partial() -> None:
    pods = [driver(state=AppState.RESERVING, started=NOW - 100), executor(0), *all_placeholders(bound=False)]
    bind(pods[2], "n0", NOW - 40)
    assert plan_of(pods).annotate == {FIRST_ALLOCATED: p.format_time(NOW - 40)}


def test_placeholders_made_again_do_not_move_the_timeout_later() -> None:
    """Placeholders deleted and made again, or a reservation given back to a reclaim and begun again,
    keep the clock of the first placement recorded: a new placement does not give the gang more time."""
    pods = [
        driver(state=AppState.RESERVING, started=NOW - 1000, first_allocated=NOW - 901),
        executor(0),
        *all_placeholders(bound=False),
    ]
    bind(pods[2], "n0", NOW - 5)
    plan = plan_of(pods)
    assert "PlaceholderTimeOut" in reasons(plan)
    assert FIRST_ALLOCATED not in plan.annotate


def test_all_placeholders_placed_means_reserved_and_members_swap_in() -> None:
    members = [driver(state=AppState.RESERVING, started=NOW - 100), executor(0), executor(1), executor(2)]
    phs = all_placeholders(bound=True, scheduled=NOW - 30)
    bind(phs[2], "n2", NOW - 20)
    plan = plan_of([*members, *phs])
    assert plan.state == AppState.RESERVED
    assert plan.annotate == {keys.STATE: "Reserved", FIRST_ALLOCATED: p.format_time(NOW - 30)}
    assert reasons(plan) == ["PlaceholderAllocated", "PlaceholderAllocated", "GangReservationComplete"]
    assert [e.note for e in plan.events] == [
        "task group driver: 1/1 placeholders placed on 1 node(s)",
        "task group exec: 2/2 placeholders placed on 2 node(s)",
        "all 3 placeholders are placed; swapping the real pods in",
    ]
    assert all(e.pod is members[0] and not e.warning for e in plan.events)
    swaps = [(p.name(s.member), p.name(s.placeholder) if s.placeholder else None, s.node, s.group) for s in plan.swaps]
    assert swaps == [
        ("driver", ph_name("driver", 0), "n0", "driver"),
        ("exec-0", ph_name("exec", 0), "n1", "exec"),
        ("exec-1", ph_name("exec", 1), "n2", "exec"),
    ]
    for swap in plan.swaps:
        assert swap.placeholder is not None
        assert p.task_group_name(swap.placeholder) == p.task_group_name(swap.member) == swap.group
        assert p.node_name(swap.placeholder) == swap.node
    # A member beyond the reserved count runs normally.
    assert names(plan.ungate) == ["exec-2"]
    assert plan.delete == [] and plan.create == []


def test_placeholders_found_placed_while_pending_go_straight_to_reserved() -> None:
    plan = plan_of([driver(), executor(0), executor(1), *all_placeholders(bound=True)])
    assert plan.state == AppState.RESERVED
    assert plan.annotate[keys.STATE] == "Reserved"
    assert plan.annotate[keys.RESERVATION_STARTED] == p.format_time(NOW)
    assert reasons(plan) == [
        "TaskGroupMatch",
        "CreatingPlaceholders",
        "PlaceholderAllocated",
        "PlaceholderAllocated",
        "GangReservationComplete",
    ]
    assert len(plan.swaps) == 3


def test_members_arriving_after_the_reservation_swap_into_what_is_left() -> None:
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False, group=None),
        executor(0),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVED
    assert [(p.name(s.member), s.node) for s in plan.swaps] == [("exec-0", "n1")]
    # The unused ones are kept until the timeout, counted from the first allocation.
    assert plan.delete == []
    assert plan.requeue_after_s == 870


def test_unused_placeholders_are_released_after_the_timeout() -> None:
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 2000, first_allocated=NOW - 901, gated=False, group=None),
        executor(0),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert [(p.name(s.member), s.node) for s in plan.swaps] == [("exec-0", "n1")]
    assert names(plan.delete) == [ph_name("driver", 0), ph_name("exec", 1)]
    assert reasons(plan) == ["PlaceholderTimeOut"]
    assert plan.events[0].note == "releasing 2 unused placeholders after 900s"


def test_running_originator_moves_reserved_to_running() -> None:
    pods = [
        driver(
            state=AppState.RESERVED,
            started=NOW - 100,
            first_allocated=NOW - 30,
            gated=False,
            node="n0",
            phase="Running",
        ),
        executor(0),
        executor(1),
        *all_placeholders(bound=True)[1:],
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.RUNNING
    assert plan.annotate == {keys.STATE: "Running"}
    assert [p.name(s.member) for s in plan.swaps] == ["exec-0", "exec-1"]


def test_a_member_larger_than_its_group_before_the_gang_starts_is_reserved_its_size() -> None:
    """Its task group's placeholders are too small for it: none of the gang starts, they are given back,
    and made again as large as the member (so it never starts alone, into normal scheduling)."""
    big = executor(0, requests={"cpu": "1500m", "memory": "2Gi"})
    pods = [driver(state=AppState.RESERVING, started=NOW - 100), big, executor(1), *all_placeholders(bound=True)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING and plan.swaps == [] and plan.ungate == []
    assert names(plan.delete) == [ph_name("exec", 0), ph_name("exec", 1)]
    assert [e.note for e in plan.events if e.reason == "TaskGroupWarning"] == [
        "task group exec: its members request more than its placeholders hold (cpu 1500m > 1, memory 2Gi > 1Gi, "
        "init containers and overhead included): making them again that large before any member starts"
    ]
    (group,) = [g for g in Application.of(KEY, pods).spec.groups if g.name == "exec"]  # type: ignore[union-attr]
    assert dict(group.min_resource) == {"cpu": "1500m", "memory": "2Gi"}
    gone = apply(pods, plan, NOW)
    again = plan_of(gone)
    assert [ph["spec"]["containers"][0]["resources"]["requests"] for ph in again.create] == [
        {"cpu": "1500m", "memory": "2Gi"},
        {"cpu": "1500m", "memory": "2Gi"},
    ]
    started = plan_of(schedule(apply(gone, again, NOW), NOW))
    assert sorted(p.name(s.member) for s in started.swaps) == ["driver", "exec-0", "exec-1"]
    assert "TaskGroupResourceMismatch" not in reasons(started)


def test_a_gang_starting_with_a_member_larger_than_its_group_is_warned_of() -> None:
    pods = [driver(), executor(0, requests={"cpu": "1500m", "memory": "1Gi"}), executor(1)]
    plan = plan_of(pods)
    warned = [e.note for e in plan.events if e.reason == "TaskGroupWarning"]
    assert warned == [
        "task group exec: its members request more than its minResource (cpu 1500m > 1, init containers and "
        "overhead included; pod exec-0 among them): each of its members is reserved that much"
    ]
    assert {ph["spec"]["containers"][0]["resources"]["requests"]["cpu"] for ph in plan.create} == {"1", "1500m"}


def test_a_member_larger_than_its_placeholders_after_the_gang_started_releases_one_and_runs_normally() -> None:
    """YuniKorn's rule for a late member (the gang runs already): it does not fit its placeholder."""
    big = executor(0, requests={"cpu": "1500m", "memory": "2Gi"})
    running = driver(state=AppState.RUNNING, started=NOW - 100, first_allocated=NOW - 30, gated=False, node="n9")
    pods = [running, big, executor(1), *all_placeholders(bound=True)[1:]]
    plan = plan_of(pods)
    mismatch = [e for e in plan.events if e.reason == "TaskGroupResourceMismatch"]
    assert len(mismatch) == 1 and mismatch[0].pod is big and mismatch[0].warning
    assert mismatch[0].note == (
        "requests more than task group exec's minResource (cpu 1500m > 1, memory 2Gi > 1Gi); "
        "releasing one of its placeholders and scheduling this pod normally"
    )
    assert plan.ungate == [big]
    assert names(plan.delete) == [ph_name("exec", 1)]
    assert [(p.name(s.member), p.name(s.placeholder) if s.placeholder else None) for s in plan.swaps] == [
        ("exec-1", ph_name("exec", 0)),
    ]


def test_a_resource_missing_from_min_resource_is_a_mismatch() -> None:
    gpu = executor(0, requests={"cpu": "1", "nvidia.com/gpu": "1"})
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False, node="n9"),
        gpu,
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert plan.ungate == [gpu]
    assert "nvidia.com/gpu 1 > 0" in plan.events[0].note


def test_member_with_smaller_request_swaps() -> None:
    small = executor(0, requests={"cpu": "100m"})
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        small,
        *all_placeholders(bound=True),
    ]
    assert [p.name(s.member) for s in plan_of(pods).swaps] == ["exec-0"]


def test_interrupted_swap_resumes_with_its_placeholder() -> None:
    phs = all_placeholders(bound=True)
    resumed = executor(0, nominated="n2", swap_placeholder=ph_name("exec", 1))
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        resumed,
        executor(1),
        *phs,
    ]
    plan = plan_of(pods)
    assert [(p.name(s.member), p.name(s.placeholder) if s.placeholder else None, s.node) for s in plan.swaps] == [
        ("exec-0", ph_name("exec", 1), "n2"),
        ("exec-1", ph_name("exec", 0), "n1"),
    ]


def test_interrupted_swap_whose_placeholder_is_gone_resumes_without_one() -> None:
    phs = [ph for ph in all_placeholders(bound=True) if p.name(ph) != ph_name("exec", 1)]
    resumed = executor(0, nominated="n2", swap_placeholder=ph_name("exec", 1))
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        resumed,
        executor(1),
        *phs,
    ]
    plan = plan_of(pods)
    assert [(p.name(s.member), s.placeholder, s.node) for s in plan.swaps][0] == ("exec-0", None, "n2")
    assert [(p.name(s.member), s.node) for s in plan.swaps] == [("exec-0", "n2"), ("exec-1", "n1")]


def test_interrupted_swap_whose_placeholder_is_being_deleted_resumes_without_one() -> None:
    phs = all_placeholders(bound=True)
    phs[2]["metadata"]["deletionTimestamp"] = p.format_time(NOW)
    resumed = executor(0, nominated="n2", swap_placeholder=ph_name("exec", 1))
    pods = [driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False), resumed, *phs]
    plan = plan_of(pods)
    assert [(p.name(s.member), s.placeholder, s.node) for s in plan.swaps] == [("exec-0", None, "n2")]


def test_no_new_swap_onto_a_node_with_a_member_in_flight() -> None:
    in_flight = executor(0, gated=False, nominated="n1", swap_placeholder=ph_name("exec", 0))
    phs = [placeholder("exec", 1, node="n1", scheduled=NOW - 30)]
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        in_flight,
        executor(1),
        *phs,
    ]
    plan = plan_of(pods)
    assert plan.swaps == [] and plan.ungate == [] and plan.delete == []
    assert plan.requeue_after_s == IN_FLIGHT_RECHECK_S
    # Once the first member is bound the node takes the next swap.
    bind(pods[1], "n1", NOW)
    assert [(p.name(s.member), s.node) for s in plan_of(pods).swaps] == [("exec-1", "n1")]


def test_a_swap_held_back_by_another_applications_member_names_the_node_it_waits_for() -> None:
    """The other member's binding is not this application's event: the controller wakes it through
    the node named here, rather than after the recheck."""
    pods = [
        driver(state=AppState.RESERVED, started=NOW - 100, first_allocated=NOW - 30, gated=False, node="n0"),
        executor(0),
        placeholder("exec", 0, node="n1", scheduled=NOW - 30),
    ]
    held = plan_application(Application.of(KEY, pods), NOW, nodes_in_flight=frozenset({"n1"}))
    assert held.swaps == [] and held.waits_for_nodes == {"n1"}
    assert held.requeue_after_s == IN_FLIGHT_RECHECK_S
    free = plan_application(Application.of(KEY, pods), NOW)
    assert [(p.name(s.member), s.node) for s in free.swaps] == [("exec-0", "n1")] and not free.waits_for_nodes


# -- timeouts -------------------------------------------------------------------------------------


def reserving_nothing_placed(started: float, policy: str | None = None) -> list[Pod]:
    return [
        driver(state=AppState.RESERVING, started=started, policy=policy),
        executor(0),
        executor(1),
        *all_placeholders(bound=False),
    ]


def test_just_before_the_timeout_keeps_waiting() -> None:
    plan = plan_of(reserving_nothing_placed(NOW - 899))
    assert plan.state == AppState.RESERVING
    assert plan.requeue_after_s == 1
    assert plan.delete == [] and plan.ungate == [] and plan.events == []


def test_soft_timeout_resumes_normal_scheduling() -> None:
    pods = reserving_nothing_placed(NOW - 900)
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert plan.annotate == {keys.STATE: "Resuming"}
    assert names(plan.delete) == [ph_name("driver", 0), ph_name("exec", 0), ph_name("exec", 1)]
    assert names(plan.ungate) == ["driver", "exec-0", "exec-1"]
    assert plan.fail == [] and plan.swaps == [] and plan.create == []
    assert reasons(plan) == ["PlaceholderTimeOut", "GangSchedulingFailed"]
    assert all(e.warning and e.pod is pods[0] for e in plan.events)
    assert plan.events[0].note == "gang reservation timed out: 0/3 placeholders placed after 900s"
    assert plan.events[1].note == (
        "gang reservation timed out (0/3 placeholders placed after 900s); Soft style: placeholders removed, pods scheduled normally"
    )


def test_custom_timeout_is_honoured() -> None:
    assert plan_of(reserving_nothing_placed(NOW - 59, "placeholderTimeoutInSeconds=60")).state == AppState.RESERVING
    assert plan_of(reserving_nothing_placed(NOW - 60, "placeholderTimeoutInSeconds=60")).state == AppState.RESUMING


def test_hard_timeout_fails_the_members() -> None:
    pods = reserving_nothing_placed(NOW - 901, f"{HARD} placeholderTimeoutInSeconds=900")
    bind(pods[3], "n0", NOW - 950)  # the timeout counts from this first placement: it ended at NOW - 50
    plan = plan_of(pods)
    assert plan.state == AppState.FAILED
    assert plan.annotate == {keys.STATE: "Failed"}
    assert names(plan.delete) == [ph_name("driver", 0), ph_name("exec", 0), ph_name("exec", 1)]
    assert plan.ungate == []
    message = "gang reservation timed out (1/3 placeholders placed after 900s); Hard style fails the application"
    assert [(p.name(f.pod), f.reason, f.message) for f in plan.fail] == [
        (name, "ResourceReservationTimeout", message) for name in ("driver", "exec-0", "exec-1")
    ]
    assert reasons(plan) == ["PlaceholderTimeOut", "ApplicationFailed"]
    assert plan.requeue_after_s is None


def test_failed_application_stays_failed_and_fails_late_members() -> None:
    pods = [driver(state=AppState.FAILED, policy=HARD, phase="Failed"), executor(5)]
    plan = plan_of(pods)
    assert plan.state == AppState.FAILED and plan.annotate == {}
    assert [(p.name(f.pod), f.reason) for f in plan.fail] == [("exec-5", "ApplicationFailed")]
    assert plan.requeue_after_s is None


def test_resuming_releases_everything_left() -> None:
    pods = [
        driver(state=AppState.RESUMING, gated=False, node="n0", phase="Running"),
        executor(0),
        placeholder("exec", 0, node="n1"),
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert names(plan.ungate) == ["exec-0"]
    assert names(plan.delete) == [ph_name("exec", 0)]


# -- invalid input --------------------------------------------------------------------------------


def test_invalid_task_groups_soft_schedule_normally() -> None:
    pods = [driver(task_groups="not json"), executor(0), executor(1)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert plan.annotate == {keys.STATE: "Resuming"}
    assert plan.create == []
    assert names(plan.ungate) == ["driver", "exec-0", "exec-1"]
    assert reasons(plan) == ["TaskGroupsError"]
    event = plan.events[0]
    assert event.pod is pods[0] and event.warning
    assert event.note == (
        'invalid gang annotations: yunikorn.apache.org/task-groups: "not json" is not valid JSON '
        "(Expecting value: line 1 column 1 (char 0)); scheduling its pods normally (Soft style)"
    )


def test_invalid_task_groups_hard_fail_the_application() -> None:
    bad = [{"name": "Driver", "minMember": 0, "minResource": ONE}]
    pods = [driver(task_groups=bad, policy=HARD), executor(0)]
    plan = plan_of(pods)
    assert plan.state == AppState.FAILED
    assert plan.create == [] and plan.ungate == []
    detail = "task-groups[0].name: \"Driver\" must be a DNS-1123 label (lower-case letters, digits, '-'; at most 63); task-groups[Driver].minMember: 0 must be an integer from 1 to 1000"
    assert [(p.name(f.pod), f.reason, f.message) for f in plan.fail] == [
        (name, "TaskGroupsError", f"invalid gang annotations: {detail}") for name in ("driver", "exec-0")
    ]
    assert plan.events[0].note == f"invalid gang annotations: {detail}; failing the application (Hard style)"


def test_invalid_policy_keeps_a_hard_request_hard() -> None:
    plan = plan_of([driver(policy=f"{HARD} placeholderTimeoutInSeconds=0"), executor(0)])
    assert plan.state == AppState.FAILED
    assert "placeholderTimeoutInSeconds" in plan.events[0].note


def test_invalid_task_groups_while_reserving_remove_the_placeholders() -> None:
    pods = [
        driver(task_groups="[]", state=AppState.RESERVING, started=NOW - 10),
        executor(0),
        *all_placeholders(bound=False),
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.RESUMING
    assert len(plan.delete) == 3


def test_member_naming_an_unknown_group_soft() -> None:
    stray = executor(7, group="executors")
    pods = [driver(), executor(0), stray]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING
    errors = [e for e in plan.events if e.reason == "TaskGroupsError"]
    assert len(errors) == 1 and errors[0].pod is stray and errors[0].warning
    assert errors[0].note == (
        'yunikorn.apache.org/task-group-name: "executors" is not a task group of this application (groups: driver, exec); '
        "scheduling it normally"
    )
    assert plan.ungate == [stray]


def test_member_naming_an_unknown_group_hard() -> None:
    stray = executor(7, group="executors")
    plan = plan_of([driver(policy=HARD), stray])
    assert [(f.pod, f.reason) for f in plan.fail] == [(stray, "TaskGroupsError")]
    assert (
        plan.fail[0].message
        == 'yunikorn.apache.org/task-group-name: "executors" is not a task group of this application (groups: driver, exec)'
    )
    assert plan.ungate == []


def test_member_naming_no_group_waits_for_its_gang_then_runs_normally() -> None:
    """As in YuniKorn: every pod of the application is held until its placeholders are all placed."""
    loner = make_pod("loner")
    plan = plan_of([driver(), loner])
    assert plan.ungate == []
    assert [e.reason for e in plan.events] == ["TaskGroupMatch", "CreatingPlaceholders"]
    reserving = [driver(state=AppState.RESERVING, started=NOW - 10), loner, *all_placeholders(bound=False)]
    assert plan_of(reserving).ungate == []
    reserved = [driver(state=AppState.RESERVING, started=NOW - 10), loner, *all_placeholders(bound=True)]
    plan = plan_of(reserved)
    assert plan.state == AppState.RESERVED and loner in plan.ungate and not any(s.member is loner for s in plan.swaps)


# -- completion -----------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
@pytest.mark.parametrize(
    "state", [AppState.PENDING, AppState.RESERVING, AppState.RESERVED, AppState.RUNNING, AppState.RESUMING]
)
def test_finished_originator_completes_and_removes_every_placeholder(phase: str, state: AppState) -> None:
    pods = [
        driver(state=state, phase=phase, gated=False, started=NOW - 10),
        executor(0),
        *all_placeholders(bound=True),
        placeholder("exec", 5, deleting=True),
    ]
    plan = plan_of(pods)
    assert plan.state == AppState.COMPLETED
    assert plan.annotate == ({keys.STATE: "Completed"})
    assert names(plan.delete) == [ph_name("driver", 0), ph_name("exec", 0), ph_name("exec", 1)]
    assert names(plan.ungate) == ["exec-0"]
    assert plan.create == [] and plan.fail == [] and plan.swaps == []
    assert plan.requeue_after_s is None


def test_completed_stays_completed() -> None:
    plan = plan_of([driver(state=AppState.COMPLETED, phase="Succeeded", gated=False)])
    assert plan.state == AppState.COMPLETED and plan.annotate == {} and plan.requeue_after_s is None


def test_a_deleting_originator_is_no_originator() -> None:
    pods = [driver(deleting=True), executor(0)]
    plan = plan_of(pods)
    assert plan.originator is None
    assert plan.state == AppState.PENDING


def worker(name: str, **overrides: Any) -> Pod:
    """A pod of a Job gang: every pod carries the task groups, so any may be the originator."""
    fields: dict[str, Any] = {"task_groups": GROUPS, "group": "exec"}
    return make_pod(name, **fields | overrides)


def test_a_started_gang_whose_originator_went_runs_on_without_reserving_again() -> None:
    """The pod with the record is gone (its Job deleted, say); the next pod with the task groups has no
    record of its own. Its gang started: no second reservation beside the members in their seats, and a
    member still held (the Job's replacement of a pod that went) starts as a late member."""
    gone = worker("w-0", state=AppState.RUNNING, started=NOW - 60, gated=False, node="n0", deleting=True)
    running = worker("w-1", gated=False, phase="Running", node="n1", created=NOW - 59)
    replacement = worker("w-2", created=NOW - 5)
    plan = plan_of([gone, running, replacement])
    assert plan.originator is not None and p.name(plan.originator) == "w-1"
    assert plan.state == AppState.RUNNING and plan.annotate == {keys.STATE: "Running"}
    assert plan.create == [] and "TaskGroupMatch" not in reasons(plan)
    assert names(plan.ungate) == ["w-2"]


def test_a_gang_evicted_whole_whose_job_makes_its_pods_again_is_a_new_attempt() -> None:
    """A reclaim evicted the running gang whole; its Job makes the pods again while the old ones still
    terminate on their nodes. The new pods are a new attempt, held for admission, not late members of a
    gang that runs."""
    evicted = [
        worker(f"w-{i}", gated=False, node=f"n{i}", phase="Running", deleting=True, created=NOW - 60) for i in range(2)
    ]
    evicted[0]["metadata"]["annotations"][keys.STATE] = AppState.RUNNING.value
    again = [worker(f"w-{i}", created=NOW - 2) for i in range(2, 4)]
    plan = plan_of([*evicted, *again])
    assert p.name(plan.originator or {}) == "w-2"
    assert plan.ungate == [] and plan.swaps == []


def test_a_fallen_back_gang_whose_originator_went_stays_fallen_back() -> None:
    """Its Job deleted, its pods go one by one: the next has no record, its fellows were released without
    starting (no room: they fell back). No second reservation, no second timeout."""
    gone = worker("w-0", state=AppState.RESUMING, started=NOW - 200, gated=False, deleting=True)
    released = worker("w-1", gated=False, created=NOW - 199)
    held = worker("w-2", created=NOW - 5)
    plan = plan_of([gone, released, held])
    assert p.name(plan.originator or {}) == "w-1"
    assert plan.state == AppState.RESUMING and plan.create == [] and reasons(plan) == []
    assert names(plan.ungate) == ["w-2"]


def test_a_failed_gang_whose_originator_went_fails_its_new_pods_too() -> None:
    gone = worker("w-0", state=AppState.FAILED, started=NOW - 200, gated=False, phase="Failed", deleting=True)
    failed = worker("w-1", gated=False, phase="Failed", created=NOW - 199)
    failed["status"]["reason"] = "ResourceReservationTimeout"
    replacement = worker("w-2", created=NOW - 5)
    plan = plan_of([gone, failed, replacement])
    assert p.name(plan.originator or {}) == "w-2"  # the oldest pod with the task groups that has not ended
    assert plan.state == AppState.FAILED and plan.create == []
    assert [(p.name(f.pod), f.reason) for f in plan.fail] == [("w-2", "ApplicationFailed")]


def test_a_gang_whose_pods_all_came_back_is_reserved_again() -> None:
    """A Job whose every pod was evicted comes back with new pods, none started: a reservation anew."""
    pods = [worker(f"w-{i}", created=NOW - 5) for i in range(2)] + [driver(created=NOW - 4)]
    plan = plan_of(pods)
    assert plan.state == AppState.RESERVING and len(plan.create) == 3
    assert "TaskGroupMatch" in reasons(plan)


# -- no originator --------------------------------------------------------------------------------


def test_members_without_originator_wait_for_the_default_timeout() -> None:
    pods = [executor(0, created=NOW - 100), executor(1, created=NOW - 10)]
    plan = plan_of(pods)
    assert plan.originator is None
    assert plan.state == AppState.PENDING
    assert plan.ungate == [] and plan.events == [] and plan.create == []
    assert plan.requeue_after_s == 800  # from the oldest gated member
    assert not plan.forget


def test_members_without_originator_are_ungated_after_the_default_timeout() -> None:
    pods = [executor(0, created=NOW - 900), executor(1, created=NOW - 10)]
    plan = plan_of(pods)
    assert names(plan.ungate) == ["exec-0", "exec-1"]
    assert reasons(plan) == ["GangSchedulingFailed", "GangSchedulingFailed"]
    assert plan.events[0].note == (
        f"no pod of application {APP} defines yunikorn.apache.org/task-groups after 900s; scheduling this pod normally"
    )
    assert [e.pod for e in plan.events] == plan.ungate
    assert plan.state == AppState.PENDING


def test_default_timeout_without_originator_comes_from_settings() -> None:
    settings = Settings(limits=Limits(default_timeout_s=30))
    assert names(plan_of([executor(0, created=NOW - 30)], settings=settings).ungate) == ["exec-0"]


def test_orphaned_placeholders_are_deleted() -> None:
    phs = all_placeholders(bound=True)
    plan = plan_of([*phs, placeholder("exec", 5, deleting=True)])
    assert plan.delete == phs
    assert plan.state == AppState.PENDING and not plan.forget
    assert plan_of([placeholder("exec", 5, deleting=True)]).forget is False


def test_nothing_left_is_forgotten() -> None:
    plan = plan_of([executor(0, gated=False, phase="Running", node="n1")])
    assert plan.forget and plan.state == AppState.COMPLETED
    assert plan_of([]).forget


# -- Application --------------------------------------------------------------------------------------


def test_app_view_splits_and_orders_pods() -> None:
    pods = [
        executor(1, created=NOW - 5),
        placeholder("exec", 0),
        executor(0, created=NOW - 5),
        driver(created=NOW - 100),
    ]
    view = Application.of(KEY, pods)
    assert names(view.members) == ["driver", "exec-0", "exec-1"]
    assert names(view.placeholders) == [ph_name("exec", 0)]
    assert view.originator is not None and p.name(view.originator) == "driver"


def test_app_view_originator_prefers_the_pod_carrying_the_state() -> None:
    first = make_pod("a", task_groups=GROUPS, created=NOW - 10)
    second = make_pod("b", task_groups=GROUPS, created=NOW - 10, state=AppState.RESERVING)
    assert p.name(Application.of(KEY, [first, second]).originator or {}) == "b"
    assert (
        p.name(Application.of(KEY, [first, make_pod("b", task_groups=GROUPS, created=NOW - 10)]).originator or {})
        == "a"
    )


# -- the state machine ----------------------------------------------------------------------------


def run(pods: list[Pod], steps: list[str], start: float = NOW) -> list[AppState]:
    """Plan, apply, and let the scheduler act, one step per entry: 'plan' only plans and applies;
    'schedule' also binds what can be bound; 'wait:N' advances the clock; 'finish' ends the driver."""
    now = start
    states: list[AppState] = []
    for step in steps:
        if step.startswith("wait:"):
            now += float(step.split(":")[1])
            continue
        if step == "schedule":
            pods = schedule(pods, now)
            continue
        if step == "schedule-members":
            pods = schedule(pods, now, placeholders=False)
            continue
        if step == "finish":
            for pod in pods:
                if p.name(pod) == "driver":
                    pod["status"]["phase"] = "Succeeded"
            continue
        plan = plan_of(pods, now)
        states.append(plan.state)
        pods = apply(pods, plan, now)
    return states


def gang(policy: str | None = None) -> list[Pod]:
    return [driver(policy=policy), executor(0), executor(1)]


def test_happy_path_through_every_state_of_a_successful_gang() -> None:
    states = run(gang(), ["plan", "schedule", "plan", "schedule", "plan", "finish", "plan"])
    assert states == [AppState.RESERVING, AppState.RESERVED, AppState.RUNNING, AppState.COMPLETED]


def test_soft_timeout_path() -> None:
    states = run(gang(), ["plan", "wait:900", "plan", "schedule", "plan", "finish", "plan"])
    assert states == [AppState.RESERVING, AppState.RESUMING, AppState.RESUMING, AppState.COMPLETED]


def test_hard_timeout_path() -> None:
    states = run(gang(HARD), ["plan", "wait:900", "plan", "plan"])
    assert states == [AppState.RESERVING, AppState.FAILED, AppState.FAILED]


def test_every_state_is_reachable_from_pending() -> None:
    reached = {AppState.PENDING}
    reached.update(run(gang(), ["plan", "schedule", "plan", "schedule", "plan", "finish", "plan"]))
    reached.update(run(gang(), ["plan", "wait:900", "plan"]))
    reached.update(run(gang(HARD), ["plan", "wait:900", "plan"]))
    # Pending itself: members waiting for an originator.
    reached.add(plan_of([executor(0)]).state)
    assert reached == set(AppState)


def test_gang_cycle_leaves_nothing_behind() -> None:
    pods = gang()
    now = NOW
    for _ in range(3):
        pods = apply(pods, plan_of(pods, now), now)
        pods = schedule(pods, now)
        now += 1
    assert not any(p.is_placeholder(pod) for pod in pods)
    assert all(not p.is_gated(pod) and p.node_name(pod) for pod in pods)
    # Each member landed where its own group's placeholder was.
    assert {p.name(pod): p.node_name(pod) for pod in pods} == {
        "driver": "node-3",
        "exec-0": "node-4",
        "exec-1": "node-5",
    }


def test_transitions_cover_every_state() -> None:
    sources = {state for state, _ in TRANSITIONS}
    assert sources == set(AppState) - TERMINAL  # nothing leaves a terminal state
    # Every state is reachable from Pending, and every state can end in a terminal one.
    assert reachable(AppState.PENDING) == set(AppState)
    for state in set(AppState) - TERMINAL:
        assert reachable(state) & TERMINAL, state


def test_parse_of_unknown_state_is_pending() -> None:
    assert AppState.parse(None) == AppState.PENDING
    assert AppState.parse("Bogus") == AppState.PENDING
    assert AppState.parse("reserved") == AppState.PENDING
    assert all(AppState.parse(s.value) == s for s in AppState)


# -- bugs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [AppState.RESERVING, AppState.PENDING])
def test_bound_originator_when_the_last_placeholder_is_placed(state: AppState) -> None:
    pods = [
        driver(state=state, started=NOW - 100, gated=False, group=None, node="n9", phase="Running"),
        executor(0),
        executor(1),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert plan.state in (AppState.RESERVED, AppState.RUNNING)
    assert [p.name(s.member) for s in plan.swaps] == ["exec-0", "exec-1"]


@pytest.mark.parametrize("state", [AppState.RESERVED, AppState.RUNNING])
@pytest.mark.parametrize("policy", [None, HARD])
def test_annotations_turning_invalid_after_the_reservation(state: AppState, policy: str | None) -> None:
    pods = [
        driver(state=state, task_groups="[]", policy=policy, started=NOW - 100, first_allocated=NOW - 30, gated=False),
        executor(0),
        *all_placeholders(bound=True),
    ]
    plan = plan_of(pods)
    assert plan.state == state or (state, plan.state) in moves()


@pytest.mark.parametrize(
    ("state", "policy", "member"),
    [
        (AppState.RESERVING, HARD, make_pod("loner", created=NOW - 90)),
        (AppState.RESERVING, HARD, executor(7, group="executors")),
        (AppState.RESERVING, None, make_pod("loner", created=NOW - 90)),
        (AppState.RESUMING, None, make_pod("loner", created=NOW - 90)),
    ],
    ids=["hard-timeout-no-group", "hard-timeout-unknown-group", "soft-timeout-no-group", "resuming-no-group"],
)
def test_each_member_gets_one_fate(state: AppState, policy: str | None, member: Pod) -> None:
    pods = [driver(state=state, started=NOW - 1000, policy=policy), executor(0), member, *all_placeholders(bound=False)]
    plan_of(pods)  # assert_consistent: at most one of ungate / fail / swap per pod


def test_originator_without_task_group_name_completes_its_reservation() -> None:
    pods = [driver(group=None), executor(0), executor(1)]
    states = run(pods, ["plan", "schedule", "plan"])
    assert states[0] == AppState.RESERVING
    assert states[1] in (AppState.RESERVED, AppState.RUNNING)


def test_a_reclaimed_gang_is_evicted_once_and_its_event_counts_its_pods() -> None:
    """`GangPreempted` counts the pods it evicts ("its pod", "its 2 pods"); while they are on their way
    out, a reclaim still in force evicts nothing more and says nothing more."""
    one = [{"name": "solo", "minMember": 1, "minResource": ONE}]

    def gang(members: int, *, deleting: bool = False) -> list[Pod]:
        groups = one if members == 1 else [{"name": "solo", "minMember": members, "minResource": ONE}]
        return [
            make_pod(
                f"m{i}",
                task_groups=groups if i == 0 else None,
                group="solo",
                state=AppState.RUNNING if i == 0 else None,
                gated=False,
                phase="Running",
                node="n1",
                deleting=deleting,
            )
            for i in range(members)
        ]

    def planned(pods: list[Pod]) -> Plan:
        app = Application.of(KEY, pods, limits=Limits())
        return make_plan(app, NOW, Settings(), Surroundings(reclaimed="queue root.a takes back room"))

    for members, counted in ((1, "evicting its pod"), (2, "evicting its 2 pods")):
        plan = planned(gang(members))
        assert [e.note for e in plan.events] == [f"queue root.a takes back room: {counted}"]
        assert len(plan.evict) == members
    gone = planned(gang(2, deleting=True))
    assert (gone.events, gone.evict) == ([], [])


def test_a_gang_reclaimed_while_its_members_swap_in_is_evicted_whole_not_given_back() -> None:
    """Its placeholders were deleted and its members released (each names the placeholder whose place it
    took) when the reclaim came; none is bound yet. Giving the reservation back would leave them to
    bind without it and, after the backoff, reserve a second time beside them: it goes whole instead."""
    pods = [
        driver(
            state=AppState.RESERVED,
            started=NOW - 5,
            first_allocated=NOW - 4,
            gated=False,
            swap_placeholder=ph_name("driver", 0),
        ),
        executor(0, gated=False, swap_placeholder=ph_name("exec", 0)),
        executor(1, gated=False, swap_placeholder=ph_name("exec", 1)),
    ]
    app = Application.of(KEY, pods, limits=Limits())
    assert app.started()
    plan = make_plan(app, NOW, Settings(), Surroundings(reclaimed="queue root.a takes back room"))
    assert plan.state == AppState.RESERVED and keys.RETRY_AFTER not in plan.annotate
    assert names(plan.evict) == ["driver", "exec-0", "exec-1"]
    assert [e.note for e in plan.events] == ["queue root.a takes back room: evicting its 3 pods"]


def test_a_gang_holding_only_placeholders_has_not_started() -> None:
    pods = [driver(state=AppState.RESERVED, started=NOW - 5), executor(0), executor(1), *all_placeholders(bound=True)]
    assert not Application.of(KEY, pods, limits=Limits()).started()


def test_a_coscheduling_gang_starts_only_once_its_whole_minimum_of_pods_exists() -> None:
    """Coscheduling (and Koordinator, and a PodGroup) turn a gang's pods away while fewer than its minimum
    exist: with all 3 placeholders placed and 2 of 3 members created, none starts; the third's arrival
    starts all three. YuniKorn's task groups keep their rule: members start as they arrive."""
    app_key = p.AppKey(NS, "mpi")

    def member(index: int) -> Pod:
        pod = make_pod(
            f"mpi-{index}",
            app=None,
            labels={coscheduling.NAME: "mpi", coscheduling.MIN_AVAILABLE: "3"},
            state=AppState.RESERVING if index == 0 else None,
            started=NOW - 20 if index == 0 else None,
            created=NOW - 60 + index,
        )
        return pod

    def seats(originator: Pod) -> list[Pod]:
        group = TaskGroup(member_group(originator), 3, ONE)
        return [
            materialize(
                placeholder_pod(app_id="mpi", group=group, index=i, originator=originator),
                created=NOW - 50,
                node=f"n{i}",
                scheduled=NOW - 30,
            )
            for i in range(3)
        ]

    def planned(pods: list[Pod]) -> Plan:
        return plan_application(Application.of(app_key, pods, limits=Limits()), NOW)

    first, second, third = member(0), member(1), member(2)
    two = planned([first, second, *seats(first)])
    assert two.swaps == [] and two.ungate == []
    [complete] = [e.note for e in two.events if e.reason == Reason.GANG_RESERVATION_COMPLETE]
    assert (
        complete
        == "all 3 placeholders are placed; the real pods start once all 3 exist (2 so far), as Coscheduling starts a gang"
    )
    all_three = planned([first, second, third, *seats(first)])
    assert sorted(p.name(s.member) for s in all_three.swaps) == ["mpi-0", "mpi-1", "mpi-2"]


# -- the direct start ---------------------------------------------------------------------------------


def test_a_gang_given_seats_starts_its_members_on_them_without_placeholders() -> None:
    pods = [driver(), executor(0), executor(1), executor(2)]  # one executor more than its group's minimum
    seats = Granted(seats=(("driver", ("node-a",)), ("exec", ("node-b", "node-c"))))
    plan = make_plan(Application.of(KEY, pods), NOW, Settings(), Surroundings(ticket=seats))
    assert_consistent(plan)
    assert plan.state == AppState.RESERVED and not plan.create
    assert [(p.name(s.member), s.node, s.placeholder, s.direct) for s in plan.swaps] == [
        ("driver", "node-a", None, True),
        ("exec-0", "node-b", None, True),
        ("exec-1", "node-c", None, True),
    ]
    assert [s.marker for s in plan.swaps][1] == (keys.SEAT, "node-b")
    assert names(plan.ungate) == ["exec-2"]  # beyond the gang's minimum: scheduled normally
    assert reasons(plan) == ["TaskGroupMatch", "GangStarting"]
    assert "all 3 pods exist and the whole gang fits now: starting them on 3 node(s)" in plan.events[1].note
    assert plan.annotate[keys.STATE] == "Reserved" and keys.RESERVATION_STARTED in plan.annotate


def test_a_member_larger_than_its_group_is_seated_as_large_as_it_is() -> None:
    """Admission sized the seats by the group made as large as its largest member: every member starts on
    one, none into normal scheduling."""
    pods = [driver(), executor(0, requests={"cpu": "2", "memory": "1Gi"}), executor(1)]
    seats = Granted(seats=(("driver", ("node-a",)), ("exec", ("node-b", "node-c"))))
    plan = make_plan(Application.of(KEY, pods), NOW, Settings(), Surroundings(ticket=seats))
    assert [p.name(s.member) for s in plan.swaps] == ["driver", "exec-0", "exec-1"] and plan.ungate == []
    assert "TaskGroupResourceMismatch" not in reasons(plan) and "TaskGroupWarning" in reasons(plan)
