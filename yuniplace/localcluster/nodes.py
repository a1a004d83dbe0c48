"""Fake nodes for kwok: plain Node objects with the capacity a test asks for.

kwok takes over every node annotated `kwok.x-k8s.io/node: fake`: it marks it Ready, renews its
lease and runs the pods kube-scheduler binds to it, so the scheduler sees a real cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from yuniplace.kube import AlreadyExists, KubeClient, NotFound
from yuniplace.kube.nodes import is_ready

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
NODE_POOL_LABEL = "localcluster.yuniplace.io/pool"
CREATE_CONCURRENCY = 32


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, text: str) -> Taint:
        """`key=value:Effect` or `key:Effect`, as `kubectl taint` writes them."""
        spec, _, effect = text.rpartition(":")
        key, _, value = spec.partition("=")
        if not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError(f"taint {text!r} is not key[=value]:NoSchedule|PreferNoSchedule|NoExecute")
        return cls(key, value, effect)


@dataclass(frozen=True)
class NodePool:
    """`count` identical nodes named `<prefix>-<i>`."""

    count: int = 3
    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = 110
    extended: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    prefix: str = "kwok-node"

    def names(self) -> Iterator[str]:
        return (f"{self.prefix}-{index}" for index in range(self.count))

    def manifest(self, name: str) -> dict[str, Any]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods), **self.extended}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "type": "kwok",
                    NODE_POOL_LABEL: self.prefix,
                    **self.labels,
                },
            },
            "spec": {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints]},
            "status": {
                "allocatable": capacity,
                "capacity": capacity,
                "nodeInfo": {
                    "architecture": "amd64",
                    "kubeProxyVersion": "kwok",
                    "kubeletVersion": "kwok",
                    "operatingSystem": "linux",
                },
                "phase": "Running",
            },
        }


def create_nodes(client: KubeClient, pool: NodePool) -> list[str]:
    """Create the pool's nodes (existing ones are kept: re-running is harmless)."""

    def create(name: str) -> str:
        with contextlib.suppress(AlreadyExists):
            client.create("/api/v1/nodes", pool.manifest(name))
        return name

    with ThreadPoolExecutor(CREATE_CONCURRENCY) as executor:
        return list(executor.map(create, pool.names()))


def ready_node_names(client: KubeClient) -> set[str]:
    """The nodes that take pods: Ready, and no longer tainted not-ready (a node's Ready condition comes
    a moment before kube-controller-manager lifts that taint, and until then nothing is placed there)."""
    nodes = client.get("/api/v1/nodes", resourceVersion="0")["items"]
    return {node["metadata"]["name"] for node in nodes if is_ready(node)}


NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def release_node_leases(client: KubeClient) -> None:
    """Remove the node leases for a kwok about to start. A kubelet holds its node's lease under the node's
    own name, so a restarted kubelet renews it at once; kwok holds leases under an identity new with each
    process, and leaves a node unmanaged (its pods never run) while another identity's lease on it lasts,
    up to the lease duration. Removed rather than freed: a kwok that looks for a lease before its cache
    of them is filled creates one, and retries only a renewal later if one is there already."""
    for lease in client.get(NODE_LEASES)["items"]:
        with contextlib.suppress(NotFound):  # the node went meanwhile
            client.delete(f"{NODE_LEASES}/{lease['metadata']['name']}")
