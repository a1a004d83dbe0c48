"""A started gang that loses a member (gang/losses.py): its node deleted, the member failed or never
Ready brings a GangDegraded warning on the originator naming the member and why, `yuniplace status`
shows it Degraded and the yuniplace_degraded_applications gauge counts it. Then its policy
(gang/onloss.py): `none` evicts nothing, and a replacement that runs brings it back (GangRecovered);
`restart` evicts the gang's pods together and its Job makes them again, started whole; `release`
evicts it whole after its recovery timeout and the next gang of its queue starts; past its restart
limit the gang fails; a gang of bare pods is never restarted."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    assert_on_held_room,
    events_for,
    finish,
    gang_as_job,
    gang_as_replicaset,
    gang_job,
    gang_pod,
    is_running,
    make_unready,
    posted,
)
from tests.e2e.test_native_gangs import status
from tests.e2e.test_queues import app_pods
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.pods import format_time
from yuniplace.localcluster import wait_until

WAIT_S = 60.0
Pod = dict[str, Any]


def started_gang(cluster: Cluster, namespace: str, place: Placement, members: int) -> list[str]:
    """A gang of `members` × 3 CPUs on nodes of 4: one member per node."""
    names = gang_job(cluster, namespace, place, "train", members, cpu="3")
    for name in names:
        cluster.wait_pod(namespace, name, is_running, timeout_s=WAIT_S)
    return names


def degraded_event(cluster: Cluster, namespace: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        return next(iter(events_for(cluster, namespace, "GangDegraded")), None)

    return wait_until(found, WAIT_S)  # type: ignore[no-any-return]


def status_row(cluster: Cluster, namespace: str) -> dict[str, Any]:
    [row] = [row for row in status(cluster, "-n", namespace) if row["application"] == "train"]
    return row  # type: ignore[no-any-return]


def test_a_member_whose_node_is_deleted_makes_its_gang_degraded(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    record_property: Callable[[str, object], None],
) -> None:
    place = pool(3, cpu="4")
    names = started_gang(cluster, namespace, place, 3)
    lost = cluster.get_pod(namespace, names[1])
    assert lost is not None
    node = lost["spec"]["nodeName"]
    deleted_at = time.monotonic()
    cluster.client.delete(f"/api/v1/nodes/{node}")
    event = degraded_event(cluster, namespace)
    seen_after = time.monotonic() - deleted_at
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == names[0], event
    assert f"{names[1]} (its node {node} is gone)" in event["message"], event
    assert "2 of its minimum 3 members up, 1 short" in event["message"], event
    row = status_row(cluster, namespace)
    assert row["state"] == "Degraded", row
    wait_until(lambda: controller.metrics().get("yuniplace_degraded_applications") == 1.0, WAIT_S)
    for name in (names[0], names[2]):  # nothing of the gang is evicted: reporting is all it does
        pod = cluster.get_pod(namespace, name)
        assert pod is not None and is_running(pod), pod
    record_property("figure", f"node deleted: GangDegraded {seen_after:.1f} s later: {event['message']}")


def test_a_failed_member_makes_its_gang_degraded_until_a_replacement_runs(
    cluster: Cluster, namespace: str, controller: ControllerProcess, pool: Callable[..., Placement]
) -> None:
    place = pool(3, cpu="4")
    names = started_gang(cluster, namespace, place, 3)
    finish(cluster, namespace, names[1], "Failed")
    event = degraded_event(cluster, namespace)
    assert f"lost: {names[1]} failed" in event["message"], event
    groups = [place.group("workers", 3, cpu="3", memory="1Gi")]
    replacement = place.pin(gang_pod("train-3", "train", "workers", task_groups=groups, cpu="3", memory="1Gi"))
    cluster.create_pod(namespace, replacement)
    cluster.wait_pod(namespace, "train-3", is_running, timeout_s=WAIT_S)

    def recovered() -> str | None:
        return next((e["message"] for e in events_for(cluster, namespace, "GangRecovered")), None)

    note = wait_until(recovered, WAIT_S)
    assert "back at its minimum after" in note and "3 of 3 members up" in note, note
    assert status_row(cluster, namespace)["state"] == "Running"


# -- what follows a loss: the gang's policy ------------------------------------------------------------

RESTART = {keys.ON_MEMBER_LOST: "restart"}
RESTART_S = 180.0  # a member on a node deleted goes only once the pod garbage collector takes it (~1 min)


def job_gang(
    cluster: Cluster, namespace: str, place: Placement, policy: dict[str, str], app: str = "train"
) -> list[Pod]:
    """A Job of 3 pods of 3 CPUs (one per node of 4), asking `policy` for a lost member, once it runs."""
    gang_as_job(cluster, namespace, place, app, 3, annotations=policy, cpu="3", memory="1Gi")
    return running_pods(cluster, namespace, app, 3)


def running_pods(
    cluster: Cluster,
    namespace: str,
    app: str,
    count: int,
    *,
    besides: frozenset[str] = frozenset(),
    timeout_s: float = WAIT_S,
) -> list[Pod]:
    """Once `count` pods of the application run, none of them among `besides` (uids) nor on its way out."""

    def found() -> list[Pod] | None:
        live = [
            pod
            for pod in app_pods(cluster, namespace, app)
            if is_running(pod) and not p.is_deleting(pod) and p.uid(pod) not in besides
        ]
        return live if len(live) >= count else None

    try:
        return wait_until(found, timeout_s)  # type: ignore[no-any-return]
    except TimeoutError:
        states = [(p.name(pod), p.phase(pod), bool(p.is_deleting(pod))) for pod in app_pods(cluster, namespace, app)]
        raise AssertionError(f"not {count} new pods of {app} running in {timeout_s:.0f}s: {states}") from None


def restarted_whole(
    cluster: Cluster, namespace: str, recorder: NamespaceRecorder, first: list[Pod], timeout_s: float = WAIT_S
) -> list[Pod]:
    """The gang's next attempt, once it runs: three new pods, each started on room held for it (its seat
    or a placeholder's node), none of the first attempt left running, and no other pod of it ever bound
    (a replacement the Job made for a lost member went with the others, never started alone)."""
    old = frozenset(p.uid(pod) for pod in first)
    again = running_pods(cluster, namespace, "train", 3, besides=old, timeout_s=timeout_s)
    assert_on_held_room(recorder, again)
    ran = {
        p.uid(pod): pod
        for pod in list(recorder.latest.values())
        if pod["spec"].get("nodeName") and not p.is_placeholder(pod)
    }
    outside = [
        (p.name(pod), pod["metadata"]["creationTimestamp"], p.node_name(pod), p.phase(pod))
        for uid, pod in ran.items()
        if uid not in old | {p.uid(pod) for pod in again}
    ]
    assert not outside, f"pods of the gang bound outside its two attempts: {outside}"
    return again


@pytest.mark.every_version  # eviction, the Job's podFailurePolicy and the pod garbage collector, per release
@pytest.mark.parametrize("policy", ["none", "restart"])
def test_a_job_gang_whose_node_is_deleted_is_restarted_whole_only_when_it_asks(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    policy: str,
    record_property: Callable[[str, object], None],
) -> None:
    place = pool(4, cpu="4")  # one node to spare: the gang fits again without the one deleted
    first = job_gang(cluster, namespace, place, {keys.ON_MEMBER_LOST: policy})
    node = first[1]["spec"]["nodeName"]
    deleted_at = time.monotonic()
    cluster.client.delete(f"/api/v1/nodes/{node}")
    event = degraded_event(cluster, namespace)
    seen_after = time.monotonic() - deleted_at
    assert f"{p.name(first[1])} (its node {node} is gone)" in event["message"], event
    if policy == "none":
        assert event["message"].endswith("it keeps running as it is (yuniplace.io/on-member-lost: none)"), event
        assert status_row(cluster, namespace)["state"] == "Degraded"
        for pod in (first[0], first[2]):  # nothing evicted
            now = cluster.get_pod(namespace, p.name(pod))
            assert now is not None and is_running(now) and not p.is_deleting(now), now
        assert not events_for(cluster, namespace, "GangRestarting")
        return
    restarting = posted(cluster, namespace, "GangRestarting")[0]
    assert restarting["involvedObject"]["name"] == event["involvedObject"]["name"]
    assert (
        "evicting its 3 pods together for Job train to make them again (restart 1 of at most 3)"
        in (restarting["message"])
    ), restarting
    restarted_whole(cluster, namespace, recorder, first, RESTART_S)
    started_again = time.monotonic() - deleted_at
    wait_until(lambda: status_row(cluster, namespace)["state"] == "Running", WAIT_S)
    assert controller.metrics().get('yuniplace_gang_loss_actions_total{action="restarted"}') == 1.0
    record_property(
        "figure",
        f"node deleted, restart: GangDegraded {seen_after:.1f} s later, the gang running whole again after "
        f"{started_again:.1f} s (its member on the deleted node gone with the pod garbage collector)",
    )


@pytest.mark.every_version
def test_a_job_gang_whose_member_fails_is_restarted_whole_and_the_replacement_never_runs_alone(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    record_property: Callable[[str, object], None],
) -> None:
    place = pool(3, cpu="4")
    first = job_gang(cluster, namespace, place, RESTART)
    failed_at = time.monotonic()
    finish(cluster, namespace, p.name(first[1]), "Failed")
    event = degraded_event(cluster, namespace)
    assert f"lost: {p.name(first[1])} failed" in event["message"], event
    restarting = posted(cluster, namespace, "GangRestarting")[0]
    assert "evicting its" in restarting["message"] and "restart 1 of at most 3" in restarting["message"]
    restarted_whole(cluster, namespace, recorder, first)
    record_property(
        "figure",
        f"member failed, restart: the gang running whole again {time.monotonic() - failed_at:.1f} s later; "
        f"{restarting['message']}",
    )


def test_a_job_gang_whose_member_is_never_ready_is_restarted_after_its_ready_timeout(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
) -> None:
    place = pool(3, cpu="4")
    first = job_gang(cluster, namespace, place, {**RESTART, keys.READY_TIMEOUT: "3"})
    stuck = p.name(first[2])
    make_unready(cluster, namespace, stuck)
    event = degraded_event(cluster, namespace)
    assert re.search(rf"lost: {stuck} not Ready for [0-9]+s", event["message"]), event
    posted(cluster, namespace, "GangRestarting")
    restarted_whole(cluster, namespace, recorder, first)


def test_a_released_gang_gives_its_room_to_the_next_gang_of_its_queue(
    cluster: Cluster, namespace: str, controller: ControllerProcess, pool: Callable[..., Placement]
) -> None:
    place = pool(4, cpu="4")
    release = {keys.ON_MEMBER_LOST: "release", keys.RECOVERY_TIMEOUT: "3"}
    first = job_gang(cluster, namespace, place, release)
    gang_as_job(cluster, namespace, place, "next", 3, cpu="3", memory="1Gi")

    def next_waits() -> list[dict[str, Any]]:
        return [
            e for e in events_for(cluster, namespace, "GangWaiting") if e["involvedObject"]["name"].startswith("next")
        ]

    wait_until(next_waits, WAIT_S)
    cluster.client.delete(f"/api/v1/nodes/{first[0]['spec']['nodeName']}")  # 3 nodes left: room for one gang
    released = posted(cluster, namespace, "GangReleased")[0]
    assert (
        "past its recovery timeout (3s): evicting its 3 pods to give its room back for Job train"
        in (released["message"])
    ), released
    running_pods(cluster, namespace, "next", 3, timeout_s=RESTART_S)


def test_past_its_restart_limit_a_gang_fails_and_so_does_every_new_pod_of_it(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
) -> None:
    place = pool(3, cpu="4")
    first = job_gang(cluster, namespace, place, {**RESTART, keys.RESTART_LIMIT: "1"})
    finish(cluster, namespace, p.name(first[1]), "Failed")
    posted(cluster, namespace, "GangRestarting")
    second = restarted_whole(cluster, namespace, recorder, first)
    finish(cluster, namespace, p.name(second[0]), "Failed")

    def failed_past_the_limit() -> dict[str, Any] | None:
        return next(
            (e for e in events_for(cluster, namespace, "ApplicationFailed") if "its limit" in e["message"]), None
        )

    failed = wait_until(failed_past_the_limit, WAIT_S)
    assert "after 1 restart(s), its limit (yuniplace.io/restart-limit: 1): the application fails" in failed["message"]
    seen = {p.uid(pod) for pod in [*first, *second]}

    def a_new_pod_failed_at_once() -> bool:
        return any(
            p.uid(pod) not in seen and p.phase(pod) == "Failed" and p.status_reason(pod) == "ApplicationFailed"
            for pod in app_pods(cluster, namespace, "train")
        )

    wait_until(a_new_pod_failed_at_once, WAIT_S)
    assert controller.metrics().get('yuniplace_gang_loss_actions_total{action="failed"}') == 1.0


def test_a_gang_of_bare_pods_that_asks_restart_is_reported_not_evicted(
    cluster: Cluster, namespace: str, controller: ControllerProcess, pool: Callable[..., Placement]
) -> None:
    place = pool(3, cpu="4")
    names = gang_job(cluster, namespace, place, "train", 3, cpu="3", annotations=RESTART)
    for name in names:
        cluster.wait_pod(namespace, name, is_running, timeout_s=WAIT_S)
    finish(cluster, namespace, names[1], "Failed")
    event = degraded_event(cluster, namespace)
    assert event["message"].endswith(
        "yuniplace.io/on-member-lost is restart, but its pods have no owner to make them again: not restarted"
    ), event
    for name in (names[0], names[2]):
        pod = cluster.get_pod(namespace, name)
        assert pod is not None and is_running(pod) and not p.is_deleting(pod), pod
    assert not events_for(cluster, namespace, "GangRestarting")


# -- a replacement counts once it runs ----------------------------------------------------------------


def collect_as_the_pod_garbage_collector(cluster: Cluster, namespace: str, name: str) -> None:
    """What kube-controller-manager's pod garbage collector does to a pod whose node is gone, about a
    minute on, done now: mark it Failed with a DisruptionTarget condition (which the Job's
    podFailurePolicy ignores, so the Job replaces it at once), then delete it."""
    gone = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "DeletionByPodGC",
        "message": "PodGC: node no longer exists",
        "lastTransitionTime": format_time(time.time()),
    }
    pod = cluster.get_pod(namespace, name)
    assert pod is not None, name
    conditions = [c for c in pod["status"].get("conditions") or [] if c["type"] != "DisruptionTarget"] + [gone]
    cluster.client.patch(
        f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": {"phase": "Failed", "conditions": conditions}}
    )
    cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", gracePeriodSeconds=0)


def lose_a_member_for_good(cluster: Cluster, namespace: str, first: list[Pod]) -> Pod:
    """Delete the node under the gang's second member and, once the gang is degraded, collect that pod
    as the pod garbage collector would: its Job then makes a replacement. The replacement, once
    kube-scheduler has found no node for it (none is spare), is returned."""
    lost = first[1]
    cluster.client.delete(f"/api/v1/nodes/{lost['spec']['nodeName']}")
    degraded_event(cluster, namespace)
    collect_as_the_pod_garbage_collector(cluster, namespace, p.name(lost))
    old = {p.uid(pod) for pod in first}

    def unplaceable_replacement() -> Pod | None:
        return next(
            (
                pod
                for pod in app_pods(cluster, namespace, "train")
                if p.uid(pod) not in old and not p.is_gated(pod) and unschedulable(pod)
            ),
            None,
        )

    return wait_until(unplaceable_replacement, WAIT_S)  # type: ignore[no-any-return]


def unschedulable(pod: Pod) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in pod.get("status", {}).get("conditions") or []
    )


def event_time(event: dict[str, Any]) -> float:
    stamp = p.parse_time(event.get("eventTime") or event.get("firstTimestamp"))
    assert stamp is not None, event
    return stamp


def test_a_replacement_that_cannot_be_placed_leaves_the_gang_degraded_until_it_runs(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    record_property: Callable[[str, object], None],
) -> None:
    """`none`: the lost member's replacement, made by its Job but placed nowhere, leaves the gang
    Degraded (status, gauge, no GangRecovered); a node added, the replacement runs and only then
    GangRecovered says the gang is back at its minimum."""
    place = pool(3, cpu="4")  # no spare node
    first = job_gang(cluster, namespace, place, {})
    replacement = lose_a_member_for_good(cluster, namespace, first)
    assert status_row(cluster, namespace)["state"] == "Degraded"
    assert controller.metrics().get("yuniplace_degraded_applications") == 1.0
    room_added_at = time.time()
    pool(1, cpu="4")
    cluster.wait_pod(namespace, p.name(replacement), is_running, timeout_s=WAIT_S)
    recovered = posted(cluster, namespace, "GangRecovered")[0]
    [only] = events_for(cluster, namespace, "GangRecovered")
    assert event_time(only) >= room_added_at, f"GangRecovered before the replacement could run: {only}"
    assert "back at its minimum after" in recovered["message"], recovered
    assert "3 of 3 members up" in recovered["message"], recovered
    wait_until(lambda: status_row(cluster, namespace)["state"] == "Running", WAIT_S)
    wait_until(lambda: controller.metrics().get("yuniplace_degraded_applications") == 0.0, WAIT_S)
    record_property("figure", f"replacement placed nowhere, then given a node: {recovered['message']}")


@pytest.mark.parametrize("spare", [False, True], ids=["no spare room", "a spare node"])
def test_a_release_is_not_cancelled_by_a_replacement_that_cannot_be_placed(
    cluster: Cluster, namespace: str, controller: ControllerProcess, pool: Callable[..., Placement], spare: bool
) -> None:
    """`release`: the replacement exists but runs nowhere within the recovery timeout, so the gang is
    released whole (the replacement with it) and the next gang of its queue gets the room; where a node
    is spare, the replacement runs there and the gang is back (GangRecovered), nothing released."""
    place = pool(3, cpu="4")
    release = {keys.ON_MEMBER_LOST: "release", keys.RECOVERY_TIMEOUT: "20"}
    first = job_gang(cluster, namespace, place, release)
    gang_as_job(cluster, namespace, place, "next", 2, cpu="3", memory="1Gi")
    wait_until(
        lambda: any(
            e["involvedObject"]["name"].startswith("next") for e in events_for(cluster, namespace, "GangWaiting")
        ),
        WAIT_S,
    )
    if spare:
        lost = first[1]
        cluster.client.delete(f"/api/v1/nodes/{lost['spec']['nodeName']}")
        degraded_event(cluster, namespace)
        pool(1, cpu="4")
        collect_as_the_pod_garbage_collector(cluster, namespace, p.name(lost))
        recovered = posted(cluster, namespace, "GangRecovered")[0]
        assert "3 of 3 members up" in recovered["message"], recovered
        assert not events_for(cluster, namespace, "GangReleased")
        return
    replacement = lose_a_member_for_good(cluster, namespace, first)
    released = posted(cluster, namespace, "GangReleased")[0]
    assert "past its recovery timeout (20s): evicting its 3 pods" in released["message"], released
    assert not events_for(cluster, namespace, "GangRecovered")

    def evicted_with_its_gang() -> bool:
        # Evicted before the event was posted (events follow the writes they tell of), deleted after.
        gone = cluster.get_pod(namespace, p.name(replacement))
        return gone is None or p.is_deleting(gone) or p.phase(gone) == "Failed"

    wait_until(evicted_with_its_gang, WAIT_S)
    running_pods(cluster, namespace, "next", 2, timeout_s=WAIT_S)


def test_a_restart_is_not_stopped_by_a_replacement_that_cannot_be_placed(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
) -> None:
    """`restart`: the lost member gone at once (its node deleted, the pod collected) and replaced by its
    owner within the loss grace, the replacement placed nowhere: the gang is still short, so it is
    restarted whole; the new attempt waits whole for room and starts whole once a node is added. (A
    ReplicaSet owns it: a Job would replace the pod only after a backoff longer than the grace.)"""
    place = pool(3, cpu="4")
    gang_as_replicaset(cluster, namespace, place, "train", 3, annotations=RESTART, cpu="3", memory="1Gi")
    first = running_pods(cluster, namespace, "train", 3)
    lost = first[1]
    cluster.client.delete(f"/api/v1/nodes/{lost['spec']['nodeName']}")
    collect_as_the_pod_garbage_collector(cluster, namespace, p.name(lost))
    restarting = posted(cluster, namespace, "GangRestarting")[0]
    assert "for ReplicaSet train to make them again (restart 1 of at most 3)" in restarting["message"], restarting
    assert not events_for(cluster, namespace, "GangRecovered")
    old = {p.name(pod) for pod in first}

    def new_attempt_held() -> bool:
        """Two nodes left, more than all of them hold: the new attempt reserves with placeholders."""
        return any(
            e["involvedObject"]["name"] not in old for e in events_for(cluster, namespace, "CreatingPlaceholders")
        )

    wait_until(new_attempt_held, WAIT_S)
    pool(1, cpu="4")
    restarted_whole(cluster, namespace, recorder, first)
