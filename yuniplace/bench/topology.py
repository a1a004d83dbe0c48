"""Scenario 6, topology: nodes in racks labelled as AWS labels its instances (network-node layers 1 to 3,
and the zone), a stream of mixed gangs of which some require one rack, each running for a while and
then ending. Measured twice over the same arrivals on the same cluster: with the topology asked, and
with it left off. Reports the share of gangs placed in one rack, their start latency against the gangs
that ask nothing, and the free room stranded in partly used racks over the run."""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yuniplace.bench.pods import PodTimeline
from yuniplace.bench.subjects import MEMBER_LABEL, ControllerUnderTest, delete_namespace, gang
from yuniplace.bench.workload import create_pods
from yuniplace.gang import keys
from yuniplace.gang.resources import pod_requests
from yuniplace.kube import KubeClient
from yuniplace.localcluster import LocalCluster, NodePool, wait_until
from yuniplace.localcluster.build import Binaries

LAYER = "topology.k8s.aws/network-node-layer-{}"
RACK = LAYER.format(3)
ZONE = "topology.kubernetes.io/zone"
RACKS_PER_BLOCK = 5  # network-node-layer-2
RACKS_PER_SPINE = 25  # network-node-layer-1, and a zone
SELECTOR = f"{MEMBER_LABEL}=true"
TIMEOUT_S = 3600  # a gang's placeholder timeout: none should end by timing out in a run


@dataclass(frozen=True)
class Shape:
    racks: int
    nodes_per_rack: int
    node_cpu: int
    gangs: int
    sizes: tuple[int, ...]  # members of a gang, drawn evenly
    required_share: float  # of the gangs, those that require one rack
    rate_per_s: float
    hold_s: float  # how long a gang runs once all its members are bound
    sample_s: float  # how often the free room is sampled


FULL = Shape(50, 20, 8, 400, (4, 8, 16, 32), 0.5, 2.0, 150.0, 5.0)
QUICK = Shape(6, 5, 4, 24, (2, 4, 8), 0.5, 2.0, 10.0, 1.0)


@dataclass(frozen=True)
class Arrival:
    app: str
    members: int
    cpu: int
    requires_rack: bool


def arrivals(shape: Shape, seed: int = 7) -> list[Arrival]:
    """The same gangs for both runs: sizes and CPUs drawn from a fixed seed."""
    rng = random.Random(seed)
    return [
        Arrival(f"g{index:03d}", rng.choice(shape.sizes), rng.choice((1, 2)), rng.random() < shape.required_share)
        for index in range(shape.gangs)
    ]


def node_pools(shape: Shape) -> list[NodePool]:
    """One pool per rack, labelled with its three network-node layers and its zone."""
    return [
        NodePool(
            count=shape.nodes_per_rack,
            cpu=str(shape.node_cpu),
            memory=f"{shape.node_cpu * 8}Gi",
            pods=110,
            labels={
                LAYER.format(1): f"nn-spine-{rack // RACKS_PER_SPINE}",
                LAYER.format(2): f"nn-block-{rack // RACKS_PER_BLOCK}",
                RACK: f"nn-rack-{rack:02d}",
                ZONE: f"bench-zone-{rack // RACKS_PER_SPINE}",
            },
            prefix=f"rack-{rack:02d}",
        )
        for rack in range(shape.racks)
    ]


def _pods(arrival: Arrival, topology: bool) -> list[dict[str, Any]]:
    pods = gang(arrival.app, arrival.members, cpu=str(arrival.cpu), memory="256Mi", timeout_s=TIMEOUT_S)
    if topology and arrival.requires_rack:
        pods[0]["metadata"]["annotations"][keys.TOPOLOGY] = f"required={RACK}"
    return pods


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_s": None, "p95_s": None}
    ordered = sorted(values)
    return {
        "p50_s": round(statistics.median(ordered), 2),
        "p95_s": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 2),
    }


class Stranded:
    """Samples, every `every_s`, the share of the free CPU that lies in racks partly used (neither empty
    nor full): room a gang that needs a rack's worth cannot use."""

    def __init__(
        self, client: KubeClient, namespace: str, racks: Mapping[str, str], cpu: Mapping[str, int], every_s: float
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._racks = racks  # node -> rack
        self._capacity: dict[str, int] = {}  # rack -> its CPU, in milli-cores
        for node, rack in racks.items():
            self._capacity[rack] = self._capacity.get(rack, 0) + cpu[node]
        self._every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stranded", daemon=True)

    def sample(self) -> None:
        used: dict[str, int] = {}
        for pod in self._client.get(f"/api/v1/namespaces/{self._namespace}/pods")["items"]:
            node = pod.get("spec", {}).get("nodeName")
            if node in self._racks and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                rack = self._racks[node]
                used[rack] = used.get(rack, 0) + int(pod_requests(pod["spec"]).get("cpu", 0) * 1000)
        free = {rack: max(0, total - used.get(rack, 0)) for rack, total in self._capacity.items()}
        stranded = sum(free[rack] for rack, total in self._capacity.items() if 0 < used.get(rack, 0) < total)
        total_free = sum(free.values())
        self.samples.append(stranded / total_free if total_free else 0.0)

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            self.sample()

    def __enter__(self) -> Stranded:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _finish_after(
    client: KubeClient, namespace: str, timeline: PodTimeline, gangs: Sequence[Arrival], hold_s: float
) -> Callable[[], bool]:
    """A step that ends each gang's members `hold_s` after the last of them was bound (as its program
    would end: kwok runs bare pods until told); True once every gang has ended."""
    ended: set[str] = set()

    def step() -> bool:
        now = time.monotonic()
        for arrival in gangs:
            if arrival.app in ended:
                continue
            names = [f"{arrival.app}-{i}" for i in range(arrival.members)]
            bound = [timeline.bound_at.get(name) for name in names]
            if all(at is not None for at in bound) and now - max(at for at in bound if at is not None) >= hold_s:
                for name in names:
                    client.patch(
                        f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": {"phase": "Succeeded"}}
                    )
                ended.add(arrival.app)
        return len(ended) == len(gangs)

    return step


def _run(
    cluster: LocalCluster, namespace: str, shape: Shape, gangs: Sequence[Arrival], topology: bool
) -> dict[str, Any]:
    """One run of the arrivals; per gang, its start latency and whether it landed in one rack."""
    client = cluster.client()
    nodes = client.get("/api/v1/nodes")["items"]
    racks = {n["metadata"]["name"]: n["metadata"]["labels"][RACK] for n in nodes if RACK in n["metadata"]["labels"]}
    cpu = dict.fromkeys(racks, shape.node_cpu * 1000)
    cluster.create_namespace(namespace)
    try:
        stranded = Stranded(client, namespace, racks, cpu, shape.sample_s)
        with (
            PodTimeline(client, namespace, label_selector=SELECTOR) as timeline,
            stranded,
            ThreadPoolExecutor(8) as pool,
        ):
            created: dict[str, float] = {}
            started = time.monotonic()
            futures = []
            for index, arrival in enumerate(gangs):
                due = started + index / shape.rate_per_s
                time.sleep(max(0.0, due - time.monotonic()))  # pacing the arrivals, not waiting for a state
                created[arrival.app] = time.monotonic()
                futures.append(pool.submit(create_pods, client, namespace, _pods(arrival, topology)))
            for future in futures:
                future.result()
            finished = _finish_after(client, namespace, timeline, gangs, shape.hold_s)
            # A bound, not a pace: every gang should have run and ended well within it.
            wait_until(finished, 600 + 4 * (shape.gangs / shape.rate_per_s + shape.hold_s), interval_s=0.5)
            elapsed = time.monotonic() - started
        latency: dict[bool, list[float]] = {True: [], False: []}
        one_rack: dict[bool, list[bool]] = {True: [], False: []}
        for arrival in gangs:
            names = [f"{arrival.app}-{i}" for i in range(arrival.members)]
            latency[arrival.requires_rack].append(max(timeline.bound_at[n] for n in names) - created[arrival.app])
            one_rack[arrival.requires_rack].append(len({racks[timeline.nodes[n]] for n in names}) == 1)
        every = one_rack[True] + one_rack[False]
        return {
            "one_rack_share": round(sum(every) / len(every), 3),
            "one_rack_share_requiring": round(sum(one_rack[True]) / len(one_rack[True]), 3) if one_rack[True] else None,
            "latency_requiring": _percentiles(latency[True]),
            "latency_others": _percentiles(latency[False]),
            "stranded_mean": round(statistics.fmean(stranded.samples), 3) if stranded.samples else None,
            "stranded_p95": _percentiles(stranded.samples)["p95_s"],
            "samples": len(stranded.samples),
            "run_s": round(elapsed, 1),
        }
    finally:
        delete_namespace(cluster, namespace)


def run(
    binaries: Binaries,
    shape: Shape,
    log: Path,
    controller_args: Sequence[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    gangs = arrivals(shape)
    nodes = shape.racks * shape.nodes_per_rack
    cluster = LocalCluster("bench-topology")
    cluster.up(node_pools(shape), binaries=binaries, timeout_s=max(90.0, nodes * 0.3))
    try:
        with ControllerUnderTest(cluster, log, ["--workers=8", *controller_args]):
            progress(f"   topology asked: {sum(a.requires_rack for a in gangs)} of {len(gangs)} gangs require a rack")
            asked = _run(cluster, "topology-on", shape, gangs, topology=True)
            progress("   the same arrivals, topology off")
            off = _run(cluster, "topology-off", shape, gangs, topology=False)
    finally:
        cluster.down(quiet=True)
    return {
        "scenario": "topology",
        "racks": shape.racks,
        "nodes_per_rack": shape.nodes_per_rack,
        "node_cpu": shape.node_cpu,
        "gangs": shape.gangs,
        "sizes": list(shape.sizes),
        "requiring": sum(a.requires_rack for a in gangs),
        "rate_per_s": shape.rate_per_s,
        "hold_s": shape.hold_s,
        "on": asked,
        "off": off,
    }
