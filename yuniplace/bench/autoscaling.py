"""Scenario 7: gangs on a cluster that grows, with the real Karpenter (its kwok provider) beside it. The
cluster starts with no node at all; every pod needs a node Karpenter makes (4 CPUs, and each pod asks 3,
so one node a pod). A gang of M members is measured beside the same M pods submitted plain (no gang) on
the same Karpenter, from the first pod's creation to the last bound; then how many nodes each made
against the M needed, and how long after the work ends the cluster is back to no node. Then a stream of
small gangs, beside the same pods in groups, at the same pace.

A new node takes seconds, and how many depends on what Karpenter and kube-scheduler happen to be doing:
one run of each varies by a second or more. So each is run `rounds` times, plain and gang taking turns
(which goes first alternates), and the median of each is compared; every run's figure is kept."""

from __future__ import annotations

import statistics
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
    rounds: int


FULL = Shape((10, 100), 20, 4, 1.0, rounds=3)
QUICK = Shape((10,), 5, 4, 1.0, rounds=1)


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


def _median_of(runs: list[dict[str, Any]], figures: Sequence[str]) -> dict[str, Any]:
    """The runs' median of each figure, the rest as the last run found it, and every run's figures."""
    merged = dict(runs[-1])
    found = [figure for figure in figures if all(figure in run for run in runs)]
    for figure in found:
        merged[figure] = round(statistics.median(run[figure] for run in runs), 2)
    merged["runs"] = [{figure: run[figure] for figure in found} for run in runs]
    return merged


def _in_turns(
    rounds: int, plain_run: Callable[[int], dict[str, Any]], gang_run: Callable[[int], dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`rounds` runs of each, taking turns: plain first in even rounds, the gang first in odd ones."""
    plains: list[dict[str, Any]] = []
    gangs: list[dict[str, Any]] = []
    for index in range(rounds):
        if index % 2 == 0:
            plains.append(plain_run(index))
            gangs.append(gang_run(index))
        else:
            gangs.append(gang_run(index))
            plains.append(plain_run(index))
    return plains, gangs


SIZE_FIGURES = ("start_s", "nodes_made", "back_to_size_s")
STREAM_FIGURES = ("p50_s", "p95_s", "p99_s", "pods_per_s", "nodes_made", "back_to_size_s")


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
                progress(f"7. autoscaled: {members} pods of {POD_CPU} CPUs, plain and as one gang, {shape.rounds} each")

                def plain_run(index: int, members: int = members) -> dict[str, Any]:
                    name = f"plain-{members}-{index}"
                    return _one(cluster, name, plain(name, members, cpu=POD_CPU), members)

                def gang_run(index: int, members: int = members) -> dict[str, Any]:
                    name = f"gang-{members}-{index}"
                    return _one(cluster, name, gang(name, members, cpu=POD_CPU), members)

                plains, gangs = _in_turns(shape.rounds, plain_run, gang_run)
                baseline, gang_runs = _median_of(plains, SIZE_FIGURES), _median_of(gangs, SIZE_FIGURES)
                rows.append(
                    {
                        "members": members,
                        "baseline": baseline,
                        "yuniplace": gang_runs,
                        "gang_vs_plain": round(gang_runs["start_s"] / baseline["start_s"], 2),
                    }
                )
            progress(
                f"7. autoscaled: {shape.stream_gangs} gangs of {shape.stream_members} at {shape.stream_rate_per_s}/s, "
                f"plain and as gangs, {shape.rounds} each"
            )
            members = shape.stream_members
            plain_streams, gang_streams = _in_turns(
                shape.rounds,
                lambda index: _stream(
                    cluster,
                    f"stream-plain-{index}",
                    shape,
                    lambda app: [member_pod(f"{app}-{i}", cpu=POD_CPU) for i in range(members)],
                ),
                lambda index: _stream(
                    cluster, f"stream-gang-{index}", shape, lambda app: gang(app, members, cpu=POD_CPU)
                ),
            )
            stream_plain = _median_of(plain_streams, STREAM_FIGURES)
            stream_gangs = _median_of(gang_streams, (*STREAM_FIGURES, "reaction_ms_p50", "reaction_ms_p95"))
        return {
            "scenario": "autoscaling",
            "karpenter": karpenter.version,
            "node_cpu": NODE_CPU,
            "pod_cpu": POD_CPU,
            "limit_cpu": limit,
            "consolidate_after": CONSOLIDATE_AFTER,
            "disruption_budget": DISRUPTION_BUDGET,
            "rounds": shape.rounds,
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
