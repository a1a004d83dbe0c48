"""Gangs on a cluster that grows and shrinks, with the real Karpenter (its kwok provider, built from its Go
module) beside the local control plane: a gang that fits no node gets nodes for all of its members in one
provisioning round and starts whole on them; admission counts what a NodePool can still make (its
limits), so two gangs never hold half of it each and a gang no pool can hold says so; Karpenter never
consolidates away a node a gang's reservation holds, and takes back the nodes a gang gave back.

Each test has a NodePool of its own whose nodes carry the test's label and taint, so only its pods go
there, and two fixed nodes of 4 CPUs kept busy: the room there is holds none of its gangs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import queues_yaml
from tests.e2e.conftest import SIDE_LOGS, kubernetes_version, skip_without_go
from tests.e2e.support import (
    POOL_LABEL,
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    assert_on_held_room,
    chart_installed,
    events_for,
    fill,
    gang_job,
    gang_pod,
    is_running,
    make_pod,
    posted,
    put_queues,
)
from tests.e2e.test_kuberay import all_running, create_ray_cluster, kuberay, operator
from tests.e2e.test_native_gangs import native_group
from tests.e2e.test_queues import configured
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.kube import NotFound
from yuniplace.localcluster import LocalCluster, wait_until
from yuniplace.localcluster import karpenter as karp
from yuniplace.localcluster.components import Features
from yuniplace.localcluster.operators import Operator

__all__ = ["kuberay", "operator"]  # KubeRay's operator, the fixtures of its own tests, on this cluster

WAIT_S = 90.0
DEDUPLICATED_S = 120.0  # Karpenter posts an event of a reason about one object once in this time at most
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
Pod = dict[str, Any]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A cluster of its own, with Karpenter running beside it (and the Workload API served); its nodes
    are the tests' own."""
    skip_without_go()
    version = kubernetes_version()
    local = LocalCluster(f"pytest-autoscaled-{os.getpid()}")
    try:
        local.up([], kubernetes=version, features=Features.workload_api(version))
        karp.start(local, karp.ensure_karpenter(quiet=True))
        yield Cluster(local)
    finally:
        local.down(quiet=True)


@pytest.fixture(autouse=True)
def karpenter_log(request: pytest.FixtureRequest, cluster: Cluster) -> None:
    """A failing test shows what Karpenter did meanwhile (a node it took away, and why)."""
    log = next(Path(process.log) for process in cluster.local.processes() if process.name == karp.NAME)
    request.node.stash.setdefault(SIDE_LOGS, []).append(("Karpenter", log))


BOTH_STARTS = pytest.mark.parametrize("controller", ["direct start", "placeholders always"], indirect=True)


@pytest.fixture
def controller(
    request: pytest.FixtureRequest, cluster: Cluster, namespace: str, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """The controller, starting gangs that fit now directly (the default) or, where a test asks
    (BOTH_STARTS), always through placeholders; a gang that needs new nodes reserves with placeholders
    either way."""
    args = ["--placeholders=always"] if getattr(request, "param", "") == "placeholders always" else []
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, *args)
    process.start()
    yield process
    assert process.stop() == 0, process.log()


class Pools:
    """The test's NodePools: their nodes carry the test's label and taint (as its fixed nodes do), so its
    pods, and only they, go there."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.made: list[str] = []

    def add(self, *, cpu_limit: int | None = 64, consolidate_after: str = "5s") -> str:
        name = f"{self.namespace[:50]}-{len(self.made)}"
        pool = karp.node_pool(
            name,
            cpu=4,
            limits={"cpu": str(cpu_limit)} if cpu_limit is not None else None,
            labels={POOL_LABEL: self.namespace},
            taints=[{"key": POOL_LABEL, "value": self.namespace, "effect": "NoSchedule"}],
            consolidate_after=consolidate_after,
        )
        self.cluster.client.create(NODEPOOLS, pool)
        self.made.append(name)
        return name

    def claims(self, name: str) -> list[dict[str, Any]]:
        """The pool's NodeClaims that are not going away."""
        listed = self.cluster.client.get(NODECLAIMS, labelSelector=f"karpenter.sh/nodepool={name}")["items"]
        return [claim for claim in listed if not claim["metadata"].get("deletionTimestamp")]

    def nodes(self, name: str) -> list[str]:
        listed = self.cluster.client.get("/api/v1/nodes", labelSelector=f"karpenter.sh/nodepool={name}")["items"]
        return [node["metadata"]["name"] for node in listed if not node["metadata"].get("deletionTimestamp")]

    def remove(self) -> None:
        for name in self.made:
            try:
                self.cluster.client.delete(f"{NODEPOOLS}/{name}")
            except NotFound:
                continue
        wait_until(lambda: not any(self.cluster.client.get(NODECLAIMS)["items"]), WAIT_S)


@pytest.fixture
def pools(cluster: Cluster, namespace: str) -> Iterator[Pools]:
    made = Pools(cluster, namespace)
    yield made
    made.remove()


@pytest.fixture
def busy(cluster: Cluster, namespace: str, pool: Callable[..., Placement]) -> Placement:
    """Two fixed nodes of 4 CPUs, 3 of each taken: no gang of this test fits the room there is."""
    place = pool(2, cpu="4", memory="16Gi")
    for index, node in enumerate(place.nodes):
        fill(cluster, namespace, place, node, f"busy-{index}", cpu="3")
    return place


class MostClaims:
    """The most NodeClaims a pool had at once while it watched (polling the API), to show that no more
    nodes were made than the gangs needed."""

    def __init__(self, pools: Pools, name: str) -> None:
        self._pools, self._name = pools, name
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.most = max(self.most, len(self._pools.claims(self._name)))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


def members(cluster: Cluster, namespace: str, app: str) -> list[Pod]:
    pods = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"spark-app-selector={app}")
    return [pod for pod in pods["items"] if not p.is_placeholder(pod)]


def running_whole(cluster: Cluster, namespace: str, app: str, count: int) -> list[Pod]:
    def whole() -> list[Pod] | None:
        pods = [pod for pod in members(cluster, namespace, app) if is_running(pod)]
        return pods if len(pods) >= count else None

    return wait_until(whole, WAIT_S)  # type: ignore[no-any-return]


@BOTH_STARTS
def test_a_gang_that_fits_no_node_gets_nodes_for_all_of_it_in_one_round_and_starts_whole(
    cluster: Cluster,
    namespace: str,
    busy: Placement,
    pools: Pools,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    record_property: Callable[[str, object], None],
) -> None:
    pool = pools.add()
    most = MostClaims(pools, pool)
    submitted = time.monotonic()
    gang_job(cluster, namespace, busy, "train", 4, cpu="3", memory="1Gi")
    running = running_whole(cluster, namespace, "train", 4)
    took = time.monotonic() - submitted
    assert_on_held_room(recorder, running)
    claims = pools.claims(pool)
    assert len(claims) == 4 and most.stop() == 4, [c["metadata"]["name"] for c in claims]  # one node a member
    made = sorted(p.created_at(claim) for claim in claims)
    assert made[-1] - made[0] <= 1.0, f"NodeClaims made over {made[-1] - made[0]:.0f}s, not in one round"
    nodes = {pod["spec"]["nodeName"] for pod in running}
    assert nodes == set(pools.nodes(pool)), (nodes, pools.nodes(pool))
    first_bound = min(p.scheduled_at(pod) or 0.0 for pod in running)
    assert first_bound >= made[-1], "a member was bound before the last node for the gang was made"
    assert not events_for(cluster, namespace, "GangExceedsCapacity")
    record_property(
        "figure", f"gang of 4 x 3 CPU, no node for it: 4 NodeClaims, running whole {took:.1f} s after submission"
    )


@BOTH_STARTS
def test_admission_counts_what_a_pool_can_still_make_and_says_when_none_can_hold_a_gang(
    cluster: Cluster, namespace: str, busy: Placement, pools: Pools, controller: ControllerProcess
) -> None:
    """A NodePool of 8 CPUs: a gang of 2 x 3 CPUs within it is admitted at once (not said to exceed the
    cluster, not left waiting) and runs on 2 new nodes; one of 5 x 3 CPUs, which the fixed nodes and all
    the pool can ever make could not hold, waits and its event names the pool and its limit, and no node
    is made for it."""
    pool = pools.add(cpu_limit=8)
    gang_job(cluster, namespace, busy, "fits", 2, cpu="3", memory="1Gi")
    running_whole(cluster, namespace, "fits", 2)
    assert not events_for(cluster, namespace, "GangExceedsCapacity")
    assert not [
        e for e in events_for(cluster, namespace, "GangWaiting") if e["involvedObject"]["name"].startswith("fits")
    ]
    gang_job(cluster, namespace, busy, "huge", 5, cpu="3", memory="1Gi")
    waiting = posted(cluster, namespace, "GangWaiting", on="huge")[0]
    assert "more than all matching nodes hold and its node pools can still make" in waiting["message"], waiting
    assert f"NodePool {pool} (nodes of cpu 4; cpu limit 8" in waiting["message"], waiting
    assert len(pools.claims(pool)) == 2
    assert not any(p.node_name(pod) for pod in members(cluster, namespace, "huge"))


@BOTH_STARTS
def test_two_gangs_on_room_for_one_start_one_at_a_time_and_never_hold_half_each(
    cluster: Cluster,
    namespace: str,
    busy: Placement,
    pools: Pools,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
) -> None:
    """A NodePool of 8 CPUs holds one gang of 2 x 3 CPUs: the first starts whole on 2 new nodes, the
    second waits whole (no placeholder, no node made for it); once the first ends, the second starts."""
    pool = pools.add(cpu_limit=8)
    most = MostClaims(pools, pool)
    gang_job(cluster, namespace, busy, "first", 2, cpu="3", memory="1Gi")
    first = running_whole(cluster, namespace, "first", 2)
    gang_job(cluster, namespace, busy, "second", 2, cpu="3", memory="1Gi")
    waiting = posted(cluster, namespace, "GangWaiting", on="second")[0]
    assert "waiting for free capacity: second/workers: 0 of 2 pods" in waiting["message"], waiting
    assert f"NodePool {pool}" in waiting["message"], waiting
    assert not [ph for ph in recorder.latest.values() if p.is_placeholder(ph) and "second" in p.name(ph)]
    for pod in first:
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{p.name(pod)}")
    second = running_whole(cluster, namespace, "second", 2)
    assert_on_held_room(recorder, second)
    assert most.stop() <= 2, "more nodes were made than one gang at a time needs"


def test_a_forming_gangs_nodes_are_not_consolidated_and_nodes_given_back_are(
    cluster: Cluster,
    namespace: str,
    busy: Placement,
    pools: Pools,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    record_property: Callable[[str, object], None],
) -> None:
    """A driver and two executors that come late: the executors' placeholders hold two new nodes with
    nothing else on them for longer than the pool consolidates empty nodes after. Karpenter looks and
    leaves them (its DisruptionBlocked event names the placeholder's do-not-disrupt annotation); the
    executors then start on them. Once the application is deleted, Karpenter takes its nodes back: the
    cluster is the size it was before the gang."""
    pool = pools.add(consolidate_after="2s")
    before = len(cluster.client.get("/api/v1/nodes")["items"])
    groups = [
        busy.group("driver", 1, cpu="3", memory="1Gi"),
        busy.group("executors", 2, cpu="3", memory="1Gi"),
    ]
    driver = busy.pin(gang_pod("spark-driver", "spark", "driver", task_groups=groups, cpu="3", memory="1Gi"))
    cluster.create_pod(namespace, driver)
    cluster.wait_pod(namespace, "spark-driver", is_running, timeout_s=WAIT_S)

    def blocked() -> dict[str, Any] | None:
        held = {p.node_name(ph) for ph in recorder.latest.values() if p.is_placeholder(ph) and p.node_name(ph)}
        return next(
            (
                e
                for e in events_for(cluster, "default", "DisruptionBlocked")
                if e["involvedObject"]["name"] in held and "do-not-disrupt" in e["message"]
            ),
            None,
        )

    # Karpenter says a node's disruption is blocked once per 2 minutes at most (its events are deduplicated
    # by node): a new node is first blocked for being nominated for its pending placeholder, and only a
    # later pass says the placeholder's do-not-disrupt annotation keeps it.
    event = wait_until(blocked, DEDUPLICATED_S + WAIT_S)
    assert len(pools.claims(pool)) == 3, "a node holding the reservation was taken away"
    for index in range(2):
        executor = gang_pod(f"spark-exec-{index}", "spark", "executors", task_groups=groups, cpu="3", memory="1Gi")
        cluster.create_pod(namespace, busy.pin(executor))
    running = running_whole(cluster, namespace, "spark", 3)
    assert_on_held_room(recorder, running)
    for pod in running:
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{p.name(pod)}")
    given_back_at = time.monotonic()
    wait_until(lambda: not pools.claims(pool), WAIT_S)
    wait_until(lambda: len(cluster.client.get("/api/v1/nodes")["items"]) == before, WAIT_S)
    record_property(
        "figure",
        f"reservation kept ({event['message']}); nodes taken back {time.monotonic() - given_back_at:.1f} s after "
        "the application was deleted",
    )


def test_placeholders_for_an_autoscaler_it_cannot_read_come_when_their_time_is_up(
    cluster: Cluster, namespace: str, busy: Placement, tmp_path: Path
) -> None:
    """No NodePool takes the gang (an autoscaler yuniplace cannot read, such as cluster-autoscaler, would
    act on pending pods): with --create-placeholders-after 5 its placeholders come 5 s after it began
    waiting first in its queue, though no room frees meanwhile."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, "--create-placeholders-after=5")
    process.start()
    try:
        gang_job(cluster, namespace, busy, "train", 2, cpu="3", memory="1Gi")
        waiting = posted(cluster, namespace, "GangWaiting", on="train")[0]
        created = posted(cluster, namespace, "GangExceedsCapacity", on="train")[0]
        assert "creating its placeholders anyway, so that a cluster autoscaler sees pods" in created["message"]
        after = p.parse_time(created["eventTime"]) - p.parse_time(waiting["eventTime"])  # type: ignore[operator]
        assert after >= 5.0, after
    finally:
        assert process.stop() == 0, process.log()


def test_a_native_gang_held_in_a_queue_gets_its_nodes_in_one_round_too(
    cluster: Cluster, namespace: str, busy: Placement, pools: Pools, recorder: NamespaceRecorder, tmp_path: Path
) -> None:
    """Kubernetes' own gang (the Workload API) in a queue yuniplace holds: admitted on what the pool can
    make as soon as its first pod is seen. With all 3 there by then, its gates come off with no placeholder
    (kube-scheduler's gang plugin binds them together); with some still to come, placeholders hold its
    room until they do. Either way Karpenter makes a node for each member (or its placeholder),
    unschedulable together, in one round, and they are bound whole."""
    pool = pools.add()
    put_queues(cluster, namespace, queues_yaml("- name: shared"))
    process = ControllerProcess.for_namespace(
        cluster.kubeconfig, namespace, tmp_path, f"--queues-configmap={namespace}/queues"
    )
    process.start()
    try:
        configured(cluster, namespace, "QueuesApplied")
        member = native_group(cluster, namespace, "train", 3)
        names = [f"train-{i}" for i in range(3)]
        for name in names:
            pod = busy.pin(make_pod(name, cpu="3", memory="1Gi", labels={keys.YUNIKORN_QUEUE: "root.shared"}))
            pod["spec"]["schedulingGates"] = [{"name": keys.GATE}]  # as the chart's webhook gates it
            cluster.create_pod(namespace, member(pod))
        running = [cluster.wait_pod(namespace, name, is_running, timeout_s=WAIT_S) for name in names]
        assert {pod["spec"]["nodeName"] for pod in running} == set(pools.nodes(pool))
        assert len(pools.claims(pool)) == 3
        if recorder.placeholder_uids:  # admitted before its last pod was made
            assert len(recorder.placeholder_uids) == 3, sorted(recorder.placeholder_uids)
            wait_until(
                lambda: any(
                    "3 member(s) bound" in e["message"] for e in events_for(cluster, namespace, "PlaceholderSwapped")
                ),
                WAIT_S,
            )
        else:
            starting = posted(cluster, namespace, "GangStarting", on="train")[0]
            assert "(all 3 pods exist)" in starting["message"], starting
    finally:
        assert process.stop() == 0, process.log()


@pytest.mark.parametrize("mode", ["yunikorn"])
def test_a_ray_cluster_whose_workers_need_new_nodes_gets_them_and_starts_whole(
    cluster: Cluster,
    namespace: str,
    busy: Placement,
    pools: Pools,
    kuberay: Operator,
    operator: str,
    mode: str,
    tmp_path: Path,
) -> None:
    """KubeRay's operator (yunikorn mode) and yuniplace as its chart installs it: a RayCluster whose head
    fits the room there is and whose two workers of 3 CPUs fit none; Karpenter makes their nodes in one
    round, and the cluster starts whole, every pod on room held for it."""
    pool = pools.add()
    with chart_installed(cluster, namespace, tmp_path / "chart"), NamespaceRecorder(cluster.client, namespace) as seen:
        create_ray_cluster(cluster, namespace, "ray", busy, workers=(("workers", 2, "3", "1Gi"),))
        pods = wait_until(lambda: all_running(cluster, namespace, "ray", 3), WAIT_S)
        assert_on_held_room(seen, pods)
    workers = [pod for pod in pods if "workers" in p.name(pod)]
    assert {pod["spec"]["nodeName"] for pod in workers} <= set(pools.nodes(pool)), workers
    assert len(pools.claims(pool)) == 2


@pytest.mark.parametrize("style", ["Soft", "Hard"])
def test_a_scale_up_that_comes_only_partly_never_starts_part_of_the_gang(
    cluster: Cluster,
    namespace: str,
    busy: Placement,
    pools: Pools,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    style: str,
) -> None:
    """A gang of 3 x 3 CPUs admitted on a NodePool that may make 3 nodes; before Karpenter acts, the pool's
    limit is lowered to 2 nodes (as an administrator might, or a cloud out of an instance type): 2 of its
    placeholders are placed, the third never is, and no member starts. Out of time, Soft gives the room
    back and its pods wait, still gated (the nodes made are consolidated), Hard fails it saying where its
    nodes were to come from."""
    pool = pools.add(cpu_limit=12)
    cluster.local.stop_component(karp.NAME)
    try:
        policy = f"placeholderTimeoutInSeconds=20 gangSchedulingStyle={style}"
        gang_job(cluster, namespace, busy, "train", 3, cpu="3", memory="1Gi", policy=policy)
        creating = posted(cluster, namespace, "CreatingPlaceholders", on="train")[0]
        assert f"NodePool {pool} is to make the nodes for them" in creating["message"], creating
        cluster.client.patch(f"{NODEPOOLS}/{pool}", {"spec": {"limits": {"cpu": "8"}}})
    finally:
        cluster.local.start_component(karp.NAME)

    def placed() -> int:
        return sum(1 for ph in recorder.latest.values() if p.is_placeholder(ph) and p.node_name(ph))

    wait_until(lambda: placed() == 2, WAIT_S)
    timed_out = posted(cluster, namespace, "PlaceholderTimeOut", on="train")[0]
    assert "2/3 placeholders placed" in timed_out["message"], timed_out
    assert f"its nodes were to come from NodePool {pool}, which made room for part of it" in timed_out["message"]
    if style == "Soft":
        released = posted(cluster, namespace, "GangReservationReleased", on="train")[0]
        assert "its pods wait, still gated, for the next attempt" in released["message"], released
        wait_until(lambda: not pools.claims(pool), WAIT_S * 3)  # the nodes made for it are taken back
        pods = members(cluster, namespace, "train")
        assert all(keys.GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or []] for pod in pods), pods
    else:
        failed = posted(cluster, namespace, "ApplicationFailed", on="train")[0]
        assert "Hard style fails the application" in failed["message"], failed

        def all_failed() -> bool:
            return all(p.phase(pod) == "Failed" for pod in members(cluster, namespace, "train"))

        wait_until(all_failed, WAIT_S)
    ran = [p.name(pod) for pod in recorder.latest.values() if not p.is_placeholder(pod) and p.node_name(pod)]
    assert [name for name in ran if name.startswith("train")] == [], f"members started in part: {ran}"
