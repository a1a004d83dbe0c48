"""scripts/cluster, the interface scripts outside the test suite rely on: a second cluster with custom
nodes runs beside the session's, kubectl and helm work through `env`, and `down` ends only its own
processes."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from tests.e2e.support import Cluster, is_running, make_pod
from yuniplace.localcluster import LocalCluster
from yuniplace.localcluster.build import SUPPORTED_KUBERNETES
from yuniplace.localcluster.cluster import state_root

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster"
OLDEST = SUPPORTED_KUBERNETES[0]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False)


def shell(env_lines: str, command: str) -> str:
    result = subprocess.run(
        ["bash", "-c", f"{env_lines}\n{command}"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_second_cluster_with_custom_nodes_runs_beside_the_first(cluster: Cluster) -> None:
    name = f"side-{uuid.uuid4().hex[:6]}"
    up = run(
        "up",
        "--name",
        name,
        "--nodes",
        "2",
        "--node-cpu",
        "4",
        "--node-memory",
        "8Gi",
        "--node-pods",
        "20",
        "--node-resource",
        "nvidia.com/gpu=8",
        "--node-label",
        "pool=gpu",
        "--node-taint",
        "nvidia.com/gpu=present:NoSchedule",
    )
    try:
        assert up.returncode == 0, up.stderr
        status = json.loads(run("status", "--name", name).stdout)
        assert status["running"] and status["nodes"] == {"total": 2, "ready": 2}
        assert status["kubeconfig"] != str(cluster.kubeconfig)

        env_lines = run("env", "--name", name).stdout
        assert "export KUBECONFIG=" in env_lines and "export PATH=" in env_lines
        nodes = json.loads(shell(env_lines, "kubectl get nodes -o json"))["items"]
        node = nodes[0]
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert node["status"]["allocatable"]["pods"] == "20"
        assert node["metadata"]["labels"]["pool"] == "gpu"
        assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        assert "v3." in shell(env_lines, "helm version --short")

        # The session's cluster is untouched and still schedules.
        namespace = "default"
        pod_name = f"still-works-{uuid.uuid4().hex[:6]}"
        cluster.create_pod(namespace, make_pod(pod_name))
        cluster.wait_pod(namespace, pod_name, is_running)
        cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/{pod_name}")
    finally:
        pids = [process.pid for process in LocalCluster(name).processes()]
        down = run("down", "--name", name)
    assert down.returncode == 0, down.stderr
    assert all(not Path(f"/proc/{pid}").exists() or _is_zombie(pid) for pid in pids)
    assert run("status", "--name", name).returncode == 1
    assert cluster.local.is_running()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_up_with_a_bad_taint_is_refused_with_a_clear_message() -> None:
    result = run("up", "--name", "never", "--node-taint", "gpu=yes:Sometimes")
    assert result.returncode == 2
    assert "NoSchedule|PreferNoSchedule|NoExecute" in result.stderr
    assert not (state_root() / "never").exists()


def test_a_cluster_of_another_supported_release_with_the_workload_api(cluster: Cluster) -> None:
    """`up --kubernetes 1.35 --workload-api`: the oldest supported release, serving the native gang API
    its gates switch on. scripts/test builds it before the tests start (`build --with-oldest`): `up`
    would otherwise compile it first, for longer than a test may take."""
    name = f"release-{uuid.uuid4().hex[:6]}"
    up = run("up", "--name", name, "--nodes", "1", "--kubernetes", OLDEST, "--workload-api")
    try:
        assert up.returncode == 0, up.stderr
        assert f"Kubernetes v{OLDEST}." in up.stderr and "GangScheduling=true" in up.stderr
        env_lines = run("env", "--name", name).stdout
        assert f'"minor": "{OLDEST.split(".")[1]}"' in shell(env_lines, "kubectl version -o json")
        assert "workloads" in shell(env_lines, "kubectl api-resources --api-group=scheduling.k8s.io -o name")
    finally:
        run("down", "--name", name)


def test_an_unsupported_release_is_refused_with_the_supported_ones() -> None:
    refused = run("up", "--name", "never", "--kubernetes", "1.34")
    assert refused.returncode == 2
    assert "argument --kubernetes: invalid choice: '1.34'" in refused.stderr
    assert all(version in refused.stderr.rpartition("choose from")[2] for version in ("1.35", "1.36", "1.37"))
