"""Scenario 1d, native gangs whose members come over a while: kube-scheduler's own gangs (the Workload
API) held by yuniplace in a configured queue, beside the same gangs left to the gang plugin alone, on
the same nodes, taking turns. Each size twice: its pods made in one burst (scenario 1c), and made one
at a time over SPREAD_S, as a launcher or an operator makes them. A gang admitted before its last
member exists holds the room of its whole minimum with placeholders until that member comes; one
admitted whole holds nothing. So the figures say what holding costs: time from the first pod's creation
and from the last one's, the controller's API writes a member, and the placeholders it made."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yuniplace.bench import nativegate, scenarios
from yuniplace.bench.subjects import ControllerUnderTest
from yuniplace.kube import workloadapi
from yuniplace.localcluster import LocalCluster, NodePool
from yuniplace.localcluster.build import Binaries
from yuniplace.localcluster.components import Features

SPREAD_S = 2.0


@dataclass(frozen=True)
class Shape:
    nodes: int
    sizes: tuple[int, ...]
    repeats: int


FULL = Shape(100, (10, 50, 200), 3)
QUICK = Shape(10, (10,), 1)


def run(
    binaries: Binaries,
    kubernetes: str,
    shape: Shape,
    out_dir: Path,
    log: Path,
    controller_args: Sequence[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    features = Features.workload_api(kubernetes)
    served = workloadapi.version_named(features.apis[0]) if features.apis else None
    if served is None:
        return {"scenario": "native", "skipped": f"Kubernetes {kubernetes} serves no Workload API yuniplace reads"}
    cluster = LocalCluster("bench-native")
    cluster.up(
        [NodePool(count=shape.nodes, cpu="32", memory="256Gi", pods=110)],
        binaries=binaries,
        features=features,
        timeout_s=max(90.0, shape.nodes * 0.3),
    )
    try:
        queues = nativegate.queues_configmap(cluster, nativegate.QUEUE)
        gate = nativegate.prepare(out_dir / "native-gate-1d")
        args = [f"--queues-configmap={queues}", *gate.controller_args(), *controller_args]
        with ControllerUnderTest(cluster, log, args) as controller:
            nativegate.register(cluster, gate)
            rows = []
            for members in shape.sizes:
                row: dict[str, Any] = {"members": members}
                for label, spread_s in (("burst", 0.0), ("spread", SPREAD_S)):
                    how = "in one burst" if not spread_s else f"one at a time over {spread_s:.0f}s"
                    progress(f"1d. a native gang of {members}, its pods made {how}: held by yuniplace, and alone")
                    found = scenarios.native_admission(
                        cluster,
                        [members],
                        shape.repeats,
                        served,
                        nativegate.QUEUE,
                        nativegate.HELD,
                        spread_s=spread_s,
                        controller=controller,
                    )[members]
                    found.pop("native_timelines")
                    row[label] = found
                rows.append(row)
    finally:
        cluster.down(quiet=True)
    return {
        "scenario": "native",
        "nodes": shape.nodes,
        "repeats": shape.repeats,
        "spread_s": SPREAD_S,
        "api": served.api,
        "rows": rows,
    }
