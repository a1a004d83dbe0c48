"""The webhook for native gangs as the chart registers it, for scenario 1c: served by the controller
under test (in its process, as the chart runs it), called by the apiserver on loopback for pods of the
namespaces labelled HELD. A native gang is then held the way users' are: its first pod gated, the
members made after its admission let through ungated."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from yuniplace.localcluster import LocalCluster
from yuniplace.localcluster.pki import CertificateAuthority
from yuniplace.localcluster.ports import free_ports
from yuniplace.webhook.server import NATIVE_GANGS_PATH

HELD = {"bench.yuniplace.io/native": "held"}
NATIVE_POD = "has(object.spec.schedulingGroup) || has(object.spec.workloadRef)"  # the chart's match condition
NAME = "bench-native-gate"
QUEUE = "root.native"  # the queue the held gangs are admitted in


@dataclass(frozen=True)
class NativeGate:
    address: str
    cert: Path
    key: Path
    ca_bundle: str

    def controller_args(self) -> list[str]:
        """What `yuniplace controller` is given to serve the webhook in its process."""
        return [f"--webhook-address={self.address}", f"--tls-cert-file={self.cert}", f"--tls-key-file={self.key}"]


def prepare(directory: Path) -> NativeGate:
    """A serving certificate for 127.0.0.1, signed by a CA of its own, and a free port."""
    ca = CertificateAuthority(directory, "bench-native-gate-ca")
    pair = ca.issue("webhook", "bench-native-gate", ip_addresses=("127.0.0.1",))
    (port,) = free_ports(1)
    bundle = base64.b64encode(ca.pair.cert.read_bytes()).decode()
    return NativeGate(f"127.0.0.1:{port}", pair.cert, pair.key, bundle)


def register(cluster: LocalCluster, gate: NativeGate) -> None:
    """The chart's native-gang webhook entry, pointed at the controller under test."""
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": NAME},
        "webhooks": [
            {
                "name": "native-gate.bench.yuniplace.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "reinvocationPolicy": "Never",
                "clientConfig": {"url": f"https://{gate.address}{NATIVE_GANGS_PATH}", "caBundle": gate.ca_bundle},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "operations": ["CREATE"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": dict(HELD)},
                "matchConditions": [
                    {
                        "name": "native-pod-group",
                        "expression": "has(object.spec.schedulingGroup) || has(object.spec.workloadRef)",
                    }
                ],
            }
        ],
    }
    cluster.client().create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", body)


def queues_configmap(cluster: LocalCluster, queue: str) -> str:
    """A queues ConfigMap holding one queue (`root.<name>`) with no limit, as NAMESPACE/NAME."""
    namespace, name = "bench-queues", "queues"
    cluster.create_namespace(namespace)
    text = (
        "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
        f"        queues:\n          - name: {queue.removeprefix('root.')}\n"
    )
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"queues.yaml": text}}
    cluster.client().create(f"/api/v1/namespaces/{namespace}/configmaps", body)
    return f"{namespace}/{name}"
