"""Strict and NonStrict reservations, and gang groups across namespaces, on the real control plane."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    events_for,
    gang_job,
    is_failed,
    is_running,
    placeholders,
)
from yuniplace.gang import keys
from yuniplace.kube.watch import ListWatch
from yuniplace.localcluster import wait_until


def test_strict_releases_a_partial_reservation_and_retries_until_it_fits(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], recorder: NamespaceRecorder, tmp_path: Path
) -> None:
    process = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, "--strict-backoff=2")
    process.start()
    try:
        place = pool(3, cpu="1", memory="8Gi")  # room for 3 of the 5
        names = gang_job(
            cluster,
            namespace,
            place,
            "strict",
            5,
            policy="placeholderTimeoutInSeconds=120",
            annotations={keys.GANG_MODE: "Strict"},
        )
        released = wait_until(lambda: events_for(cluster, namespace, "GangReservationReleased"), 60)
        assert "Strict mode releases the partial reservation" in released[0]["message"]
        assert "Insufficient cpu" in released[0]["message"] or "didn't match" in released[0]["message"], released[0][
            "message"
        ]
        wait_until(lambda: not placeholders(cluster, namespace), 30)  # the room is given back
        assert all(not is_running(cluster.get_pod(namespace, n) or {}) for n in names)

        pool(2, cpu="1", memory="8Gi")  # room for the rest: a retry now reserves the whole gang
        for name in names:
            cluster.wait_pod(namespace, name, is_running, timeout_s=90)
        recreated = [name for name, uids in recorder.placeholder_uids.items() if len(uids) > 1]
        assert recreated, "placeholders were not created again by a retry"
        originator = cluster.get_pod(namespace, names[0])
        assert originator is not None and int(originator["metadata"]["annotations"][keys.ATTEMPTS]) >= 1
        wait_until(lambda: not placeholders(cluster, namespace), 30)
        assert not events_for(cluster, namespace, "PlaceholderTimeOut")
    finally:
        assert process.stop() == 0, process.log()


def test_non_strict_holds_a_partial_reservation_until_the_timeout(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
) -> None:
    place = pool(3, cpu="1", memory="8Gi")
    names = gang_job(
        cluster,
        namespace,
        place,
        "patient",
        5,
        policy="placeholderTimeoutInSeconds=10 gangSchedulingStyle=Soft",
        annotations={keys.GANG_MODE: "NonStrict"},
    )
    wait_until(lambda: len(recorder.placeholder_nodes) == 3, 60)
    wait_until(lambda: events_for(cluster, namespace, "PlaceholderTimeOut"), 60)
    assert len(recorder.placeholder_uids) == 5
    assert all(len(uids) == 1 for uids in recorder.placeholder_uids.values()), (
        "NonStrict released and re-created placeholders"
    )
    assert not events_for(cluster, namespace, "GangReservationReleased")
    # Soft style after the timeout: the pods that fit run normally.
    wait_until(lambda: sum(is_running(cluster.get_pod(namespace, n) or {}) for n in names) == 3, 60)
    wait_until(lambda: not placeholders(cluster, namespace), 30)


class Bindings:
    """One watch over the pods of several namespaces, in the apiserver's order: when each
    placeholder and each real pod was first seen bound."""

    def __init__(self, cluster: Cluster, namespaces: set[str]) -> None:
        self.order: list[tuple[str, str]] = []  # (kind, namespace/name), placeholder or member
        self._seen: set[str] = set()
        self._namespaces = namespaces
        self._lock = threading.Lock()
        self._watch = ListWatch(
            cluster.client, "/api/v1/pods", on_list=lambda pods: [self._on("ADDED", p) for p in pods], on_event=self._on
        )

    def _on(self, _kind: str, pod: dict) -> None:
        meta = pod["metadata"]
        if meta["namespace"] not in self._namespaces or not pod["spec"].get("nodeName"):
            return
        name = f"{meta['namespace']}/{meta['name']}"
        with self._lock:
            if name not in self._seen:
                self._seen.add(name)
                kind = "placeholder" if (meta.get("labels") or {}).get(keys.PLACEHOLDER) == "true" else "member"
                self.order.append((kind, name))

    def members_bound(self) -> list[str]:
        with self._lock:
            return [name for kind, name in self.order if kind == "member"]

    def __enter__(self) -> Bindings:
        threading.Thread(target=self._watch.run, daemon=True).start()
        wait_until(self._watch.synced.is_set, 30)
        return self

    def __exit__(self, *_: object) -> None:
        self._watch.stop()


@pytest.fixture
def other_namespace(tenant: Callable[[str], str]) -> str:
    return tenant(f"b{uuid.uuid4().hex[:4]}")


@pytest.fixture
def cluster_wide_controller(cluster_wide: Callable[..., ControllerProcess]) -> ControllerProcess:
    return cluster_wide()


def test_gang_group_across_namespaces_starts_together(
    cluster: Cluster,
    namespace: str,
    other_namespace: str,
    pool: Callable[..., Placement],
    cluster_wide_controller: ControllerProcess,
) -> None:
    place = pool(4, cpu="2", memory="8Gi")
    together = {keys.GANG_GROUP: json.dumps([f"{namespace}/train", f"{other_namespace}/eval"])}
    with Bindings(cluster, {namespace, other_namespace}) as bindings:
        train = gang_job(
            cluster, namespace, place, "train", 3, policy="placeholderTimeoutInSeconds=60", annotations=together
        )
        waiting = wait_until(lambda: events_for(cluster, namespace, "GangWaiting"), 30)
        assert f"{other_namespace}/eval" in waiting[0]["message"]
        assert not placeholders(cluster, namespace), "a gang group member reserved before its group was complete"
        evaluate = gang_job(
            cluster, other_namespace, place, "eval", 3, policy="placeholderTimeoutInSeconds=60", annotations=together
        )
        for ns, names in ((namespace, train), (other_namespace, evaluate)):
            for name in names:
                cluster.wait_pod(ns, name, is_running, timeout_s=60)
        order = list(bindings.order)
    first_member = next(i for i, (kind, _) in enumerate(order) if kind == "member")
    placeholders_bound = [name for kind, name in order if kind == "placeholder"]
    assert len(placeholders_bound) == 6 and all(kind == "placeholder" for kind, _ in order[:first_member]), order
    assert first_member == 6, f"a member was bound before every placeholder of the group was placed: {order}"


def test_gang_group_across_namespaces_fails_together(
    cluster: Cluster,
    namespace: str,
    other_namespace: str,
    pool: Callable[..., Placement],
    cluster_wide_controller: ControllerProcess,
) -> None:
    """One gang fits, the other never can: with Hard style both fail, and no member of either runs."""
    place = pool(4, cpu="2", memory="8Gi")
    together = {keys.GANG_GROUP: json.dumps([f"{namespace}/small", f"{other_namespace}/huge"])}
    hard = "placeholderTimeoutInSeconds=10 gangSchedulingStyle=Hard"
    with Bindings(cluster, {namespace, other_namespace}) as bindings:
        small = gang_job(cluster, namespace, place, "small", 2, policy=hard, annotations=together)
        huge = gang_job(cluster, other_namespace, place, "huge", 10, policy=hard, annotations=together)
        for ns, names in ((namespace, small), (other_namespace, huge)):
            for name in names:
                cluster.wait_pod(ns, name, is_failed, timeout_s=60)
        wait_until(lambda: not placeholders(cluster, namespace) and not placeholders(cluster, other_namespace), 30)
        assert bindings.members_bound() == []
    failed = cluster.get_pod(namespace, small[0])
    assert failed is not None and failed["status"]["reason"] == "ResourceReservationTimeout"
