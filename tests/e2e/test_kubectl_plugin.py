"""`kubectl yuniplace`, as a user runs it: the built kubectl finds `kubectl-yuniplace` (the package's entry
point) on PATH, and the plugin reads the cluster through kubectl's own kubeconfig ($KUBECONFIG, its
current context and that context's namespace, or --context, -n, -A), against the real control plane
with a gang waiting for room; then `explain` tells that gang's story, before and after it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    Placement,
    events_for,
    fill,
    gang_pod,
    is_running,
)
from yuniplace.localcluster import wait_until

PLUGIN = Path(sys.executable).parent / "kubectl-yuniplace"


def kubectl_home(cluster: Cluster, namespace: str, tmp_path: Path) -> dict[str, str]:
    """An environment as a kubectl user has it: kubectl and the plugin on PATH, and $KUBECONFIG with two
    contexts on the test's cluster: `e2e` (current, namespace: the test's) and `other` (namespace default)."""
    assert PLUGIN.exists(), f"{PLUGIN}: the package's kubectl-yuniplace entry point is not installed"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(cluster.bin_dir / "kubectl")
    (bin_dir / "kubectl-yuniplace").symlink_to(PLUGIN)
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    context = config["contexts"][0]["context"]
    config["contexts"] = [
        {"name": "e2e", "context": {**context, "namespace": namespace}},
        {"name": "other", "context": {**context, "namespace": "default"}},
    ]
    config["current-context"] = "e2e"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "KUBECONFIG": str(kubeconfig)}


def kubectl(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{' '.join(result.args)} exited {result.returncode}:\n{result.stderr}"
    return result.stdout


def test_kubectl_yuniplace_status_validate_and_explain_a_waiting_gang(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    pool: Callable[..., Placement],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    env = kubectl_home(cluster, namespace, tmp_path)
    place = pool(1, cpu="4", memory="16Gi")
    fill(cluster, namespace, place, place.nodes[0], "filler", cpu="2")  # the gang fits the node, not its free room
    groups = [place.group("workers", 4, cpu="1", memory="1Gi")]
    for i in range(4):
        pod = gang_pod(
            f"train-{i}",
            "train",
            "workers",
            task_groups=groups if i == 0 else None,
            policy="placeholderTimeoutInSeconds=300",
            cpu="1",
            memory="1Gi",
        )
        cluster.create_pod(namespace, place.pin(pod))
    wait_until(lambda: events_for(cluster, namespace, "GangWaiting"), 30)

    # status: -n, the current context's namespace, another context's (none there), and -A from it.
    for args in (("status", "-n", namespace), ("status",)):
        rows = ok(kubectl(env, "yuniplace", *args)).strip().splitlines()
        assert rows[0].split()[:3] == ["NAMESPACE", "APPLICATION", "STATE"], rows
        assert [row.split()[:5] for row in rows[1:]] == [[namespace, "train", "Pending", "workers", "0/4"]], rows
    elsewhere = kubectl(env, "yuniplace", "--context", "other", "status")
    assert ok(elsewhere).strip() == "" and "No gang applications found." in elsewhere.stderr
    everywhere = ok(kubectl(env, "yuniplace", "--context", "other", "status", "-A"))
    assert any(row.split()[:3] == [namespace, "train", "Pending"] for row in everywhere.splitlines()), everywhere

    # validate -f, as kubectl takes files.
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**gang_pod("check", "check", "workers", task_groups=groups), "kind": "Pod"}))
    checked = ok(kubectl(env, "yuniplace", "validate", "-f", "job.yaml", cwd=tmp_path))
    assert checked.strip().splitlines()[-1] == "ok: 1 file(s), 1 gang pod(s), 0 error(s), 0 warning(s)", checked

    # explain, while it waits, and once the room is freed and it started.
    told = ok(kubectl(env, "yuniplace", "explain", "train-2", "-n", namespace)).splitlines()
    record_property("figure", "kubectl yuniplace explain, waiting: " + " / ".join(told[:6]))
    assert told[0] == (
        f"Pod {namespace}/train-2: Pending, held back by yuniplace's scheduling gate yuniplace.io/gang until its "
        "gang may start"
    ), told
    assert told[1].startswith(f"Gang: application train in namespace {namespace}, described by train-0: 4 pods all"), (
        told
    )
    assert "State: Pending, waiting for admission: nothing is reserved for it yet." in told
    assert f"Queue: {namespace}." in told
    waiting = next(line for line in told if line.startswith("Waiting for: "))
    assert "waiting for free capacity" in waiting and waiting.endswith("(GangWaiting)."), waiting
    timeout = next(line for line in told if line.startswith("Timeout: "))
    assert "left of 300s; then its placeholders are removed and its pods are scheduled normally" in timeout, timeout
    assert any(line.startswith("Next: admission reserves it") for line in told), told
    assert any("GangWaiting on train-0: waiting for free capacity" in line for line in told), told

    cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/filler")
    for i in range(4):
        cluster.wait_pod(namespace, f"train-{i}", is_running)
    started = ok(kubectl(env, "yuniplace", "explain", "train-2")).splitlines()  # the context's namespace
    assert started[0].startswith(f"Pod {namespace}/train-2: Running, bound to node {place.nodes[0]}"), started
    assert "State: Running, started: its members were given their room." in started, started
