"""Command lines of the control-plane components: pure functions of paths and ports.

Everything listens on 127.0.0.1 only. Client rate limits are raised the same way for every
component, because kube-scheduler's default of 50 QPS, not the scheduler, would otherwise set the
pace of every measurement made on this cluster.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
POD_CIDR = "10.0.0.1/16"
CLIENT_QPS = 1000
CLIENT_BURST = 2000
# kwok renews each node's lease every quarter of its duration: at 40 s (kubelet's default) 5 000 nodes
# make 500 lease writes a second, more than a 2-core machine's API server serves beside the workload;
# renewals fall behind and the node lifecycle controller taints healthy nodes unreachable. Renewed
# every 30 s instead, and a node counted lost after 100 s without one (kubelet's 50 s grace, doubled).
NODE_LEASE_DURATION_S = 120
NODE_MONITOR_GRACE_PERIOD_S = 100


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    scheduler: int
    controller_manager: int
    kwok: int


@dataclass(frozen=True)
class Layout:
    """Where a cluster keeps its files; every path is under one state directory."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    def kubeconfig(self, component: str) -> Path:
        return self.root / f"{component}.kubeconfig"

    @property
    def service_account_public_key(self) -> Path:
        return self.pki / "sa.pub"

    def cert(self, stem: str) -> Path:
        return self.pki / f"{stem}.crt"

    def key(self, stem: str) -> Path:
        return self.pki / f"{stem}.key"


@dataclass(frozen=True)
class Component:
    name: str
    argv: list[str]
    health_url: str


# The native gang API (KEP-4671) of each supported minor version: the feature gates that switch it on
# in every component, and the API version the apiserver must serve (alpha and beta APIs are off by
# default). 1.35 serves Workload (pods point at it with spec.workloadRef); 1.36 adds PodGroup (pods name
# it in spec.schedulingGroup); 1.37 serves both as beta, kube-scheduler's gang plugin under
# GenericWorkload alone.
WORKLOAD_API: dict[str, tuple[dict[str, bool], str]] = {
    "1.35": ({"GenericWorkload": True, "GangScheduling": True}, "scheduling.k8s.io/v1alpha1"),
    "1.36": ({"GenericWorkload": True, "GangScheduling": True}, "scheduling.k8s.io/v1alpha2"),
    "1.37": ({"GenericWorkload": True}, "scheduling.k8s.io/v1beta1"),
}


@dataclass(frozen=True)
class Features:
    """Feature gates given to every component, and API versions the apiserver serves beyond its defaults."""

    gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    apis: tuple[str, ...] = ()

    @classmethod
    def workload_api(cls, kubernetes: str) -> Features:
        gates, api = WORKLOAD_API[kubernetes]
        return cls(gates, (api,))

    def merged(self, other: Features) -> Features:
        return Features({**self.gates, **other.gates}, tuple(dict.fromkeys(self.apis + other.apis)))

    def gate_flags(self) -> list[str]:
        if not self.gates:
            return []
        return ["--feature-gates=" + ",".join(f"{name}={str(on).lower()}" for name, on in sorted(self.gates.items()))]

    def api_flags(self) -> list[str]:
        return ["--runtime-config=" + ",".join(f"{api}=true" for api in self.apis)] if self.apis else []


def etcd(bin_dir: Path, layout: Layout, ports: Ports) -> Component:
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return Component(
        "etcd",
        [
            str(bin_dir / "etcd"),
            "--name=local",
            f"--data-dir={layout.etcd_data}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            # A throwaway test cluster: durability buys nothing, fsync latency costs every write.
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ],
        f"{client}/health",
    )


def kube_apiserver(bin_dir: Path, layout: Layout, ports: Ports, features: Features = Features()) -> Component:
    return Component(
        "kube-apiserver",
        [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports.apiserver}",
            f"--cert-dir={layout.pki}",
            f"--tls-cert-file={layout.cert('apiserver')}",
            f"--tls-private-key-file={layout.key('apiserver')}",
            f"--client-ca-file={layout.cert('ca')}",
            f"--service-account-key-file={layout.service_account_public_key}",
            f"--service-account-signing-key-file={layout.key('sa')}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # The loopback address cannot be published as the kubernetes Service's endpoint.
            "--endpoint-reconciler-type=none",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction,PodSecurity",
            "--allow-privileged=true",
            "--max-requests-inflight=2000",
            "--max-mutating-requests-inflight=1000",
            "--event-ttl=2h",
            "--profiling=false",
            *features.gate_flags(),
            *features.api_flags(),
        ],
        f"https://127.0.0.1:{ports.apiserver}/readyz",
    )


def _serving_flags(layout: Layout, stem: str, port: int) -> list[str]:
    return [
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={layout.cert(stem)}",
        f"--tls-private-key-file={layout.key(stem)}",
        f"--authentication-kubeconfig={layout.kubeconfig(stem)}",
        f"--authorization-kubeconfig={layout.kubeconfig(stem)}",
    ]


def kube_controller_manager(bin_dir: Path, layout: Layout, ports: Ports, features: Features = Features()) -> Component:
    return Component(
        "kube-controller-manager",
        [
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={layout.kubeconfig('kube-controller-manager')}",
            *_serving_flags(layout, "kube-controller-manager", ports.controller_manager),
            "--leader-elect=false",
            f"--service-account-private-key-file={layout.key('sa')}",
            f"--root-ca-file={layout.cert('ca')}",
            f"--cluster-signing-cert-file={layout.cert('ca')}",
            f"--cluster-signing-key-file={layout.key('ca')}",
            "--use-service-account-credentials=true",
            f"--kube-api-qps={CLIENT_QPS}",
            f"--kube-api-burst={CLIENT_BURST}",
            "--concurrent-job-syncs=20",
            "--concurrent-gc-syncs=50",
            f"--node-monitor-grace-period={NODE_MONITOR_GRACE_PERIOD_S}s",
            "--profiling=false",
            *features.gate_flags(),
        ],
        f"https://127.0.0.1:{ports.controller_manager}/healthz",
    )


def scheduler_configuration(layout: Layout) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {
                "kubeconfig": str(layout.kubeconfig("kube-scheduler")),
                "qps": CLIENT_QPS,
                "burst": CLIENT_BURST,
            },
            "leaderElection": {"leaderElect": False},
        }
    )


def kube_scheduler(bin_dir: Path, layout: Layout, ports: Ports, features: Features = Features()) -> Component:
    return Component(
        "kube-scheduler",
        [
            str(bin_dir / "kube-scheduler"),
            f"--config={layout.root / 'kube-scheduler.yaml'}",
            *_serving_flags(layout, "kube-scheduler", ports.scheduler),
            "--profiling=false",
            *features.gate_flags(),
        ],
        f"https://127.0.0.1:{ports.scheduler}/healthz",
    )


KEEPS_RUNNING_ANNOTATION = "kwok.yuniplace.io/completes"
"""A Job pod annotated with this key (value "never") stays Running: a long-lived executor or worker."""

LINGERS_ANNOTATION = "kwok.yuniplace.io/lingers"
"""A deleted pod annotated with this key stays on its node, terminating, until the key is removed: a pod
slow to stop, whose room is not free yet."""

_RUNNING_STATUS = """\
{{ $now := Now }}
phase: Running
startTime: {{ $now | Quote }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
{{ $m := .metadata }}
{{ $podIP := PodIPWith .spec.nodeName (or .spec.hostNetwork false) (or $m.uid "") (or $m.name "") (or $m.namespace "")}}
podIP: {{ $podIP | Quote }}
conditions:
{{ range list "Initialized" "ContainersReady" "Ready" }}
- type: {{ . }}
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
{{ range .spec.readinessGates }}
- type: {{ .conditionType | Quote }}
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state:
    running: {startedAt: {{ $now | Quote }}}
{{ end }}
"""

_COMPLETED_STATUS = """\
{{ $now := Now }}
phase: Succeeded
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}
{{ end }}
"""


def _pod_stage(name: str, selector: list[Mapping[str, object]], next_step: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": selector},
            "next": next_step,
        },
    }


def kwok_stages() -> str:
    """The pod lifecycle kwok simulates: pods run at once, Job pods complete at once, deleted pods go.

    The same as kwok's own defaults but for two exceptions: a Job pod carrying KEEPS_RUNNING_ANNOTATION
    keeps running, so tests can show what happens to a running Job's pods (eviction, reclaim); a deleted
    pod carrying LINGERS_ANNOTATION stays until the key is removed, so tests can hold a pod terminating.
    kwok uses no default pod stage once any is configured, so all three are spelled out.
    """
    alive = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    stages = [
        _pod_stage(
            "pod-ready",
            [alive, {"key": ".status.podIP", "operator": "DoesNotExist"}],
            {"statusTemplate": _RUNNING_STATUS},
        ),
        _pod_stage(
            "pod-complete",
            [
                alive,
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
                {"key": f'.metadata.annotations["{KEEPS_RUNNING_ANNOTATION}"]', "operator": "DoesNotExist"},
            ],
            {"statusTemplate": _COMPLETED_STATUS},
        ),
        _pod_stage(
            "pod-delete",
            [
                {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                {"key": f'.metadata.annotations["{LINGERS_ANNOTATION}"]', "operator": "DoesNotExist"},
            ],
            {"finalizers": {"empty": True}, "delete": True},
        ),
    ]
    return yaml.safe_dump_all(stages, sort_keys=False)


def kwok(bin_dir: Path, layout: Layout, ports: Ports) -> Component:
    return Component(
        "kwok",
        [
            str(bin_dir / "kwok"),
            f"--kubeconfig={layout.kubeconfig('kwok')}",
            f"--config={layout.root / 'kwok.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--manage-nodes-with-label-selector=",
            f"--cidr={POD_CIDR}",
            "--node-ip=10.0.0.1",
            f"--node-lease-duration-seconds={NODE_LEASE_DURATION_S}",
            f"--server-address=127.0.0.1:{ports.kwok}",
        ],
        f"http://127.0.0.1:{ports.kwok}/healthz",
    )


def kubeconfig(server: str, ca: Path, cert: Path, key: Path, user: str) -> str:
    """A self-contained kubeconfig (certificates inlined, so it can be copied elsewhere)."""

    def inline(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority-data": inline(ca)}}],
            "users": [
                {"name": user, "user": {"client-certificate-data": inline(cert), "client-key-data": inline(key)}}
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local",
        }
    )
