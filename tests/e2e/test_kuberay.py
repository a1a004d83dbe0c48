"""KubeRay's own operator (v1.5.0, built from its Go module) against the local control plane, its batch
scheduler pointed at yuniplace as the README says: `--batch-scheduler=yunikorn` (YuniKorn's task groups
on every pod, `schedulerName: yunikorn`) and `--batch-scheduler=scheduler-plugins` (a scheduler-plugins
PodGroup per RayCluster, `schedulerName: scheduler-plugins-scheduler`). yuniplace is installed with its
chart as shipped: its webhook takes both scheduler names over (no such scheduler runs here), gates the
pods and records them; the operator's objects are its own, in the order and shapes it writes them.

kwok runs no container, so no Ray process runs: a RayCluster is Ready once its pods run (kwok marks them
Ready), a RayJob's submitter Job completes as kwok completes Job pods, and the Ray job itself, which the
operator asks Ray's dashboard about, is never seen by the operator to end."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import IN_CI, SIDE_LOGS
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    assert_on_held_room,
    chart_installed,
    events_for,
    fill,
    free_port,
    is_ready,
    is_running,
    make_unready,
    placeholders,
    posted,
)
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.kube import NotFound
from yuniplace.localcluster import BuildError, wait_until
from yuniplace.localcluster.operators import Operator, ensure_kuberay
from yuniplace.tools import status

RAY = "/apis/ray.io/v1"
MODES = ["yunikorn", "scheduler-plugins"]
GANG_LABEL = "ray.io/gang-scheduling-enabled"
# (group, replicas, CPUs, memory): a head and two worker groups of different sizes.
HEAD = ("headgroup", 1, "1", "2Gi")
SMALL = ("small", 2, "1", "1Gi")
LARGE = ("large", 1, "2", "4Gi")


@pytest.fixture(scope="module")
def kuberay(cluster: Cluster) -> Iterator[Operator]:
    """KubeRay's operator built from its module, its CustomResourceDefinitions installed and served."""
    try:
        operator = ensure_kuberay()
    except BuildError as error:
        if IN_CI:
            raise
        pytest.skip(f"KubeRay e2e tests: {error}")
    for crd in operator.crds:
        cluster.kubectl("apply", "--server-side", "-f", str(crd))

    def served() -> bool:
        try:
            names = {r["name"] for r in cluster.client.get(RAY)["resources"]}
        except NotFound:
            return False
        return {"rayclusters", "rayjobs"} <= names

    wait_until(served, 60)
    yield operator
    for crd in operator.crds:
        cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", str(crd))


@dataclass(frozen=True)
class Ray:
    """What each test works with: the cluster and the test's namespace, its own nodes and the watch of
    its pods, with yuniplace installed and KubeRay's operator running in the test's mode."""

    cluster: Cluster
    namespace: str
    pool: Callable[..., Placement]
    recorder: NamespaceRecorder


@pytest.fixture
def ray(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    controller: ControllerProcess,
    operator: str,
) -> Ray:
    return Ray(cluster, namespace, pool, recorder)


@pytest.fixture
def controller(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[ControllerProcess]:
    """yuniplace installed by its chart with the values it ships with (named like conftest's fixture so
    that its log is shown when a test fails)."""
    with chart_installed(cluster, namespace, tmp_path / "chart") as process:
        yield process


@pytest.fixture
def operator(
    request: pytest.FixtureRequest, kuberay: Operator, cluster: Cluster, namespace: str, tmp_path: Path
) -> Iterator[str]:
    """The operator out of cluster, for the test's namespace, with the batch scheduler the test is
    parametrized with (`mode`); its log is shown when the test fails."""
    mode = request.getfixturevalue("mode")
    port = free_port()
    log = tmp_path / "kuberay-operator.log"
    request.node.stash.setdefault(SIDE_LOGS, []).append(("KubeRay operator", log))
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                str(kuberay.binary),
                f"--batch-scheduler={mode}",
                f"--watch-namespace={namespace}",
                "--enable-leader-election=false",
                "--metrics-addr=0",
                f"--health-probe-bind-address=127.0.0.1:{port}",
                "--log-stdout-encoder=console",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        )

    def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"KubeRay's operator exited ({process.returncode}):\n{log.read_text()[-4000:]}")
        return is_ready(port)

    try:
        wait_until(healthy, 60)
        yield mode
    finally:
        process.terminate()
        process.wait(30)


def group(
    place: Placement, name: str, cpu: str, memory: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Ray node group's pod template on the test's own nodes."""
    container = "ray-head" if name == HEAD[0] else "ray-worker"
    return {
        "metadata": {"annotations": dict(annotations or {})},
        "spec": {
            "nodeSelector": dict(place.node_selector),
            "tolerations": list(place.tolerations),
            "containers": [
                {
                    "name": container,
                    "image": "rayproject/ray:2.46.0",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


def ray_cluster_spec(
    place: Placement,
    annotations: dict[str, str] | None = None,
    workers: tuple[tuple[str, int, str, str], ...] = (SMALL, LARGE),
) -> dict[str, Any]:
    """A head of 1 CPU and worker groups (by default 2 × 1 CPU and 1 × 2 CPUs), each at its minimum."""
    groups = [
        {
            "groupName": name,
            "replicas": replicas,
            "minReplicas": replicas,
            "maxReplicas": replicas + 2,
            "rayStartParams": {},
            "template": group(place, name, cpu, memory, annotations),
        }
        for name, replicas, cpu, memory in workers
    ]
    return {
        "rayVersion": "2.46.0",
        "headGroupSpec": {"rayStartParams": {}, "template": group(place, HEAD[0], HEAD[2], HEAD[3], annotations)},
        "workerGroupSpecs": groups,
    }


def gang_labels(name: str) -> dict[str, str]:
    """What KubeRay's documentation (and YuniKorn's) has a user put on a RayCluster or RayJob for gang
    scheduling: the gang switch, and YuniKorn's application id and queue (the `yunikorn` mode copies
    them to the pods as `applicationId` and `queue`)."""
    return {GANG_LABEL: "true", keys.APP_ID: f"{name}-0", keys.YUNIKORN_QUEUE: "root.default"}


def create_ray_cluster(
    cluster: Cluster,
    namespace: str,
    name: str,
    place: Placement,
    annotations: dict[str, str] | None = None,
    workers: tuple[tuple[str, int, str, str], ...] = (SMALL, LARGE),
) -> dict[str, Any]:
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": gang_labels(name)},
        "spec": ray_cluster_spec(place, annotations, workers),
    }
    created: dict[str, Any] = cluster.client.create(f"{RAY}/namespaces/{namespace}/rayclusters", body)
    return created


def ray_pods(cluster: Cluster, namespace: str, ray_cluster: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = cluster.client.get(
        f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"ray.io/cluster={ray_cluster}"
    )["items"]
    return pods


def all_running(cluster: Cluster, namespace: str, ray_cluster: str, count: int) -> list[dict[str, Any]] | None:
    pods = ray_pods(cluster, namespace, ray_cluster)
    return pods if len(pods) == count and all(is_running(pod) for pod in pods) else None


def bound_at(pod: dict[str, Any]) -> str | None:
    """When the pod was bound, as its PodScheduled condition says."""
    scheduled = next((c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    return scheduled.get("lastTransitionTime") if scheduled.get("status") == "True" else None


@pytest.mark.every_version
@pytest.mark.parametrize("mode", MODES)
def test_a_ray_cluster_of_three_sizes_starts_whole(ray: Ray, mode: str) -> None:
    """A head and two worker groups of different sizes, as the operator writes them: every pod gated at
    creation, none bound before all could be, each on room of its own size, and `yuniplace status`
    showing the gang Running with each group whole."""
    cluster, namespace, pool, recorder = ray.cluster, ray.namespace, ray.pool, ray.recorder
    place = pool(3, cpu="4", memory="16Gi")
    create_ray_cluster(cluster, namespace, "ray", place)
    pods = wait_until(lambda: all_running(cluster, namespace, "ray", 4), 90)
    assert_on_held_room(recorder, pods)
    assert all(pod["spec"].get("schedulerName") == "default-scheduler" for pod in pods)
    posted(cluster, namespace, ("GangStarting", "GangReservationComplete"))  # after the gates it lifts
    rows = wait_until(
        lambda: [r for r in status.collect(cluster.client, namespace, None) if r["state"] == "Running"], 30
    )
    (row,) = rows
    assert sum(g["required"] for g in row["groups"]) == 4
    assert all(g["reserved"] == g["required"] for g in row["groups"]), row


@pytest.mark.parametrize("mode", MODES)
def test_workers_smaller_than_the_operators_own_init_container_start_whole_on_room_of_their_size(
    ray: Ray, mode: str
) -> None:
    """KubeRay adds an init container of 200m CPU and 256Mi to every worker, which its task groups do not
    count: workers of 100m and 128Mi request 200m and 256Mi. With only the head's node and one more with
    room for exactly two such workers, they still start together, each on room of its real size."""
    cluster, namespace, pool, recorder = ray.cluster, ray.namespace, ray.pool, ray.recorder
    place = pool(2, cpu="2", memory="4Gi")
    fill(cluster, namespace, place, place.nodes[1], "blocker", "1600m")  # leaves 400m: two workers of 200m
    create_ray_cluster(cluster, namespace, "ray", place, workers=(("tiny", 2, "100m", "128Mi"),))
    pods = wait_until(lambda: all_running(cluster, namespace, "ray", 3), 90)
    assert_on_held_room(recorder, pods)
    assert not events_for(cluster, namespace, "TaskGroupResourceMismatch")
    if mode == "yunikorn":  # the task group KubeRay wrote is made as large as its members, and it is said
        posted(  # after its plan's writes (started directly: the pods' release), so it may trail their run
            cluster,
            namespace,
            "TaskGroupWarning",
            saying=lambda note: (
                note.startswith("task group tiny: its members request more than its")
                and "cpu 200m > 100m, memory 256Mi > 128Mi" in note
            ),
        )


@pytest.mark.every_version
@pytest.mark.parametrize("mode", MODES)
def test_a_ray_cluster_larger_than_the_free_room_waits_whole_and_starts_when_room_frees(ray: Ray, mode: str) -> None:
    """Room for the head and its small workers but not its large one: no pod of it runs (not the head
    alone), a GangWaiting event names what does not fit; once a blocker goes, all start."""
    cluster, namespace, pool, recorder = ray.cluster, ray.namespace, ray.pool, ray.recorder
    place = pool(2, cpu="3", memory="16Gi")
    for index, node in enumerate(place.nodes):
        fill(cluster, namespace, place, node, f"blocker-{index}")
    # Free: 2 + 2 CPUs. The gang needs 1 + 1 + 1 + 2: it fits only once a node has 3 free.
    create_ray_cluster(cluster, namespace, "ray", place)
    waiting = wait_until(lambda: events_for(cluster, namespace, "GangWaiting"), 60)[0]
    # It names the group of the gang that does not fit, and its size: the large worker placed first (the
    # largest pods are placed first), the head beside it, one small worker of two.
    assert re.search(r"ray\S*/small\S*: 1 of 2 pods of \(cpu 1, memory 1Gi\) fit", waiting["message"]), waiting

    # The operator creates the pods one after another: once all four exist, none is bound.
    def all_four() -> list[dict[str, Any]] | None:
        pods = ray_pods(cluster, namespace, "ray")
        return pods if len(pods) == 4 else None

    pods = wait_until(all_four, 30)  # read from the API: the recorder's watch may not have seen the last yet
    assert not [pod["metadata"]["name"] for pod in pods if pod["spec"].get("nodeName")], "a Ray pod ran alone"

    cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/blocker-0", {"gracePeriodSeconds": 0})
    pods = wait_until(lambda: all_running(cluster, namespace, "ray", 4), 90)
    assert_on_held_room(recorder, pods)


@pytest.mark.parametrize("mode", MODES)
def test_a_ray_cluster_out_of_time_under_hard_style_fails_clearly(ray: Ray, mode: str) -> None:
    """A gang that never fits, with YuniKorn's Hard style and a 5 s timeout on its pods' templates: at
    its timeout its pods are failed with the reason and an ApplicationFailed event says why; none ran."""
    cluster, namespace, pool, recorder = ray.cluster, ray.namespace, ray.pool, ray.recorder
    place = pool(1, cpu="3", memory="16Gi")
    hard = {keys.SCHEDULING_POLICY_PARAMETERS: "placeholderTimeoutInSeconds=5 gangSchedulingStyle=Hard"}
    create_ray_cluster(cluster, namespace, "ray", place, hard)
    failed = wait_until(lambda: events_for(cluster, namespace, "ApplicationFailed"), 90)
    assert any("Hard style fails the application" in e["message"] for e in failed), failed

    def failed_for_the_timeout() -> bool:  # as the recorder's watch sees them, which may trail the event
        reasons = {
            (pod.get("status") or {}).get("reason")
            for name, pod in list(recorder.latest.items())
            if name.startswith("ray-") and (pod.get("status") or {}).get("phase") == "Failed"
        }
        return "ResourceReservationTimeout" in reasons

    wait_until(failed_for_the_timeout, 30)
    assert not any(bound_at(pod) for name, pod in recorder.latest.items() if name.startswith("ray-"))


@pytest.mark.parametrize("mode", MODES)
def test_scaling_a_running_ray_cluster_starts_and_removes_workers_without_disturbing_the_rest(
    ray: Ray, mode: str
) -> None:
    """As Ray's autoscaler does, by editing a worker group's replicas: a worker beyond the minimum is
    scheduled normally (no placeholder), the pods already running stay where they are, and scaling
    back down removes a worker and leaves nothing of yuniplace behind."""
    cluster, namespace, pool, recorder = ray.cluster, ray.namespace, ray.pool, ray.recorder
    place = pool(3, cpu="4", memory="16Gi")
    create_ray_cluster(cluster, namespace, "ray", place)
    before = {
        p["metadata"]["uid"]: p["spec"]["nodeName"]
        for p in wait_until(lambda: all_running(cluster, namespace, "ray", 4), 90)
    }
    made = set(recorder.placeholder_uids)
    path = f"{RAY}/namespaces/{namespace}/rayclusters/ray"

    def scale(replicas: int) -> None:
        groups = cluster.client.get(path)["spec"]["workerGroupSpecs"]
        groups[0]["replicas"] = replicas
        cluster.client.patch(path, {"spec": {"workerGroupSpecs": groups}})

    scale(SMALL[1] + 2)
    grown = wait_until(lambda: all_running(cluster, namespace, "ray", 6), 60)
    assert set(recorder.placeholder_uids) == made, "scaling up made placeholders"
    now = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in grown}
    assert all(now.get(uid) == node for uid, node in before.items()), "a running pod was disturbed"
    for pod in grown:
        if pod["metadata"]["uid"] not in before:  # a new worker: released by yuniplace, without a seat
            assert keys.GATE in recorder.gates_seen[pod["metadata"]["name"]]

    scale(SMALL[1])
    wait_until(lambda: all_running(cluster, namespace, "ray", 4), 60)
    assert not placeholders(cluster, namespace)
    assert not any(
        keys.GATE in [g["name"] for g in p["spec"].get("schedulingGates") or []]
        for p in ray_pods(cluster, namespace, "ray")
    )


@pytest.mark.parametrize("mode", ["yunikorn"])
def test_a_ray_job_runs_its_submitter_on_its_gang_started_cluster(ray: Ray, mode: str) -> None:
    """A RayJob labelled as KubeRay's documentation says: the operator creates its RayCluster, whose
    gang (YuniKorn's task groups, with the submitter's group) starts without waiting for the submitter;
    once the cluster is Ready the operator creates the submitter Job, whose pod takes the room held for
    it and completes."""
    cluster, namespace, pool, recorder = ray.cluster, ray.namespace, ray.pool, ray.recorder
    place = pool(3, cpu="4", memory="16Gi")
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "job", "labels": gang_labels("job")},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "rayClusterSpec": ray_cluster_spec(place),
            "submitterPodTemplate": {
                "spec": {
                    **group(place, "submitter", "500m", "200Mi")["spec"],
                    "restartPolicy": "Never",
                }
            },
        },
    }
    job["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["name"] = "ray-job-submitter"
    cluster.client.create(f"{RAY}/namespaces/{namespace}/rayjobs", job)

    def ray_cluster_name() -> str | None:
        return (cluster.client.get(f"{RAY}/namespaces/{namespace}/rayjobs/job").get("status") or {}).get(
            "rayClusterName"
        )

    name = wait_until(ray_cluster_name, 60)
    pods = wait_until(lambda: all_running(cluster, namespace, name, 4), 90)
    assert_on_held_room(recorder, pods)
    ran = max(str(bound_at(pod)) for pod in pods)

    def submitter_succeeded() -> bool:
        try:
            status_ = cluster.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/job").get("status") or {}
        except NotFound:
            return False
        return bool(status_.get("succeeded"))

    wait_until(submitter_succeeded, 90)
    (submitter,) = [
        p for n, p in recorder.latest.items() if (p["metadata"].get("labels") or {}).get("job-name") == "job"
    ]
    assert submitter["metadata"]["creationTimestamp"] >= ran[:19] + "Z", "the submitter came before its cluster ran"
    assert keys.GATE in recorder.gates_seen[submitter["metadata"]["name"]]
    notes = submitter["metadata"].get("annotations") or {}
    assert notes.get(keys.TASK_GROUP_NAME) == "submittergroup" and keys.SWAP_PLACEHOLDER in notes, notes


@pytest.mark.parametrize("mode", MODES)
def test_deleting_a_ray_cluster_mid_reservation_leaves_nothing_behind(ray: Ray, mode: str) -> None:
    """A RayCluster larger than all its nodes together is reserving (GangExceedsCapacity: placeholders
    made, some never placed) when it is deleted: no placeholder and no gated pod is left."""
    cluster, namespace, pool = ray.cluster, ray.namespace, ray.pool
    place = pool(1, cpu="4", memory="16Gi")
    create_ray_cluster(cluster, namespace, "ray", place)
    wait_until(lambda: events_for(cluster, namespace, "GangExceedsCapacity"), 60)
    wait_until(lambda: placeholders(cluster, namespace), 30)
    cluster.client.delete(f"{RAY}/namespaces/{namespace}/rayclusters/ray")

    def cleared() -> bool:
        pods = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        return not pods

    wait_until(cleared, 60)


@pytest.mark.parametrize("mode", ["yunikorn"])
def test_a_ray_cluster_whose_worker_never_comes_up_is_restarted_whole(ray: Ray, mode: str) -> None:
    """A Ray cluster asking `restart` whose worker is not Ready within its ready timeout (it could not
    join the head, say): its pods are evicted together, KubeRay makes them again, and they start whole
    on room held for each, as a new attempt."""
    cluster, namespace, pool, recorder = ray.cluster, ray.namespace, ray.pool, ray.recorder
    place = pool(3, cpu="4", memory="16Gi")
    asks = {keys.ON_MEMBER_LOST: "restart", keys.READY_TIMEOUT: "3"}
    create_ray_cluster(cluster, namespace, "ray", place, asks)
    first = wait_until(lambda: all_running(cluster, namespace, "ray", 4), 90)
    worker = next(pod for pod in first if "worker" in pod["metadata"]["name"])
    name = worker["metadata"]["name"]
    make_unready(cluster, namespace, name)
    restarting = wait_until(lambda: events_for(cluster, namespace, "GangRestarting"), 60)[0]
    assert "evicting its 4 pods together for RayCluster ray to make them again" in restarting["message"], restarting
    old = {pod["metadata"]["uid"] for pod in first}

    def started_again() -> list[dict[str, Any]] | None:
        pods = [pod for pod in ray_pods(cluster, namespace, "ray") if not pod["metadata"].get("deletionTimestamp")]
        fresh = [pod for pod in pods if pod["metadata"]["uid"] not in old]
        return fresh if len(fresh) == 4 and all(is_running(pod) for pod in fresh) else None

    assert_on_held_room(recorder, wait_until(started_again, 90))


@pytest.mark.parametrize("mode", ["yunikorn"])
def test_a_ray_cluster_made_again_after_hard_style_failed_it_backs_off_and_its_attempts_end(
    ray: Ray, mode: str
) -> None:
    """KubeRay makes a Ray cluster's failed pods again, without end. A gang that never fits, Hard style,
    restart limit 1: its first attempt fails out of time, KubeRay's second waits a backoff (GangBackingOff)
    before it reserves and fails too, and from then on every pod KubeRay makes fails at once: no further
    reservation, and `yuniplace status` says why the gang failed."""
    cluster, namespace, pool = ray.cluster, ray.namespace, ray.pool
    place = pool(1, cpu="3", memory="16Gi")
    hard = {
        keys.SCHEDULING_POLICY_PARAMETERS: "placeholderTimeoutInSeconds=5 gangSchedulingStyle=Hard",
        keys.RESTART_LIMIT: "1",
    }
    create_ray_cluster(cluster, namespace, "ray", place, hard)

    def said(reason: str, phrase: str) -> dict[str, Any] | None:
        return next((e for e in events_for(cluster, namespace, reason) if phrase in e["message"]), None)

    first = wait_until(lambda: said("ApplicationFailed", "attempt 2 of at most 2 waits a backoff"), 90)
    backing_off = wait_until(lambda: said("GangBackingOff", "attempt 2 of at most 2 reserves in"), 90)
    assert "RayCluster ray made the gang again after 1 of its attempts ran out of time" in backing_off["message"]
    last = wait_until(lambda: said("ApplicationFailed", "past its limit (yuniplace.io/restart-limit: 1)"), 120)
    assert p.parse_time(last["eventTime"]) > p.parse_time(first["eventTime"])  # type: ignore[operator]
    ended_at = p.parse_time(last["eventTime"])
    assert ended_at is not None

    def failed_at_once() -> list[dict[str, Any]]:
        """Pods KubeRay made once the attempts ended, failed by yuniplace before any was bound."""
        return [
            pod
            for pod in ray_pods(cluster, namespace, "ray")
            if p.created_at(pod) > ended_at + 1
            and p.phase(pod) == "Failed"
            and p.status_reason(pod) == "ApplicationFailed"
            and not bound_at(pod)
        ]

    wait_until(lambda: len(failed_at_once()) >= 3, 120)  # KubeRay keeps making them; each fails at once
    reservations = events_for(cluster, namespace, "CreatingPlaceholders")
    assert len(reservations) == 2, [e["message"] for e in reservations]

    # KubeRay deletes the failed pods and makes new ones several times a second, and `status` shows the pods
    # of the moment: between two of its rounds there are none, or new ones yuniplace has not failed yet.
    # Whenever it holds pods yuniplace has failed, it must say why.
    def failed_rows() -> list[dict[str, Any]]:
        rows = status.collect(cluster.client, namespace, None)
        said_failed = [row for row in rows if row["state"] == "Failed"]
        assert all(row["note"].startswith("failed: ") for row in said_failed), said_failed
        return said_failed

    wait_until(failed_rows, 30)
