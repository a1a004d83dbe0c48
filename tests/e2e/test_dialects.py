"""Each gang dialect's example (examples/dialects) through the whole gang flow on the real control
plane: placeholders, swap onto reserved nodes, the Job complete, nothing left behind; and a Volcano gang
of two tasks of different sizes, each task swapped into its own placeholders."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.support import (
    START_PATHS,
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    assert_started_whole,
    events_for,
    finish,
    is_running,
    make_pod,
    placeholders,
)
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects import coscheduling, koordinator, podgroup, volcano
from yuniplace.localcluster import wait_until
from yuniplace.tools import status

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "dialects"
# Where each kind of PodGroup is served.
POD_GROUP_APIS = {"scheduling.x-k8s.io/v1alpha1": podgroup.API, "scheduling.volcano.sh/v1beta1": keys.VOLCANO_API}


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def as_submitted(job: dict[str, Any], place: Placement) -> dict[str, Any]:
    """The example's Job on the test's own nodes, its pods gated as yuniplace's webhook gates them."""
    job = copy.deepcopy(job)
    spec = job["spec"]["template"]["spec"]
    spec["nodeSelector"] = dict(place.node_selector)
    spec["tolerations"] = list(place.tolerations)
    spec["schedulingGates"] = [{"name": keys.GATE}]
    return job


@pytest.mark.parametrize(
    ("example", "annotations"),
    [
        ("coscheduling-job.yaml", {}),
        ("koordinator-job.yaml", {}),
        # Koordinator reads an empty gang group as none: still one gang, never pods scheduled one by one.
        ("koordinator-job.yaml", {koordinator.GROUPS: ""}),
        ("podgroup.yaml", {}),
        ("volcano-job.yaml", {}),
    ],
    ids=["coscheduling", "koordinator", "koordinator-empty-groups", "podgroup", "volcano"],
)
@pytest.mark.parametrize("start", START_PATHS)
def test_dialect_example_runs_through_the_gang_flow(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    pod_group_api: None,
    tmp_path: Path,
    example: str,
    annotations: dict[str, str],
    start: str,
) -> None:
    """Whole, the example's Job starts directly on the nodes admission chose (by default), or through
    its placeholders (--placeholders=always): every member on its seat, or on a reserved node."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, *START_PATHS[start])
    process.start()
    try:
        place = pool(4, cpu="4", memory="16Gi")
        pod_group: dict[str, Any] | None = None
        job: dict[str, Any] | None = None
        for document in documents(example):
            if document["kind"] == "PodGroup":
                api = POD_GROUP_APIS[document["apiVersion"]]
                pod_group = cluster.client.create(f"{api}/namespaces/{namespace}/podgroups", document)
            elif document["kind"] == "Job":
                job = as_submitted(document, place)
                job["spec"]["template"]["metadata"].setdefault("annotations", {}).update(annotations)
                cluster.client.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
        assert job is not None
        name, completions = job["metadata"]["name"], job["spec"]["completions"]

        def complete() -> bool:
            status = cluster.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}").get("status", {})
            return status.get("succeeded", 0) == completions

        wait_until(complete, 90)
        pods = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={name}")["items"]
        assert len(pods) == completions
        # The example's pods are alike: one task group, of their role and shape (or their Volcano task).
        (group,) = {p.task_group_name(pod) for pod in pods}
        assert group is not None
        assert_started_whole(start, recorder, pods, group)
        wait_until(lambda: not placeholders(cluster, namespace), 30)
        rows = status.collect(cluster.client, namespace, name)
        assert [(r["application"], r["groups"][0]["name"], r["groups"][0]["required"]) for r in rows] == [
            (name, group, completions)
        ], rows
        if pod_group is not None and pod_group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1":
            path = f"{podgroup.API}/namespaces/{namespace}/podgroups/{pod_group['metadata']['name']}"
            shown = wait_until(
                lambda: (s := cluster.client.get(path).get("status", {})).get("phase") == "Finished" and s, 30
            )
            assert shown["succeeded"] == completions and shown["scheduled"] == completions, shown
        elif pod_group is not None:  # Volcano's: Completed once every member ended, with Volcano's counts
            path = f"{keys.VOLCANO_API}/namespaces/{namespace}/podgroups/{pod_group['metadata']['name']}"
            shown = wait_until(
                lambda: (s := cluster.client.get(path).get("status", {})).get("phase") == "Completed" and s, 30
            )
            assert shown["succeeded"] == completions and not shown.get("running") and not shown.get("failed"), shown
            [scheduled] = [c for c in shown["conditions"] if c["type"] == "Scheduled"]
            assert scheduled["status"] == "True", shown
    finally:
        assert process.stop() == 0, process.log()


def volcano_task_pod(name: str, task: str, cpu: str, memory: str, place: Placement) -> dict[str, Any]:
    """A pod of a Volcano Job's task, as its controller marks it, gated as yuniplace's webhook gates it."""
    pod = make_pod(
        name,
        cpu=cpu,
        memory=memory,
        gates=[keys.GATE],
        annotations={volcano.GROUP_NAME: "tf-volcano", volcano.TASK: task},
    )
    return place.pin(pod)


def test_volcano_tasks_of_different_sizes_each_take_their_own_placeholders(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    pod_group_api: None,
    tmp_path: Path,
) -> None:
    """A parameter server and two workers three times its size (spec.minTaskMember), and an evaluator
    whose task has no minimum: the placeholders are sized per task, each member lands on a node its
    own task's placeholder held, the evaluator starts with the gang, and the PodGroup's status follows
    to Completed."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, "--placeholders=always")
    process.start()
    try:
        # Room for one worker per node: a worker placed where another's room was reserved could not fit.
        place = pool(3, cpu="4", memory="8Gi")
        path = f"{keys.VOLCANO_API}/namespaces/{namespace}/podgroups"
        cluster.client.create(
            path,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "tf-volcano"},
                "spec": {"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2}},
            },
        )
        members = {
            "tf-ps-0": ("ps", "1", "1Gi"),
            "tf-worker-0": ("worker", "3", "4Gi"),
            "tf-worker-1": ("worker", "3", "4Gi"),
            "tf-evaluator-0": ("evaluator", "200m", "256Mi"),
        }
        for name, (task, cpu, memory) in members.items():
            cluster.create_pod(namespace, volcano_task_pod(name, task, cpu, memory, place))
        running = {name: cluster.wait_pod(namespace, name, is_running) for name in members}

        # One placeholder per member of each task's minimum, each sized like its task's pods.
        created = {name: recorder.latest[name] for name in recorder.placeholder_uids}
        sizes = sorted(
            (
                ph["metadata"]["labels"][keys.PLACEHOLDER_GROUP],
                ph["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            )
            for ph in created.values()
        )
        assert sizes == [("ps", "1"), ("worker", "3"), ("worker", "3")], sizes
        assert all(len(uids) == 1 for uids in recorder.placeholder_uids.values()), recorder.placeholder_uids
        assert running["tf-ps-0"]["spec"]["nodeName"] in recorder.group_nodes("ps")
        workers = {running[name]["spec"]["nodeName"] for name in ("tf-worker-0", "tf-worker-1")}
        assert workers == recorder.group_nodes("worker") and len(workers) == 2, (workers, recorder.placeholder_nodes)
        assert not running["tf-evaluator-0"]["spec"].get("schedulingGates")
        wait_until(lambda: not placeholders(cluster, namespace), 30)

        shown = wait_until(
            lambda: (s := cluster.client.get(f"{path}/tf-volcano").get("status", {})).get("running") == 4 and s, 30
        )
        assert shown["phase"] == "Running", shown
        for name in members:
            finish(cluster, namespace, name)
        shown = wait_until(
            lambda: (s := cluster.client.get(f"{path}/tf-volcano").get("status", {})).get("phase") == "Completed" and s,
            30,
        )
        assert shown["succeeded"] == 4 and not shown.get("running") and not shown.get("failed"), shown
    finally:
        assert process.stop() == 0, process.log()


@pytest.mark.parametrize(
    ("labels", "annotations", "key"),
    [
        (
            {coscheduling.NAME: "too-big", coscheduling.MIN_AVAILABLE: "5000"},
            {},
            "label " + coscheduling.MIN_AVAILABLE,
        ),
        (
            {},
            {koordinator.NAME: "too-big", koordinator.MIN_AVAILABLE: "5000"},
            koordinator.MIN_AVAILABLE,
        ),
    ],
    ids=["coscheduling", "koordinator"],
)
def test_a_bad_minimum_is_reported_with_the_key_the_user_wrote(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    tmp_path: Path,
    labels: dict[str, str],
    annotations: dict[str, str],
    key: str,
) -> None:
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path)
    process.start()
    try:
        place = pool(1)
        member = place.pin(make_pod("too-big-0", gates=[keys.GATE], labels=labels, annotations=annotations))
        cluster.create_pod(namespace, member)
        errors = wait_until(lambda: events_for(cluster, namespace, "TaskGroupsError"), 30)
        message = errors[0]["message"]
        assert f'{key}: "5000" must be at most 1000 pods' in message and "task-groups" not in message, message
    finally:
        assert process.stop() == 0, process.log()


def test_a_coscheduling_gang_short_of_its_minimum_starts_no_pod_until_the_last_is_created(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], recorder: NamespaceRecorder, tmp_path: Path
) -> None:
    """Coscheduling's own rule (its PreFilter turns a gang's pods away while fewer than min-available
    exist): 2 of 3 pods created, the gang's room reserved, and neither starts; the third starts all three."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path)
    process.start()
    try:
        place = pool(3, cpu="4", memory="16Gi")
        labels = {coscheduling.NAME: "mpi", coscheduling.MIN_AVAILABLE: "3"}

        def member(index: int) -> None:
            cluster.create_pod(
                namespace, place.pin(make_pod(f"mpi-{index}", cpu="1", gates=[keys.GATE], labels=labels))
            )

        member(0)
        member(1)
        wait_until(lambda: len([p for p in placeholders(cluster, namespace) if p["spec"].get("nodeName")]) == 3, 60)
        [complete] = wait_until(lambda: events_for(cluster, namespace, "GangReservationComplete"), 30)
        assert "start once all 3 exist (2 so far), as Coscheduling starts a gang" in complete["message"], complete
        pods = {n: cluster.client.get(f"/api/v1/namespaces/{namespace}/pods/mpi-{n}") for n in (0, 1)}
        assert all(keys.GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or []] for pod in pods.values())
        member(2)
        for index in range(3):
            cluster.wait_pod(namespace, f"mpi-{index}", is_running)
        assert len(recorder.placeholder_uids) == 3
    finally:
        assert process.stop() == 0, process.log()


def gang_pods(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = cluster.client.get(
        f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={job}"
    )["items"]
    return pods


def record_of(cluster: Cluster, namespace: str, job: str) -> dict[str, str]:
    """The annotations of the Job's originator: the pod carrying the application's record (its state,
    or its attempts while it stays Pending)."""
    notes = [pod["metadata"].get("annotations") or {} for pod in gang_pods(cluster, namespace, job)]
    return next((n for n in notes if keys.STATE in n or keys.ATTEMPTS in n), {})


def gated(pod: dict[str, Any]) -> bool:
    return keys.GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or []]


@pytest.mark.every_version
def test_a_koordinator_gang_out_of_its_waiting_time_is_marked_timed_out_and_never_scheduled(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    tmp_path: Path,
) -> None:
    """Koordinator's documented example with a 5 s waiting-time and room for 3 of its 4 pods: as
    koord-scheduler does with a gang out of time, every pod is marked
    gang.scheduling.koordinator.sh/timeout=true and none is ever bound (not 3 of 4 scheduled normally);
    no placeholder is left, the events say what happened and what to do, and a pod of the gang created
    later is marked and kept too."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path)
    process.start()
    bound: set[str] = set()

    def note_bound(pod: dict[str, Any]) -> None:
        if pod["spec"].get("nodeName") and not (pod["metadata"].get("labels") or {}).get(keys.PLACEHOLDER):
            bound.add(pod["metadata"]["name"])

    recorder.callbacks.append(note_bound)
    try:
        place = pool(3, cpu="4", memory="16Gi")  # one 3-CPU pod a node: room for 3 of the 4
        [document] = documents("koordinator-job.yaml")
        job = as_submitted(document, place)
        template = job["spec"]["template"]
        template["metadata"]["annotations"][koordinator.WAITING_TIME] = "5s"
        template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
        name = job["metadata"]["name"]
        cluster.client.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

        record = wait_until(
            lambda: (r := record_of(cluster, namespace, name)).get(keys.STATE) in ("Failed", "Resuming") and r, 90
        )
        assert record[keys.STATE] == "Failed" and record.get(koordinator.TIMEOUT) == "true", record
        wait_until(lambda: not placeholders(cluster, namespace), 30)

        def all_marked() -> list[dict[str, Any]] | None:
            pods = gang_pods(cluster, namespace, name)
            notes = [pod["metadata"].get("annotations") or {} for pod in pods]
            return pods if pods and all(n.get(koordinator.TIMEOUT) == "true" for n in notes) else None

        marked = wait_until(all_marked, 30)
        assert len(marked) == 4 and all(gated(pod) for pod in marked), [
            (pod["metadata"]["name"], pod["spec"].get("schedulingGates")) for pod in marked
        ]
        events = wait_until(lambda: len(e := events_for(cluster, namespace, "GangTimedOut")) == 4 and e, 30)
        notes = [event["message"] for event in events]
        assert all("gang.scheduling.koordinator.sh/timeout=true and will not be scheduled" in n for n in notes), notes
        assert any("delete them and create them again" in n for n in notes), notes

        # A pod of the gang created afterwards is marked and kept as well.
        late = place.pin(
            make_pod(
                "train-koordinator-late", cpu="3", gates=[keys.GATE], annotations=template["metadata"]["annotations"]
            )
        )
        cluster.create_pod(namespace, late)
        kept = cluster.wait_pod(
            namespace,
            "train-koordinator-late",
            lambda pod: (pod["metadata"].get("annotations") or {}).get(koordinator.TIMEOUT) == "true",
        )
        assert gated(kept), kept["spec"]
        wait_until(lambda: len(events_for(cluster, namespace, "GangTimedOut")) == 5, 30)
        assert all(gated(pod) for pod in gang_pods(cluster, namespace, name))
        assert not bound, f"pods of a gang out of time were bound: {sorted(bound)}"
    finally:
        assert process.stop() == 0, process.log()


@pytest.mark.every_version
def test_a_podgroup_gang_out_of_time_gives_its_reservation_back_and_starts_whole_once_there_is_room(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    pod_group_api: None,
    tmp_path: Path,
) -> None:
    """scheduler-plugins' documented PodGroup example with scheduleTimeoutSeconds 5, while another pod
    holds one of the three nodes it needs (so admission holds it first in its queue, its timeout
    running): at the timeout its pods stay gated (none started, none failed, not 2 of 3 scheduled
    normally), nothing of it is left reserved, and an event says it tries again; it goes on trying, and
    once the other pod is gone an attempt reserves the gang and it starts whole."""
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, "--strict-backoff=2")
    process.start()
    try:
        place = pool(3, cpu="4", memory="16Gi")  # one 3-CPU pod a node
        cluster.create_pod(namespace, place.pin(make_pod("blocker", cpu="3")))
        cluster.wait_pod(namespace, "blocker", is_running)
        pod_group, document = documents("podgroup.yaml")
        pod_group["spec"]["scheduleTimeoutSeconds"] = 5
        cluster.client.create(f"{podgroup.API}/namespaces/{namespace}/podgroups", pod_group)
        job = as_submitted(document, place)
        job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
        name, completions = job["metadata"]["name"], job["spec"]["completions"]
        cluster.client.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

        def decided() -> dict[str, str] | None:
            """The record once the timeout has been acted on: retried (new), or fallen back (before)."""
            record = record_of(cluster, namespace, name)
            return record if keys.ATTEMPTS in record or record.get(keys.STATE) in ("Resuming", "Failed") else None

        record = wait_until(decided, 60)
        assert keys.ATTEMPTS in record and record.get(keys.STATE, "Pending") in ("Pending", "Reserving"), record
        timed_out = wait_until(lambda: events_for(cluster, namespace, "PlaceholderTimeOut"), 30)[0]
        assert "within 5s" in timed_out["message"], timed_out
        released = wait_until(lambda: events_for(cluster, namespace, "GangReservationReleased"), 30)[0]
        assert "trying again in" in released["message"] and "still gated" in released["message"], released
        assert not placeholders(cluster, namespace)
        pods = gang_pods(cluster, namespace, name)
        assert all(gated(pod) and not pod["spec"].get("nodeName") for pod in pods), [
            (pod["metadata"]["name"], pod["spec"].get("nodeName"), pod["spec"].get("schedulingGates")) for pod in pods
        ]

        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/blocker", {"gracePeriodSeconds": 0})

        def complete() -> bool:
            status = cluster.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}").get("status", {})
            return status.get("succeeded", 0) == completions

        wait_until(complete, 120)
        reserved = recorder.group_nodes(str(p.task_group_name(gang_pods(cluster, namespace, name)[0])))
        ran = {pod["spec"]["nodeName"] for pod in gang_pods(cluster, namespace, name)}
        assert len(ran) == completions and ran <= reserved, (ran, reserved)
        wait_until(lambda: not placeholders(cluster, namespace), 30)
    finally:
        assert process.stop() == 0, process.log()
