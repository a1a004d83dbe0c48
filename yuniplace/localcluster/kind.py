"""kind clusters of real nodes (Docker containers running systemd, containerd and the kubelet), made
from the images kindimage builds, with yuniplace's image loaded: the way users deploy yuniplace,
its chart on a real kubelet, without a registry."""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from yuniplace.kube import KubeClient
from yuniplace.localcluster.cluster import command_dir, wait_until
from yuniplace.localcluster.kindimage import KindImages, ensure_all, tools

CREATE_TIMEOUT_S = 600.0
NODES_READY_S = 180.0
FREEZER = Path("/sys/fs/cgroup/freezer")  # cgroup v1 only; absent on cgroup v2 hosts
# Since Kubernetes 1.35 the kubelet refuses to start on a cgroup v1 host unless its configuration says
# failCgroupV1: false; kind's kubeadm configuration does not, so every cluster is created with this
# patch (a no-op on cgroup v2 hosts). examples/kind-cluster.yaml carries the same for the README.
KUBELET_PATCH = "kind: KubeletConfiguration\nfailCgroupV1: false\n"


class KindError(RuntimeError):
    """A kind cluster could not be created, used or deleted; the message says why."""


def state_dir(name: str) -> Path:
    return Path(tempfile.gettempdir()) / "yuniplace-kind" / name


def thaw(containers: list[str], freezer: Path = FREEZER) -> int:
    """Thaw every frozen cgroup v1 freezer under the `containers` (full Docker ids, cgroupfs or systemd
    cgroup driver); return how many were frozen."""
    thawed = 0
    for container in containers:
        for top in (freezer / "docker" / container, freezer / "system.slice" / f"docker-{container}.scope"):
            for state in top.rglob("freezer.state") if top.is_dir() else ():
                if state.read_text().strip() == "FROZEN":
                    state.write_text("THAWED")
                    thawed += 1
    return thawed


class KindCluster:
    """One named kind cluster: its kubeconfig lives in state_dir(name), not in ~/.kube/config."""

    def __init__(self, name: str, images: KindImages | None = None) -> None:
        self.name = name
        self._images = images
        self.kubeconfig = state_dir(name) / "kubeconfig"

    @property
    def images(self) -> KindImages:
        """The images and tools; only the tools are checked until `up` builds the images."""
        if self._images is None:
            self._images = tools(quiet=True)
        return self._images

    def kind(self, *args: str, timeout_s: float = CREATE_TIMEOUT_S) -> str:
        result = subprocess.run(
            [str(self.images.kind), *args],
            capture_output=True,
            text=True,
            env=self.images.env(),
            timeout=timeout_s,
            check=False,
        )
        if result.returncode != 0:
            raise KindError(f"kind {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
        return result.stdout

    def exists(self) -> bool:
        return self.name in self.kind("get", "clusters").split()

    def up(self, *, workers: int = 2) -> float:
        """Build the images when needed, create the cluster (one control plane, `workers` workers),
        wait for every node to be Ready and load yuniplace's image; returns the seconds from
        `kind create cluster` to every node Ready."""
        self._images = ensure_all()
        if self.exists():
            raise KindError(f"kind cluster {self.name} exists already (scripts/cluster down --kind --name {self.name})")
        directory = state_dir(self.name)
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "kind.yaml"
        nodes = [{"role": "control-plane"}] + [{"role": "worker"} for _ in range(workers)]
        config.write_text(
            yaml.safe_dump(
                {
                    "kind": "Cluster",
                    "apiVersion": "kind.x-k8s.io/v1alpha4",
                    "kubeadmConfigPatches": [KUBELET_PATCH],
                    "nodes": nodes,
                }
            )
        )
        started = time.monotonic()
        self.kind(
            "create",
            "cluster",
            "--name",
            self.name,
            "--image",
            self.images.node_image,
            "--config",
            str(config),
            "--kubeconfig",
            str(self.kubeconfig),
            "--wait",
            "5m",
        )
        # kind waits for the control plane; workers are Ready once kind-netd has configured them.
        try:
            wait_until(lambda: self.ready_nodes() == len(nodes), NODES_READY_S, interval_s=1.0)
        except TimeoutError:
            raise KindError(
                f"kind cluster {self.name}: {self.ready_nodes()} of {len(nodes)} nodes Ready after {NODES_READY_S:.0f}s"
            ) from None
        took = time.monotonic() - started
        self.load(self.images.yuniplace_image)
        return took

    def load(self, image: str) -> None:
        self.kind("load", "docker-image", "--name", self.name, image)

    def down(self) -> bool:
        """Delete the cluster; False when there was none. On a cgroup v1 host, a node killed while its
        kubelet runs an exec probe can keep that probe's runc frozen, and Docker then cannot kill the
        node: its frozen cgroups are thawed and the deletion tried once more."""
        if not self.exists():
            return False
        delete = ("delete", "cluster", "--name", self.name, "--kubeconfig", str(self.kubeconfig))
        try:
            self.kind(*delete)
        except KindError:
            if not thaw(self._node_containers()):
                raise
            self.kind(*delete)
        return True

    def _node_containers(self) -> list[str]:
        result = subprocess.run(
            ["docker", "ps", "-aq", "--no-trunc", "--filter", f"label=io.x-k8s.kind.cluster={self.name}"],
            capture_output=True,
            text=True,
            env=self.images.env(),
            timeout=60,
            check=False,
        )
        return result.stdout.split()

    def ready_nodes(self) -> int:
        nodes = self.client().get("/api/v1/nodes")["items"]
        return sum(
            any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))
            for node in nodes
        )

    def client(self) -> KubeClient:
        return KubeClient.from_kubeconfig(str(self.kubeconfig))

    def env(self) -> str:
        """Shell lines that point kubectl and helm at this cluster, with kind, kubectl, helm and yuniplace's
        own commands on PATH."""
        folders = ":".join(str(folder) for folder in (self.images.bin_dir, command_dir()) if folder)
        return f'export KUBECONFIG="{self.kubeconfig}"\nexport PATH="{folders}:$PATH"\n'
