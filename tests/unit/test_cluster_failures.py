"""How a failing component is reported and how processes are ended, with real child processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yuniplace.localcluster import components as comp
from yuniplace.localcluster.cluster import ClusterError, LocalCluster, Process


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
