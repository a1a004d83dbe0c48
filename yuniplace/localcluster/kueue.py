"""Kueue (sigs.k8s.io/kueue) beside the local control plane: its manager built from its Go module like the
operators, and what it is given to run out of cluster as its documentation sets it up for plain pods in
groups: its Configuration, its webhook configurations called on loopback, a ResourceFlavor, a
ClusterQueue and LocalQueues. Everything here but the build and `install_crds` is a pure function, so
what Kueue is given can be read and tested without running it.

Kueue's own Configuration (config/components/manager/controller_manager_config.yaml in its module) is
read from the module and followed wherever it applies out of cluster: its client rate, its controllers'
concurrency and its waitForPodsReady are those it ships. What differs says why where it is set.
"""

from __future__ import annotations

import base64
import copy
import fcntl
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from yuniplace.kube import KubeClient, NotFound
from yuniplace.localcluster.build import BuildError, Operator, ensure_operator
from yuniplace.localcluster.cluster import LocalCluster, wait_until
from yuniplace.localcluster.pki import CertificateAuthority

KUEUE_MODULE = "sigs.k8s.io/kueue"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"  # the Configuration version v0.17 reads and stores
API_VERSION = "kueue.x-k8s.io/v1beta2"
API = f"/apis/{API_VERSION}"
WEBHOOK_MANIFESTS = "config/components/webhook/manifests.yaml"
CRD_FOLDER = "config/components/crd/bases"
# The keys of Kueue's pod integration (pkg/controller/jobs/pod/constants and pkg/controller/constants).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
# Only namespaces with this label are Kueue's: its pod webhooks are called for their pods alone, and its
# managedJobsNamespaceSelector selects them, so every other pod of the cluster never meets Kueue.
MANAGED_NAMESPACE_LABEL = "kueue.yuniplace.io/managed"
NAMESPACE = "kueue-system"  # Kueue's namespace as its manifests name it; nothing is created there
FLAVOR = "default"
CLUSTER_QUEUE = "cluster"
LOCAL_QUEUE = "queue"
WEBHOOK_CONFIGURATION_PREFIX = "kueue-"  # as Kueue's kustomization names them
# Kueue reads its metrics certificate from this fixed path when its own certificate management is off
# (cmd/kueue/main.go: metricsCertPath); a missing one stops it at start.
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
# Kueue's Configuration as its deployment ships it, in its module.
SHIPPED_CONFIGURATION = "config/components/manager/controller_manager_config.yaml"
SERVED_TIMEOUT_S = 60.0


def ensure_kueue(*, quiet: bool = False) -> Operator:
    """Kueue's manager (about 4 minutes to build on 2 cores), its CRDs and its module's folder."""
    return ensure_operator(
        "kueue",
        KUEUE_MODULE,
        f"{KUEUE_MODULE}/cmd/kueue",
        "kueue",
        "Kueue's manager",
        4,
        quiet,
        crd_folders=(CRD_FOLDER,),
    )


def shipped_configuration(kueue: Operator) -> dict[str, Any]:
    """Kueue's Configuration as its deployment ships it, read from the module the bench builds: its client
    rate, its controllers' concurrency and its waitForPodsReady (commented out there, so off) are then
    what that version ships, not what anyone typed in."""
    loaded = yaml.safe_load((kueue.root / SHIPPED_CONFIGURATION).read_text())
    if not isinstance(loaded, dict) or loaded.get("kind") != "Configuration":
        raise BuildError(f"{kueue.root / SHIPPED_CONFIGURATION} is not a Kueue Configuration")
    return loaded


def configuration(
    shipped: Mapping[str, Any],
    *,
    webhook_port: int,
    cert_dir: Path,
    metrics_port: int,
    health_port: int,
    client: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Kueue's `shipped` Configuration run out of cluster for plain pods in groups. Changed only where
    running out of cluster needs it: every port on loopback, no leader election (one manager),
    certificates made here instead of by its internal certificate management (which signs for the
    in-cluster Service's DNS name, not for the loopback address the API server calls), and only the
    labelled namespaces managed. Only the pod integration is on: the other frameworks' CRDs are not
    installed. The visibility API server is off: an aggregated API for listing pending workloads, not
    on the admission path, that would need certificates of its own at a fixed /visibility. With
    `client`, its client's rate (qps, burst) instead of the shipped one; everything else, waitForPodsReady
    included, as shipped."""
    settings = copy.deepcopy(dict(shipped))
    settings.update(
        {
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "manageJobsWithoutQueueName": False,
            "managedJobsNamespaceSelector": {"matchLabels": {MANAGED_NAMESPACE_LABEL: "true"}},
            "integrations": {"frameworks": ["pod"]},
            "featureGates": {**(settings.get("featureGates") or {}), "VisibilityOnDemand": False},
        }
    )
    if client is not None:
        settings["clientConnection"] = dict(client)
    return settings


def _kept(webhook: Mapping[str, Any]) -> bool:
    """A webhook of pods, or of Kueue's own objects: those of other frameworks' objects are left out."""
    groups = {group for rule in webhook.get("rules", []) for group in rule.get("apiGroups", [])}
    resources = {resource for rule in webhook.get("rules", []) for resource in rule.get("resources", [])}
    return groups == {"kueue.x-k8s.io"} or (groups == {""} and resources == {"pods"})


def webhook_configurations(manifests: Sequence[Mapping[str, Any]], url: str, ca_bundle: bytes) -> list[dict[str, Any]]:
    """Kueue's Mutating and ValidatingWebhookConfiguration from its module's manifests, keeping the pod
    webhooks and those of Kueue's own objects, each called at `url` + its path and trusting `ca_bundle`
    (PEM). Pod webhooks are called only for pods of the labelled namespaces."""
    made = []
    for manifest in manifests:
        if manifest.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        configuration = copy.deepcopy(dict(manifest))
        configuration["metadata"] = {"name": WEBHOOK_CONFIGURATION_PREFIX + manifest["metadata"]["name"]}
        webhooks = []
        for webhook in configuration["webhooks"]:
            if not _kept(webhook):
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": url.rstrip("/") + path, "caBundle": base64.b64encode(ca_bundle).decode()}
            if webhook["rules"][0].get("resources") == ["pods"]:
                webhook["namespaceSelector"] = {"matchLabels": {MANAGED_NAMESPACE_LABEL: "true"}}
            webhooks.append(webhook)
        configuration["webhooks"] = webhooks
        made.append(configuration)
    return made


def resource_flavor() -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}


def cluster_queue(quota: Mapping[str, str]) -> dict[str, Any]:
    """One ClusterQueue for every namespace, its nominal quota `quota` (resource: quantity) in one flavor:
    given the whole cluster, quota never holds back what the nodes could run."""
    names = sorted(quota)
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": names,
                    "flavors": [{"name": FLAVOR, "resources": [{"name": n, "nominalQuota": quota[n]} for n in names]}],
                }
            ],
        },
    }


def local_queue(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    }


def pod_group(pods: Sequence[dict[str, Any]], group: str, queue: str = LOCAL_QUEUE) -> list[dict[str, Any]]:
    """`pods` as one Kueue pod group: every pod labelled with its LocalQueue and group name and annotated
    with the group's size, as Kueue's plain-pod documentation writes them. Kueue's webhook adds its gate."""
    grouped = copy.deepcopy(list(pods))
    for pod in grouped:
        metadata = pod["metadata"]
        metadata.setdefault("labels", {}).update({QUEUE_NAME_LABEL: queue, GROUP_NAME_LABEL: group})
        metadata.setdefault("annotations", {})[GROUP_TOTAL_COUNT_ANNOTATION] = str(len(grouped))
    return grouped


def module_manifests(kueue: Operator) -> list[dict[str, Any]]:
    path = kueue.root / WEBHOOK_MANIFESTS
    return [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]


def write_certificates(directory: Path) -> bytes:
    """A CA of its own and a serving certificate for 127.0.0.1 signed by it, as Kueue's webhook server
    reads them (tls.crt and tls.key in its certDir); return the CA's PEM for the webhook configurations.
    Kueue's metrics certificate (the same one) is put where Kueue looks for it, once for every run."""
    ca = CertificateAuthority(directory, "yuniplace-kueue-webhook-ca")
    pair = ca.issue("tls", "kueue-webhook", ip_addresses=("127.0.0.1",))
    _place_metrics_certificate(pair.cert.read_bytes(), pair.key.read_bytes())
    return ca.pair.cert.read_bytes()


def _place_metrics_certificate(cert: bytes, key: bytes) -> None:
    """Kueue v0.17 reads its metrics server's certificate from METRICS_CERT_DIR, a fixed path. Any valid
    pair serves (nothing here scrapes its metrics over TLS), so an existing pair is kept: concurrent runs
    on one machine then never replace it under each other."""
    try:
        METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
        with open(METRICS_CERT_DIR.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (METRICS_CERT_DIR / "tls.crt").exists() and (METRICS_CERT_DIR / "tls.key").exists():
                return
            for name, data in (("tls.key", key), ("tls.crt", cert)):
                staged = METRICS_CERT_DIR / f".{name}.new"
                staged.write_bytes(data)
                staged.chmod(0o600)
                staged.rename(METRICS_CERT_DIR / name)
    except OSError as error:
        raise BuildError(
            f"Kueue v0.17 with its own certificate management off reads its metrics certificate from "
            f"{METRICS_CERT_DIR}/tls.crt and tls.key (a fixed path) and stops without them; writing them "
            f"failed: {error}"
        ) from None


def _served(client: KubeClient, resources: set[str]) -> bool:
    try:
        return resources <= {r["name"] for r in client.get(API)["resources"]}
    except NotFound:
        return False


def install_crds(cluster: LocalCluster, kueue: Operator) -> None:
    """Kueue's CustomResourceDefinitions from its module, applied server side, until its API is served."""
    kubectl = cluster.bin_dir() / "kubectl"
    for crd in kueue.crds:
        applied = subprocess.run(
            [str(kubectl), f"--kubeconfig={cluster.kubeconfig}", "apply", "--server-side", "-f", str(crd)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if applied.returncode != 0:
            raise BuildError(f"kubectl apply {crd.name}: {applied.stderr.strip()}")
    wanted = {"resourceflavors", "clusterqueues", "localqueues", "workloads"}
    wait_until(lambda: _served(cluster.client(), wanted), SERVED_TIMEOUT_S)


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Whether the object's status condition `kind` (Active, Admitted...) is True."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)
