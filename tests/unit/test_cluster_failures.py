"""How a failing component is reported and how processes are ended, with real child processes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from yuniplace.localcluster import components as comp
from yuniplace.localcluster.cluster import ClusterError, LocalCluster, Process
from yuniplace.localcluster.ports import free_ports


@pytest.fixture
def cluster(tmp_path: Path) -> LocalCluster:
    local = LocalCluster("unit", root=tmp_path)
    local.layout.logs.mkdir(parents=True)
    (local.layout.pki).mkdir()
    return local


def test_a_component_that_exits_is_named_with_its_log_tail(cluster: LocalCluster) -> None:
    failing = comp.Component(
        "kube-fake", ["sh", "-c", "echo 'flag provided but not defined: -bogus'; exit 3"], "http://127.0.0.1:9/healthz"
    )
    state = {"processes": []}
    cluster._write_state(state)
    with pytest.raises(ClusterError) as raised:
        cluster._launch(failing, state, timeout_s=10)
    assert "kube-fake exited" in str(raised.value)
    assert "flag provided but not defined: -bogus" in str(raised.value)


def test_a_component_that_never_gets_healthy_times_out_with_its_name(cluster: LocalCluster) -> None:
    slow = comp.Component("kube-slow", ["sh", "-c", "echo starting; exec sleep 60"], "http://127.0.0.1:9/healthz")
    state = {"processes": []}
    cluster._write_state(state)
    with pytest.raises(ClusterError, match=r"kube-slow did not become ready within 1s(.|\n)*starting"):
        cluster._launch(slow, state, timeout_s=1)
    processes = cluster.processes()
    assert processes and processes[0].alive()
    assert cluster.down(quiet=True)
    assert not processes[0].alive()
    assert not cluster.layout.root.exists()


def test_down_of_a_cluster_that_never_ran_is_harmless(tmp_path: Path) -> None:
    assert LocalCluster("never", root=tmp_path).down(quiet=True) is False


def test_names_are_restricted_to_what_a_directory_and_process_can_carry() -> None:
    with pytest.raises(ClusterError, match="letters, digits and dashes"):
        LocalCluster("../etc")


def test_a_recycled_pid_is_not_ours() -> None:
    """Our own PID with another start time stands for a PID the kernel gave to a new process."""
    assert not Process("recycled", os.getpid(), start_ticks=1, log="").alive()


def _serving(cluster: LocalCluster, name: str) -> comp.Component:
    """A stand-in for a component: an HTTP server answering 200 on / at a free port."""
    (port,) = free_ports(1)
    argv = [
        sys.executable,
        "-m",
        "http.server",
        str(port),
        "--bind",
        "127.0.0.1",
        "--directory",
        str(cluster.layout.root),
    ]
    return comp.Component(name, argv, f"http://127.0.0.1:{port}/")


@pytest.fixture
def running(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """A cluster of two stand-in components, etcd and kwok, both healthy."""
    state: dict[str, Any] = {"processes": [], "kubeconfig": "", "versions": {}}
    cluster._write_state(state)
    for name in ("etcd", "kwok"):
        cluster._launch(_serving(cluster, name), state, timeout_s=30)
    yield cluster
    cluster.down(quiet=True)


def test_a_stopped_component_starts_again_with_its_command_line(running: LocalCluster) -> None:
    before = {p.name: p for p in running.processes()}
    running.stop_component("etcd")
    assert not before["etcd"].alive() and before["kwok"].alive()
    assert [p.name for p in running.stopped()] == ["etcd"]
    assert running.status()["components"] == {"kwok": "running", "etcd": "stopped"}
    assert not running.is_running()

    running.start_component("etcd", timeout_s=30)
    after = {p.name: p for p in running.processes()}
    assert after["etcd"].pid != before["etcd"].pid
    assert after["etcd"].argv == before["etcd"].argv and after["etcd"].health_url == before["etcd"].health_url
    assert after["kwok"].pid == before["kwok"].pid
    assert running.is_running() and not running.stopped()


def test_a_killed_component_is_gone_at_once_and_restarts(running: LocalCluster) -> None:
    etcd = next(p for p in running.processes() if p.name == "etcd")
    running.restart_component("etcd", kill=True, timeout_s=30)
    assert not etcd.alive()
    assert running.is_running()


def test_component_errors_say_what_is_wrong(running: LocalCluster, tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"unknown component 'etc': the components are etcd, kube-apiserver"):
        running.stop_component("etc")
    with pytest.raises(ClusterError, match="etcd of cluster 'unit' is already running"):
        running.start_component("etcd")
    running.stop_component("kwok")
    with pytest.raises(ClusterError, match="kwok of cluster 'unit' is already stopped"):
        running.stop_component("kwok")
    with pytest.raises(ClusterError, match="cluster 'idle' is not running"):
        LocalCluster("idle", root=tmp_path / "other").start_component("kwok")


def test_up_refuses_a_cluster_with_a_component_stopped(running: LocalCluster) -> None:
    running.stop_component("kwok")
    with pytest.raises(ClusterError, match="running with kwok stopped"):
        running.up()
    assert next(p for p in running.processes() if p.name == "etcd").alive()
