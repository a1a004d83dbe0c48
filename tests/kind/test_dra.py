"""DRA gangs on real kubelets. Kubernetes' own DRA test driver (tests/kind/dra-test-driver.yaml) is the
kubelet plugin of both workers, each publishing its devices in a ResourceSlice. A gang whose members each
use a claim of the driver's class starts whole: placeholders hold the members' own claims, the members
are swapped in, and the kubelet has the driver prepare each member's devices, which containerd hands
to the container through CDI (the variables the driver's CDI spec sets, read inside it). A gang asking
more devices than the workers have waits whole. yuniplace runs as the chart installs it, with the
chart's service account: the swap's writes to the claims are made with the chart's permissions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests import builders
from tests.kind.support import (
    RELEASE_NAMESPACE,
    REPO,
    History,
    Kind,
    Pod,
    pause_pod,
    task_group,
    wait,
    wait_landed,
)
from yuniplace.gang import keys
from yuniplace.localcluster.kindimage import KindImages

DRA = "/apis/resource.k8s.io/v1"
MANIFEST = REPO / "tests" / "kind" / "dra-test-driver.yaml"
# Up to the kubelet's plugin registration and the driver's first ResourceSlices.
DRIVER_READY_S = 120.0
# Placeholders placed, their claims allocated and prepared, members swapped in and started.
GANG_RUNNING_S = 180.0
HANDED_OVER = "yuniplace_dra_claims_handed_over_total"


@dataclass(frozen=True)
class Driver:
    """The test driver as the manifest deploys it: its name, its DeviceClass, and the devices each worker has."""

    name: str
    device_class: str
    per_node: int
    workers: tuple[str, ...]
    image: str


def flag(arguments: list[str], name: str) -> str:
    [value] = [a.split("=", 1)[1] for a in arguments if a.startswith(f"--{name}=")]
    return value


def driver_slices(kind: Kind, driver: str) -> list[dict[str, Any]]:
    slices = kind.client.get(f"{DRA}/resourceslices")["items"]
    return [s for s in slices if s["spec"]["driver"] == driver]


def allocated_claims(kind: Kind, driver: str) -> list[str]:
    """Every claim in the cluster holding one of the driver's devices."""
    claims = kind.client.get(f"{DRA}/resourceclaims")["items"]
    return [
        f"{c['metadata']['namespace']}/{c['metadata']['name']}"
        for c in claims
        if any(
            r["driver"] == driver
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        )
    ]


@pytest.fixture(scope="module")
def driver(installed: Kind, images: KindImages, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    """The test driver on both workers (its image loaded into the nodes), its devices published."""
    rendered = MANIFEST.read_text().replace("{{IMAGE}}", images.dra_driver_image)
    documents = list(yaml.safe_load_all(rendered))
    [daemonset] = [d for d in documents if d["kind"] == "DaemonSet"]
    [device_class] = [d for d in documents if d["kind"] == "DeviceClass"]
    arguments = daemonset["spec"]["template"]["spec"]["containers"][0]["command"]
    installed.cluster.load(images.dra_driver_image)
    manifest = tmp_path_factory.mktemp("dra") / "dra-test-driver.yaml"
    manifest.write_text(rendered)
    installed.kubectl("apply", "-f", str(manifest))
    nodes = installed.client.get("/api/v1/nodes")["items"]
    workers = tuple(
        sorted(
            n["metadata"]["name"]
            for n in nodes
            if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {})
        )
    )
    found = Driver(
        flag(arguments, "drivername"),
        device_class["metadata"]["name"],
        int(flag(arguments, "num-devices")),
        workers,
        images.dra_driver_image,
    )

    def published() -> bool:
        slices = driver_slices(installed, found.name)
        return sorted(s["spec"]["nodeName"] for s in slices) == list(workers) and all(
            len(s["spec"]["devices"]) == found.per_node for s in slices
        )

    wait(published, DRIVER_READY_S, f"{found.name} publishing {found.per_node} devices on each of {workers}")
    yield found
    installed.kubectl("delete", "-f", str(manifest), "--ignore-not-found", "--wait=true")


def device_template(kind: Kind, namespace: str, name: str, driver: Driver, count: int, app: str) -> str:
    """A ResourceClaimTemplate asking `count` of the driver's devices, with an opaque parameter the
    driver turns into user_gang=<app> in the environment of the containers using the claim."""
    body = builders.claim_template(name, builders.device_request(driver.device_class, count))
    body["spec"]["spec"]["devices"]["config"] = [{"opaque": {"driver": driver.name, "parameters": {"gang": app}}}]
    kind.client.create(f"{DRA}/namespaces/{namespace}/resourceclaimtemplates", body)
    return name


def device_member(name: str, app: str, members: int, template: str, image: str) -> Pod:
    """A YuniKorn-annotated member of task group "workers" using a claim of `template` in its container,
    which sleeps (the driver's image has a shell and printenv for kubectl exec)."""
    pod = pause_pod(
        name,
        app,
        "workers",
        task_groups=[task_group("workers", members, cpu="50m", memory="32Mi")],
        cpu="50m",
        memory="32Mi",
    )
    container = pod["spec"]["containers"][0]
    container["image"] = image
    container["command"] = ["sleep", "infinity"]
    return builders.using_claims(pod, templates=[template])


def claim_of(kind: Kind, namespace: str, pod: Pod) -> dict[str, Any]:
    """The claim made for the pod from its template."""
    [status] = pod["status"]["resourceClaimStatuses"]
    return kind.client.get(f"{DRA}/namespaces/{namespace}/resourceclaims/{status['resourceClaimName']}")


def reserved_for_it_alone(kind: Kind, namespace: str, pod: Pod) -> dict[str, Any] | None:
    """The pod's claim, once its `reservedFor` names the pod and nothing else."""
    claim = claim_of(kind, namespace, pod)
    reserved = [r["name"] for r in (claim.get("status") or {}).get("reservedFor") or []]
    return claim if reserved == [pod["metadata"]["name"]] else None


def allocated_node(claim: dict[str, Any]) -> str:
    [term] = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    [match] = term["matchFields"]
    return str(match["values"][0])


def cdi_variable(claim: str, request: str) -> str:
    """The variable the test driver's CDI spec sets in containers using a claim's request."""
    return re.sub(r"[^a-zA-Z0-9]", "_", f"claim_{claim}_{request}")


def claims_handed_over(kind: Kind) -> float:
    """How many claims the leading replica has handed from a placeholder to its member (each a write to
    the claim's status, with the chart's permissions), from its /metrics through the API server."""
    port = yaml.safe_load((kind.chart / "values.yaml").read_text())["metrics"]["port"]
    path = f"/api/v1/namespaces/{RELEASE_NAMESPACE}/pods/{kind.lease_holder()}:{port}/proxy/metrics"
    samples = [s for f in text_string_to_metric_families(kind.kubectl("get", "--raw", path)) for s in f.samples]
    return sum(s.value for s in samples if s.name == HANDED_OVER)


def wait_devices_free(kind: Kind, driver: Driver) -> None:
    wait(lambda: not allocated_claims(kind, driver.name), 120, f"every device of {driver.name} free")


def test_a_gang_asking_more_devices_than_the_workers_have_waits_whole(
    installed: Kind, namespace: str, driver: Driver
) -> None:
    """One member more than there are workers, each asking all of a worker's devices (3 members of 2 on
    2 workers of 2): no member starts, no placeholder is made, and the gang says which class is short
    and by how much. The devices are free: the kubelets could run all but one of them."""
    wait_devices_free(installed, driver)
    members = len(driver.workers) + 1
    template = device_template(installed, namespace, "whole-node", driver, driver.per_node, "big")
    names = [f"big-{i}" for i in range(members)]
    for name in names:
        installed.client.create(
            f"/api/v1/namespaces/{namespace}/pods", device_member(name, "big", members, template, driver.image)
        )
    [event] = wait(lambda: installed.events(namespace, "GangExceedsCapacity"), 60, "GangExceedsCapacity")
    note = event["note"]
    assert f"deviceclass.resource.kubernetes.io/{driver.device_class}" in note, note
    total = driver.per_node * len(driver.workers)
    assert f"{len(driver.workers)} of {members} pods" in note and f"the nodes have {total} of" in note, note
    assert "waiting, whole" in note, note
    assert not installed.placeholders(namespace)
    for name in names:
        pod = installed.pod(namespace, name)
        assert pod is not None and not pod["spec"].get("nodeName"), pod
        assert [g["name"] for g in pod["spec"].get("schedulingGates") or []] == [keys.GATE], pod["spec"]


def test_a_gang_starts_whole_with_its_devices_prepared_by_the_kubelets(
    installed: Kind, namespace: str, driver: Driver
) -> None:
    """As many members as the workers have devices, each using a claim of one device: placeholders hold
    the members' own claims (each bound where its claim's device is), every member is swapped in and Running on the node its claim is
    allocated on, with the devices the kubelet had the driver prepare for it in its environment. yuniplace
    handed each claim over itself (its RBAC lets it write the claims' status)."""
    wait_devices_free(installed, driver)
    members = driver.per_node * len(driver.workers)
    template = device_template(installed, namespace, "one", driver, 1, "train")
    names = [f"train-{i}" for i in range(members)]
    handed_over = claims_handed_over(installed)
    with History(installed.client, namespace) as history:
        for name in names:
            installed.client.create(
                f"/api/v1/namespaces/{namespace}/pods", device_member(name, "train", members, template, driver.image)
            )
        pods = installed.wait_running(namespace, *names, timeout_s=GANG_RUNNING_S)
        wait_landed(installed, namespace, members)
        held = history.placeholders_seen_bound()
    wait(lambda: not installed.placeholders(namespace), 60, "no placeholder left")
    claims_held = {
        entry.get("resourceClaimName"): placeholder["spec"]["nodeName"]
        for placeholder in held.values()
        for entry in placeholder["spec"].get("resourceClaims") or []
    }
    devices = set()
    for pod in pods:
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
        # Its placeholder's reservation goes once the resourceclaim controller sees the placeholder gone.
        claim: dict[str, Any] = wait(
            functools.partial(reserved_for_it_alone, installed, namespace, pod), 60, f"{name}'s claim its own"
        )
        claim_name = claim["metadata"]["name"]
        assert allocated_node(claim) == node, (name, node, claim["status"])
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"]) == (driver.name, node), result
        devices.add((node, result["device"]))
        assert claims_held.get(claim_name) == node, f"no placeholder held {claim_name} on {node}: {claims_held}"
        environment = installed.kubectl("exec", "-n", namespace, name, "--", "printenv").splitlines()
        assert f"{cdi_variable(claim_name, result['request'])}=true" in environment, (name, environment)
        assert "user_gang=train" in environment, (name, environment)
    assert len(devices) == members, devices
    assert claims_handed_over(installed) - handed_over == members
