"""Scenario 5, scale: a full cluster of N nodes with many ordinary pods and many waiting gangs, and what
the controller costs there. Run for several N to see how each figure grows with the cluster."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from yuniplace.bench.subjects import ControllerUnderTest, gang
from yuniplace.bench.workload import create_pods, plain_pod
from yuniplace.gang import keys
from yuniplace.kube import KubeClient
from yuniplace.localcluster import LocalCluster, NodePool, wait_until
from yuniplace.localcluster.build import Binaries

NODE_CPU_MILLI = 8000
GANG_SIZES = (2, 4, 8, 16)  # mixed sizes, cycled through
FILL_NAMESPACE = "scale-fill"
GANG_NAMESPACE = "scale-gangs-{:02d}"  # tenants of GANGS_PER_NAMESPACE gangs each, within per-namespace limits
GANGS_PER_NAMESPACE = 10
CHURN_EVENTS = 1000
ADMISSIONS_MEASURED = 5


def _cycles(controller: ControllerUnderTest) -> tuple[float, float, float]:
    """Admission cycles so far: their count, their total time and their total CPU time (s)."""
    metrics = controller.metrics()
    return (
        metrics.get("yuniplace_admission_cycle_duration_seconds_count", 0.0),
        metrics.get("yuniplace_admission_cycle_duration_seconds_sum", 0.0),
        metrics.get("yuniplace_admission_cycle_cpu_seconds_total", 0.0),
    )


def _all_running(client: KubeClient, namespace: str) -> bool:
    rest = client.get(f"/api/v1/namespaces/{namespace}/pods", fieldSelector="status.phase!=Running", limit="1")
    return not rest["items"]


def _fill(client: KubeClient, nodes: Sequence[str], per_node: int) -> dict[str, list[str]]:
    """Ordinary pods already bound to every node (no scheduling needed), leaving less than one CPU free
    on each; returns the pods of each node."""
    cpu = f"{NODE_CPU_MILLI * 15 // 16 // per_node}m"
    pods: dict[str, list[str]] = {}
    manifests = []
    for node in nodes:
        for index in range(per_node):
            name = f"{node}-{index}"
            pod = plain_pod(name, cpu=cpu, memory="64Mi", labels={"bench.yuniplace.io/fill": "true"})
            pod["spec"]["nodeName"] = node
            manifests.append(pod)
            pods.setdefault(node, []).append(name)
    create_pods(client, FILL_NAMESPACE, manifests)
    return pods


def _namespace_of(index: int) -> str:
    return GANG_NAMESPACE.format(index // GANGS_PER_NAMESPACE)


def _settled(controller: ControllerUnderTest) -> Callable[[], bool]:
    """A condition true once the controller has used (next to) no CPU since it was last checked: it
    has taken in every event sent its way."""
    last = [controller.cpu_seconds()]

    def idle() -> bool:
        now = controller.cpu_seconds()
        quiet = now - last[0] < 0.02
        last[0] = now
        return quiet

    return idle


def _admitted(client: KubeClient, index: int) -> bool:
    """Whether gang `index` has begun to start: its first placeholder exists, or (started directly) a
    member was given its seat."""
    app, path = f"g{index:03d}", f"/api/v1/namespaces/{_namespace_of(index)}/pods"
    members = client.get(path, labelSelector=f"applicationId={app}")["items"]
    if any(keys.SEAT in (pod["metadata"].get("annotations") or {}) for pod in members):
        return True
    placeholders = client.get(path, labelSelector=f"{keys.PLACEHOLDER}=true,{keys.PLACEHOLDER_APP}={app}", limit="1")
    return bool(placeholders["items"])


def run(
    binaries: Binaries,
    nodes: int,
    per_node: int,
    gangs: int,
    log: Path,
    controller_args: Sequence[str],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    cluster = LocalCluster(f"bench-scale-{nodes}")
    cluster.up(
        [NodePool(count=nodes, cpu=str(NODE_CPU_MILLI // 1000), memory="64Gi", pods=per_node + 20)],
        binaries=binaries,
        timeout_s=max(90.0, nodes * 0.3),
    )
    try:
        client = cluster.client()
        node_names = sorted(n["metadata"]["name"] for n in client.get("/api/v1/nodes")["items"])
        cluster.create_namespace(FILL_NAMESPACE)
        for namespace in sorted({_namespace_of(index) for index in range(gangs)}):
            cluster.create_namespace(namespace)
        started = time.monotonic()
        fill = _fill(client, node_names, per_node)
        wait_until(lambda: _all_running(client, FILL_NAMESPACE), max(300.0, nodes * per_node / 20))
        progress(f"   {nodes * per_node} ordinary pods running in {time.monotonic() - started:.0f}s")

        began = time.monotonic()
        with ControllerUnderTest(cluster, log, ["--workers=8", *controller_args]) as controller:
            ready_s = time.monotonic() - began
            with controller.rss_sampler() as rss:
                sizes = list(itertools.islice(itertools.cycle(GANG_SIZES), gangs))
                for index, size in enumerate(sizes):
                    # 1 CPU each: no node has that much free, so every gang waits.
                    create_pods(client, _namespace_of(index), gang(f"g{index:03d}", size, cpu="1", memory="128Mi"))
                wait_until(
                    lambda: controller.metrics().get("yuniplace_admission_waiting_applications", 0) >= gangs,
                    max(120.0, gangs * 3.0),
                )
                cycles_before = _cycles(controller)

                cpu_before = controller.cpu_seconds()
                churned = [name for names in fill.values() for name in names][:CHURN_EVENTS]
                for name in churned:  # a label change: one MODIFIED event each, nothing freed
                    client.patch(
                        f"/api/v1/namespaces/{FILL_NAMESPACE}/pods/{name}",
                        {"metadata": {"labels": {"bench.yuniplace.io/touched": "true"}}},
                    )
                wait_until(_settled(controller), 120, interval_s=0.5)
                churn_cpu_s = controller.cpu_seconds() - cpu_before

                # Free room for the head gang, one pod on each of `size` nodes, and time its admission
                # (its first placeholder appears, or its first member gets its seat); then the next head, and
                # so on.
                freed_to_admitted = []
                spare = iter(node_names[::-1])
                for index in range(ADMISSIONS_MEASURED):
                    freeing = [next(spare) for _ in range(sizes[index])]
                    for node in freeing:
                        client.delete(f"/api/v1/namespaces/{FILL_NAMESPACE}/pods/{fill[node][0]}")
                    freed = time.monotonic()
                    wait_until(partial(_admitted, client, index), 120, interval_s=0.01)
                    freed_to_admitted.append(time.monotonic() - freed)
                cycles_after = _cycles(controller)
                rss.sample()
            count = cycles_after[0] - cycles_before[0]
        return {
            "nodes": nodes,
            "ordinary_pods": nodes * per_node,
            "waiting_gangs": gangs,
            "gang_pods": sum(sizes),
            "controller_ready_s": round(ready_s, 2),
            "controller_peak_rss_mib": round(rss.peak_by_name["controller"] / 2**20),
            "admission_cycles": int(count),
            "admission_cycle_ms": round((cycles_after[1] - cycles_before[1]) / max(count, 1) * 1000, 1),
            "admission_cycle_cpu_ms": round((cycles_after[2] - cycles_before[2]) / max(count, 1) * 1000, 1),
            "cpu_s_per_1000_pod_events": round(churn_cpu_s * 1000 / len(churned), 2),
            "freed_to_admitted_s": round(statistics.median(freed_to_admitted), 3),
        }
    finally:
        cluster.down(quiet=True)
