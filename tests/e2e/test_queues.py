"""Queues on the real control plane: YuniKorn's own queues.yaml and Volcano's Queues deciding which gang
reserves first: limits holding gangs back while room is free and live edits letting them in, guarantees
borrowed and reclaimed (whole gangs, through the Eviction API), priority within a queue, node pools,
bad configurations refused while the last good one stays, and placeholders created for an autoscaler.
Outcomes and orders are asserted, never times."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.builders import queues_yaml
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    events_for,
    finish,
    gang_as_job,
    gang_job,
    is_running,
    make_pod,
    placeholders,
    posted,
    put_queues,
)
from yuniplace.gang import keys
from yuniplace.gang.pods import parse_time
from yuniplace.localcluster import wait_until

# CI runs these on every supported Kubernetes version, not only the default.
pytestmark = pytest.mark.every_version

SAMPLES = Path(__file__).resolve().parents[1] / "unit" / "data"
YUNIKORN_QUEUE = "yunikorn.apache.org/queue"
WAIT_S = 60.0

Pod = dict[str, Any]


# -- the queue configuration -------------------------------------------------------------------------


def configured(cluster: Cluster, namespace: str, reason: str, count: int = 1) -> list[dict[str, Any]]:
    """Wait for the `count`th QueuesApplied or QueuesRefused event on the queues ConfigMap."""
    return posted(cluster, namespace, reason, count=count, timeout_s=WAIT_S)


def status_queues(cluster: Cluster, configmap: str) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "yuniplace",
            "status",
            "--queues",
            f"--queues-configmap={configmap}",
            f"--kubeconfig={cluster.kubeconfig}",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def queue_row(report: Mapping[str, Any], queue: str) -> dict[str, Any]:
    return next(row for row in report["queues"] if row["queue"] == queue)


# -- gangs -------------------------------------------------------------------------------------------


def gang(
    cluster: Cluster, namespace: str, place: Placement, app: str, members: int, *, memory: str = "256Mi", **more: Any
) -> list[str]:
    """A gang of bare pods of 256Mi each unless told (the room of this file's nodes is counted in them)."""
    return gang_job(cluster, namespace, place, app, members, memory=memory, **more)


def halves_of_eight_cpus(
    cluster: Cluster,
    namespace: str,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
) -> tuple[str, str, Placement]:
    """Teams A and B, each guaranteed 4 of the 8 CPUs of two nodes, a namespace each, and a controller
    with that configuration applied."""
    a, b = tenant("a"), tenant("b")
    put_queues(
        cluster,
        namespace,
        queues_yaml(
            f"- name: {a}\n  resources:\n    guaranteed: {{vcore: 4}}",
            f"- name: {b}\n  resources:\n    guaranteed: {{vcore: 4}}",
            rules="- name: tag\n  value: namespace",
        ),
    )
    cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    return a, b, pool(2, cpu="4", memory="16Gi")


def budget(cluster: Cluster, namespace: str, app: str, *, min_available: int) -> None:
    """A PodDisruptionBudget, named after the application, over its pods."""
    cluster.client.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": app},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"spark-app-selector": app}}},
        },
    )


def budget_allows(cluster: Cluster, namespace: str, name: str, disruptions: int, healthy: int | None = None) -> None:
    """Wait until the disruption controller has computed the PodDisruptionBudget's status."""

    def computed() -> bool:
        status = cluster.client.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}").get(
            "status", {}
        )
        return status.get("disruptionsAllowed") == disruptions and (
            healthy is None or status.get("currentHealthy") == healthy
        )

    wait_until(computed, WAIT_S)


def app_pods(cluster: Cluster, namespace: str, app: str) -> list[Pod]:
    pods = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"spark-app-selector={app}")
    return [pod for pod in pods["items"] if pod["metadata"].get("labels", {}).get(keys.PLACEHOLDER) != "true"]


def running(cluster: Cluster, namespace: str, app: str, members: int) -> list[Pod]:
    """Wait until `members` pods of the application run (ignoring ones on their way out)."""

    def ready() -> list[Pod] | None:
        pods = [p for p in app_pods(cluster, namespace, app) if not p["metadata"].get("deletionTimestamp")]
        live = [p for p in pods if is_running(p)]
        return live if len(live) >= members else None

    try:
        return wait_until(ready, WAIT_S)  # type: ignore[no-any-return]
    except TimeoutError:
        states = [(p["metadata"]["name"], p["status"].get("phase")) for p in app_pods(cluster, namespace, app)]
        raise AssertionError(f"{namespace}/{app}: not {members} pods running within {WAIT_S}s: {states}") from None


def app_placeholders(cluster: Cluster, namespace: str, app: str) -> list[Pod]:
    return [p for p in placeholders(cluster, namespace) if p["metadata"]["labels"].get(keys.PLACEHOLDER_APP) == app]


def waiting(cluster: Cluster, namespace: str, app: str, *phrases: str) -> str:
    """Wait for a GangWaiting event of the application whose note says every phrase; return the note."""

    def found() -> str | None:
        for event in events_for(cluster, namespace, "GangWaiting"):
            if event["involvedObject"]["name"].startswith(f"{app}-") and all(p in event["message"] for p in phrases):
                return str(event["message"])
        return None

    try:
        return wait_until(found, WAIT_S)  # type: ignore[no-any-return]
    except TimeoutError:
        notes = [e["message"] for e in events_for(cluster, namespace, "GangWaiting")]
        raise AssertionError(f"no GangWaiting of {app} saying {phrases}: {notes}") from None


def nodes_of(pods: list[Pod]) -> set[str]:
    return {p["spec"]["nodeName"] for p in pods}


# -- 1. YuniKorn's own sample ------------------------------------------------------------------------


def test_yunikorn_sample_loads_a_queue_at_max_holds_its_next_gang_and_a_live_raise_admits_it(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    """YuniKorn's documentation sample (resource_quota_mgmt.md, static queues) loads as it is. Its
    advertisement queue may use 800000 bytes of memory: a first gang of four 150Ki pods fits, a second of
    two would pass it, so it waits while room is free, with a GangWaiting naming the limit; raising the max
    in the ConfigMap admits it, without a restart."""
    sample = (SAMPLES / "yunikorn-static-queues-sample.yaml").read_text()
    put_queues(cluster, namespace, sample, name="yunikorn-configs")
    controller = cluster_wide(f"--queues-configmap={namespace}/yunikorn-configs")
    [applied] = configured(cluster, namespace, "QueuesApplied")
    assert applied["involvedObject"]["kind"] == "ConfigMap" and "4 queues (3 taking applications)" in applied["message"]
    place = pool(1, cpu="16", memory="64Gi")
    queue = {YUNIKORN_QUEUE: "root.advertisement"}

    gang(cluster, namespace, place, "first", 4, memory="150Ki", labels=queue)
    running(cluster, namespace, "first", 4)
    gang(cluster, namespace, place, "second", 2, memory="150Ki", labels=queue)
    note = waiting(cluster, namespace, "second", "queue root.advertisement is at its max memory")
    assert "the gang needs" in note, note
    assert not app_placeholders(cluster, namespace, "second")  # 12 of the node's 16 CPUs are free
    report = status_queues(cluster, f"{namespace}/yunikorn-configs")
    row = queue_row(report, "root.advertisement")
    assert row["waitingApplications"] == [f"{namespace}/second"] and row["max"]["memory"] == "800000", row
    assert row["guaranteed"] == {"cpu": "50000", "memory": "500000"} and row["used"]["pods"] == "4", row

    put_queues(cluster, namespace, sample.replace("memory: 800000", "memory: 1000000"), name="yunikorn-configs")
    configured(cluster, namespace, "QueuesApplied", 2)
    running(cluster, namespace, "second", 2)
    assert controller.starts == 1


# -- 2. Two teams: borrowing and reclaim -------------------------------------------------------------


def test_two_teams_borrow_each_others_idle_half_and_reclaim_takes_the_newest_borrower_whole(
    cluster: Cluster,
    namespace: str,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
) -> None:
    """Teams A and B are each guaranteed half of 8 CPUs. A's two Jobs of 3 run (2 CPUs borrowed from B's
    idle half). B submits a gang of 4: A's newest Job is evicted whole through the Eviction API (its
    PodDisruptionBudget allows it), B's gang reserves and runs; the Job's pods come back, wait, and start
    once B's gang is done. A's older Job is never touched."""
    a, b, place = halves_of_eight_cpus(cluster, namespace, tenant, pool, cluster_wide)
    budget(cluster, a, "newer", min_available=0)  # a Job's pods can only have an integer minAvailable

    with NamespaceRecorder(cluster.client, a) as team_a:
        evicted: dict[str, str] = {}

        def note_eviction(pod: Pod) -> None:
            for c in pod.get("status", {}).get("conditions") or []:
                if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
                    evicted[pod["metadata"]["uid"]] = c.get("reason", "")

        team_a.callbacks.append(note_eviction)
        gang_as_job(cluster, a, place, "older", 3)
        older = running(cluster, a, "older", 3)
        gang_as_job(cluster, a, place, "newer", 3)
        newer = running(cluster, a, "newer", 3)
        budget_allows(cluster, a, "newer", 3)  # a budget not yet computed allows no eviction at all

        gang(cluster, b, place, "b-job", 4)
        note = waiting(cluster, b, "b-job", f"taking back room its queue root.{b} lent to root.{a}")
        assert "1 gang(s)" in note, note
        b_pods = running(cluster, b, "b-job", 4)
        assert nodes_of(b_pods) <= set(place.nodes)

        preempted = [e["message"] for e in posted(cluster, a, "GangPreempted", on="newer-")]
        taken_back = f"queue root.{b} takes back room it is guaranteed and lent to queue root.{a}"
        assert len(preempted) == 1 and taken_back in preempted[0], preempted
        assert "evicting all its pods, the whole gang" in preempted[0]
        # Every pod of the gang (B may start before the last eviction: it needs only 4 of the 5 CPUs).
        wait_until(lambda: {p["metadata"]["uid"] for p in newer} <= set(evicted), WAIT_S)
        assert set(evicted.values()) == {"EvictionByEvictionAPI"}, evicted
        assert not {p["metadata"]["uid"] for p in older} & set(evicted)
        assert {p["metadata"]["uid"] for p in running(cluster, a, "older", 3)} == {p["metadata"]["uid"] for p in older}

        # The Job makes its pods again; they wait for room, and start once B's gang is done.
        comeback = wait_until(
            lambda: [
                p for p in app_pods(cluster, a, "newer") if p["metadata"]["uid"] not in evicted and not is_running(p)
            ],
            WAIT_S,
        )
        assert all(keys.GATE in [g["name"] for g in p["spec"].get("schedulingGates") or []] for p in comeback)
        for pod in b_pods:
            finish(cluster, b, pod["metadata"]["name"])
        again = running(cluster, a, "newer", 3)
        assert not {p["metadata"]["uid"] for p in again} & set(evicted)


def test_a_queue_that_does_not_share_lends_nothing_until_it_does(
    cluster: Cluster,
    namespace: str,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
) -> None:
    """With sharing off on B, A's gang that would borrow waits while B's half is free, and says why; a
    live edit turning sharing on lets it in."""
    a, b = tenant("a"), tenant("b")

    def config(sharing: str) -> str:
        return queues_yaml(
            f"- name: {a}\n  resources:\n    guaranteed: {{vcore: 4}}",
            f"- name: {b}\n  properties:\n    yuniplace.io/sharing: '{sharing}'\n  resources:\n    guaranteed: {{vcore: 4}}",
            rules="- name: tag\n  value: namespace",
        )

    put_queues(cluster, namespace, config("false"))
    cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    place = pool(2, cpu="4", memory="16Gi")
    gang(cluster, a, place, "within", 4)
    running(cluster, a, "within", 4)
    gang(cluster, a, place, "beyond", 2)
    waiting(
        cluster,
        a,
        "beyond",
        f"the free cpu beyond queue root.{a}'s guarantee is guaranteed to queues that do not lend it",
    )
    assert not app_placeholders(cluster, a, "beyond")

    put_queues(cluster, namespace, config("true"))
    configured(cluster, namespace, "QueuesApplied", 2)
    running(cluster, a, "beyond", 2)


def test_a_gang_its_budget_protects_is_not_evicted_and_reclaim_takes_another_whole(
    cluster: Cluster,
    namespace: str,
    tenant: Callable[[str], str],
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
) -> None:
    """A's newest borrowing gang has a PodDisruptionBudget that allows no eviction: it keeps all its pods
    (GangPreempted says why), and reclaim evicts A's other borrowing gang instead, whole."""
    a, b, place = halves_of_eight_cpus(cluster, namespace, tenant, pool, cluster_wide)
    budget(cluster, a, "protected", min_available=3)
    gang(cluster, a, place, "spared", 3)
    spared = running(cluster, a, "spared", 3)
    gang(cluster, a, place, "protected", 3)
    protected = running(cluster, a, "protected", 3)
    budget_allows(cluster, a, "protected", 0, healthy=3)

    gang(cluster, b, place, "b-job", 4)
    running(cluster, b, "b-job", 4)
    [refusal] = [e["message"] for e in posted(cluster, a, "GangPreempted", on="protected-")]
    assert "cannot be evicted whole" in refusal, refusal
    assert {p["metadata"]["uid"] for p in running(cluster, a, "protected", 3)} == {
        p["metadata"]["uid"] for p in protected
    }
    wait_until(lambda: not app_pods(cluster, a, "spared"), WAIT_S)  # bare pods: evicted, gone
    taken = posted(cluster, a, "GangPreempted", on="spared-")
    assert taken and "evicting all its pods, the whole gang" in taken[0]["message"], taken
    assert len(spared) == 3


# -- 3. Priority -------------------------------------------------------------------------------------


def test_a_high_priority_gang_submitted_last_reserves_first_in_its_queue(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    priority_classes: Callable[[int], str],
) -> None:
    """Three low-priority gangs wait behind a gang that holds the queue's nodes; a high-priority gang
    submitted after them is admitted first when the room frees, and the low ones follow in arrival order."""
    put_queues(cluster, namespace, queues_yaml("- name: batch"))
    cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    place = pool(1, cpu="4", memory="16Gi")
    queue = {YUNIKORN_QUEUE: "root.batch"}
    low, high = priority_classes(10), priority_classes(1000)
    holder = gang(cluster, namespace, place, "holder", 4, labels=queue)
    running(cluster, namespace, "holder", 4)
    for name in ("low-1", "low-2", "low-3"):
        gang(cluster, namespace, place, name, 4, labels=queue, priority_class=low)
        waiting(cluster, namespace, name, "waiting for free capacity")
    gang(cluster, namespace, place, "urgent", 4, labels=queue, priority_class=high)
    waiting(cluster, namespace, "low-1", f"behind {namespace}/urgent")

    for name in holder:
        finish(cluster, namespace, name)
    urgent = running(cluster, namespace, "urgent", 4)
    assert not any(app_placeholders(cluster, namespace, f"low-{i}") for i in (1, 2, 3))
    assert not any(is_running(p) for i in (1, 2, 3) for p in app_pods(cluster, namespace, f"low-{i}"))
    for pod in urgent:
        finish(cluster, namespace, pod["metadata"]["name"])
    running(cluster, namespace, "low-1", 4)
    assert not any(is_running(p) for i in (2, 3) for p in app_pods(cluster, namespace, f"low-{i}"))


# -- 4. A node pool ----------------------------------------------------------------------------------


def test_a_pool_is_its_queues_own_lent_only_while_shared_and_reclaimed_by_its_owner(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
) -> None:
    """Queue ml owns the nodes labelled gpu: its gangs go there only. Queue etl fills its own nodes;
    its next gang does not go to the pool while ml does not share it, does once sharing is on, and is
    evicted whole when ml needs its pool back."""
    gpu_label = {"e2e.yuniplace.io/gpu": namespace[-6:]}

    def config(sharing: str) -> str:
        return queues_yaml(
            "- name: ml\n  properties:\n    yuniplace.io/node-selector: e2e.yuniplace.io/gpu="
            f"{namespace[-6:]}\n    yuniplace.io/sharing: '{sharing}'\n  resources:\n    guaranteed: {{vcore: 8}}",
            "- name: etl\n  resources:\n    guaranteed: {vcore: 8}",
        )

    put_queues(cluster, namespace, config("false"))
    cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    place = pool(2, cpu="4", memory="16Gi")
    gpu_nodes = set(pool(2, cpu="4", memory="16Gi", labels=gpu_label).nodes)
    etl, ml = {YUNIKORN_QUEUE: "root.etl"}, {YUNIKORN_QUEUE: "root.ml"}

    gang(cluster, namespace, place, "etl-1", 8, labels=etl)
    assert not nodes_of(running(cluster, namespace, "etl-1", 8)) & gpu_nodes
    gang(cluster, namespace, place, "etl-2", 4, labels=etl)
    waiting(cluster, namespace, "etl-2", "waiting for free capacity")
    assert not app_placeholders(cluster, namespace, "etl-2")

    put_queues(cluster, namespace, config("true"))
    configured(cluster, namespace, "QueuesApplied", 2)
    assert nodes_of(running(cluster, namespace, "etl-2", 4)) <= gpu_nodes
    report = status_queues(cluster, f"{namespace}/queues")
    [gpu_pool] = report["pools"]
    assert (gpu_pool["queue"], gpu_pool["nodes"], gpu_pool["sharing"]) == ("root.ml", 2, True), gpu_pool
    assert gpu_pool["shared"]["cpu"] == "4" and queue_row(report, "root.ml")["lent"]["cpu"] == "4", report

    gang(cluster, namespace, place, "train", 8, labels=ml)
    assert nodes_of(running(cluster, namespace, "train", 8)) == gpu_nodes
    wait_until(lambda: not app_pods(cluster, namespace, "etl-2"), WAIT_S)
    taken = posted(cluster, namespace, "GangPreempted", on="etl-2-")
    assert taken and "queue root.ml takes back room" in taken[0]["message"], taken
    assert len(running(cluster, namespace, "etl-1", 8)) == 8


# -- 5. Volcano --------------------------------------------------------------------------------------


def volcano_queue(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"capability": {"cpu": cpu}, "reclaimable": True},
    }


def volcano_gang(cluster: Cluster, namespace: str, place: Placement, name: str, members: int, queue: str) -> list[str]:
    cluster.client.create(
        f"{keys.VOLCANO_API}/namespaces/{namespace}/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": members, "queue": queue},
        },
    )
    names = [f"{name}-{i}" for i in range(members)]
    for pod_name in names:
        pod = place.pin(
            make_pod(
                pod_name, cpu="1", memory="256Mi", gates=[keys.GATE], annotations={"scheduling.k8s.io/group-name": name}
            )
        )
        cluster.create_pod(namespace, pod)
    return names


def pod_group_phase(cluster: Cluster, namespace: str, name: str) -> str:
    return str(
        cluster.client.get(f"{keys.VOLCANO_API}/namespaces/{namespace}/podgroups/{name}").get("status", {}).get("phase")
    )


@pytest.mark.usefixtures("pod_group_api")
def test_a_volcano_queues_capability_limits_its_podgroups_and_their_status_follows(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    """A Volcano Queue of capability 4 CPUs: a PodGroup of 4 runs, the next one waits while room is free
    (Pending), and runs (Running) once the capability is raised; the first ends Completed."""
    queue = f"e2e-{namespace[-6:]}"
    cluster.client.create(f"{keys.VOLCANO_API}/queues", volcano_queue(queue, "4"))
    try:
        cluster_wide()
        place = pool(1, cpu="16", memory="64Gi")
        first = volcano_gang(cluster, namespace, place, "first", 4, queue)
        for name in first:
            cluster.wait_pod(namespace, name, is_running)
        wait_until(lambda: pod_group_phase(cluster, namespace, "first") == "Running", WAIT_S)
        second = volcano_gang(cluster, namespace, place, "second", 2, queue)
        note = waiting(cluster, namespace, "second", f"queue root.{queue} is at its max cpu: 4 of 4 used")
        assert "the gang needs 2" in note, note
        assert pod_group_phase(cluster, namespace, "second") == "Pending"
        assert not placeholders(cluster, namespace)

        cluster.client.patch(f"{keys.VOLCANO_API}/queues/{queue}", {"spec": {"capability": {"cpu": "8"}}})
        for name in second:
            cluster.wait_pod(namespace, name, is_running)
        wait_until(lambda: pod_group_phase(cluster, namespace, "second") == "Running", WAIT_S)
        for name in first:
            finish(cluster, namespace, name)
        wait_until(lambda: pod_group_phase(cluster, namespace, "first") == "Completed", WAIT_S)
    finally:
        cluster.client.delete(f"{keys.VOLCANO_API}/queues/{queue}")


# -- 6. A bad configuration --------------------------------------------------------------------------

MALFORMED = """
partitions:
  - name: default
    placementrules:
      - name: fixed
        value: team
        parent:
          name: fixed
          value: root.nowhere
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: batch
            resources:
              guaranteed: {vcore: 8}
              max: {vcore: 4}
          - name: team
            resources:
              max: {memory: lots}
          - name: team
"""


@pytest.mark.usefixtures("pod_group_api")
def test_a_malformed_configuration_is_refused_field_by_field_and_the_last_good_one_stays(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    tmp_path: Path,
) -> None:
    """An edit with an unknown parent, a max below its guarantee, a bad quantity and a duplicate name is
    refused with each problem named (event on the ConfigMap, `yuniplace validate`); the queue's max in
    force before stays: its waiting gang still waits, its running gang is untouched. A Volcano Queue with
    an unknown parent is refused on itself. A good edit then applies."""
    good = queues_yaml("- name: batch\n  resources:\n    max: {vcore: 4}")
    put_queues(cluster, namespace, good)
    controller = cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    place = pool(1, cpu="16", memory="64Gi")
    queue = {YUNIKORN_QUEUE: "root.batch"}
    gang(cluster, namespace, place, "first", 4, labels=queue)
    first = running(cluster, namespace, "first", 4)
    running_uids = {p["metadata"]["uid"] for p in first}
    gang(cluster, namespace, place, "second", 2, labels=queue)
    waiting(cluster, namespace, "second", "queue root.batch is at its max cpu")

    put_queues(cluster, namespace, MALFORMED)
    [refused] = configured(cluster, namespace, "QueuesRefused")
    note = refused["message"]
    assert note.startswith("refused, its previous queues stay in force: "), note
    for problem in ("root.batch", "resources.max.memory", '"lots"', "root.nowhere", "root.team"):
        assert problem in note, (problem, note)
    path = tmp_path / "queues.yaml"
    path.write_text(MALFORMED)
    validate = subprocess.run(
        [sys.executable, "-m", "yuniplace", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert validate.returncode != 0
    for problem in (
        'root.batch: resources.guaranteed.vcore: "8" is above resources.max.vcore (4)',
        'root.team: resources.max.memory: "lots" is not a quantity',
        '"team" is the name of another queue under root',
        '"root.nowhere.team" names queues that do not exist',
    ):
        assert problem in validate.stdout + validate.stderr, (problem, validate.stdout, validate.stderr)
    # The controller keeps the queue as it was (its gauges); `status --queues`, which reads the ConfigMap
    # itself, says the configuration there is refused.
    in_force = {'yuniplace_queue_max{queue="root.batch",resource="cpu"}': 4.0}
    in_force['yuniplace_queue_waiting_applications{queue="root.batch"}'] = 1.0
    wait_until(lambda: in_force.items() <= controller.metrics().items(), WAIT_S)
    status = subprocess.run(
        [
            sys.executable,
            "-m",
            "yuniplace",
            "status",
            "--queues",
            f"--queues-configmap={namespace}/queues",
            f"--kubeconfig={cluster.kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert status.returncode == 1 and "queue configuration refused" in status.stderr, status
    assert {p["metadata"]["uid"] for p in running(cluster, namespace, "first", 4)} == running_uids
    assert not app_placeholders(cluster, namespace, "second")

    orphan = f"e2e-orphan-{namespace[-6:]}"
    cluster.client.create(
        f"{keys.VOLCANO_API}/queues",
        {**volcano_queue(orphan, "4"), "spec": {"capability": {"cpu": "4"}, "parent": "nowhere"}},
    )
    try:
        on_queue = wait_until(
            lambda: [
                e for e in events_for(cluster, "default", "QueuesRefused") if e["involvedObject"]["name"] == orphan
            ],
            WAIT_S,
        )
        assert "parent" in on_queue[0]["message"] and "nowhere" in on_queue[0]["message"], on_queue
    finally:
        cluster.client.delete(f"{keys.VOLCANO_API}/queues/{orphan}")

    put_queues(cluster, namespace, good.replace("vcore: 4", "vcore: 6"))
    configured(cluster, namespace, "QueuesApplied", 2)
    running(cluster, namespace, "second", 2)


# -- 7. Placeholders for an autoscaler ---------------------------------------------------------------


def test_a_waiting_head_gets_its_placeholders_for_an_autoscaler_only_with_the_option(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    """A gang that fits the node but not its free room waits first in its queue. Without the option it
    never gets placeholders: past the set time, a later gang backfills and still none appear. With
    --create-placeholders-after, its placeholders appear, Pending, once it has waited that long; a node
    added (as an autoscaler would) takes them and the gang runs."""
    after_s = 3
    place = pool(1, cpu="4", memory="16Gi")
    cluster.create_pod(namespace, place.pin(make_pod("busy", cpu="2", memory="1Gi")))
    cluster.wait_pod(namespace, "busy", is_running)
    without = cluster_wide("--head-claim=1")
    gang(cluster, namespace, place, "big", 4)
    waiting(cluster, namespace, "big", "first in queue")
    queued_since = wait_until(lambda: queued_since_of(cluster, namespace, "big-0"), WAIT_S)
    wait_until(lambda: time.time() > queued_since + after_s, 30)  # the option's time has passed
    gang(cluster, namespace, place, "small", 1)  # fits beside the waiting head once its claim has lapsed
    running(cluster, namespace, "small", 1)  # so admission has decided again since
    assert not app_placeholders(cluster, namespace, "big")
    assert without.stop() == 0

    elastic = cluster_wide("--head-claim=1", f"--create-placeholders-after={after_s}")
    try:
        pending = wait_until(lambda: len(found := app_placeholders(cluster, namespace, "big")) == 4 and found, WAIT_S)
    except TimeoutError:
        raise AssertionError(f"no placeholders for the waiting head:\n{elastic.log()}") from None
    unplaced = [p for p in pending if not p["spec"].get("nodeName")]
    assert len(unplaced) >= 3, pending  # one CPU is free: at most one of them is placed
    granted = [
        e
        for e in posted(cluster, namespace, "GangExceedsCapacity")  # posted after the placeholders it makes
        if "cluster autoscaler" in e["message"]
    ]
    assert granted and granted[0]["involvedObject"]["name"] == "big-0", granted
    added = pool(1, cpu="4", memory="16Gi")
    assert nodes_of(running(cluster, namespace, "big", 4)) <= set(added.nodes) | set(place.nodes)


def queued_since_of(cluster: Cluster, namespace: str, name: str) -> float | None:
    """When the pod's application became first in its queue (its originator's annotation)."""
    pod = cluster.get_pod(namespace, name)
    return parse_time((pod or {}).get("metadata", {}).get("annotations", {}).get(keys.QUEUED_SINCE))


# -- 8. ai-scheduler's Pools -------------------------------------------------------------------------


def ai_pool(name: str, labels: Mapping[str, str], **switches: bool) -> dict[str, Any]:
    return {
        "apiVersion": "resource.aibee.cn/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": name},
        "spec": {"nodeSelector": {"matchLabels": dict(labels)}, **switches},
    }


@pytest.mark.usefixtures("pool_api")
def test_ai_scheduler_pools_keep_their_own_gangs_home_and_take_back_what_they_lent(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    """ai-scheduler's two example Pools: demo, of the nodes labelled pool=demo, and masters, with
    preemption, borrowing and sharing disabled. A gang naming no Pool (the default pool) borrows demo's
    idle nodes, never masters': a gang that would need masters' idle room waits. Then demo's own gang,
    a Job annotated resource.aibee.cn/pool, takes its nodes back: the borrower is evicted whole and the
    Job runs on demo's nodes only."""
    place = pool(1, cpu="4", memory="16Gi")  # a node of no Pool: the default pool's
    demo_nodes = set(pool(2, cpu="4", memory="16Gi", labels={"pool": "demo"}).nodes)
    master_nodes = set(pool(1, cpu="4", memory="16Gi", labels={"kubernetes.io/role": "master"}).nodes)
    suffix = namespace[-6:]
    demo, masters = f"demo-{suffix}", f"masters-{suffix}"
    pools = f"{keys.AI_SCHEDULER_API}/pools"
    # The examples' labels, and this test's own, so that no other node joins.
    cluster.client.create(pools, ai_pool(demo, {"pool": "demo", **place.node_selector}, disablePreemption=False))
    everything_off = {"disablePreemption": True, "disableBorrowing": True, "disableSharing": True}
    cluster.client.create(
        pools, ai_pool(masters, {"kubernetes.io/role": "master", **place.node_selector}, **everything_off)
    )
    controller = cluster_wide()

    def applied_on_both() -> list[dict[str, Any]] | None:
        events = [e for e in events_for(cluster, "default", "QueuesApplied") if e["involvedObject"]["kind"] == "Pool"]
        return events if {demo, masters} <= {e["involvedObject"]["name"] for e in events} else None

    wait_until(applied_on_both, WAIT_S)

    gang(cluster, namespace, place, "borrower", 6)
    on = nodes_of(running(cluster, namespace, "borrower", 6))
    assert on & demo_nodes and not on & master_nodes, on  # 6 CPUs: more than the default pool's node holds
    # Each Pool is guaranteed what its nodes hold: demo two nodes, masters one.
    guaranteed = {
        f'yuniplace_queue_guaranteed{{queue="root.{demo}",resource="cpu"}}': 8.0,
        f'yuniplace_queue_guaranteed{{queue="root.{masters}",resource="cpu"}}': 4.0,
    }
    wait_until(lambda: guaranteed.items() <= controller.metrics().items(), WAIT_S)

    greedy = gang(cluster, namespace, place, "greedy", 8)  # 6 CPUs free beside masters' idle 4
    waiting(cluster, namespace, "greedy", "waiting for free capacity")
    assert not app_placeholders(cluster, namespace, "greedy")
    for name in greedy:
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
    wait_until(lambda: not app_pods(cluster, namespace, "greedy"), WAIT_S)

    gang_as_job(cluster, namespace, place, "train", 8, annotations={keys.AI_SCHEDULER_POOL: demo})
    waiting(cluster, namespace, "train", f"taking back room its queue root.{demo} lent to root.default")
    train = running(cluster, namespace, "train", 8)
    assert nodes_of(train) == demo_nodes
    wait_until(lambda: not app_pods(cluster, namespace, "borrower"), WAIT_S)  # bare pods: evicted, gone
    taken = posted(cluster, namespace, "GangPreempted", on="borrower-")
    assert taken and f"queue root.{demo} takes back room" in taken[0]["message"], taken
    assert "evicting all its pods, the whole gang" in taken[0]["message"]
    everywhere = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert not {p["spec"].get("nodeName") for p in everywhere} & master_nodes


@pytest.mark.usefixtures("pool_api")
def test_a_short_ai_scheduler_pool_preempts_its_own_lower_priority_gang(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    priority_classes: Callable[[int], str],
) -> None:
    """A Pool's nodes are full of its own low-priority gang, and nothing it lent is left to take back: its
    high-priority gang evicts that gang, whole, and runs on the Pool's nodes."""
    place = pool(2, cpu="4", memory="16Gi", labels={"pool": "short"})
    name = f"short-{namespace[-6:]}"
    cluster.client.create(f"{keys.AI_SCHEDULER_API}/pools", ai_pool(name, {"pool": "short", **place.node_selector}))
    cluster_wide()
    wait_until(
        lambda: any(e["involvedObject"]["name"] == name for e in events_for(cluster, "default", "QueuesApplied")),
        WAIT_S,
    )
    in_pool = {keys.AI_SCHEDULER_POOL: name}
    low, high = priority_classes(10), priority_classes(1000)
    gang(cluster, namespace, place, "low", 8, annotations=in_pool, priority_class=low)
    running(cluster, namespace, "low", 8)
    gang(cluster, namespace, place, "high", 4, annotations=in_pool, priority_class=high)
    waiting(cluster, namespace, "high", f"evicting 1 lower-priority gang(s) of its queue root.{name}")
    assert nodes_of(running(cluster, namespace, "high", 4)) <= set(place.nodes)
    wait_until(lambda: not app_pods(cluster, namespace, "low"), WAIT_S)  # bare pods: evicted, gone
    [taken] = [e["message"] for e in posted(cluster, namespace, "GangPreempted")]
    assert f"a gang of priority 1000 of its own queue root.{name}" in taken and "the whole gang" in taken, taken
