"""The control plane's own figures, the baseline every yuniplace benchmark is compared with: build
time, cluster start time, memory with many kwok nodes, and how fast plain pods reach Running."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from yuniplace.bench.memory import RssSampler
from yuniplace.bench.pods import PodTimeline
from yuniplace.bench.workload import create_pods, plain_pod
from yuniplace.localcluster import LocalCluster, NodePool, ensure_built
from yuniplace.localcluster.build import Binaries

MIB = 1024 * 1024
NAMESPACE = "bench"


def timed_build(kubernetes: str, *, cold: bool) -> float:
    """Time a build into an empty binary cache. Cold: empty Go caches too (modules downloaded again,
    everything compiled), as on a new machine. Warm: Go's caches kept, so only linking is left, as
    after a change to controlplane/main.go."""
    keys = ("GOCACHE", "GOMODCACHE", "GOFLAGS", "YUNIPLACE_CACHE")
    saved = {key: os.environ.get(key) for key in keys}
    with tempfile.TemporaryDirectory(prefix="yuniplace-build-") as scratch:
        os.environ["YUNIPLACE_CACHE"] = f"{scratch}/cache"
        if cold:
            os.environ.update(
                GOCACHE=f"{scratch}/gocache",
                GOMODCACHE=f"{scratch}/gomod",
                # A writable module cache, so the scratch directory can be removed afterwards.
                GOFLAGS=f"{saved['GOFLAGS'] or ''} -modcacherw".strip(),
            )
        try:
            started = time.monotonic()
            ensure_built(kubernetes, quiet=True)
            return time.monotonic() - started
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def run(*, nodes: int, pods: int, cold_build: bool, kubernetes: str) -> dict[str, Any]:
    result: dict[str, Any] = {"scenario": "control-plane", "nodes": nodes, "pods": pods}
    if cold_build:
        result["build_cold_s"] = round(timed_build(kubernetes, cold=True), 1)
    started = time.monotonic()
    binaries: Binaries = ensure_built(kubernetes, quiet=True)
    result["build_cached_s"] = round(time.monotonic() - started, 2)
    result["build_warm_s"] = round(timed_build(kubernetes, cold=False), 1)

    cluster = LocalCluster("bench-control-plane")
    try:
        timings = cluster.up(
            [NodePool(count=nodes, cpu="32", memory="256Gi", pods=110)],
            binaries=binaries,
            timeout_s=max(90.0, nodes * 0.3),
        )
        result["cluster_start_s"] = timings["service accounts"]
        result["nodes_ready_s"] = timings["nodes"]
        client = cluster.client()
        with RssSampler({p.name: p.pid for p in cluster.processes()}) as memory:
            cluster.create_namespace(NAMESPACE)
            with PodTimeline(client, NAMESPACE) as timeline:
                first_create = time.monotonic()
                create_pods(client, NAMESPACE, [plain_pod(f"plain-{i}") for i in range(pods)])
                created = time.monotonic()
                last_running = timeline.wait_running(pods, timeout_s=max(120.0, pods * 0.5))
        result["pods_created_s"] = round(created - first_create, 2)
        result["pods_running_s"] = round(last_running - first_create, 2)
        result["pods_per_s"] = round(pods / (last_running - first_create), 1)
        result["peak_rss_total_mib"] = round(memory.peak_total / MIB)
        result["peak_rss_mib"] = {name: round(value / MIB) for name, value in memory.peak_by_name.items()}
    finally:
        cluster.down(quiet=True)
    return result
