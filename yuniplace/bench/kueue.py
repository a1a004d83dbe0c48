"""Kueue as the bench's peer: its manager running out of cluster against the bench's cluster (its
webhooks called on loopback), a ClusterQueue with the whole cluster as its quota, and the bench's gangs
written as Kueue's pod groups. Kueue gates each pod as it is created, admits the group once all of its
pods exist and its quota holds them all, and lifts the gates; kube-scheduler then binds the pods."""

from __future__ import annotations

import contextlib
import os
import subprocess
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from yuniplace.bench.subjects import delete_namespace, member_pod, stop
from yuniplace.gang.resources import format_quantity, quantities, total
from yuniplace.kube import KubeClient, NotFound
from yuniplace.localcluster import LocalCluster, wait_until
from yuniplace.localcluster import kueue as kq
from yuniplace.localcluster.build import Operator
from yuniplace.localcluster.ports import free_ports

QUOTA_RESOURCES = ("cpu", "memory", "pods")
READY_TIMEOUT_S = 120.0
PROBE_NAMESPACE = "kueue-ready"


def kueue_gang(app: str, members: int, *, cpu: str = "100m", memory: str = "128Mi") -> list[dict[str, Any]]:
    """The bench's gang of `members` written for Kueue: the same pods as `gang()` (names, requests),
    with no gate and no task groups of yuniplace's, as one Kueue pod group in the namespace's
    LocalQueue. Kueue's webhook gates them."""
    pods = [member_pod(f"{app}-{i}", cpu=cpu, memory=memory) for i in range(members)]
    return kq.pod_group(pods, app)


def cluster_quota(nodes: list[dict[str, Any]]) -> dict[str, str]:
    """The nominal quota that covers the cluster: every node's allocatable cpu, memory and pods."""
    summed: dict[str, Decimal] = total(quantities(node["status"].get("allocatable") or {}) for node in nodes)
    return {name: format_quantity(summed.get(name, Decimal(0))) for name in QUOTA_RESOURCES}


def managed_namespace(cluster: LocalCluster, namespace: str) -> None:
    """Create a namespace Kueue manages, with its LocalQueue, and wait until the queue is Active: a
    measured run then starts with Kueue already knowing where its pods are queued."""
    cluster.create_namespace(namespace, labels={kq.MANAGED_NAMESPACE_LABEL: "true"})
    client = cluster.client()
    path = f"{kq.API}/namespaces/{namespace}/localqueues"
    client.create(path, kq.local_queue(namespace))
    wait_until(lambda: kq.condition_true(client.get(f"{path}/{kq.LOCAL_QUEUE}"), "Active"), READY_TIMEOUT_S)


@dataclass
class KueueManager:
    """Kueue's manager, built from its Go module, running against the cluster with its CRDs, its webhook
    configurations, a ResourceFlavor and a ClusterQueue covering the cluster. Ready once a probe group
    of one pod is admitted and bound. On exit its webhook configurations are removed before it stops,
    so no pod creation is left calling a webhook that is gone."""

    cluster: LocalCluster
    kueue: Operator
    workdir: Path
    log: Path
    client: Mapping[str, int] | None = None  # its client's qps and burst; None: as it ships
    process: subprocess.Popen[bytes] | None = None
    health_port: int = 0
    created: list[str] = field(default_factory=list)  # API paths of the webhook configurations
    # What Kueue was given, for the results: its version, its Configuration, its ClusterQueue's quota.
    given: dict[str, Any] = field(default_factory=dict)

    def __enter__(self) -> KueueManager:
        client = self.cluster.client()
        kq.install_crds(self.cluster, self.kueue)
        webhook_port, metrics_port, self.health_port = free_ports(3)
        cert_dir = self.workdir / "certs"
        ca_bundle = kq.write_certificates(cert_dir)
        settings = kq.configuration(
            kq.shipped_configuration(self.kueue),
            webhook_port=webhook_port,
            cert_dir=cert_dir,
            metrics_port=metrics_port,
            health_port=self.health_port,
            client=self.client,
        )
        config = self.workdir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(settings, sort_keys=False))
        self.given = {"version": self.kueue.version, "configuration": settings}
        url = f"https://127.0.0.1:{webhook_port}"
        for configuration in kq.webhook_configurations(kq.module_manifests(self.kueue), url, ca_bundle):
            path = f"/apis/admissionregistration.k8s.io/v1/{configuration['kind'].lower()}s"
            named = f"{path}/{configuration['metadata']['name']}"
            with contextlib.suppress(NotFound):  # one left by a run that did not end cleanly
                client.delete(named)
            client.create(path, configuration)
            self.created.append(named)
        with self.log.open("ab") as output:
            # Errors only, as yuniplace logs warnings only in the bench: Kueue's deployment logs at
            # level 2, a line per reconcile, which costs CPU the two shared cores would miss.
            self.process = subprocess.Popen(
                [str(self.kueue.binary), f"--config={config}", "--zap-log-level=error"],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)},
            )
        try:
            wait_until(self._ready, READY_TIMEOUT_S, interval_s=0.2)
            self._queues(client)
            self._probe(client)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"Kueue's manager exited ({self.process.returncode}); see {self.log}")

    def _ready(self) -> bool:
        """Its readiness probe: true once its webhook server listens."""
        self._alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _queues(self, client: KubeClient) -> None:
        """The ResourceFlavor and the ClusterQueue (through Kueue's webhooks), until the queue is Active."""
        quota = cluster_quota(client.get("/api/v1/nodes")["items"])
        self.given["quota"] = quota
        for resource, body in (("resourceflavors", kq.resource_flavor()), ("clusterqueues", kq.cluster_queue(quota))):
            path = f"{kq.API}/{resource}"
            try:
                client.get(f"{path}/{body['metadata']['name']}")
            except NotFound:
                client.create(path, body)
            else:
                client.patch(f"{path}/{body['metadata']['name']}", {"spec": body.get("spec", {})})

        def active() -> bool:
            self._alive()
            return kq.condition_true(client.get(f"{kq.API}/clusterqueues/{kq.CLUSTER_QUEUE}"), "Active")

        wait_until(active, READY_TIMEOUT_S, interval_s=0.2)

    def _probe(self, client: KubeClient) -> None:
        """A pod group of one, gated by Kueue's webhook, admitted and bound: the whole path works."""
        managed_namespace(self.cluster, PROBE_NAMESPACE)
        try:
            path = f"/api/v1/namespaces/{PROBE_NAMESPACE}/pods"
            (pod,) = kueue_gang("kueue-ready", 1)
            created = client.create(path, pod)
            gates = [gate["name"] for gate in created["spec"].get("schedulingGates") or []]
            if kq.ADMISSION_GATE not in gates:
                raise RuntimeError(f"Kueue's webhook did not gate the probe pod (gates: {gates}); see {self.log}")

            def bound() -> bool:
                self._alive()
                return bool(client.get(f"{path}/kueue-ready-0")["spec"].get("nodeName"))

            wait_until(bound, READY_TIMEOUT_S, interval_s=0.2)
        finally:
            delete_namespace(self.cluster, PROBE_NAMESPACE)

    def __exit__(self, *_: object) -> None:
        client = self.cluster.client()
        for path in self.created:
            with contextlib.suppress(NotFound):
                client.delete(path)
        self.created.clear()
        if self.process is None:
            return
        stop(self.process)
