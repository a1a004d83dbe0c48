"""Deleting a kind cluster whose node Docker cannot kill: its frozen cgroups are thawed first."""

from __future__ import annotations

from pathlib import Path

from yuniplace.localcluster.kind import thaw


def state(path: Path, value: str) -> Path:
    path.mkdir(parents=True)
    (path / "freezer.state").write_text(value)
    return path / "freezer.state"


def test_only_the_frozen_cgroups_of_the_named_containers_are_thawed(tmp_path: Path) -> None:
    node = tmp_path / "docker" / "abc"
    top = state(node, "THAWED")
    probe = state(node / "kubelet.slice" / "pod.slice" / "cri-containerd-1.scope", "FROZEN")
    systemd = state(tmp_path / "system.slice" / "docker-def.scope" / "kubelet.slice", "FROZEN")
    other = state(tmp_path / "docker" / "zzz" / "inner", "FROZEN")
    assert thaw(["abc", "def"], tmp_path) == 2
    assert probe.read_text() == "THAWED"
    assert systemd.read_text() == "THAWED"
    assert top.read_text() == "THAWED"
    assert other.read_text() == "FROZEN"  # another container's: not ours to touch
    assert thaw(["abc", "def"], tmp_path) == 0
    assert thaw(["missing"], tmp_path / "nowhere") == 0
