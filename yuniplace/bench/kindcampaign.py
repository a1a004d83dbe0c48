"""The fault campaign on kind: yuniplace's image installed with its chart (two replicas in pods, the
webhook served by them through its Service) into a kind cluster of real kubelets, the campaign's
stream of gangs running real programs, a fault made with a real tool every 20-40 s after the last one
ended (kindfaults.py), the same invariants checked over the same observation, and, for every node
taken away, how long Kubernetes took to mark it and evict its pods beside how long yuniplace took to
report each gang on it degraded, to answer by its policy, and to have it running whole again.

Not a test: its figures are reported, never asserted on. A seed replays the same gangs and faults."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yuniplace.bench.campaign import (
    CAMPAIGN_LABEL,
    DEFAULT_SEED,
    DEFAULT_TIMEOUT_S,
    QUEUES_CONFIGMAP,
    SYSTEM_NAMESPACE,
    TEAMS,
    Checker,
    Parts,
    drive,
    queues_yaml,
)
from yuniplace.bench.faults import Fault
from yuniplace.bench.invariants import EventSeen, Gang, PodTrace
from yuniplace.bench.kindfaults import NODE_FAULTS, Kind, KindFaultInjector, Setup
from yuniplace.bench.observer import NodeObserver, NodeTrace, PodObserver
from yuniplace.bench.stream import REPLACEMENTS, GangStream, Workload
from yuniplace.kube import ApiError, KubeClient
from yuniplace.localcluster.kind import KindCluster
from yuniplace.localcluster.kinddocker import docker
from yuniplace.localcluster.kindimage import YUNIPLACE_IMAGE

SCENARIO = "kind-faults"
RELEASE = "yuniplace"
CHART = Path(__file__).resolve().parents[2] / "charts" / "yuniplace"
NODE_CPU = 2  # what a kind node reports here: the host's cores
LOST_NODE_TOLERATION_S = 30  # the gang pods' tolerationSeconds for unreachable and not-ready
# The stream's sizes are for kwok nodes of 8 CPUs; kind's nodes have 2 (the host's).
WORKLOAD = Workload(
    image=YUNIPLACE_IMAGE,
    scale=NODE_CPU / 8,
    programs=True,
    lost_node_toleration_s=LOST_NODE_TOLERATION_S,
    policies=("restart", "release", "none"),
    replacements=REPLACEMENTS,
    termination_grace_s=10,
    ready_timeout_s=60,
    recovery_timeout_s=30,
)
SAMPLE_EVERY_S = 30.0
TAINT_EVICTION = "DeletionByTaintManager"
ANSWERS = ("GangRestarting", "GangReleased", "ApplicationFailed")


@dataclass(frozen=True)
class KindCampaign:
    duration_s: float = 900.0
    seed: int = DEFAULT_SEED
    workers: int = 4
    interval_s: tuple[float, float] = (20.0, 40.0)  # from one fault's end to the next
    arrivals_s: tuple[float, float] = (8.0, 16.0)  # between gangs: real pods cost real CPU
    grace_s: float = 90.0
    keep: bool = False  # leave the cluster up at the end

    @property
    def scenario(self) -> str:
        return SCENARIO

    @property
    def nodes(self) -> int:
        return self.workers


# -- what 2 cores hold: the node containers' CPU and memory --------------------------------------------


def _percent(text: str) -> float:
    return float(text.rstrip("%") or 0.0)


def _mib(text: str) -> float:
    """A docker stats memory figure ("603.8MiB", "1.2GiB") in MiB."""
    units = {"KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "kB": 1 / 1024, "MB": 1.0, "GB": 1024.0, "B": 1 / 2**20}
    for unit, factor in units.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text or 0.0)


class DockerSampler:
    """Every SAMPLE_EVERY_S, each node container's CPU (% of one core) and memory, and the host's
    load, from `run(stop)` until stopped."""

    def __init__(self, cluster: str) -> None:
        self._cluster = cluster
        self.samples: list[dict[str, Any]] = []

    def sample(self) -> dict[str, Any]:
        # Every container on the host: only this cluster's nodes are kept.
        result = docker("stats", "--no-stream", "--format", "{{json .}}", check=False)
        nodes: dict[str, dict[str, float]] = {}
        for line in result.stdout.splitlines():
            row = json.loads(line)
            if str(row.get("Name", "")).startswith(f"{self._cluster}-"):
                used = str(row.get("MemUsage", "0B / 0B")).split("/")[0].strip()
                nodes[row["Name"]] = {"cpu_percent": _percent(row.get("CPUPerc", "0%")), "mem_mib": _mib(used)}
        return {"t": time.time(), "load1": os.getloadavg()[0], "nodes": nodes}

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(SAMPLE_EVERY_S):
            self.samples.append(self.sample())

    def summary(self) -> dict[str, Any]:
        """Mean and peak of the whole cluster's CPU and memory, and of the host's load."""
        if not self.samples:
            return {}
        cpu = [sum(n["cpu_percent"] for n in s["nodes"].values()) for s in self.samples]
        mem = [sum(n["mem_mib"] for n in s["nodes"].values()) for s in self.samples]
        load = [s["load1"] for s in self.samples]
        per_node = {
            name: round(max(s["nodes"].get(name, {}).get("mem_mib", 0.0) for s in self.samples))
            for name in self.samples[-1]["nodes"]
        }
        return {
            "samples": len(self.samples),
            "cluster_cpu_percent_mean": round(statistics.fmean(cpu), 1),
            "cluster_cpu_percent_max": round(max(cpu), 1),
            "cluster_mem_mib_mean": round(statistics.fmean(mem)),
            "cluster_mem_mib_max": round(max(mem)),
            "node_mem_mib_max": per_node,
            "host_load1_mean": round(statistics.fmean(load), 2),
            "host_load1_max": round(max(load), 2),
        }


# -- from a node's loss to its gangs whole again -------------------------------------------------------------


def _first(values: Iterable[float | None]) -> float | None:
    return min((v for v in values if v is not None), default=None)


def _since(moment: float | None, start: float) -> float | None:
    return None if moment is None else round(moment - start, 1)


def _troubled_at(trace: NodeTrace | None, moment: float) -> bool:
    if trace is None:
        return False
    return any(
        since is not None and since <= moment and (until is None or moment < until) for since, until in trace.troubled
    )


def whole_again(
    members: Sequence[PodTrace], minimum: int, node: str, trace: NodeTrace | None, start: float, end: float
) -> float | None:
    """The first moment from `start` on at which `minimum` members run (or have succeeded) and none
    of those counted is on `node` while it is in trouble; None when that did not come by `end`."""

    def up(moment: float) -> int:
        return sum(
            1
            for m in members
            if m.running_at is not None
            and m.running_at <= moment
            and (m.phase == "Succeeded" or m.ended_at is None or m.ended_at > moment)
            and not (m.node == node and _troubled_at(trace, moment))
        )

    moments = sorted(
        {start}
        | {m.running_at for m in members if m.running_at is not None and start < m.running_at <= end}
        | {until for _, until in (trace.troubled if trace else []) if until is not None and start < until <= end}
    )
    return next((moment for moment in moments if up(moment) >= minimum), None)


def recoveries(
    faults: Sequence[Fault],
    pods: Mapping[str, PodTrace],
    nodes: Mapping[str, NodeTrace],
    events: Sequence[EventSeen],
    gangs: Mapping[str, Gang],
    replacements: Mapping[str, str],
    end: float,
) -> list[dict[str, Any]]:
    """For each node fault: when Kubernetes marked the node NotReady and tainted it, when it first
    evicted a pod of it for its taint, and for each gang that had a member running there, when
    yuniplace reported it degraded, when its policy answered (a restart, a release, a failure), and
    when it ran whole again; seconds since the fault began."""
    by_app: dict[str, list[PodTrace]] = {}
    for pod in pods.values():
        by_app.setdefault(pod.app, []).append(pod)
    rows = []
    for fault in faults:
        node = fault.node
        if node is None or fault.back_at is None:
            continue
        start = fault.at
        trace = nodes.get(node)
        window = fault.back_at + 60.0  # what Kubernetes marks after the node is back is of the next
        not_ready = _first(s for s, _ in (trace.not_ready if trace else []) if s is not None and start <= s <= window)
        tainted = _first(s for s, _ in (trace.troubled if trace else []) if s is not None and start <= s <= window)
        evicted = _first(
            p.deleting_at
            for p in pods.values()
            if p.node == node and p.disruption == TAINT_EVICTION and p.deleting_at and start <= p.deleting_at <= window
        )
        hit = sorted(
            {
                t.app
                for t in pods.values()
                if not t.placeholder
                and t.node == node
                and t.running_at is not None
                and t.running_at <= start
                and (t.ended_at is None or t.ended_at > start)
                and t.app in gangs
            }
        )
        row: dict[str, Any] = {
            "kind": fault.kind,
            "node": node,
            "away_s": round(fault.back_at - start, 1),
            "not_ready_s": _since(not_ready, start),
            "tainted_s": _since(tainted, start),
            "taint_eviction_s": _since(evicted, start),
            "gangs": [],
        }
        for app in hit:
            gang, members = gangs[app], [m for m in by_app.get(app, []) if not m.placeholder]
            names = {(m.namespace, m.name) for m in members}
            # What yuniplace said of an earlier fault (a gang still degraded from it) is not this one's answer.
            since = (tainted if tainted is not None else start) - 1.0
            told = [e for e in events if (e.namespace, e.name) in names and e.at is not None and e.at >= since]
            degraded = _first(e.at for e in told if e.reason == "GangDegraded")
            answered = _first(e.at for e in told if e.reason in ANSWERS)
            minimum = sum(gang.groups.values())
            whole = whole_again(members, minimum, node, trace, tainted, end) if tainted is not None else None
            row["gangs"].append(
                {
                    "app": app,
                    "policy": gang.on_loss or "none",
                    "replacement": replacements.get(app, ""),
                    "members": minimum,
                    "degraded_s": _since(degraded, start),
                    "answered_s": _since(answered, start),
                    "whole_again_s": _since(whole, start),
                }
            )
        rows.append(row)
    return rows


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 1) if known else None


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians (and counts) of the node faults' times, by fault kind and by each hit gang's policy and
    way of replacing its pods."""
    marked = [r for r in rows if r["tainted_s"] is not None]
    by_kind = {
        kind: {
            "faults": sum(1 for r in rows if r["kind"] == kind),
            "marked": sum(1 for r in marked if r["kind"] == kind),
            "not_ready_s": _median(r["not_ready_s"] for r in rows if r["kind"] == kind),
            "tainted_s": _median(r["tainted_s"] for r in rows if r["kind"] == kind),
            "taint_eviction_s": _median(r["taint_eviction_s"] for r in rows if r["kind"] == kind),
        }
        for kind in sorted({r["kind"] for r in rows})
    }
    gangs = [g | {"tainted_s": r["tainted_s"]} for r in marked for g in r["gangs"]]
    by_policy: dict[str, dict[str, Any]] = {}
    for key in sorted({(g["policy"], g["replacement"]) for g in gangs}):
        same = [g for g in gangs if (g["policy"], g["replacement"]) == key]
        by_policy[f"{key[0]}, replaced {key[1] or '-'}"] = {
            "gangs": len(same),
            "degraded_s": _median(g["degraded_s"] for g in same),
            "answered_s": _median(g["answered_s"] for g in same),
            "whole_again_s": _median(g["whole_again_s"] for g in same),
            "never_whole": sum(1 for g in same if g["whole_again_s"] is None),
        }
    return {"by_fault": by_kind, "by_policy": by_policy}


# -- the run -------------------------------------------------------------------------------------------------


def _helm(cluster: KindCluster, *args: str) -> str:
    result = subprocess.run(
        ["helm", *args],
        capture_output=True,
        text=True,
        env={**cluster.images.env(), "KUBECONFIG": str(cluster.kubeconfig)},
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args[:2])} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def _namespace(client: KubeClient, name: str, labels: Mapping[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
    client.create("/api/v1/namespaces", body)


def install(cluster: KindCluster, client: KubeClient, workers: int) -> None:
    """The queues, then the chart with yuniplace's image (two replicas), its webhook only for the
    campaign's namespaces."""
    _namespace(client, SYSTEM_NAMESPACE)
    for team in TEAMS:
        _namespace(client, team, {CAMPAIGN_LABEL: "enabled"})
    client.create(
        f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": QUEUES_CONFIGMAP},
            "data": {"queues.yaml": queues_yaml(workers, NODE_CPU)},
        },
    )
    values = {
        "image.repository": YUNIPLACE_IMAGE.split(":")[0],
        "image.tag": YUNIPLACE_IMAGE.split(":")[1],
        "image.pullPolicy": "Never",
        r"webhook.namespaceSelector.matchLabels.faults\.yuniplace\.io/campaign": "enabled",
        "queues.configMap": QUEUES_CONFIGMAP,
        "queues.configMapNamespace": SYSTEM_NAMESPACE,
        "defaultTimeoutSeconds": str(DEFAULT_TIMEOUT_S),
    }
    settings = [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]
    _helm(cluster, "install", RELEASE, str(CHART), "-n", SYSTEM_NAMESPACE, *settings, "--wait", "--timeout", "300s")


def controller_restarts(client: KubeClient, started: float) -> list[dict[str, Any]]:
    """The controller pods at the end and how often each one's container started again."""
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/name=yuniplace"
    pods = client.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=selector)["items"]
    rows = []
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses") or []:
            if status.get("restartCount"):
                last = (status.get("lastState") or {}).get("terminated") or {}
                rows.append(
                    {
                        "at_s": round(time.time() - started, 1),
                        "replica": pod["metadata"]["name"],
                        "exit_code": last.get("exitCode"),
                        "restarts": status["restartCount"],
                    }
                )
    return rows


def save_logs(cluster: KindCluster, client: KubeClient, logs: Path) -> None:
    """Each replica's log (and its previous container's, where it started again), kept before the
    cluster goes: what a figure or a violation asks to be explained."""
    logs.mkdir(parents=True, exist_ok=True)
    env = {**cluster.images.env(), "KUBECONFIG": str(cluster.kubeconfig)}
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/name=yuniplace"
    for pod in client.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=selector)["items"]:
        name = pod["metadata"]["name"]
        for previous in (False, True):
            result = subprocess.run(
                ["kubectl", "logs", "-n", SYSTEM_NAMESPACE, name, *(["--previous"] if previous else [])],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
                check=False,
            )
            if result.returncode == 0:
                (logs / f"{name}{'.previous' if previous else ''}.log").write_text(result.stdout)


def run(campaign: KindCampaign, out_dir: Path, report: Callable[[str], None]) -> dict[str, Any]:
    """Run the campaign on a fresh kind cluster and return its figures and violations."""
    report(
        f"{SCENARIO}: seed {campaign.seed}, {campaign.duration_s / 60:.0f} min, kind with {campaign.workers} workers, "
        f"a fault {campaign.interval_s[0]:.0f}-{campaign.interval_s[1]:.0f}s after the last one ended "
        f"(replay: scripts/bench --scenario faults --kind --seed {campaign.seed})"
    )
    logging.getLogger("yuniplace.kube").setLevel(logging.ERROR)
    out_dir.mkdir(parents=True, exist_ok=True)
    cluster = KindCluster(f"yp-bench-{SCENARIO}")
    if cluster.exists():
        cluster.down()
    started = time.monotonic()
    up_s = cluster.up(workers=campaign.workers)
    loaded_s = time.monotonic() - started
    sampler = DockerSampler(cluster.name)
    idle = sampler.sample()
    observer: PodObserver | None = None
    nodes: NodeObserver | None = None
    stop_sampling = threading.Event()
    sampling = threading.Thread(target=sampler.run, args=(stop_sampling,), name="docker-stats", daemon=True)
    try:
        client = cluster.client()
        installing = time.monotonic()
        install(cluster, client, campaign.workers)
        installed_s = time.monotonic() - installing
        observer = PodObserver(client, TEAMS)
        observer.start()
        nodes = NodeObserver(client)
        nodes.start()
        stream = GangStream(
            client,
            TEAMS,
            observer,
            random.Random(f"stream-{campaign.seed}"),
            interval_s=campaign.arrivals_s,
            default_timeout_s=DEFAULT_TIMEOUT_S,
            workload=WORKLOAD,
            report=report,
        )
        checker = Checker(observer, stream, campaign.grace_s, report, nodes)
        workers = tuple(
            sorted(
                n["metadata"]["name"]
                for n in client.get("/api/v1/nodes")["items"]
                if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {})
            )
        )
        setup = Setup(
            client=client,
            workers=workers,
            control_plane=f"{cluster.name}-control-plane",
            namespace=SYSTEM_NAMESPACE,
            lease=RELEASE,
            env={**cluster.images.env(), "KUBECONFIG": str(cluster.kubeconfig)},
        )
        injector = KindFaultInjector(
            setup,
            stream,
            observer,
            random.Random(f"faults-{campaign.seed}"),
            interval_s=campaign.interval_s,
            report=report,
        )
        sampling.start()
        parts = Parts(
            client, stream, checker, injector, controller_restarts=lambda: controller_restarts(client, checker.started)
        )
        result = drive(campaign, parts, out_dir, report)
        stop_sampling.set()
        plans = {plan.key: plan.replacement for plan in stream.plans.values() if plan.kind == "job"}
        rows = recoveries(
            [f for f in injector.faults if f.kind in {k.value for k in NODE_FAULTS}],
            observer.snapshot(),
            nodes.snapshot(),
            observer.events(),
            stream.gangs(),
            plans,
            time.time(),
        )
        result |= {
            "workers": campaign.workers,
            "interval_s": list(campaign.interval_s),
            "arrivals_s": list(campaign.arrivals_s),
            "toleration_s": LOST_NODE_TOLERATION_S,
            "cluster_up_s": round(up_s, 1),
            "cluster_loaded_s": round(loaded_s, 1),
            "chart_installed_s": round(installed_s, 1),
            "idle": idle,
            "resources": sampler.summary(),
            "recoveries": rows,
            "recovery_summary": summarise(rows),
            "member_exits": [f.detail for f in injector.faults if f.kind == Kind.MEMBER_EXITED.value],
            "broken_images": [f.detail for f in injector.faults if f.kind == Kind.IMAGE_PULL.value],
        }
        return result
    finally:
        stop_sampling.set()
        if observer is not None:
            observer.stop()
        if nodes is not None:
            nodes.stop()
        with contextlib.suppress(ApiError, OSError, subprocess.SubprocessError):
            save_logs(cluster, cluster.client(), out_dir / "logs" / SCENARIO)
        if not campaign.keep:
            cluster.down()
