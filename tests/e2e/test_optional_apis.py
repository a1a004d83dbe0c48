"""The cluster as it changes under a running controller, each with its real component: Karpenter (its
kwok provider) installed after the controller, a scheduler-plugins PodGroup CRD installed after it (and
gang pods created before their CRD), and a CRD deleted under it. Nothing is restarted on yuniplace's
side: each API is read from the moment it is served, said by an event on the controller's Lease, and
shown by `yuniplace status --apis`.

A cluster of its own: CRDs are cluster-wide, and these tests install and delete them. The Workload API
switched on is test_workload_api_later.py's.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import CHART_CRDS, kubernetes_version, served, skip_without_go
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    assert_on_held_room,
    events_for,
    gang_job,
    is_bound,
    is_ready,
    is_running,
    make_pod,
    posted,
)
from tests.e2e.test_autoscaling import Pools, busy, pools, running_whole
from tests.e2e.test_native_gangs import held_throughout
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects import podgroup, volcano
from yuniplace.kube import NotFound
from yuniplace.localcluster import LocalCluster, wait_until
from yuniplace.localcluster import karpenter as karp

__all__ = ["busy", "pools"]  # the autoscaling tests' fixed nodes kept busy, and their NodePools

WAIT_S = 90.0
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PLUGIN_CRD = "podgroups.scheduling.x-k8s.io"
VOLCANO_CRD = "podgroups.scheduling.volcano.sh"
Pod = dict[str, Any]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A cluster of its own with no optional API installed: no PodGroup CRD, no Karpenter, the Workload
    API off. Its nodes are the tests' own."""
    skip_without_go()
    local = LocalCluster(f"pytest-apis-{os.getpid()}")
    try:
        local.up([], kubernetes=kubernetes_version())
        yield Cluster(local)
    finally:
        local.down(quiet=True)


def leading(cluster: Cluster, namespace: str, tmp_path: Path, *args: str) -> ControllerProcess:
    """The controller for the test's namespace, leading through a Lease there (as the chart runs it), so
    its events and its record of the APIs it reads are the test's to see."""
    process = ControllerProcess.for_namespace(
        cluster.kubeconfig,
        namespace,
        tmp_path,
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        "--leader-election-id=yuniplace",
        *args,
    )
    process.start()
    wait_until(lambda: "became leader" in process.log_path.read_text(), WAIT_S)
    return process


@pytest.fixture
def controller(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[ControllerProcess]:
    process = leading(cluster, namespace, tmp_path)
    yield process
    assert process.stop() == 0, process.log()


def crd_path(name: str) -> str:
    return f"{CRDS}/{name}"


def install_crd(cluster: Cluster, name: str) -> float:
    """Install one of the chart's CRDs as `kubectl apply` does; return when (epoch seconds)."""
    applied_at = time.time()
    cluster.kubectl("apply", "--server-side", "-f", str(CHART_CRDS / f"{name}.yaml"))
    return applied_at


def remove_crd(cluster: Cluster, name: str, api: str) -> None:
    """Delete the CRD (its objects go with it) and wait until discovery no longer serves it."""
    with contextlib.suppress(NotFound):
        cluster.client.delete(crd_path(name))
    cluster.wait_gone(crd_path(name), WAIT_S)
    wait_until(lambda: not served(cluster, api), WAIT_S)


@pytest.fixture
def no_pod_group_crds(cluster: Cluster) -> Iterator[None]:
    """Neither PodGroup CRD is installed when the test begins, nor left when it ends."""
    crds = ((PLUGIN_CRD, podgroup.API), (VOLCANO_CRD, keys.VOLCANO_API))
    for name, api in crds:
        remove_crd(cluster, name, api)
    yield
    for name, api in crds:
        remove_crd(cluster, name, api)


def said(cluster: Cluster, namespace: str, reason: str, api: str) -> dict[str, Any]:
    """The controller's event of `reason` on its Lease naming the API (group/version)."""

    def found() -> dict[str, Any] | None:
        return next(
            (
                e
                for e in events_for(cluster, namespace, reason)
                if e["involvedObject"]["kind"] == "Lease" and e["message"].startswith(f"{api} ")
            ),
            None,
        )

    return wait_until(found, WAIT_S)  # type: ignore[no-any-return]


def event_time(event: dict[str, Any]) -> float:
    at = p.parse_time(event.get("eventTime") or event.get("lastTimestamp"))
    assert at is not None, event
    return at


def status_apis(cluster: Cluster) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "yuniplace", "status", "--apis", f"--kubeconfig={cluster.kubeconfig}", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def reads(cluster: Cluster, lease: str, until: Callable[[dict[str, Any]], bool]) -> dict[str, dict[str, str]]:
    """What `yuniplace status --apis` says the controller of `lease` (namespace/name) reads, once `until`
    holds of it: the leader writes it on its Lease with each renewal (every 2 s), so a change shows a
    moment after it is said."""

    def shown() -> dict[str, dict[str, str]] | None:
        controllers = status_apis(cluster)["controllers"]
        record = next((c["reads"] for c in controllers if c["lease"] == lease), {})
        return record if until(record) else None

    return wait_until(shown, WAIT_S)  # type: ignore[no-any-return]


def plugin_pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }


def plugin_members(cluster: Cluster, namespace: str, place: Placement, gang: str, count: int) -> list[str]:
    """Bare pods of a scheduler-plugins PodGroup gang, gated as the chart's webhook gates them."""
    names = [f"{gang}-{i}" for i in range(count)]
    for name in names:
        pod = make_pod(name, cpu="1", memory="1Gi", gates=[keys.GATE], labels={podgroup.LABEL: gang})
        cluster.create_pod(namespace, place.pin(pod))
    return names


def running(cluster: Cluster, namespace: str, names: list[str]) -> list[Pod]:
    return [cluster.wait_pod(namespace, name, is_running, timeout_s=WAIT_S) for name in names]


def test_karpenter_installed_after_the_controller_makes_the_waiting_gangs_nodes_at_once(
    cluster: Cluster,
    namespace: str,
    busy: Placement,
    pools: Pools,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    record_property: Callable[[str, object], None],
) -> None:
    """The issue's cluster: two 4-CPU nodes, 3 CPUs of each taken, and a gang of 2 x 3 CPUs that fits
    their total room but not their free room. It waits. Then Karpenter is installed (its CRDs, its
    process) and given a NodePool: the controller counts it from then on, and the gang gets 2 new nodes
    and starts whole on them, its NodeClaims counted."""
    gang_job(cluster, namespace, busy, "gb2", 2, cpu="3", memory="1Gi")
    before = posted(cluster, namespace, "GangWaiting", on="gb2")[0]
    assert "0 of 2 pods of (cpu 3, memory 1Gi) fit" in before["message"], before
    installed_at = time.time()
    karp.start(cluster.local, karp.ensure_karpenter(quiet=True))
    read = said(cluster, namespace, "OptionalApiServed", "karpenter.sh/v1")
    assert "counting what Karpenter's NodePools can still make" in read["message"], read
    pool = pools.add()
    created = time.monotonic()
    members = running_whole(cluster, namespace, "gb2", 2)
    took = time.monotonic() - created
    assert_on_held_room(recorder, members)
    claims = pools.claims(pool)
    assert len(claims) == 2, [c["metadata"]["name"] for c in claims]  # one node a member, none more
    assert {pod["spec"]["nodeName"] for pod in members} == set(pools.nodes(pool))
    record = reads(cluster, f"{namespace}/yuniplace", lambda record: "karpenter" in record)
    assert record["karpenter"]["api"] == "karpenter.sh/v1", record
    assert not events_for(cluster, namespace, "OptionalApiGone")
    record_property(
        "figure",
        f"Karpenter's CRDs applied -> read by the controller {event_time(read) - installed_at:.1f} s; NodePool "
        f"created -> gang of 2 x 3 CPU running whole on 2 new nodes {took:.1f} s",
    )


@pytest.mark.every_version
def test_a_podgroup_crd_installed_after_the_controller_is_read_and_its_gangs_start_whole(
    cluster: Cluster,
    namespace: str,
    no_pod_group_crds: None,
    pool: Callable[..., Placement],
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    record_property: Callable[[str, object], None],
) -> None:
    """scheduler-plugins' PodGroup CRD installed while the controller runs: read at once (the watch of
    CRDs), said on its Lease and in `yuniplace status --apis`; a gang of that format created afterwards
    starts whole."""
    place = pool(2, cpu="4", memory="16Gi")
    applied_at = install_crd(cluster, PLUGIN_CRD)
    read = said(cluster, namespace, "OptionalApiServed", "scheduling.x-k8s.io/v1alpha1")
    took = event_time(read) - applied_at
    cluster.client.create(f"{podgroup.API}/namespaces/{namespace}/podgroups", plugin_pod_group("mpi", 3))
    members = running(cluster, namespace, plugin_members(cluster, namespace, place, "mpi", 3))
    assert_on_held_room(recorder, members)
    record = reads(cluster, f"{namespace}/yuniplace", lambda record: "podgroups" in record)
    assert record["podgroups"]["api"] == "scheduling.x-k8s.io/v1alpha1", record
    assert "volcano-podgroups" not in record, record
    record_property("figure", f"PodGroup CRD applied -> read by the controller {took:.2f} s")


@pytest.mark.every_version
def test_a_gang_whose_pods_came_before_its_crd_starts_whole_once_its_podgroup_comes(
    cluster: Cluster,
    namespace: str,
    no_pod_group_crds: None,
    pool: Callable[..., Placement],
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
) -> None:
    """A PodGroup gang's pods created before the PodGroup CRD exists (so before their PodGroup could): held,
    none bound. The CRD is installed and the PodGroup created: the gang is read and starts whole."""
    place = pool(2, cpu="4", memory="16Gi")
    names = plugin_members(cluster, namespace, place, "early", 3)
    install_crd(cluster, PLUGIN_CRD)
    said(cluster, namespace, "OptionalApiServed", "scheduling.x-k8s.io/v1alpha1")
    held_throughout(cluster, namespace, names)
    cluster.client.create(f"{podgroup.API}/namespaces/{namespace}/podgroups", plugin_pod_group("early", 3))
    members = running(cluster, namespace, names)
    assert_on_held_room(recorder, members)


@pytest.mark.every_version
def test_a_gang_whose_crd_never_comes_fails_at_its_timeout_and_never_starts_in_part(
    cluster: Cluster,
    namespace: str,
    no_pod_group_crds: None,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    tmp_path: Path,
) -> None:
    """Gang pods naming a PodGroup whose CRD is never installed: held for --default-timeout (10 s here),
    then failed, saying what to create; not one was ever bound (neither gated forever, nor started in
    part on nodes where only some of them fit)."""
    place = pool(1, cpu="2", memory="16Gi")  # room for 2 of its 3 pods: released, it would start in part
    process = leading(cluster, namespace, tmp_path, "--default-timeout=10")
    try:
        names = plugin_members(cluster, namespace, place, "never", 3)
        failed = [
            cluster.wait_pod(namespace, name, lambda pod: pod["status"].get("phase") == "Failed", timeout_s=WAIT_S)
            for name in names
        ]
        assert {pod["status"]["reason"] for pod in failed} == {"ResourceReservationTimeout"}, failed
        message = failed[0]["status"]["message"]
        assert "names no PodGroup never of this namespace after 10s: failed rather than started" in message
        assert "its CRD, scheduling.x-k8s.io/v1alpha1" in message, message
        recorder.wait_seen(names)
        assert not [name for name in names if is_bound(recorder.latest[name])]
    finally:
        assert process.stop() == 0, process.log()


@pytest.mark.every_version
def test_a_crd_deleted_under_the_controller_is_said_once_and_other_gangs_go_on(
    cluster: Cluster,
    namespace: str,
    no_pod_group_crds: None,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    """Both PodGroup CRDs installed, a gang of each running. scheduler-plugins' CRD is deleted (its
    PodGroups with it): the controller warns once (one event, one log line, no watch failing over and
    over), stays ready, and its other gangs are unaffected: the Volcano gang keeps running, and a new
    Volcano gang and a new YuniKorn gang start whole."""
    install_crd(cluster, PLUGIN_CRD)
    install_crd(cluster, VOLCANO_CRD)
    wait_until(lambda: served(cluster, podgroup.API) and served(cluster, keys.VOLCANO_API), WAIT_S)
    place = pool(2, cpu="8", memory="32Gi")
    process = leading(cluster, namespace, tmp_path)
    try:
        cluster.client.create(f"{podgroup.API}/namespaces/{namespace}/podgroups", plugin_pod_group("mpi", 2))
        plugin = running(cluster, namespace, plugin_members(cluster, namespace, place, "mpi", 2))
        first = volcano_gang(cluster, namespace, place, "vc-a")
        deleted_at = time.time()
        cluster.client.delete(crd_path(PLUGIN_CRD))
        gone = said(cluster, namespace, "OptionalApiGone", "scheduling.x-k8s.io/v1alpha1")
        assert "PodGroup gangs are not read" in gone["message"], gone
        second = volcano_gang(cluster, namespace, place, "vc-b")
        yunikorn = running(cluster, namespace, gang_job(cluster, namespace, place, "yk", 2, cpu="1", memory="1Gi"))
        assert_on_held_room(recorder, second + yunikorn)
        for pod in plugin + first:  # running gangs run on, the PodGroup gang's too (its PodGroup went)
            assert is_running(cluster.get_pod(namespace, p.name(pod)) or {}), pod["metadata"]["name"]
        assert is_ready(process.port), "the controller is not ready after its CRD went"
        assert len(events_for(cluster, namespace, "OptionalApiGone")) == 1
        warned = [
            line
            for line in process.log_path.read_text().splitlines()
            if " WARNING " in line and ("watch of podgroups " in line or "scheduling.x-k8s.io" in line)
        ]
        assert len(warned) == 1 and "is no longer served" in warned[0], warned
        record = reads(cluster, f"{namespace}/yuniplace", lambda r: "podgroups" not in r and "volcano-podgroups" in r)
        assert record["volcano-podgroups"]["api"] == "scheduling.volcano.sh/v1beta1", record
        record_property("figure", f"CRD deleted -> said gone {event_time(gone) - deleted_at:.1f} s later")
    finally:
        assert process.stop() == 0, process.log()


def volcano_gang(cluster: Cluster, namespace: str, place: Placement, name: str) -> list[Pod]:
    """A Volcano PodGroup of 2 and its 2 pods; returned once both run."""
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 2},
    }
    cluster.client.create(f"{keys.VOLCANO_API}/namespaces/{namespace}/podgroups", group)
    names = [f"{name}-{i}" for i in range(2)]
    for pod_name in names:
        pod = make_pod(pod_name, cpu="1", memory="1Gi", gates=[keys.GATE], annotations={volcano.GROUP_NAME: name})
        cluster.create_pod(namespace, place.pin(pod))
    return running(cluster, namespace, names)
