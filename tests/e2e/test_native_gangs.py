"""Kubernetes' own gangs (the Workload API, with its feature gates on) beside yuniplace's, on a cluster
of their own: kube-scheduler's gang plugin binds a native pod group all or nothing while yuniplace
reserves a YuniKorn-style gang in the same queue. Neither is gated or placeheld twice, the native gang
counts against the queue's max, and a pod naming a pod group that does not exist is told so and never
held. Each served shape of the API is written as that version reads it (1.35: a Workload and
spec.workloadRef; 1.36: a Workload, a PodGroup and spec.schedulingGroup; 1.37: a PodGroup)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.builders import queues_yaml
from tests.e2e.conftest import SIDE_LOGS, kubernetes_version, skip_without_go
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    chart_installed,
    events_for,
    gang_pod,
    is_bound,
    make_pod,
    posted,
    put_queues,
)
from tests.e2e.test_queues import configured, waiting
from yuniplace.controller.podgroups import served_native_version
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.resources import pod_requests
from yuniplace.kube import NotFound, parse_quantity, workloadapi
from yuniplace.localcluster import LocalCluster, NodePool, wait_until
from yuniplace.localcluster.components import LINGERS_ANNOTATION, Features

pytestmark = pytest.mark.every_version

QUEUE = {keys.YUNIKORN_QUEUE: "root.shared"}
WAIT_S = 60.0

Pod = dict[str, Any]


@pytest.fixture(scope="module")
def native_cluster() -> Iterator[Cluster]:
    """Two nodes of 8 CPU, with the Workload API and kube-scheduler's gang plugin switched on."""
    skip_without_go()
    version = kubernetes_version()
    local = LocalCluster(f"pytest-native-{os.getpid()}")
    try:
        local.up(
            [NodePool(count=2, cpu="8", memory="32Gi")], kubernetes=version, features=Features.workload_api(version)
        )
        yield Cluster(local)
    finally:
        local.down(quiet=True)


@pytest.fixture
def native_namespace(native_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    # Unique: a parametrized test's next case must not wait for the last one's namespace to go.
    name = f"{request.node.name.replace('_', '-')[:43].rstrip('-').lower()}-{uuid.uuid4().hex[:6]}"
    name = "".join(c for c in name if c.isalnum() or c == "-")
    native_cluster.local.create_namespace(name)
    yield name
    native_cluster.client.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def native_controller(
    native_cluster: Cluster, native_namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ControllerProcess]:
    """yuniplace installed by its chart (its RBAC, its webhook, which the apiserver calls for the test's
    namespace) and run with the chart's ServiceAccount, managing every namespace with the test's queues;
    its log is shown when the test fails."""
    queues = {
        "queues.configMap": "queues",
        "queues.configMapNamespace": native_namespace,
        "extraArgs[0]": f"--queues-configmap={native_namespace}/queues",
    }
    with chart_installed(native_cluster, native_namespace, tmp_path, queues) as controller:
        request.node.stash[SIDE_LOGS] = [("controller", controller.log_path)]
        wait_until(lambda: "became leader" in controller.log_path.read_text(), WAIT_S)
        yield controller


def served(cluster: Cluster) -> workloadapi.ServedVersion:
    version = served_native_version(cluster.client)
    assert version is not None, "the cluster serves no version of the Workload API yuniplace reads"
    return version


def native_group(
    cluster: Cluster,
    namespace: str,
    name: str,
    min_count: int,
    policy: str | None = None,
    priority_class: str | None = None,
) -> Callable[[Pod], Pod]:
    """Create a native pod group of `min_count` as the cluster's version of the API has it (1.35: a
    Workload; 1.36: a Workload and a PodGroup; 1.37: a PodGroup), with the scheduling `policy`
    (schedulingPolicyParameters) and the priority class on the object that describes it; return what
    makes a pod its member (and gives the pod that priority class too)."""
    version = served(cluster)
    notes = {keys.SCHEDULING_POLICY_PARAMETERS: policy} if policy else None
    for resource, body in workloadapi.manifests(version, name, min_count, notes, priority_class):
        cluster.client.create(f"{version.api}/namespaces/{namespace}/{resource}", body)

    def member(pod: Pod) -> Pod:
        pod["spec"].update(workloadapi.member_spec(version, name))
        if priority_class:
            pod["spec"]["priorityClassName"] = priority_class
        return pod

    return member


def bound(cluster: Cluster, namespace: str, names: list[str]) -> list[Pod]:
    def all_bound() -> list[Pod] | None:
        pods = [cluster.get_pod(namespace, n) for n in names]
        return pods if all(pod is not None and is_bound(pod) for pod in pods) else None  # type: ignore[return-value]

    try:
        return wait_until(all_bound, WAIT_S)  # type: ignore[no-any-return]
    except TimeoutError:
        states = {n: (cluster.get_pod(namespace, n) or {}).get("status", {}).get("phase") for n in names}
        raise AssertionError(f"not all of {names} bound within {WAIT_S}s: {states}") from None


def status(cluster: Cluster, *args: str) -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "yuniplace", "status", f"--kubeconfig={cluster.kubeconfig}", "-o", "json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


def native_pods(
    cluster: Cluster,
    namespace: str,
    member: Callable[[Pod], Pod],
    app: str,
    count: int,
    *,
    cpu: str = "1",
    first: int = 0,
    queue: str = "root.shared",
) -> list[str]:
    """`count` bare pods of the native group `member` makes them part of, in `queue`, created ungated
    as a Job controller creates them (the chart's webhook gates them)."""
    names = [f"{app}-{i}" for i in range(first, first + count)]
    for name in names:
        pod = member(make_pod(name, cpu=cpu, memory="1Gi", labels={keys.YUNIKORN_QUEUE: queue}))
        cluster.create_pod(namespace, pod)
    return names


class Whole:
    """Watches gangs' pods through a recorder: a gang starts in part if one of its pods is bound while
    another is still held by yuniplace's gate, or bound while one of its pods has not been created."""

    def __init__(self, recorder: NamespaceRecorder, gangs: dict[str, int]) -> None:
        self._gangs = gangs  # gang name -> its minimum of pods
        self._seen: dict[str, Pod] = {}
        self.partial: list[str] = []
        recorder.callbacks.append(self._saw)

    def _saw(self, pod: Pod) -> None:
        name = pod["metadata"]["name"]
        gang = name.rpartition("-")[0]
        if gang not in self._gangs:
            return
        self._seen[name] = pod
        members = [seen for n, seen in self._seen.items() if n.rpartition("-")[0] == gang]
        bound_now = [m["metadata"]["name"] for m in members if is_bound(m)]
        held = [m["metadata"]["name"] for m in members if keys.GATE in gates_of(m)]
        if bound_now and (held or len(members) < self._gangs[gang]):
            self.partial.append(
                f"{gang}: {bound_now} bound while {held} held, {len(members)} of {self._gangs[gang]} exist"
            )


def gates_of(pod: Pod) -> list[str]:
    return [g.get("name", "") for g in pod["spec"].get("schedulingGates") or []]


def held_throughout(cluster: Cluster, namespace: str, names: list[str]) -> None:
    """Each pod is held by the gate, and none is bound."""
    for name in names:
        pod = cluster.wait_pod(namespace, name, lambda pod: keys.GATE in gates_of(pod))
        assert not is_bound(pod), pod


def delete_pods(cluster: Cluster, namespace: str, names: list[str]) -> None:
    for name in names:
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0})


def test_a_native_gang_waits_for_its_queue_and_starts_whole_through_the_gang_plugin(
    native_cluster: Cluster,
    native_namespace: str,
    native_controller: ControllerProcess,
    record_property: Callable[[str, object], None],
) -> None:
    """Queue root.shared may hold 4 CPUs; the cluster has 16. Native gang A (4 × 1 CPU) is gated by the
    chart's webhook and admitted as soon as its first pod is seen: with all 4 there by then, its gates
    come off together; with some still to come, placeholders hold its room until they do. Either way
    kube-scheduler's gang plugin binds it whole. Native gang B then stays gated, waiting for the queue's
    max (GangWaiting names it), until A ends: then, every pod of it there, its gates come off together
    with no placeholder, and it starts whole in turn."""
    cluster, namespace = native_cluster, native_namespace
    put_queues(cluster, namespace, queues_yaml("- name: shared\n  resources:\n    max: {vcore: 4}"))
    configured(cluster, namespace, "QueuesApplied")
    with NamespaceRecorder(cluster.client, namespace) as recorder:
        whole = Whole(recorder, {"first": 4, "second": 4})
        first = native_pods(cluster, namespace, native_group(cluster, namespace, "first", 4), "first", 4)
        bound(cluster, namespace, first)
        second = native_pods(cluster, namespace, native_group(cluster, namespace, "second", 4), "second", 4)
        note = waiting(cluster, namespace, "second", "root.shared")
        held_throughout(cluster, namespace, second)
        first_app = workloadapi.app_id(served(cluster), "first")

        def first_running() -> bool:
            rows = {row["application"]: row for row in status(cluster, "-n", namespace)}
            return rows[first_app]["state"] == "Running"

        wait_until(first_running, WAIT_S)
        delete_pods(cluster, namespace, first)
        bound(cluster, namespace, second)
        gates = {name: sorted(recorder.gates_seen[name]) for name in first + second}
        second_app = workloadapi.app_id(served(cluster), "second")
        held_first = recorder.placeholders_of(first_app)
        held_second = recorder.placeholders_of(second_app)
    # The second gang's pods, made while the queue was full, were gated by the webhook; of the first, made
    # as it was admitted, those made after an admission with no placeholder were let through ungated.
    assert all(gates[name] == [keys.GATE] for name in second), gates
    assert gates[first[0]] == [keys.GATE] and all(gates[name] in ([keys.GATE], []) for name in first), gates
    if held_first:
        assert all(gates[name] == [keys.GATE] for name in first), (held_first, gates)
    assert not held_second, f"placeholders for a gang whose every member existed: {sorted(held_second)}"
    assert not whole.partial, whole.partial
    posted(cluster, namespace, "GangStarting", on="second-")  # posted after the gates it lifts: may trail the binding
    starting = events_for(cluster, namespace, "GangStarting")
    second_starting = [e["message"] for e in starting if e["involvedObject"]["name"] in second]
    assert len(second_starting) == 1 and "(all 4 pods exist): lifting their gates" in second_starting[0], starting
    assert "kube-scheduler's gang plugin binds them all or none" in second_starting[0]
    how = f"held by {len(held_first)} placeholders" if held_first else "its gates lifted at once"
    record_property(
        "figure", f"Kubernetes {kubernetes_version()}: gang A {how}; native gang B waited for its queue: {note}"
    )


@pytest.fixture
def native_priorities(native_cluster: Cluster) -> Iterator[Callable[[int], str]]:
    """PriorityClasses on the native gangs' cluster, deleted afterwards."""
    made: list[str] = []

    def make(value: int) -> str:
        name = f"native-{value}"
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        native_cluster.client.create("/apis/scheduling.k8s.io/v1/priorityclasses", body)
        made.append(name)
        return name

    yield make
    for name in made:
        native_cluster.client.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


def test_native_and_yunikorn_gangs_in_one_queue_start_by_priority_then_arrival(
    native_cluster: Cluster,
    native_namespace: str,
    native_controller: ControllerProcess,
    native_priorities: Callable[[int], str],
) -> None:
    """Queue root.shared holds one gang of 4 CPUs at a time, and a YuniKorn gang runs in it. Then come,
    in this order, a native gang of low priority, a YuniKorn gang of high priority and a native gang of
    high priority (its PodGroup's on 1.37, its pods' before). As each ends, the next to start is the
    high-priority YuniKorn gang, then the high-priority native one, then the low one, each whole."""
    cluster, namespace = native_cluster, native_namespace
    low, high = native_priorities(10), native_priorities(1000)
    put_queues(cluster, namespace, queues_yaml("- name: shared\n  resources:\n    max: {vcore: 4}"))
    configured(cluster, namespace, "QueuesApplied")
    groups = [{"name": "workers", "minMember": 4, "minResource": {"cpu": "1", "memory": "1Gi"}}]

    def yunikorn(app: str, priority_class: str | None = None) -> list[str]:
        names = [f"{app}-{i}" for i in range(4)]
        for name in names:
            pod = gang_pod(name, app, "workers", task_groups=groups, cpu="1", memory="1Gi", gated=False)
            pod["metadata"]["labels"].update(QUEUE)
            if priority_class:
                pod["spec"]["priorityClassName"] = priority_class
            cluster.create_pod(namespace, pod)
        return names

    with NamespaceRecorder(cluster.client, namespace) as recorder:
        whole = Whole(recorder, {"nlow": 4, "nhigh": 4})  # a YuniKorn gang started directly is released pod by pod
        running = yunikorn("running")
        bound(cluster, namespace, running)
        waiters = {
            "nlow": native_pods(
                cluster, namespace, native_group(cluster, namespace, "nlow", 4, priority_class=low), "nlow", 4
            ),
            "ykhigh": yunikorn("ykhigh", high),
        }
        waiting(cluster, namespace, "ykhigh", "root.shared")
        waiters["nhigh"] = native_pods(
            cluster, namespace, native_group(cluster, namespace, "nhigh", 4, priority_class=high), "nhigh", 4
        )
        waiting(cluster, namespace, "nhigh", "root.shared")
        order: list[str] = []
        ending = running
        while waiters:
            delete_pods(cluster, namespace, ending)

            def started() -> str | None:
                for app, names in waiters.items():
                    pods = [cluster.get_pod(namespace, name) for name in names]
                    if any(pod is not None and is_bound(pod) for pod in pods):
                        return app
                return None

            app = wait_until(started, WAIT_S)
            order.append(app)
            ending = waiters.pop(app)
            bound(cluster, namespace, ending)
    assert order == ["ykhigh", "nhigh", "nlow"], order
    assert not whole.partial, whole.partial


@pytest.mark.parametrize("style", ["Soft", "Hard"])
def test_a_native_gang_out_of_time_gives_its_room_back_or_fails_never_starting_in_part(
    native_cluster: Cluster, native_namespace: str, native_controller: ControllerProcess, style: str
) -> None:
    """A native gang of minimum 3 whose third pod never comes (its PodGroup says a 5 s timeout and the
    style) is admitted from what its group declares: placeholders hold its room, its two pods stay gated,
    and it holds the queue's whole max while it waits; a second native gang waits behind it. At the
    timeout, Soft gives the room back (its pods stay unbound, to try again after a backoff) and Hard fails
    its pods: either way its placeholders go, the second gang starts, and no pod of the first is ever
    bound."""
    cluster, namespace = native_cluster, native_namespace
    put_queues(cluster, namespace, queues_yaml("- name: shared\n  resources:\n    max: {vcore: 6}"))
    configured(cluster, namespace, "QueuesApplied")
    policy = f"placeholderTimeoutInSeconds=5 gangSchedulingStyle={style}"
    with NamespaceRecorder(cluster.client, namespace) as recorder:
        whole = Whole(recorder, {"stuck": 3, "next": 2})
        stuck = native_pods(
            cluster, namespace, native_group(cluster, namespace, "stuck", 3, policy), "stuck", 2, cpu="2"
        )
        stuck_app = workloadapi.app_id(served(cluster), "stuck")
        wait_until(lambda: recorder.placeholders_of(stuck_app), WAIT_S)  # admitted: its room is held
        held_throughout(cluster, namespace, stuck)
        following = native_pods(cluster, namespace, native_group(cluster, namespace, "next", 2), "next", 2, cpu="2")
        waiting(cluster, namespace, "next", "root.shared")
        bound(cluster, namespace, following)
        if style == "Soft":
            released = [e["message"] for e in posted(cluster, namespace, "GangReservationReleased", on="stuck-")]
            assert any("trying again" in m for m in released), released
        else:
            for name in stuck:
                cluster.wait_pod(namespace, name, lambda pod: pod["status"].get("phase") == "Failed")
            failed = [e["message"] for e in posted(cluster, namespace, "ApplicationFailed", on="stuck-")]
            assert any("Hard style fails the application" in m for m in failed), failed
        ever_bound = [name for name in stuck if name in recorder.latest and is_bound(recorder.latest[name])]
        placeholders = sorted(recorder.placeholders_of(stuck_app))
    assert not ever_bound and not whole.partial, (ever_bound, whole.partial)
    assert len(placeholders) >= 3, placeholders
    try:
        wait_until(lambda: all(cluster.get_pod(namespace, name) is None for name in placeholders), WAIT_S)
    except TimeoutError:
        left = [name for name in placeholders if cluster.get_pod(namespace, name) is not None]
        raise AssertionError(f"placeholders left after the timeout: {left}") from None
    timed_out = [e["message"] for e in posted(cluster, namespace, "PlaceholderTimeOut", on="stuck-")]
    assert any("1 of its 3 pods still do not exist" in m for m in timed_out), timed_out


def test_a_group_larger_than_its_pods_holds_the_room_of_those_to_come_and_binds_whole_once_they_arrive(
    native_cluster: Cluster,
    native_namespace: str,
    native_controller: ControllerProcess,
    record_property: Callable[[str, object], None],
) -> None:
    """A launcher's PodGroup says 3 while 2 of its pods exist: admitted from what its group declares, it
    reserves the whole gang's room with placeholders and keeps its two pods gated (kube-scheduler's gang
    plugin would hold them with no room). Then 14 plain 1-CPU pods of another namespace, of the same
    priority, flood the two 8-CPU nodes: they get the 10 CPUs outside the gang's 6, no more. The third
    member, made after, is gated by the webhook; each member takes a placeholder's place, and the gang
    plugin binds all 3 together, seconds after the third came."""
    cluster, namespace = native_cluster, native_namespace
    put_queues(cluster, namespace, queues_yaml("- name: shared\n  resources:\n    max: {vcore: 12}"))
    configured(cluster, namespace, "QueuesApplied")
    flood_namespace = f"{namespace[:50]}-flood"
    cluster.local.create_namespace(flood_namespace)
    try:
        with NamespaceRecorder(cluster.client, namespace) as recorder:
            whole = Whole(recorder, {"launcher": 3})
            member = native_group(cluster, namespace, "launcher", 3)
            first = native_pods(cluster, namespace, member, "launcher", 2, cpu="2")
            app = workloadapi.app_id(served(cluster), "launcher")

            def reserved() -> bool:
                rows = {row["application"]: row for row in status(cluster, "-n", namespace)}
                return rows.get(app, {}).get("state") == "Reserved"

            wait_until(reserved, WAIT_S)
            held_throughout(cluster, namespace, first)
            # The room outside the gang's: what its placeholders and the other pods (yuniplace's own, once
            # none is still terminating) leave free on each node, in whole CPUs.
            outside = wait_until(lambda: one_cpu_seats(cluster), WAIT_S)
            flood = [f"flood-{i}" for i in range(14)]
            for name in flood:
                cluster.create_pod(flood_namespace, make_pod(name, cpu="1"))
            flood_bound = settled(cluster, flood_namespace, flood)
            made_at = time.monotonic()
            last = native_pods(cluster, namespace, member, "launcher", 1, cpu="2", first=2)
            bound(cluster, namespace, first + last)
            whole_after_s = time.monotonic() - made_at  # an upper bound: bound() polls
            gated_late = sorted(recorder.gates_seen[last[0]])
            placeholders = recorder.placeholders_of(app)
    finally:
        cluster.client.delete(f"/api/v1/namespaces/{flood_namespace}")
    assert outside.seats < 14, outside  # the flood would fill every node
    assert flood_bound == outside.seats, f"the flood took {flood_bound} CPUs, where {outside} were outside the gang's"
    assert len(placeholders) == 3, sorted(placeholders)
    assert gated_late == [keys.GATE], gated_late  # to take a placeholder's place
    assert not whole.partial, whole.partial
    # Posted once the controller has seen them bound: it may trail the binding.
    posted(cluster, namespace, "PlaceholderSwapped", saying=lambda note: "3 member(s) bound" in note)
    record_property(
        "figure",
        f"Kubernetes {kubernetes_version()}: the flood took {flood_bound} of 16 CPUs, all {outside.seats} outside the "
        "gang's 6; the gang bound whole "
        f"within {whole_after_s:.1f}s of its third member's creation",
    )


class Seats(NamedTuple):
    seats: int  # pods of 1 CPU the nodes can still take
    held: dict[str, list[str]]  # what holds the rest, by node


def one_cpu_seats(cluster: Cluster) -> Seats | None:
    """How many pods of 1 CPU the nodes can still take (each node's allocatable less what its pods
    request, in whole CPUs), once no pod on them is terminating (a last test's namespace going); None
    until then."""
    pods = cluster.client.get("/api/v1/pods", fieldSelector="spec.nodeName!=")["items"]
    placed = [pod for pod in pods if not p.is_terminal(pod)]
    if any(p.is_deleting(pod) for pod in placed):
        return None
    seats, held = 0, {}
    for node in cluster.client.get("/api/v1/nodes")["items"]:
        name = node["metadata"]["name"]
        here = [pod for pod in placed if p.node_name(pod) == name]
        used = sum(pod_requests(pod["spec"]).get("cpu", Decimal(0)) for pod in here)
        seats += int(Decimal(parse_quantity(node["status"]["allocatable"]["cpu"])) - used)
        held[name] = [f"{p.namespace(pod)}/{p.name(pod)}" for pod in here]
    return Seats(seats, held)


def settled(cluster: Cluster, namespace: str, names: list[str]) -> int:
    """Wait until kube-scheduler has decided on each pod (bound, or found no node for it); how many CPUs
    the bound ones hold (one each)."""

    def decided(pod: Pod | None) -> bool:
        conditions = (pod or {}).get("status", {}).get("conditions") or []
        unschedulable = any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)
        return pod is not None and (is_bound(pod) or unschedulable)

    def all_decided() -> list[Pod] | None:
        found = [cluster.get_pod(namespace, name) for name in names]
        return found if all(decided(pod) for pod in found) else None  # type: ignore[return-value]

    pods: list[Pod] = wait_until(all_decided, WAIT_S)
    return sum(1 for pod in pods if is_bound(pod))


def test_a_namespace_that_opts_out_leaves_its_native_gangs_to_kube_scheduler(
    native_cluster: Cluster, native_namespace: str, native_controller: ControllerProcess
) -> None:
    """A namespace labelled yuniplace.io/native-gangs=kube-scheduler: the chart's webhook never gates its
    native gangs, even in a queue at its max; kube-scheduler's gang plugin binds them as before, and
    yuniplace counts them in their queue."""
    cluster, namespace = native_cluster, native_namespace
    cluster.client.patch(
        f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": {"yuniplace.io/native-gangs": "kube-scheduler"}}}
    )
    put_queues(cluster, namespace, queues_yaml("- name: shared\n  resources:\n    max: {vcore: 2}"))
    configured(cluster, namespace, "QueuesApplied")
    with NamespaceRecorder(cluster.client, namespace) as recorder:
        names = native_pods(cluster, namespace, native_group(cluster, namespace, "free", 4), "free", 4)
        bound(cluster, namespace, names)
        gated = {name: sorted(recorder.gates_seen[name]) for name in names if recorder.gates_seen[name]}
    assert not gated, f"pods of an opted-out namespace were gated: {gated}"
    notes = [e["message"] for e in posted(cluster, namespace, "NativeGang", on="free-")]
    assert any("neither gates nor placeholds it" in m and "queue root.shared" in m for m in notes), notes


@pytest.mark.parametrize("opted_out", [False, True], ids=["held", "opted-out"])
def test_a_pod_naming_a_missing_native_group_starts_once_the_group_exists(
    native_cluster: Cluster, native_namespace: str, native_controller: ControllerProcess, opted_out: bool
) -> None:
    """A pod of a native pod group nobody created yet: kube-scheduler keeps it unschedulable until the
    group exists. Held, it waits gated for the group (which may be created after its pods); in a
    namespace that opts out it is told at once and never gated. Once the group exists, it starts."""
    cluster, namespace = native_cluster, native_namespace
    if opted_out:
        cluster.client.patch(
            f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": {"yuniplace.io/native-gangs": "kube-scheduler"}}}
        )
    put_queues(cluster, namespace, queues_yaml("- name: shared"))
    configured(cluster, namespace, "QueuesApplied")
    pod = make_pod("orphan-0", cpu="1", memory="1Gi", labels=QUEUE)
    pod["spec"].update(workloadapi.member_spec(served(cluster), "orphan"))
    cluster.create_pod(namespace, pod)
    if opted_out:

        def told() -> str | None:
            messages = [e["message"] for e in events_for(cluster, namespace, "TaskGroupsError")]
            return next((m for m in messages if "orphan" in m and "no pod group" in m), None)

        wait_until(told, WAIT_S)
        current = cluster.get_pod(namespace, "orphan-0")
        assert current is not None and not current["spec"].get("schedulingGates"), current
    else:
        held_throughout(cluster, namespace, ["orphan-0"])
    native_group(cluster, namespace, "orphan", 1)
    bound(cluster, namespace, ["orphan-0"])


def test_a_reclaim_takes_a_native_gang_whole(
    native_cluster: Cluster, native_namespace: str, native_controller: ControllerProcess
) -> None:
    """Queues a and b are each guaranteed 8 of the 16 CPUs. b's native gang of 3 × 3 CPUs borrows 1 of
    a's; a's gang of 2 × 4 CPUs then takes its guarantee back: all 3 pods of b's gang are evicted
    together (GangPreempted on it), and a's gang starts."""
    cluster, namespace = native_cluster, native_namespace
    queues = queues_yaml(
        "- name: a\n  resources:\n    guaranteed: {vcore: 8}", "- name: b\n  resources:\n    guaranteed: {vcore: 8}"
    )
    put_queues(cluster, namespace, queues)
    configured(cluster, namespace, "QueuesApplied")
    member = native_group(cluster, namespace, "borrower", 3)
    borrowers = native_pods(cluster, namespace, member, "borrower", 3, cpu="3", queue="root.b")
    bound(cluster, namespace, borrowers)
    groups = [{"name": "workers", "minMember": 2, "minResource": {"cpu": "4", "memory": "1Gi"}}]
    owners = [f"owner-{i}" for i in range(2)]
    for name in owners:
        pod = gang_pod(name, "owner", "workers", task_groups=groups, cpu="4", memory="1Gi", gated=False)
        pod["metadata"]["labels"][keys.YUNIKORN_QUEUE] = "root.a"
        cluster.create_pod(namespace, pod)
    bound(cluster, namespace, owners)
    wait_until(lambda: all(cluster.get_pod(namespace, name) is None for name in borrowers), WAIT_S)  # bare pods: gone
    preempted = posted(cluster, namespace, "GangPreempted", on="borrower-")
    assert preempted and "evicting its 3 pods" in preempted[0]["message"], preempted


def test_a_native_gang_restarted_whole_gates_its_new_members_until_the_new_attempt_is_admitted(
    native_cluster: Cluster,
    native_namespace: str,
    native_controller: ControllerProcess,
    record_property: Callable[[str, object], None],
) -> None:
    """A native gang of 4 pods of 3 CPUs takes most of the cluster's two nodes of 8 and runs. It is restarted whole:
    its pods are deleted and stay terminating, slow to stop, the old attempt's record (Running) still on
    its originator, while its owner makes the new attempt's 4 pods in the same pod group. Each is gated by
    the webhook (the record of an attempt being stopped admits nothing) and stays gated and unbound, the
    new attempt waiting for room, until the old pods are gone: then the new attempt is admitted and bound
    whole."""
    cluster, namespace = native_cluster, native_namespace
    put_queues(cluster, namespace, queues_yaml("- name: shared"))
    configured(cluster, namespace, "QueuesApplied")
    member = native_group(cluster, namespace, "restart", 4)
    old = [f"restart-old-{i}" for i in range(4)]
    try:
        with NamespaceRecorder(cluster.client, namespace) as recorder:
            whole = Whole(recorder, {"restart-new": 4})
            for name in old:
                pod = member(make_pod(name, cpu="3", memory="1Gi", labels=QUEUE))
                pod["metadata"]["annotations"][LINGERS_ANNOTATION] = "true"
                pod["spec"]["terminationGracePeriodSeconds"] = 30  # 0 would delete it at once, without a kubelet
                cluster.create_pod(namespace, pod)
            bound(cluster, namespace, old)
            app = workloadapi.app_id(served(cluster), "restart")
            wait_until(
                lambda: {r["application"]: r for r in status(cluster, "-n", namespace)}[app]["state"] == "Running",
                WAIT_S,
            )
            for name in old:  # restarted whole: every pod of the old attempt goes, slowly
                cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", {})
            for name in old:
                cluster.wait_pod(namespace, name, lambda pod: bool(pod["metadata"].get("deletionTimestamp")))
            new = native_pods(cluster, namespace, member, "restart-new", 4, cpu="3")
            held_throughout(cluster, namespace, new)  # gated by the webhook
            note = waiting(cluster, namespace, "restart-new", "waiting for free capacity")
            held_throughout(cluster, namespace, new)
            record = [p.annotations_of(cluster.get_pod(namespace, name) or {}).get(keys.STATE) for name in old]
            release_lingering(cluster, namespace, old)
            bound(cluster, namespace, new)
            gates = {name: sorted(recorder.gates_seen[name]) for name in new}
    finally:
        release_lingering(cluster, namespace, old)
    assert record[0] == "Running", record  # the old attempt's record was there all along
    assert all(gates[name] == [keys.GATE] for name in new), gates
    assert not whole.partial, whole.partial
    record_property("figure", f"Kubernetes {kubernetes_version()}: a native gang restarted whole waited: {note}")


def release_lingering(cluster: Cluster, namespace: str, names: list[str]) -> None:
    """Let pods kept terminating (LINGERS_ANNOTATION) go."""
    for name in names:
        with contextlib.suppress(NotFound):
            cluster.client.patch(
                f"/api/v1/namespaces/{namespace}/pods/{name}", {"metadata": {"annotations": {LINGERS_ANNOTATION: None}}}
            )


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "native" / "training-gang.yaml"


def test_the_readme_example_waits_for_its_queue_then_starts_whole(
    native_cluster: Cluster, native_namespace: str, native_controller: ControllerProcess
) -> None:
    """examples/native/training-gang.yaml as the docs show it (docs/guides/native-gangs.md: 1.37's v1beta1
    PodGroup and an indexed Job of 4 × 2 CPUs in root.training, whose max is 8 CPUs): applied while another native gang holds 4
    of them, the Job's workers are created gated and wait (GangWaiting names the queue); once the other
    gang is gone their gates come off together and all four are bound, none before the others."""
    cluster, namespace = native_cluster, native_namespace
    if served(cluster).version != "v1beta1":
        pytest.skip("the example is written for 1.37's scheduling.k8s.io/v1beta1")
    put_queues(cluster, namespace, queues_yaml("- name: training\n  resources:\n    max: {vcore: 8}"))
    configured(cluster, namespace, "QueuesApplied")
    member = native_group(cluster, namespace, "other", 2)
    others = native_pods(cluster, namespace, member, "other", 2, cpu="2", queue="root.training")
    bound(cluster, namespace, others)
    with NamespaceRecorder(cluster.client, namespace) as recorder:
        partial: list[str] = []

        def workers() -> list[Pod]:
            return [pod for name, pod in recorder.latest.items() if name.startswith("training-")]

        def saw(_pod: Pod) -> None:
            seen = workers()
            if any(is_bound(pod) for pod in seen) and (len(seen) < 4 or any(keys.GATE in gates_of(p) for p in seen)):
                partial.append(", ".join(sorted(p["metadata"]["name"] for p in seen if is_bound(p))))

        recorder.callbacks.append(saw)
        cluster.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
        note = waiting(cluster, namespace, "training", "root.training")
        assert all(keys.GATE in gates_of(pod) for pod in workers()), workers()
        delete_pods(cluster, namespace, others)
        wait_until(lambda: len(workers()) == 4 and all(is_bound(pod) for pod in workers()), WAIT_S)
    assert not partial, partial
    assert "max" in note, note
    starting = [e["message"] for e in posted(cluster, namespace, "GangStarting", on="training-")]
    assert any("lifting their gates; kube-scheduler's gang plugin binds them all or none" in m for m in starting), (
        starting
    )
