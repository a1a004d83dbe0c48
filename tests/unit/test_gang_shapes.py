"""Gangs whose members differ in size, written as "N pods like these" (Coscheduling labels, a PodGroup,
Koordinator, the Workload API): each member belongs to the task group of its own role and shape, so no
member is ever released into room made for a smaller one, and the gang is admitted only when every
member fits as it is, whichever pod was created first."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from tests.planning import (
    NOW,
    apply,
    assert_consistent,
    make_pod,
    names,
    reasons,
    schedule,
)
from tests.unit.test_decision import NOW as DECIDED_AT
from tests.unit.test_decision import snapshot
from yuniplace.admission.decision import AdmissionRules, decide
from yuniplace.admission.snapshot import App
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.controller.lifecycle import make_plan, plan_application
from yuniplace.controller.plan import Plan, Settings, Surroundings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application, read_gang
from yuniplace.gang.dialects import coscheduling, podgroup
from yuniplace.gang.fit import Node
from yuniplace.gang.podshape import member_group, role_of
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.events import Reason

Pod = dict[str, Any]
APP = "mpi"
KEY = p.AppKey("default", APP)
LAUNCHER = {"cpu": "1", "memory": "1Gi"}
WORKER = {"cpu": "2", "memory": "1Gi"}
GANG = {coscheduling.NAME: APP, coscheduling.MIN_AVAILABLE: "3"}


def member(
    name: str, requests: dict[str, str], *, created: float = NOW - 60, role: str | None = None, **more: Any
) -> Pod:
    """A gated member of the Coscheduling gang `mpi` of 3, as the store holds it."""
    labels = {**GANG, **({"training.kubeflow.org/job-role": role} if role else {})}
    return make_pod(name, app=None, labels=labels, requests=requests, created=created, **more)


def launcher_and_workers(**launcher: Any) -> list[Pod]:
    return [
        member("mpi-launcher", LAUNCHER, role="launcher", **launcher),
        member("mpi-worker-0", WORKER, role="worker"),
        member("mpi-worker-1", WORKER, role="worker"),
    ]


def groups_of(pods: list[Pod], pod_group: dict[str, Any] | None = None) -> list[tuple[str, int, dict[str, str]]]:
    app = Application.of(KEY, pods, pod_group, Limits())
    assert app.spec is not None, app.problem
    return [(g.name, g.min_member, dict(g.min_resource)) for g in app.spec.groups]


# -- each member's task group ---------------------------------------------------------------------


def test_a_members_group_is_its_role_and_its_shape_and_nothing_else() -> None:
    launcher, worker, other_worker = launcher_and_workers()
    assert member_group(worker) == member_group(other_worker) != member_group(launcher)
    assert re.fullmatch(r"launcher-[0-9a-f]{6}", member_group(launcher))
    assert re.fullmatch(r"worker-[0-9a-f]{6}", member_group(worker))
    # The same role in another size is another group; the same size without a role is "members".
    bigger = member("mpi-worker-2", {"cpu": "3", "memory": "1Gi"}, role="worker")
    assert member_group(bigger).startswith("worker-") and member_group(bigger) != member_group(worker)
    plain = member("plain", WORKER)
    assert member_group(plain).startswith("members-") and member_group(plain)[-6:] == member_group(worker)[-6:]
    # Where a member may go is part of its shape.
    pinned = member("mpi-worker-3", WORKER, role="worker")
    pinned["spec"]["nodeSelector"] = {"pool": "gpu"}
    assert member_group(pinned) != member_group(worker)


@pytest.mark.parametrize(
    ("labels", "role"),
    [
        ({"ray.io/group": "headgroup"}, "headgroup"),
        ({"training.kubeflow.org/replica-type": "Master"}, "master"),
        ({"ray.io/group": "GPU workers/v2_x"}, "gpu-workers-v2-x"),
        ({"ray.io/group": "---"}, "members"),
        ({"spark-role": "x" * 70}, "x" * 40),
        ({}, "members"),
    ],
)
def test_a_role_becomes_a_dns_label_whatever_the_operator_wrote(labels: dict[str, str], role: str) -> None:
    assert role_of({"metadata": {"labels": labels}}) == role


# -- the gang's task groups -------------------------------------------------------------------------


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))), ids=lambda o: "-".join(map(str, o)))
def test_a_launcher_and_larger_workers_are_two_groups_whichever_pod_came_first(order: tuple[int, ...]) -> None:
    pods = launcher_and_workers()
    for rank, index in enumerate(order):
        pods[index]["metadata"]["creationTimestamp"] = p.format_time(NOW - 60 + rank)
    launcher, worker = member_group(pods[0]), member_group(pods[1])
    assert sorted(groups_of(pods)) == sorted([(launcher, 1, LAUNCHER), (worker, 2, WORKER)])


def test_members_yet_to_come_are_reserved_as_large_as_the_largest_seen_in_each_resource() -> None:
    small_cpu_much_memory = member("mpi-launcher", {"cpu": "1", "memory": "8Gi"}, role="launcher")
    worker = member("mpi-worker-0", WORKER, role="worker", created=NOW - 50)
    groups = groups_of([small_cpu_much_memory, worker])
    assert groups[:2] == [
        (member_group(small_cpu_much_memory), 1, {"cpu": "1", "memory": "8Gi"}),
        (member_group(worker), 1, WORKER),
    ]
    (name, count, size) = groups[2]
    assert name.startswith("members-") and (count, size) == (1, {"cpu": "2", "memory": "8Gi"})


def test_the_podgroups_min_resources_sizes_the_members_yet_to_come() -> None:
    """scheduler-plugins' PodGroup states the whole gang's resources: a launcher of 1 CPU seen, two
    members to come and 5 CPUs in all, so each of them is reserved 2 CPUs, not 1."""
    launcher = member("mpi-launcher", LAUNCHER, role="launcher")
    launcher["metadata"]["labels"] = {podgroup.LABEL: APP}
    pod_group = {
        "metadata": {"name": APP, "namespace": "default"},
        "spec": {"minMember": 3, "minResources": {"cpu": "5", "memory": "3Gi", "pods": "3"}},
    }
    assert groups_of([launcher], pod_group) == [
        (member_group(launcher), 1, LAUNCHER),
        (groups_of([launcher], pod_group)[1][0], 2, {"cpu": "2", "memory": "1Gi"}),
    ]
    uneven = {**pod_group, "spec": {"minMember": 3, "minResources": {"cpu": "4"}}}
    assert groups_of([launcher], uneven)[1][1:] == (2, {"cpu": "1500m", "memory": "1Gi"})


def test_a_podgroup_asking_more_than_its_members_request_is_warned_of() -> None:
    pods = launcher_and_workers()
    for pod in pods:
        pod["metadata"]["labels"] = {**p.labels_of(pod), podgroup.LABEL: APP}
        del pod["metadata"]["labels"][coscheduling.NAME]
    pod_group = {"metadata": {"name": APP}, "spec": {"minMember": 3, "minResources": {"cpu": "8"}}}
    spec = read_gang(pods[0], pod_group, Limits(), pods)
    assert spec.warnings == (
        "PodGroup spec.minResources.cpu is 8, more than the task groups reserve (5); yuniplace reserves what the "
        "pods request",
    )


def test_members_beyond_the_minimum_follow_the_gang_unreserved() -> None:
    """The oldest three are the gang; a fourth, larger still, starts with it, as members beyond a
    group's minimum do."""
    pods = [*launcher_and_workers(), member("mpi-worker-9", {"cpu": "4"}, role="worker", created=NOW - 10)]
    app = Application.of(KEY, pods, None, Limits())
    assert app.spec is not None and app.spec.min_members == 3 and app.spec.other_groups_follow
    assert app.spec.group(member_group(pods[3])) is None


def test_a_member_requesting_nothing_is_named() -> None:
    pods = [*launcher_and_workers()[:2], member("mpi-empty", {}, role="worker")]
    app = Application.of(KEY, pods, None, Limits())
    assert app.spec is None and "pod mpi-empty requests" in str(app.problem)


# -- admission ---------------------------------------------------------------------------------------


def admitted(free_cpu: list[int], pods: list[Pod]) -> Any:
    """Admission's ticket for the gang of `pods` (all gated) on nodes with that much free CPU."""
    application = Application.of(KEY, pods, None, Limits())
    assert application.spec is not None
    needing: dict[str, int] = {}
    for pod in pods:
        group = application.group_of(pod) or ""
        needing[group] = needing.get(group, 0) + 1
    gang = App(
        KEY,
        application.spec,
        AppState.PENDING,
        (DECIDED_AT - 60, 0, APP),
        "default",
        holding={},
        needing=needing,
        placeholders=0,
        backing_off=False,
        queued_since=None,
        arrived=(DECIDED_AT - 60, DECIDED_AT - 60),
    )
    cluster = [
        Node(f"n{i}", {}, (), {"cpu": 4000, "memory": 64 * 2**30 * 1000, "pods": 110_000}) for i in range(len(free_cpu))
    ]
    takes = {f"other-{i}": (f"n{i}", 4 - free) for i, free in enumerate(free_cpu) if free < 4}
    seen = snapshot(cluster, [gang], takes=takes)
    return decide(seen, AdmissionRules()).tickets[KEY]


def test_a_gang_is_admitted_only_when_every_member_fits_as_it_is() -> None:
    """Free room for the launcher and one worker (2 + 1 + 1 CPUs), not both workers: it waits, saying
    which members do not fit; sized like its launcher (3 × 1 CPU) it would have been let in."""
    waiting = admitted([2, 1, 1], launcher_and_workers())
    assert isinstance(waiting, Waiting), waiting
    assert "1 of 2 pods of (cpu 2, memory 1Gi) fit" in waiting.message, waiting.message
    granted = admitted([2, 2, 1], launcher_and_workers())
    assert isinstance(granted, Granted) and granted.seats, granted
    launcher, worker = launcher_and_workers()[:2]
    assert dict(granted.seats) == {member_group(launcher): ("n2",), member_group(worker): ("n0", "n1")}


# -- the planner -------------------------------------------------------------------------------------


def planned(pods: list[Pod], ticket: Any = None) -> Plan:
    plan = make_plan(Application.of(KEY, pods, None, Limits()), NOW, Settings(), Surroundings(ticket=ticket))
    assert_consistent(plan)
    return plan


def test_seated_members_each_start_on_their_own_seat() -> None:
    pods = launcher_and_workers()
    launcher, worker = member_group(pods[0]), member_group(pods[1])
    plan = planned(pods, Granted(seats=((launcher, ("n2",)), (worker, ("n0", "n1")))))
    assert sorted((p.name(s.member), s.node) for s in plan.swaps) == [
        ("mpi-launcher", "n2"),
        ("mpi-worker-0", "n0"),
        ("mpi-worker-1", "n1"),
    ]
    assert plan.ungate == [] and Reason.TASK_GROUP_RESOURCE_MISMATCH not in reasons(plan)


def test_placeholders_are_sized_per_shape_and_each_member_takes_one_of_its_own() -> None:
    pods = launcher_and_workers()
    plan = planned(pods, Granted())
    sizes = sorted(
        (
            ph["metadata"]["annotations"][keys.PLACEHOLDER_GROUP],
            ph["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        )
        for ph in plan.create
    )
    assert sizes == sorted([(member_group(pods[0]), "1"), (member_group(pods[1]), "2"), (member_group(pods[1]), "2")])
    cluster = schedule(apply(pods, plan, NOW), NOW)
    swapped = planned(cluster)
    assert sorted(p.name(s.member) for s in swapped.swaps) == ["mpi-launcher", "mpi-worker-0", "mpi-worker-1"]
    for swap in swapped.swaps:
        assert swap.placeholder is not None and swap.group == member_group(swap.member)


def test_members_arriving_larger_than_reserved_for_them_are_reserved_again_before_any_starts() -> None:
    """Only the launcher existed when the gang was reserved (three placeholders of its size). Its
    workers then come with 2 CPUs each: no member starts into the 1-CPU room, the placeholders made
    for them are given back, 2-CPU ones are made, and only once those are placed do all three start."""
    launcher = member("mpi-launcher", LAUNCHER, role="launcher")
    first = planned([launcher], Granted())
    assert len(first.create) == 3
    cluster = schedule(apply([launcher], first, NOW), NOW)
    reserved = planned(cluster)
    assert reserved.state == AppState.RESERVED and reserved.swaps == [] and reserved.ungate == []

    cluster = reserved_cluster = apply(cluster, reserved, NOW) + launcher_and_workers()[1:]
    again = planned(reserved_cluster)
    assert again.state == AppState.RESERVING and again.swaps == [] and again.ungate == []
    assert len(again.delete) == 2 and names(again.create) and len(again.create) == 2
    assert all(ph["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2" for ph in again.create)
    note = next(e.note for e in again.events if e.reason == Reason.CREATING_PLACEHOLDERS)
    assert note == (
        f"its placeholders no longer hold what its members ask (task group {member_group(reserved_cluster[-1])} 0/2 "
        "of their size): reserving that before any member starts"
    )

    cluster = apply(cluster, again, NOW)
    waiting = planned(cluster)  # the new placeholders are not placed yet: still nobody starts
    assert waiting.swaps == [] and waiting.ungate == [] and waiting.state == AppState.RESERVING
    cluster = schedule(apply(cluster, waiting, NOW), NOW)
    started = planned(cluster)
    assert sorted(p.name(s.member) for s in started.swaps) == ["mpi-launcher", "mpi-worker-0", "mpi-worker-1"]
    assert Reason.TASK_GROUP_RESOURCE_MISMATCH not in reasons(started)


def test_a_gang_started_directly_is_not_reserved_again() -> None:
    pods = launcher_and_workers()
    launcher, worker = member_group(pods[0]), member_group(pods[1])
    plan = planned(pods, Granted(seats=((launcher, ("n2",)), (worker, ("n0", "n1")))))
    running = apply(pods, plan, NOW)
    later = plan_application(Application.of(KEY, running, None, Limits()), NOW + 1, Settings())
    assert later.create == [] and later.state in (AppState.RESERVED, AppState.RUNNING)
