"""yuniplace installed with its Helm chart: the controller and the webhook run with the chart's
ServiceAccount token and certificate, and the apiserver calls the webhook for gang pods only."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    finish,
    free_port,
    gang_pod,
    is_bound,
    is_running,
    placeholders,
)
from yuniplace.gang import keys
from yuniplace.localcluster import chartinstall, wait_until

# CI runs these on every supported Kubernetes version, not only the default.
pytestmark = pytest.mark.every_version

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Installed:
    installation: chartinstall.Installation
    controller: ControllerProcess
    namespace: str  # where the test's pods go (the webhook's namespaceSelector selects only it)

    def kubectl(self, cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}", "-n", self.namespace, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result


@pytest.fixture(scope="module")
def installed(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    suffix = uuid.uuid4().hex[:6]
    system, workloads = f"yuniplace-system-{suffix}", f"workloads-{suffix}"
    for name in (system, workloads):
        cluster.local.create_namespace(name)
    port = free_port()
    workdir = tmp_path_factory.mktemp("chart")
    installation = chartinstall.install(
        cluster.local,
        release=f"yp-{suffix}",
        namespace=system,
        webhook_port=port,
        workdir=workdir,
        values={r"webhook.namespaceSelector.matchLabels.kubernetes\.io/metadata\.name": workloads},
    )
    controller = ControllerProcess(
        [*installation.controller_args(f"127.0.0.1:{port}"), "--log-level=DEBUG"], workdir, name="chart-sa"
    )
    try:
        controller.start()
        yield Installed(installation, controller, workloads)
    finally:
        controller.stop()
        chartinstall.uninstall(cluster.local, installation)
        for name in (system, workloads):
            cluster.client.delete(f"/api/v1/namespaces/{name}")


def test_the_controller_holds_only_the_charts_rights(cluster: Cluster, installed: Installed) -> None:
    kubeconfig = installed.installation.kubeconfig

    def can(*args: str) -> bool:
        result = subprocess.run(
            [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", "auth", "can-i", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return result.stdout.strip() == "yes"

    assert can("create", "pods", "-n", installed.namespace) and can("patch", "pods/status", "-n", installed.namespace)
    assert not can("list", "secrets", "-n", installed.namespace)
    assert not can("delete", "nodes")
    wait_until(lambda: "became leader" in installed.controller.log_path.read_text(), 30)


def test_webhook_gates_the_spark_example_which_runs_to_completion(cluster: Cluster, installed: Installed) -> None:
    created = json.loads(
        installed.kubectl(cluster, "create", "-f", str(EXAMPLES / "spark" / "driver-pod.yaml"), "-o", "json").stdout
    )
    assert {"name": keys.GATE} in created["spec"]["schedulingGates"], "the webhook adds the gate at creation"
    namespace = installed.namespace
    cluster.wait_pod(namespace, "spark-pi-driver", is_running)
    installed.kubectl(cluster, "apply", "-f", str(EXAMPLES / "spark" / "executor-pods.yaml"))
    executors = [f"spark-pi-exec-{i}" for i in range(1, 5)]
    for name in executors:
        cluster.wait_pod(namespace, name, is_running)
    wait_until(lambda: not placeholders(cluster, namespace), 30)
    # Every member bound on its placeholder's node, as the controller saw it.
    wait_until(lambda: installed.controller.metrics()['yuniplace_swaps_total{outcome="landed"}'] == 5, 30)
    assert installed.controller.metrics()['yuniplace_swaps_total{outcome="moved"}'] == 0
    for name in ["spark-pi-driver", *executors]:
        finish(cluster, namespace, name)

    def completed() -> bool:
        pod = cluster.get_pod(namespace, "spark-pi-driver") or {}
        return (pod.get("metadata", {}).get("annotations") or {}).get(keys.STATE) == "Completed"

    wait_until(completed, 30)
    events = installed.kubectl(cluster, "get", "events").stdout
    for reason in ("TaskGroupMatch", "GangReservationComplete", "PlaceholderSwapped"):
        assert reason in events


def test_malformed_gang_pod_is_denied_at_kubectl_apply(cluster: Cluster, installed: Installed, tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad-driver\n  labels: {spark-app-selector: bad}\n"
        "  annotations:\n    yunikorn.apache.org/task-group-name: driver\n"
        '    yunikorn.apache.org/task-groups: \'[{"name": "driver", "minMember": 0, "minResource": {"cpu": "1"}}]\'\n'
        "spec:\n  containers: [{name: main, image: busybox}]\n"
    )
    result = installed.kubectl(cluster, "apply", "-f", str(manifest), check=False)
    assert result.returncode != 0
    assert "denied the request: yuniplace: pod bad-driver has invalid gang annotations: " in result.stderr
    assert "task-groups[driver].minMember: 0 must be an integer from 1 to 1000" in result.stderr
    assert cluster.get_pod(installed.namespace, "bad-driver") is None


def test_pod_without_gang_annotations_is_untouched(cluster: Cluster, installed: Installed) -> None:
    created = json.loads(
        installed.kubectl(cluster, "run", "plain", "--image=busybox", "--restart=Never", "-o", "json").stdout
    )
    assert not created["spec"].get("schedulingGates")
    assert keys.STATE not in (created["metadata"].get("annotations") or {})
    cluster.wait_pod(installed.namespace, "plain", is_bound)


def test_pods_written_for_yunikorn_are_gang_scheduled_with_the_charts_defaults(
    cluster: Cluster, installed: Installed
) -> None:
    """YuniKorn's Spark documentation sets `spark.kubernetes.scheduler.name=yunikorn`. No YuniKorn runs
    here, so the chart's default (`webhook.rewriteSchedulerName: auto`) hands the pod to yuniplace."""
    pod = gang_pod(
        "yunikorn-driver",
        "spark-docs",
        "driver",
        gated=False,
        task_groups=[{"name": "driver", "minMember": 1, "minResource": {"cpu": "100m", "memory": "128Mi"}}],
    )
    pod["spec"]["schedulerName"] = "yunikorn"
    created = cluster.create_pod(installed.namespace, pod)
    assert created["spec"]["schedulerName"] == "default-scheduler"
    assert {"name": keys.GATE} in created["spec"]["schedulingGates"]
    cluster.wait_pod(installed.namespace, "yunikorn-driver", is_running)
    wait_until(lambda: not placeholders(cluster, installed.namespace), 30)
