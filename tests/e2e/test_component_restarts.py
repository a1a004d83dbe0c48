"""Stopping and starting one component of the local control plane while the others run: each comes back
on its own ports with its own flags, and the cluster works after (etcd keeps its objects, a restarted
kube-scheduler schedules, a restarted kube-controller-manager runs Jobs, a restarted kwok runs pods).
A cluster of their own: stopping etcd or the API server would cut every other test off."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import kubernetes_version, skip_without_go
from tests.e2e.support import Cluster, is_bound, is_running, is_succeeded, make_pod
from yuniplace.kube import NotFound
from yuniplace.localcluster import LocalCluster, NodePool, wait_until
from yuniplace.localcluster.cluster import COMPONENTS

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster"
NAMESPACE = "default"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def own() -> Iterator[Cluster]:
    skip_without_go()
    local = LocalCluster(f"restarts-{uuid.uuid4().hex[:6]}")
    try:
        local.up([NodePool(count=2, cpu="4", memory="8Gi")], kubernetes=kubernetes_version())
        yield Cluster(local)
    finally:
        local.down(quiet=True)


def command_line(cluster: Cluster, component: str) -> list[str]:
    return next(p.argv for p in cluster.local.processes() if p.name == component)


def pid_of(cluster: Cluster, component: str) -> int:
    return next(p.pid for p in cluster.local.processes() if p.name == component)


def others_untouched(cluster: Cluster, component: str, before: dict[str, int]) -> None:
    after = {p.name: p.pid for p in cluster.local.processes()}
    assert {name: pid for name, pid in after.items() if name != component} == {
        name: pid for name, pid in before.items() if name != component
    }
    assert after[component] != before[component]


def pod_runs(cluster: Cluster, name: str) -> None:
    cluster.create_pod(NAMESPACE, make_pod(name))
    cluster.wait_pod(NAMESPACE, name, is_running)
    cluster.client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")


def test_etcd_stopped_and_started_keeps_every_object(own: Cluster) -> None:
    name = f"kept-{uuid.uuid4().hex[:6]}"
    own.client.create(
        f"/api/v1/namespaces/{NAMESPACE}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}},
    )
    before = {p.name: p.pid for p in own.local.processes()}
    argv = command_line(own, "etcd")

    stopped = run("stop", "--component", "etcd", "--name", own.local.name)
    assert stopped.returncode == 0, stopped.stderr
    status = json.loads(run("status", "--name", own.local.name).stdout)
    assert status["components"]["etcd"] == "stopped"
    assert all(status["components"][c] == "running" for c in COMPONENTS if c != "etcd")
    assert not status["running"]

    started = run("start", "--component", "etcd", "--name", own.local.name)
    assert started.returncode == 0, started.stderr
    assert "etcd of cluster" in started.stderr and "healthy" in started.stderr
    others_untouched(own, "etcd", before)
    assert command_line(own, "etcd") == argv
    wait_until(lambda: own.local.is_running(), 30)
    assert own.client.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}")["data"] == {"k": "v"}
    pod_runs(own, f"after-etcd-{uuid.uuid4().hex[:6]}")


def test_the_api_server_killed_comes_back_on_its_port(own: Cluster) -> None:
    before = {p.name: p.pid for p in own.local.processes()}
    argv = command_line(own, "kube-apiserver")
    own.local.stop_component("kube-apiserver", kill=True)
    with pytest.raises(Exception):  # noqa: B017 - refused or reset: nothing listens
        own.client.request("GET", "/version", retry=False)
    own.local.start_component("kube-apiserver")
    others_untouched(own, "kube-apiserver", before)
    assert command_line(own, "kube-apiserver") == argv
    # The same kubeconfig (the same address) reaches it.
    assert own.client.get("/version")["gitVersion"].startswith(f"v{kubernetes_version()}.")
    pod_runs(own, f"after-apiserver-{uuid.uuid4().hex[:6]}")


def test_a_pod_created_while_the_scheduler_is_down_runs_once_it_is_back(own: Cluster) -> None:
    before = {p.name: p.pid for p in own.local.processes()}
    own.local.stop_component("kube-scheduler")
    name = f"waits-{uuid.uuid4().hex[:6]}"
    own.create_pod(NAMESPACE, make_pod(name))
    restarted = run("restart", "--component", "kube-scheduler", "--name", own.local.name)
    assert restarted.returncode == 1 and "kube-scheduler of cluster" in restarted.stderr
    assert "is already stopped" in restarted.stderr
    own.local.start_component("kube-scheduler")
    others_untouched(own, "kube-scheduler", before)
    own.wait_pod(NAMESPACE, name, is_running)
    own.client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
    pod_runs(own, f"after-scheduler-{uuid.uuid4().hex[:6]}")


def test_a_job_created_while_the_controller_manager_is_down_completes_once_it_is_back(own: Cluster) -> None:
    before = {p.name: p.pid for p in own.local.processes()}
    own.local.stop_component("kube-controller-manager")
    name = f"job-{uuid.uuid4().hex[:6]}"
    template = make_pod("unused")
    own.client.create(
        f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": {"job": name}}, "spec": template["spec"]}},
        },
    )
    own.local.start_component("kube-controller-manager")
    others_untouched(own, "kube-controller-manager", before)

    def succeeded() -> bool:
        return bool(
            own.client.get(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}").get("status", {}).get("succeeded")
        )

    wait_until(succeeded, 60)
    pods = own.client.get(f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=f"job={name}")["items"]
    assert pods and all(is_succeeded(pod) for pod in pods)
    own.client.delete(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}", propagationPolicy="Background")


def test_a_pod_bound_while_kwok_is_down_runs_once_it_is_back(own: Cluster) -> None:
    before = {p.name: p.pid for p in own.local.processes()}
    own.local.stop_component("kwok")
    name = f"bound-{uuid.uuid4().hex[:6]}"
    own.create_pod(NAMESPACE, make_pod(name))
    own.wait_pod(NAMESPACE, name, is_bound)  # kube-scheduler binds it; nothing runs it yet
    own.local.start_component("kwok")
    others_untouched(own, "kwok", before)
    own.wait_pod(NAMESPACE, name, is_running)
    own.client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")


def test_component_commands_refuse_what_cannot_be_done_with_a_clear_message(own: Cluster) -> None:
    unknown = run("stop", "--component", "kubelet", "--name", own.local.name)
    assert unknown.returncode == 2 and "invalid choice: 'kubelet'" in unknown.stderr
    assert all(component in unknown.stderr for component in COMPONENTS)

    running = run("start", "--component", "kwok", "--name", own.local.name)
    assert running.returncode == 1
    assert f"kwok of cluster '{own.local.name}' is already running" in running.stderr

    absent = run("stop", "--component", "etcd", "--name", f"absent-{uuid.uuid4().hex[:6]}")
    assert absent.returncode == 1 and "is not running (scripts/cluster up" in absent.stderr
    assert own.local.is_running()


def test_objects_written_before_a_kill_of_etcd_are_there_after(own: Cluster) -> None:
    """SIGKILL rather than a clean stop: what the API server acknowledged is in etcd's data directory."""
    name = f"acked-{uuid.uuid4().hex[:6]}"
    own.client.create(
        f"/api/v1/namespaces/{NAMESPACE}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}},
    )
    own.local.restart_component("etcd", kill=True)

    def readable() -> bool:
        try:
            return own.client.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}")["data"] == {"k": "v"}
        except NotFound:
            return False

    assert wait_until(readable, 60)
