"""Karpenter as the local control plane's autoscaler: its kwok provider (sigs.k8s.io/karpenter/kwok, a
complete Karpenter whose "cloud" makes kwok nodes from NodePools and a KWOKNodeClass), built from its Go
module like the operators, run out of cluster against the cluster beside its kwok. Its nodes carry
kwok's annotation, so the cluster's kwok makes them Ready as it does its own.

`scripts/cluster up --autoscaler karpenter` starts it with a NodePool; the autoscaler tests and the bench
start it the same way (`start`).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from yuniplace.kube import KubeClient, NotFound
from yuniplace.localcluster.build import BuildError, Operator, ensure_operator
from yuniplace.localcluster.cluster import LocalCluster, wait_until
from yuniplace.localcluster.ports import free_ports

KARPENTER_MODULE = "sigs.k8s.io/karpenter"
NAME = "karpenter"  # the process, among the cluster's
NODE_CLASS = "default"
KARPENTER_API = "/apis/karpenter.sh/v1"
KWOK_API = "/apis/karpenter.kwok.sh/v1alpha1"
# The kwok provider's instance types: families c (2 GiB a CPU), m (8) and s (4), of 1 to 256 CPUs.
INSTANCE_CPU = "karpenter.kwok.sh/instance-cpu"
INSTANCE_FAMILY = "karpenter.kwok.sh/instance-family"
SERVED_TIMEOUT_S = 60.0


def ensure_karpenter(*, quiet: bool = False) -> Operator:
    """Karpenter with its kwok provider (about 5 minutes to build on 2 cores), and its CRDs."""
    return ensure_operator(
        "karpenter",
        KARPENTER_MODULE,
        f"{KARPENTER_MODULE}/kwok",
        "karpenter",
        "Karpenter with its kwok provider",
        5,
        quiet,
        crd_folders=("kwok/charts/crds", "kwok/apis/crds"),
    )


def node_pool(
    name: str,
    *,
    cpu: int = 4,
    family: str = "c",
    limits: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    consolidate_after: str = "10s",
    disruption_budget: str | None = None,
) -> dict[str, Any]:
    """A NodePool of kwok nodes of `cpu` CPUs of one instance family (the shape admission reads from its
    requirements), within `limits`, consolidating nodes empty or underused after `consolidate_after`,
    at most `disruption_budget` of them at once (Karpenter's default, 10%, takes back one node of ten at a
    time)."""
    requirements = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": INSTANCE_FAMILY, "operator": "In", "values": [family]},
        {"key": INSTANCE_CPU, "operator": "In", "values": [str(cpu)]},
    ]
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(labels or {})},
            "spec": {
                "requirements": requirements,
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": NODE_CLASS},
                "expireAfter": "Never",
                **({"taints": [dict(t) for t in taints]} if taints else {}),
            },
        },
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": consolidate_after,
            **({"budgets": [{"nodes": disruption_budget}]} if disruption_budget else {}),
        },
    }
    if limits:
        spec["limits"] = dict(limits)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def _served(client: KubeClient, api: str, resources: set[str]) -> bool:
    try:
        return resources <= {r["name"] for r in client.get(api)["resources"]}
    except NotFound:
        return False


def install(cluster: LocalCluster, karpenter: Operator) -> None:
    """Karpenter's CRDs, served, and the KWOKNodeClass its NodePools name."""
    kubectl = cluster.bin_dir() / "kubectl"
    for crd in karpenter.crds:
        applied = subprocess.run(
            [str(kubectl), f"--kubeconfig={cluster.kubeconfig}", "apply", "--server-side", "-f", str(crd)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if applied.returncode != 0:
            raise BuildError(f"kubectl apply {crd.name}: {applied.stderr.strip()}")
    client = cluster.client()
    wait_until(lambda: _served(client, KARPENTER_API, {"nodepools", "nodeclaims"}), SERVED_TIMEOUT_S)
    wait_until(lambda: _served(client, KWOK_API, {"kwoknodeclasses"}), SERVED_TIMEOUT_S)
    try:
        client.get(f"{KWOK_API}/kwoknodeclasses/{NODE_CLASS}")
    except NotFound:
        client.create(
            f"{KWOK_API}/kwoknodeclasses",
            {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": NODE_CLASS}},
        )


def start(cluster: LocalCluster, karpenter: Operator, *, timeout_s: float = 90.0) -> None:
    """Install Karpenter's CRDs and run it as one of the cluster's processes (`scripts/cluster down`
    stops it with the rest), out of cluster, without leader election, until it answers its health probe."""
    install(cluster, karpenter)
    metrics, health = free_ports(2)
    env = shutil.which("env") or "/usr/bin/env"
    cluster.spawn(
        NAME,
        [
            env,
            f"KUBECONFIG={cluster.kubeconfig}",
            "DISABLE_LEADER_ELECTION=true",
            f"METRICS_PORT={metrics}",
            f"HEALTH_PROBE_PORT={health}",
            "LOG_LEVEL=info",
            str(karpenter.binary),
        ],
        f"http://127.0.0.1:{health}/healthz",
        timeout_s=timeout_s,
    )
