"""Scenario 7: gangs on a cluster that grows, with the real Karpenter (its kwok provider) beside it. The
cluster starts with no node at all; every pod needs a node Karpenter makes (4 CPUs, and each pod asks 3,
so one node a pod). A gang of M members is measured beside the same M pods submitted plain (no gang) on
the same Karpenter, from the first pod's creation to the last bound; then how many nodes each made
against the M needed, and how long after the work ends the cluster is back to no node. Then a stream of
small gangs, beside the same pods in groups, at the same pace."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yuniplace.bench.scenarios import arrivals, time_to_bound
from yuniplace.bench.subjects import ControllerUnderTest, gang, member_pod, plain
from yuniplace.kube import KubeClient
from yuniplace.localcluster import LocalCluster, wait_until
from yuniplace.localcluster import karpenter as karp
from yuniplace.localcluster.build import Binaries

POOL = "bench"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
POD_CPU = "3"  # of a node of 4: one pod a node
NODE_CPU = 4
CONSOLIDATE_AFTER = "5s"
# Every empty node may go at once: with Karpenter's default budget (10% of the pool's nodes at a time) the
# time back to size measures the budget, one batch of a node or two every 25 s or so, not consolidation.
DISRUPTION_BUDGET = "100%"
BACK_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Shape:
    sizes: tuple[int, ...]
    stream_gangs: int
    stream_members: int
    stream_rate_per_s: float


FULL = Shape((10, 100), 20, 4, 1.0)
QUICK = Shape((10,), 5, 4, 1.0)


class Claims:
    """Every NodeClaim seen while it watches (polling), and the most at once."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self.seen: set[str] = set()
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nodeclaims", daemon=True)

    def live(self) -> list[str]:
        items = self._client.get(NODECLAIMS)["items"]
        return [c["metadata"]["name"] for c in items if not c["metadata"].get("deletionTimestamp")]

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            live = self.live()
            self.seen.update(live)
            self.most = max(self.most, len(live))

    def __enter__(self) -> Claims:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _back_to_no_node(client: KubeClient) -> float:
    """Seconds until Karpenter has taken back every node it made (the work ended just before)."""
    started = time.monotonic()
    wait_until(lambda: not client.get(NODECLAIMS)["items"], BACK_TIMEOUT_S)
    return round(time.monotonic() - started, 1)


def _one(cluster: LocalCluster, namespace: str, pods: list[dict[str, Any]], needed: int) -> dict[str, Any]:
    client = cluster.client()
    with Claims(client) as claims:
        run = time_to_bound(cluster, namespace, pods, timeout_s=300.0)
    return {
        "start_s": round(run.seconds, 2),
        "nodes_made": len(claims.seen),
        "nodes_needed": needed,
        "back_to_size_s": _back_to_no_node(client),
    }


def _stream(
    cluster: LocalCluster, namespace: str, shape: Shape, make: Callable[[str], list[dict[str, Any]]]
) -> dict[str, Any]:
    client = cluster.client()
    with Claims(client) as claims:
        timeout_s = 120 + shape.stream_gangs / shape.stream_rate_per_s * 3
        found = arrivals(
            cluster, namespace, shape.stream_gangs, shape.stream_members, shape.stream_rate_per_s, make, timeout_s
        )
    return {
        **found,
        "nodes_made": len(claims.seen),
        "nodes_needed": shape.stream_gangs * shape.stream_members,
        "back_to_size_s": _back_to_no_node(client),
    }


def run(
    binaries: Binaries,
    shape: Shape,
    log: Path,
    controller_args: Sequence[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    cluster = LocalCluster("bench-autoscaled")
    cluster.up([], binaries=binaries)
    try:
        karpenter = karp.ensure_karpenter(quiet=True)
        karp.start(cluster, karpenter)
        limit = NODE_CPU * max([*shape.sizes, shape.stream_gangs * shape.stream_members]) * 2
        pool = karp.node_pool(
            POOL,
            cpu=NODE_CPU,
            limits={"cpu": str(limit)},
            consolidate_after=CONSOLIDATE_AFTER,
            disruption_budget=DISRUPTION_BUDGET,
        )
        cluster.client().create("/apis/karpenter.sh/v1/nodepools", pool)
        rows = []
        with ControllerUnderTest(cluster, log, ["--workers=8", *controller_args]):
            for members in shape.sizes:
                progress(f"7. autoscaled: {members} pods of {POD_CPU} CPUs, plain, then as one gang")
                baseline = _one(cluster, f"plain-{members}", plain(f"plain-{members}", members, cpu=POD_CPU), members)
                gang_run = _one(cluster, f"gang-{members}", gang(f"gang-{members}", members, cpu=POD_CPU), members)
                rows.append(
                    {
                        "members": members,
                        "baseline": baseline,
                        "yuniplace": gang_run,
                        "gang_vs_plain": round(gang_run["start_s"] / baseline["start_s"], 2),
                    }
                )
            progress(
                f"7. autoscaled: {shape.stream_gangs} gangs of {shape.stream_members} at {shape.stream_rate_per_s}/s, "
                "plain, then as gangs"
            )
            members = shape.stream_members
            stream_plain = _stream(
                cluster,
                "stream-plain",
                shape,
                lambda app: [member_pod(f"{app}-{i}", cpu=POD_CPU) for i in range(members)],
            )
            stream_gangs = _stream(cluster, "stream-gang", shape, lambda app: gang(app, members, cpu=POD_CPU))
        return {
            "scenario": "autoscaling",
            "karpenter": karpenter.version,
            "node_cpu": NODE_CPU,
            "pod_cpu": POD_CPU,
            "limit_cpu": limit,
            "consolidate_after": CONSOLIDATE_AFTER,
            "disruption_budget": DISRUPTION_BUDGET,
            "rows": rows,
            "stream": {
                "gangs": shape.stream_gangs,
                "members": members,
                "rate_per_s": shape.stream_rate_per_s,
                "baseline": stream_plain,
                "yuniplace": stream_gangs,
            },
        }
    finally:
        cluster.down(quiet=True)
