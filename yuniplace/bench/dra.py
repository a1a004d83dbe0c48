"""Scenario 8, DRA gangs: nodes whose devices a DRA driver publishes in ResourceSlices, and gangs whose
members each use a claim of one device (a ResourceClaimTemplate). A gang of M held and started by
yuniplace (placeholders holding each member's own claim, handed over in the swap) beside the same M pods
plain (no gang: kube-scheduler allocates as they come), on the same nodes and slices, alternating, M of
10 and 100. Reports the start latency of each (first pod created to last bound), the claims handed over
and the API writes a member cost."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yuniplace.bench.scenarios import time_to_bound
from yuniplace.bench.subjects import ControllerUnderTest, gang, plain
from yuniplace.devices.claims import DRA_API
from yuniplace.localcluster import LocalCluster, NodePool
from yuniplace.localcluster.build import Binaries

DRIVER = "gpu.bench.yuniplace.io"
DEVICE_CLASS = "bench-gpu"
TEMPLATE = "one-gpu"
HANDED_OVER = "yuniplace_dra_claims_handed_over_total"


@dataclass(frozen=True)
class Shape:
    nodes: int
    devices_per_node: int
    sizes: tuple[int, ...]
    repeats: int


FULL = Shape(100, 8, (10, 100), 3)
QUICK = Shape(10, 4, (10,), 1)


def publish(cluster: LocalCluster, nodes: Sequence[str], per_node: int) -> None:
    """The DeviceClass, and a ResourceSlice per node as a driver publishes it."""
    client = cluster.client()
    client.create(
        f"{DRA_API}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    for node in nodes:
        client.create(
            f"{DRA_API}/resourceslices",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"gpu-{i}"} for i in range(per_node)],
                },
            },
        )


def template() -> tuple[str, dict[str, Any]]:
    """The ResourceClaimTemplate each pod's claim is made from, as a namespaced object to create."""
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}]}}},
    }
    return f"{DRA_API}/namespaces/{{namespace}}/resourceclaimtemplates", body


def with_claim(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for pod in pods:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pods


def run(
    binaries: Binaries,
    shape: Shape,
    log: Path,
    controller_args: Sequence[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    cluster = LocalCluster("bench-dra")
    pool = NodePool(count=shape.nodes, cpu="32", memory="256Gi", pods=110)
    cluster.up([pool], binaries=binaries, timeout_s=max(90.0, shape.nodes * 0.3))
    try:
        publish(cluster, list(pool.names()), shape.devices_per_node)
        with ControllerUnderTest(cluster, log, list(controller_args)) as controller:
            rows = [_size(cluster, controller, members, shape.repeats, progress) for members in shape.sizes]
    finally:
        cluster.down(quiet=True)
    return {
        "scenario": "dra",
        "nodes": shape.nodes,
        "devices_per_node": shape.devices_per_node,
        "repeats": shape.repeats,
        "rows": rows,
    }


def _size(
    cluster: LocalCluster,
    controller: ControllerUnderTest,
    members: int,
    repeats: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """One gang of M members, each with a claim, against the same M pods plain, alternating."""
    progress(f"8. DRA: a gang of {members}, each member a claim of one device, and {members} plain pods")
    plain_s, gang_s, writes, handed = [], [], [], []
    timeout_s = max(120.0, members * 1.0)
    for attempt in range(repeats):
        run = time_to_bound(
            cluster,
            f"dra-plain-{members}-{attempt}",
            with_claim(plain("plain", members)),
            timeout_s,
            objects=[template()],
        )
        plain_s.append(run.seconds)
        before, handed_before = controller.writes(), controller.metrics().get(HANDED_OVER, 0.0)
        name = f"dra-gang-{members}-{attempt}"
        run = time_to_bound(cluster, name, with_claim(gang(name, members)), timeout_s, objects=[template()])
        gang_s.append(run.seconds)
        after = controller.writes()
        writes.append(sum(after.get(k, 0.0) - before.get(k, 0.0) for k in after if k != "events"))
        handed.append(controller.metrics().get(HANDED_OVER, 0.0) - handed_before)
    row: dict[str, Any] = {
        "members": members,
        "plain_s": round(statistics.median(plain_s), 2),
        "yuniplace_s": round(statistics.median(gang_s), 2),
        "runs_plain_s": [round(x, 2) for x in plain_s],
        "runs_yuniplace_s": [round(x, 2) for x in gang_s],
        "claims_handed_over": int(statistics.median(handed)),
        "writes_per_member": round(statistics.median(writes) / members, 2),
    }
    row["ratio"] = round(row["yuniplace_s"] / row["plain_s"], 2)
    return row
