"""GPU gangs on Dynamic Resource Allocation, end to end: devices published in ResourceSlices as a DRA
driver publishes them, members asking for them through ResourceClaimTemplates, kube-scheduler
allocating them. A gang whose devices do not all fit waits whole and says why; a gang that fits holds
its members' own claims with placeholders, and the swap hands each claim to its member without the
claim ever leaving its allocation, under a flood of device-claiming pods of the same priority."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import builders
from tests.e2e.conftest import kubernetes_version
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    chart_installed,
    events_for,
    gang_pod,
    is_bound,
    is_running,
    make_pod,
    placeholders,
    posted,
    put_queues,
)
from tests.e2e.test_pools import applied, in_pool, make_pools, status_queues
from yuniplace.gang import keys
from yuniplace.kube import NotFound
from yuniplace.kube.watch import ListWatch
from yuniplace.localcluster import wait_until

pytestmark = pytest.mark.every_version

DRA = "/apis/resource.k8s.io/v1"


@dataclass
class Devices:
    """The test's DRA driver: its device class, and the devices it published on each of the test's nodes."""

    cluster: Cluster
    namespace: str
    driver: str
    device_class: str
    slices: list[str] = field(default_factory=list)

    def template(self, name: str, count: int, **request: Any) -> str:
        """A ResourceClaimTemplate in the test's namespace whose claims ask `count` of the class's devices."""
        body = builders.claim_template(name, builders.device_request(self.device_class, count, **request))
        self.cluster.client.create(f"{DRA}/namespaces/{self.namespace}/resourceclaimtemplates", body)
        return name

    def pod(self, pod: dict[str, Any], template: str) -> dict[str, Any]:
        return builders.using_claims(pod, templates=[template])

    @property
    def extended_resource(self) -> str:
        """The name pods ask the class's devices by, where the class offers them as an extended resource."""
        return f"{self.driver}/gpu"

    def claims(self) -> list[dict[str, Any]]:
        return self.cluster.client.get(f"{DRA}/namespaces/{self.namespace}/resourceclaims")["items"]

    def claim_of(self, pod_name: str) -> dict[str, Any]:
        """The claim made for the pod from its template."""
        pod = self.cluster.get_pod(self.namespace, pod_name)
        assert pod is not None, pod_name
        [status] = pod["status"]["resourceClaimStatuses"]
        return self.cluster.client.get(
            f"{DRA}/namespaces/{self.namespace}/resourceclaims/{status['resourceClaimName']}"
        )


def allocated_node(claim: dict[str, Any]) -> str | None:
    """The node a claim's devices are on, from its allocation's node selector."""
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return None
    [term] = allocation["nodeSelector"]["nodeSelectorTerms"]
    [match] = term["matchFields"]
    return str(match["values"][0])


@pytest.fixture
def devices(cluster: Cluster, namespace: str) -> Iterator[Callable[..., Devices]]:
    """A DRA driver of the test's own (class and slices cluster-wide, named after it; removed afterwards)
    publishing `per_node` devices on each of the given nodes; `extended` makes the class offer them as
    an extended resource from its creation on, before any pod asks them that way."""
    made: list[Devices] = []

    def publish(
        nodes: Sequence[str], per_node: int, *, selectors: Sequence[str] = (), extended: bool = False
    ) -> Devices:
        suffix = uuid.uuid4().hex[:8]
        found = Devices(cluster, namespace, f"gpu-{suffix}.example.com", f"gpu-{suffix}")
        body = builders.device_class(
            found.device_class,
            found.driver,
            selectors=selectors,
            extended_resource=found.extended_resource if extended else None,
        )
        cluster.client.create(f"{DRA}/deviceclasses", body)
        for node in nodes:
            name = f"{node}-{found.driver}"
            cluster.client.create(
                f"{DRA}/resourceslices",
                builders.resource_slice(name, node, found.driver, [f"gpu-{i}" for i in range(per_node)]),
            )
            found.slices.append(name)
        made.append(found)
        return found

    yield publish
    for found in made:
        for name in found.slices:
            with contextlib.suppress(NotFound):
                cluster.client.delete(f"{DRA}/resourceslices/{name}")
        with contextlib.suppress(NotFound):
            cluster.client.delete(f"{DRA}/deviceclasses/{found.device_class}")


class ClaimHistory:
    """Every state each of a namespace's ResourceClaims went through, from a watch: whether it was
    allocated (and where) and whom it was reserved for, in order."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self._lock = threading.Lock()
        self.states: dict[str, list[tuple[str | None, tuple[str, ...]]]] = defaultdict(list)
        self._watch = ListWatch(
            cluster.client,
            f"{DRA}/namespaces/{namespace}/resourceclaims",
            on_list=lambda claims: [self._saw(c) for c in claims],
            on_event=lambda _kind, claim: self._saw(claim),
        )
        threading.Thread(target=self._watch.run, daemon=True).start()
        wait_until(self._watch.synced.is_set, 30)

    def _saw(self, claim: dict[str, Any]) -> None:
        reserved = tuple(sorted(c["name"] for c in (claim.get("status") or {}).get("reservedFor") or []))
        with self._lock:
            self.states[claim["metadata"]["name"]].append((allocated_node(claim), reserved))

    def lapses(self, claim: str, member: str) -> list[tuple[str | None, tuple[str, ...]]]:
        """The states in which the claim was not allocated (its devices free for anyone), from the one in
        which a placeholder held it for `member` last before `member` joined it: the hand-over's window.
        (Before that a placeholder may lose a claim it was being allocated: kwok, which stands in for the
        kubelet, deletes a terminating pod by name, no uid given, so a late deletion of a placeholder
        meets the one made again under its name; a real kubelet's deletion names the pod's uid.)"""
        with self._lock:
            seen = list(self.states[claim])
        joined = next((i for i, (_, reserved) in enumerate(seen) if member in reserved), None)
        if joined is None or joined == 0:
            return seen  # the member never joined it from a placeholder: all of it is said
        held = seen[joined - 1]
        if held[0] is None or not any(name.startswith("tg-") for name in held[1]):
            return seen[joined - 1 :]
        return [state for state in seen[joined - 1 :] if state[0] is None]

    def stop(self) -> None:
        self._watch.stop()


@pytest.fixture
def claim_history(cluster: Cluster, namespace: str) -> Iterator[ClaimHistory]:
    history = ClaimHistory(cluster, namespace)
    yield history
    history.stop()


def wait_running(cluster: Cluster, devices: Devices, names: Sequence[str]) -> None:
    """Until every pod named runs; if one does not, the failure says what every claim of the namespace
    holds, and for whom."""
    try:
        for name in names:
            cluster.wait_pod(devices.namespace, name, is_running)
    except AssertionError as error:
        held = [
            (c["metadata"]["name"], allocated_node(c), [r["name"] for r in c["status"].get("reservedFor") or []])
            for c in devices.claims()
        ]
        raise AssertionError(f"{error}\nclaims (name, node, reserved for): {held}") from None


def gpu_gang(
    cluster: Cluster,
    devices: Devices,
    place: Placement,
    app: str,
    members: int,
    template: str,
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    policy: str = "placeholderTimeoutInSeconds=300",
) -> list[str]:
    """A gang of `members` pods (one task group, "workers"), each using a claim of `template`, created
    gated as yuniplace's webhook would gate them."""
    groups = [place.group("workers", members, cpu="1", memory="1Gi")]
    names = [f"{app}-{i}" for i in range(members)]
    for name in names:
        pod = gang_pod(name, app, "workers", task_groups=groups, policy=policy, cpu="1", memory="1Gi")
        pod["metadata"]["annotations"].update(annotations or {})
        pod["metadata"]["labels"].update(labels or {})
        cluster.create_pod(devices.namespace, place.pin(devices.pod(pod, template)))
    return names


def plain_device_pod(cluster: Cluster, devices: Devices, place: Placement, name: str, template: str) -> None:
    pod = gang_pod(name, name, None, gated=False, cpu="100m", memory="128Mi")
    cluster.create_pod(devices.namespace, place.pin(devices.pod(pod, template)))


def capacity_exceeded(cluster: Cluster, namespace: str, fitting: str) -> str:
    """The note of the GangExceedsCapacity event saying `fitting` (such as "2 of 3 pods"). The controller
    may take a gang in before the last of the test's slices (each node's a watch event of its own): it then
    says truly what it knew, and says it again once the slice comes, so a test waits for the note of the
    whole picture rather than reading the first."""
    *_, event = posted(cluster, namespace, "GangExceedsCapacity", saying=lambda note: fitting in note, timeout_s=30)
    return str(event["message"])


def test_a_gang_asking_more_devices_than_the_cluster_has_waits_whole_and_says_so(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
) -> None:
    """3 members of 2 devices each on 2 nodes of 2 devices (CPU plentiful): no member starts, no
    placeholder is made, and the event names the class and the count."""
    place = pool(2, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2)
    names = gpu_gang(cluster, gpus, place, "big", 3, gpus.template("two", 2))
    message = capacity_exceeded(cluster, namespace, "2 of 3 pods")
    assert f"deviceclass.resource.kubernetes.io/{gpus.device_class}" in message, message
    assert "the nodes have 4 of" in message and "waiting, whole" in message, message
    notes = [e["message"] for e in events_for(cluster, namespace, "GangExceedsCapacity")]
    assert all("waiting, whole" in note for note in notes), notes
    assert not recorder.placeholder_uids, sorted(recorder.placeholder_uids)
    assert not any(is_bound(recorder.latest[name]) for name in names)
    gates = {name: [g["name"] for g in recorder.latest[name]["spec"].get("schedulingGates") or []] for name in names}
    assert all(gate == [keys.GATE] for gate in gates.values()), gates


def test_a_gang_waits_whole_while_a_pod_holds_devices_it_needs_then_starts_on_its_own_claims(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
    claim_history: ClaimHistory,
) -> None:
    """A plain pod holds one node's 2 devices: a gang of 2 members of 2 devices waits (no member runs),
    saying what does not fit. Once the pod ends the gang reserves with placeholders holding its members'
    own claims, and each member starts where its claim's devices are, the claim never deallocated on
    the way from its placeholder to its member."""
    place = pool(2, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2)
    template = gpus.template("two", 2)
    plain_device_pod(cluster, gpus, place, "holder", template)
    cluster.wait_pod(namespace, "holder", is_running)
    names = gpu_gang(cluster, gpus, place, "train", 2, template)
    [waiting] = wait_until(lambda: events_for(cluster, namespace, "GangWaiting"), 30)
    assert "1 of 2 pods" in waiting["message"] and gpus.device_class in waiting["message"], waiting["message"]
    assert not recorder.placeholder_uids and not any(is_bound(recorder.latest[n]) for n in names)

    cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/holder")
    wait_running(cluster, gpus, names)
    held = recorder.placeholders_of("train")
    assert len(held) == 2, held
    for name in names:
        claim = gpus.claim_of(name)
        pod = recorder.latest[name]
        assert allocated_node(claim) == pod["spec"]["nodeName"], (claim["status"], pod["spec"]["nodeName"])
        assert claim_history.lapses(claim["metadata"]["name"], name) == [], claim_history.states[
            claim["metadata"]["name"]
        ]
        holders = [p for p in claim_history.states[claim["metadata"]["name"]] if any(n.startswith("tg-") for n in p[1])]
        assert holders, f"no placeholder held {claim['metadata']['name']}: {claim_history.states}"
    assert controller.metrics().get("yuniplace_dra_claims_handed_over_total") == 2
    assert wait_until(lambda: not placeholders(cluster, namespace), 30)


def test_the_swap_hands_each_claim_to_its_member_under_a_flood_of_device_pods(
    cluster: Cluster,
    namespace: str,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
    claim_history: ClaimHistory,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    """A gang of 4 members of 1 device holds every device of its 2 nodes, reserved and waiting for the
    other application of its gang group (whose placeholder finds no CPU yet: admission is off, so each
    reserves on its own); 20 ordinary pods of the same priority, each asking a device, wait to be
    scheduled. Then CPU is freed for the other application, and the gang swaps in while the flood
    retries on every claim change: each member lands where its own claim's devices are, no flood pod gets
    a device, and no claim is ever free between placeholder and member."""
    place = pool(2, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2)
    template = gpus.template("one", 1)
    for index, node in enumerate(place.nodes):  # 13 of each node's 16 CPUs
        blocker = make_pod(f"blocker-{index}", cpu="13", memory="1Gi")
        blocker["spec"]["nodeName"] = node
        cluster.create_pod(namespace, place.pin(blocker))
    controller = ControllerProcess.for_namespace(cluster.kubeconfig, namespace, tmp_path, "--admission=off")
    controller.start()
    try:
        together = {keys.GANG_GROUP: json.dumps([f"{namespace}/gpus", f"{namespace}/partner"])}
        names = gpu_gang(cluster, gpus, place, "gpus", 4, template, annotations=together)
        partner = [place.group("workers", 1, cpu="4", memory="1Gi")]
        pod = gang_pod("partner-0", "partner", "workers", task_groups=partner, cpu="4", memory="1Gi")
        pod["metadata"]["annotations"].update(together)
        cluster.create_pod(namespace, place.pin(pod))
        wait_until(lambda: len([c for c in gpus.claims() if allocated_node(c)]) == 4, 60)
        wait_until(lambda: events_for(cluster, namespace, "GangGroupWaiting"), 30)
        flood = [f"flood-{i}" for i in range(20)]
        for name in flood:
            plain_device_pod(cluster, gpus, place, name, template)
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/blocker-0")
        wait_running(cluster, gpus, names)
        landed = 0
        for name in names:
            claim = gpus.claim_of(name)
            landed += allocated_node(claim) == recorder.latest[name]["spec"]["nodeName"]
            history = claim_history.states[claim["metadata"]["name"]]
            assert claim_history.lapses(claim["metadata"]["name"], name) == [], history
        version = cluster.client.get("/version")["gitVersion"]
        figure = (
            f"Kubernetes {version}: {len(names)} DRA members swapped under a flood of {len(flood)} device pods, "
            f"{landed} on their own claim's devices"
        )
        record_property("figure", figure)
        print(f"\n{figure}")
        assert landed == len(names)
        assert controller.metrics().get("yuniplace_dra_claims_handed_over_total") == len(names)
        flood_claims = [c for c in gpus.claims() if c["metadata"]["name"].startswith("flood-")]
        assert len(flood_claims) == len(flood)
        assert not any(allocated_node(c) for c in flood_claims), [c["metadata"]["name"] for c in flood_claims]
        assert not any(is_bound(recorder.latest.get(n, {})) for n in flood)
        # The flood gets the devices once the gang is gone: it lost them to nothing but the gang.
        for name in names:
            cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
        wait_until(lambda: sum(1 for n in flood if is_bound(recorder.latest.get(n, {}))) == 4, 60)
    finally:
        assert controller.stop() == 0, controller.log()


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing-template", "ResourceClaimTemplate missing does not exist"),
        ("alternatives", "firstAvailable"),
        ("selector", "CEL compile error"),
    ],
)
def test_devices_that_cannot_be_counted_keep_the_gang_waiting_and_say_why(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
    case: str,
    expected: str,
) -> None:
    place = pool(1, cpu="8", memory="32Gi")
    # ip() is a function of Kubernetes' CEL library that DRA selectors may use and yuniplace does not offer.
    gpus = devices(place.nodes, 2, selectors=['ip("10.0.0.1").family() == 4'] if case == "selector" else ())
    if case == "missing-template":
        template = "missing"
    elif case == "alternatives":
        body = builders.claim_template(
            "either",
            {
                "name": "devices",
                "firstAvailable": [
                    {"name": "two", "deviceClassName": gpus.device_class, "count": 2},
                    {"name": "one", "deviceClassName": gpus.device_class, "count": 1},
                ],
            },
        )
        cluster.client.create(f"{DRA}/namespaces/{namespace}/resourceclaimtemplates", body)
        template = "either"
    else:
        template = gpus.template("one", 1)
    names = gpu_gang(cluster, gpus, place, "odd", 2, template)
    # The controller may take the gang in before the template or class made just before it (each a watch
    # of its own), and then says that one is missing first: the test waits for the note it is about.
    [event, *_] = posted(cluster, namespace, "GangDevices", saying=lambda note: expected in note, timeout_s=30)
    assert event["type"] == "Warning"
    assert not recorder.placeholder_uids and not any(is_bound(recorder.latest[n]) for n in names)


def test_a_gang_asking_devices_by_an_extended_resource_is_counted_from_the_slices(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
) -> None:
    """A DeviceClass that lets pods ask its devices as an extended resource (DRAExtendedResource: beta
    and on in 1.36, GA in 1.37): its nodes advertise none of it, and admission counts it from the slices
    (3 of 2 devices each on 2 nodes of 2 wait; 2 start whole)."""
    if kubernetes_version() == "1.35":
        pytest.skip("DRA-backed extended resources are alpha and off in Kubernetes 1.35")
    place = pool(2, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2, extended=True)
    resource = gpus.extended_resource

    def gang(app: str, members: int) -> list[str]:
        groups = [place.group("workers", members, cpu="1", memory="1Gi")]
        groups[0]["minResource"][resource] = "2"
        names = [f"{app}-{i}" for i in range(members)]
        for name in names:
            pod = gang_pod(name, app, "workers", task_groups=groups, policy="placeholderTimeoutInSeconds=300")
            pod["spec"]["containers"][0]["resources"] = {
                "requests": {"cpu": "1", "memory": "1Gi", resource: "2"},
                "limits": {resource: "2"},
            }
            cluster.create_pod(namespace, place.pin(pod))
        return names

    big = gang("big", 3)
    message = capacity_exceeded(cluster, namespace, "2 of 3 pods")
    assert resource in message, message
    assert not any(is_bound(recorder.latest[n]) for n in big)
    for name in big:
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
    fits = gang("fits", 2)
    wait_running(cluster, gpus, fits)
    assert len({recorder.latest[n]["spec"]["nodeName"] for n in fits}) == 2


def test_a_claim_every_member_shares_is_counted_once_and_handed_to_each_member(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
    claim_history: ClaimHistory,
) -> None:
    """One node of 2 GPUs and 1 channel device; 2 members, each with a GPU claim of its own and the
    gang's one channel claim, named: counted once, the gang fits and starts whole on that node, every
    member in the channel's reservedFor and the channel never free on the way."""
    place = pool(1, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2)
    channels = devices(place.nodes, 1)
    template = gpus.template("one", 1)
    channel = builders.resource_claim("channel", builders.device_request(channels.device_class, 1))
    cluster.client.create(f"{DRA}/namespaces/{namespace}/resourceclaims", channel)
    groups = [place.group("workers", 2, cpu="1", memory="1Gi")]
    names = ["shared-0", "shared-1"]
    for name in names:
        pod = gang_pod(name, "shared", "workers", task_groups=groups, policy="placeholderTimeoutInSeconds=300")
        cluster.create_pod(namespace, place.pin(builders.using_claims(pod, templates=[template], claims=["channel"])))
    wait_running(cluster, gpus, names)
    claim = cluster.client.get(f"{DRA}/namespaces/{namespace}/resourceclaims/channel")
    assert sorted(c["name"] for c in claim["status"]["reservedFor"]) == names
    assert all(claim_history.lapses("channel", name) == [] for name in names), claim_history.states["channel"]
    assert allocated_node(claim) == place.nodes[0]


def test_a_member_asking_every_device_of_a_node_gets_a_node_of_its_own(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
) -> None:
    """allocationMode All: 3 members each asking every device of its node wait on 2 nodes; 2 start whole,
    one a node."""
    place = pool(2, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2)
    template = gpus.template("all", 1, mode="All")
    big = gpu_gang(cluster, gpus, place, "big", 3, template)
    message = capacity_exceeded(cluster, namespace, "2 of 3 pods")
    assert "[all]" in message, message
    for name in big:
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
    names = gpu_gang(cluster, gpus, place, "two", 2, template)
    wait_running(cluster, gpus, names)
    assert len({recorder.latest[n]["spec"]["nodeName"] for n in names}) == 2


def test_executors_that_come_after_their_driver_runs_start_on_devices_held_for_them(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
    claim_history: ClaimHistory,
) -> None:
    """A Spark-like gang: the driver asks no device, its 2 executors (made once it runs) 2 GPUs each,
    which their task group's minResource names so admission counts them before they exist. Each
    executor, as it comes, gets a placeholder holding its own claims in place of one that held only CPU,
    and starts from it on those devices."""
    place = pool(2, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2)
    template = gpus.template("two", 2)
    executors_group = place.group("executors", 2, cpu="1", memory="1Gi")
    executors_group["minResource"][f"deviceclass.resource.kubernetes.io/{gpus.device_class}"] = "2"
    groups = [place.group("driver", 1, cpu="1", memory="1Gi"), executors_group]
    driver = gang_pod(
        "driver", "spark", "driver", task_groups=groups, policy="placeholderTimeoutInSeconds=300", cpu="1", memory="1Gi"
    )
    cluster.create_pod(namespace, place.pin(driver))
    cluster.wait_pod(namespace, "driver", is_running)
    names = ["exec-0", "exec-1"]
    for name in names:
        pod = gang_pod(name, "spark", "executors", cpu="1", memory="1Gi")
        cluster.create_pod(namespace, place.pin(gpus.pod(pod, template)))
    wait_running(cluster, gpus, names)
    for name in names:
        claim = gpus.claim_of(name)
        assert allocated_node(claim) == recorder.latest[name]["spec"]["nodeName"]
        history = claim_history.states[claim["metadata"]["name"]]
        assert claim_history.lapses(claim["metadata"]["name"], name) == [], history
        holders = [
            state
            for state in claim_history.states[claim["metadata"]["name"]]
            if any(n.startswith("tg-") for n in state[1])
        ]
        assert holders, claim_history.states[claim["metadata"]["name"]]


def test_a_queues_max_of_a_device_class_holds_a_second_dra_gang_back(
    cluster: Cluster,
    namespace: str,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
    cluster_wide: Callable[..., ControllerProcess],
) -> None:
    """queues.yaml names a device class in a queue's max (`deviceclass.resource.kubernetes.io/<class>`,
    the name Kubernetes gives a class's devices): a first gang of 2 × 2 devices runs, a second waits on
    the queue though 4 more devices are free, and runs once the first is gone."""
    place = pool(4, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2)
    resource = f"deviceclass.resource.kubernetes.io/{gpus.device_class}"
    queue = f"""
        - name: gpus
          resources:
            max:
              {resource}: 4
    """
    put_queues(cluster, namespace, builders.queues_yaml(queue))
    cluster_wide(f"--queues-configmap={namespace}/queues")
    wait_until(lambda: events_for(cluster, namespace, "QueuesApplied"), 60)
    template = gpus.template("two", 2)
    in_queue = {"yunikorn.apache.org/queue": "root.gpus"}
    first = gpu_gang(cluster, gpus, place, "first", 2, template, labels=in_queue)
    wait_running(cluster, gpus, first)
    second = gpu_gang(cluster, gpus, place, "second", 2, template, labels=in_queue)

    def queue_says() -> str | None:
        notes = [
            e["message"]
            for e in events_for(cluster, namespace, "GangWaiting")
            if e["involvedObject"]["name"] == "second-0"
        ]
        return next((n for n in notes if f"max {resource}" in n), None)

    note = wait_until(queue_says, 30)
    assert "waiting for its queue" in note, note
    assert not any(is_bound(recorder.latest[n]) for n in second)
    for name in first:
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
    wait_running(cluster, gpus, second)


@pytest.mark.usefixtures("pool_api")
def test_an_ai_scheduler_pool_is_guaranteed_its_nodes_devices_and_takes_them_back_from_a_borrower(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
    cluster_wide: Callable[..., ControllerProcess],
) -> None:
    """ai-scheduler Pools: `gpus` owns two nodes of 2 devices each, `cpus` one node with none; gpus is
    guaranteed its nodes' 4 devices (`status --queues` says so). A gang of cpus asking 2 × 2 devices
    finds none at home, borrows gpus' idle nodes and runs whole. gpus' own gang of 2 × 2 devices then
    takes them back: the borrower is evicted whole (its devices counted free once it goes) and gpus'
    gang runs on its own devices."""
    home = pool(1, cpu="16", memory="64Gi", labels={"pool": "cpus"})
    gpu_nodes = pool(2, cpu="16", memory="64Gi", labels={"pool": "gpus"}).nodes
    gpus = devices(gpu_nodes, 2)
    names = make_pools(cluster, home, namespace[-6:], ("cpus", {"pool": "cpus"}, {}), ("gpus", {"pool": "gpus"}, {}))
    cluster_wide()
    applied(cluster, names)
    resource = f"deviceclass.resource.kubernetes.io/{gpus.device_class}"
    guaranteed = {row["queue"]: row["guaranteed"] or {} for row in status_queues(cluster)["queues"]}
    assert guaranteed[f"root.{names['gpus']}"].get(resource) == "4", guaranteed
    assert resource not in guaranteed[f"root.{names['cpus']}"], guaranteed
    template = gpus.template("two", 2)

    borrower = gpu_gang(cluster, gpus, home, "borrower", 2, template, annotations=in_pool(names["cpus"]))
    wait_running(cluster, gpus, borrower)
    assert {(cluster.get_pod(namespace, name) or {})["spec"]["nodeName"] for name in borrower} <= set(gpu_nodes)

    train = gpu_gang(cluster, gpus, home, "train", 2, template, annotations=in_pool(names["gpus"]))
    taken = [e["message"] for e in posted(cluster, namespace, "GangPreempted", on="borrower-")]
    assert (
        f"queue root.{names['gpus']} takes back room it is guaranteed and lent to queue root.{names['cpus']}"
        in (taken[0])
    ), taken
    wait_running(cluster, gpus, train)
    assert {allocated_node(gpus.claim_of(name)) for name in train} == set(gpu_nodes)
    wait_until(lambda: all(cluster.get_pod(namespace, name) is None for name in borrower), 60)  # evicted, gone


def test_the_charts_permissions_let_the_swap_hand_claims_over(
    cluster: Cluster,
    namespace: str,
    recorder: NamespaceRecorder,
    pool: Callable[..., Placement],
    devices: Callable[..., Devices],
    claim_history: ClaimHistory,
    tmp_path: Path,
) -> None:
    """The controller as the chart runs it (its ServiceAccount and ClusterRole, its webhook gating the
    members as they are created): the claims' hand-over writes `reservedFor`, which from 1.36 needs the
    `resourceclaims/binding` permission besides `resourceclaims/status`."""
    place = pool(2, cpu="16", memory="64Gi")
    gpus = devices(place.nodes, 2)
    template = gpus.template("two", 2)
    with chart_installed(cluster, namespace, tmp_path / "chart") as controller:
        groups = [place.group("workers", 2, cpu="1", memory="1Gi")]
        names = ["chart-0", "chart-1"]
        for name in names:
            pod = gang_pod(name, "chart", "workers", task_groups=groups, gated=False, cpu="1", memory="1Gi")
            cluster.create_pod(namespace, place.pin(gpus.pod(pod, template)))
        wait_running(cluster, gpus, names)
        assert all(keys.GATE in recorder.gates_seen[name] for name in names)
        assert controller.metrics().get("yuniplace_dra_claims_handed_over_total") == 2, controller.log()
        for name in names:
            claim = gpus.claim_of(name)
            assert claim_history.lapses(claim["metadata"]["name"], name) == [], claim_history.states
