"""Faults as real machines have them, on kind's real kubelets, for the cases users meet most: a node that
stops under a running gang, a member whose image cannot be pulled, and the node of yuniplace's leader
stopped while a gang reserves. The faults are the kind campaign's own (yuniplace.bench.kindfaults), and
its gangs are the campaign's Jobs (yuniplace.bench.stream) with programs that run until told to stop.

Each test gives its node back and waits for it, and for both replicas, before it ends: the next test
(and the next module) finds the cluster whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator

from tests.kind.support import RELEASE, RELEASE_NAMESPACE, Kind, Pod, container_running, pause_pod, task_group, wait
from yuniplace.bench import kindfaults
from yuniplace.bench.kindcampaign import WORKLOAD
from yuniplace.bench.stream import APP_LABEL, AT_ONCE, ENDED, GangPlan, Group, manifests
from yuniplace.gang import keys
from yuniplace.localcluster.kindimage import YUNIPLACE_IMAGE

# A stopped node is NotReady after kube-controller-manager's grace (50 s), its pods tolerate that for
# the campaign's 30 s, and the replacements start on the other worker: well within this.
LOST_NODE_S = 240.0
NODE_BACK_S = kindfaults.NODE_READY_S
# A member not Ready for this long counts as lost.
READY_TIMEOUT_S = 20
LOST_FOR_ITS_IMAGE = re.compile(r"not Ready for \d+s \(main: (ErrImagePull|ImagePullBackOff)\)")


def workers(kind: Kind) -> list[str]:
    nodes = kind.client.get("/api/v1/nodes")["items"]
    return sorted(
        n["metadata"]["name"]
        for n in nodes
        if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {})
    )


def gang_job(
    namespace: str, app: str, *, on_loss: str, restart_limit: int, replacement: str = ENDED, broken: bool = False
) -> GangPlan:
    """A Job gang of two workers and a parameter server, as the campaign's stream submits it."""
    return GangPlan(
        app=app,
        namespace=namespace,
        kind="job",
        style="Soft",
        timeout_s=120,
        groups=[Group("workers", 2, "400m", "256Mi"), Group("ps", 1, "400m", "256Mi")],
        fits=True,
        lifetime_s=900,
        delete_after_s=None,
        on_loss=on_loss,
        restart_limit=restart_limit,
        replacement=replacement,
        broken_group="ps" if broken else None,
    )


def submit(kind: Kind, plan: GangPlan) -> None:
    workload = dataclasses.replace(WORKLOAD, ready_timeout_s=READY_TIMEOUT_S)
    for path, body in manifests(plan, workload):
        kind.client.create(path, body)


def members(kind: Kind, namespace: str, app: str) -> list[Pod]:
    pods = kind.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{APP_LABEL}={app}")["items"]
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(keys.PLACEHOLDER) != "true"]


def running(kind: Kind, namespace: str, app: str, *, off: str = "") -> list[Pod]:
    """The gang's members running, not being deleted, and not on node `off`."""
    return [
        p
        for p in members(kind, namespace, app)
        if container_running(p) and not p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName") != off
    ]


def notes(kind: Kind, namespace: str, reason: str) -> list[str]:
    """What the events of a reason said, in the order they were posted: they are listed by name, which
    begins with their pod's, and a gang's pods change with each attempt."""
    events = sorted(kind.events(namespace, reason), key=lambda e: str(e.get("eventTime") or ""))
    return [str(e.get("note", "")) for e in events]


def whole_again(kind: Kind) -> None:
    """Every worker Ready and both replicas running, as the next test expects."""
    for node in workers(kind):
        kindfaults.wait_ready(kind.client, node, NODE_BACK_S)
    wait(
        lambda: len(pods := kind.controller_pods()) == 2 and all(container_running(p) for p in pods),
        300,
        "both replicas running again",
    )


@contextlib.contextmanager
def stopped(kind: Kind, node: str) -> Iterator[None]:
    """The node's container stopped (its kubelet, containerd and every container with it), and started
    again at the end, whatever the test found."""
    kindfaults.stop_node(node)
    try:
        yield
    finally:
        kindfaults.start_node(node)
        whole_again(kind)


def test_a_gang_on_a_stopped_node_is_reported_and_restarted_whole_on_the_others(
    installed: Kind, namespace: str
) -> None:
    """A worker stops under a running gang: once Kubernetes marks it unreachable the gang is reported
    degraded, restarted whole by its policy on the other worker, and when the node comes back nothing
    of the gang is left on it."""
    whole_again(installed)
    # Its Jobs replace a pod as soon as it is terminating: the pods on the stopped node stay so until
    # the node is back, and a Job that waits for them to end would wait as long.
    plan = gang_job(namespace, "lost-node", on_loss="restart", restart_limit=3, replacement=AT_ONCE)
    submit(installed, plan)
    before = wait(lambda: len(r := running(installed, namespace, plan.app)) == 3 and r, 180, "the gang running whole")
    node = sorted(p["spec"]["nodeName"] for p in before)[0]
    first_uids = {p["metadata"]["uid"] for p in before}

    with stopped(installed, node):
        wait(lambda: notes(installed, namespace, "GangDegraded"), LOST_NODE_S, "GangDegraded once the node is lost")
        wait(lambda: notes(installed, namespace, "GangRestarting"), LOST_NODE_S, "GangRestarting by its policy")
        again = wait(
            lambda: len(r := running(installed, namespace, plan.app, off=node)) == 3 and r,
            LOST_NODE_S,
            "the gang running whole again on the other worker",
        )
        assert not first_uids & {p["metadata"]["uid"] for p in again}, "the gang restarted whole, not in part"
        [degraded, *_] = notes(installed, namespace, "GangDegraded")
        assert node in degraded, degraded
        # A pod of the first attempt stays on the node, being deleted, while it is away: no loss of the
        # next attempt, whichever of its Jobs makes the pod that carries that attempt's record.
        restarts = notes(installed, namespace, "GangRestarting")
        assert len(restarts) == 1, restarts

    def nothing_old_on_the_node() -> bool:
        return not any(
            p["metadata"]["uid"] in first_uids and p["spec"].get("nodeName") == node
            for p in members(installed, namespace, plan.app)
        )

    wait(nothing_old_on_the_node, 180, f"nothing of the first attempt left on {node} once it is back")
    assert len(running(installed, namespace, plan.app)) == 3
    assert not installed.placeholders(namespace)


def test_a_member_whose_image_cannot_be_pulled_never_leaves_the_rest_holding_room(
    installed: Kind, namespace: str
) -> None:
    """The parameter server's image cannot be pulled: its gang is reported degraded, saying so, and
    fails at its restart limit with every pod of it ended: the workers that did run do not keep
    holding their room, and no placeholder is left."""
    whole_again(installed)
    plan = gang_job(namespace, "no-image", on_loss="restart", restart_limit=0, broken=True)
    submit(installed, plan)
    wait(lambda: notes(installed, namespace, "GangDegraded"), 180, "GangDegraded for the member that never came up")
    said = notes(installed, namespace, "GangDegraded")
    assert any(LOST_FOR_ITS_IMAGE.search(note) for note in said), said
    failed = wait(lambda: notes(installed, namespace, "ApplicationFailed"), 120, "ApplicationFailed at its limit")
    assert any(f"its limit ({keys.RESTART_LIMIT}: 0)" in note for note in failed), failed
    wait(lambda: not running(installed, namespace, plan.app), 120, "no member of the failed gang running")
    assert not installed.placeholders(namespace)


def test_the_leaders_node_stopped_mid_reservation_the_other_replica_finishes_the_gang(
    installed: Kind, namespace: str
) -> None:
    """The node of the leading replica stops while a gang holds placeholders for members still to come:
    the replica on the other worker takes the Lease once it expires and swaps the members in."""
    whole_again(installed)
    leader = installed.lease_holder()
    by_pod = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in installed.controller_pods()}
    leader_node = by_pod[leader]
    [other] = [w for w in workers(installed) if w != leader_node]
    # The gang lives on the other worker, so the fault takes its leader and nothing of it.
    selector = {"kubernetes.io/hostname": other}
    groups = [task_group("workers", 3) | {"nodeSelector": selector}]

    def member(name: str) -> Pod:
        pod = pause_pod(name, "leader-lost", "workers", task_groups=groups)
        pod["spec"]["nodeSelector"] = selector
        return pod

    installed.client.create(f"/api/v1/namespaces/{namespace}/pods", member("worker-0"))
    installed.wait_running(namespace, "worker-0")
    wait(lambda: len(installed.placeholders(namespace)) == 2, 60, "two placeholders waiting for members")

    with stopped(installed, leader_node):
        for name in ("worker-1", "worker-2"):
            installed.client.create(f"/api/v1/namespaces/{namespace}/pods", member(name))
        installed.wait_running(namespace, "worker-1", "worker-2", timeout_s=180)
        new_leader = installed.lease_holder()
        assert new_leader not in ("", leader) and by_pod.get(new_leader) == other, (leader, new_leader, by_pod)
        swapped = installed.events(namespace, "PlaceholderSwapped")
        assert any(e.get("reportingInstance") == new_leader for e in swapped), swapped
        wait(lambda: not installed.placeholders(namespace), 60, "no placeholder left")


def test_the_faults_leave_yuniplace_whole(installed: Kind) -> None:
    """After them, the release is as installed: two replicas running, one leading, on the image."""
    whole_again(installed)
    pods = installed.controller_pods()
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {YUNIPLACE_IMAGE}
    assert installed.lease_holder() in {p["metadata"]["name"] for p in pods}
    assert installed.kubectl("get", "deployment", RELEASE, "-n", RELEASE_NAMESPACE, "-o", "name")
