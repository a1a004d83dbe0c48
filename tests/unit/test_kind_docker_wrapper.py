"""controlplane/kind/docker: kind's `docker run --privileged` on hosts whose capability bounding set
lacks CAP_SYS_RESOURCE (where Docker cannot grant --privileged), and plain passthrough elsewhere."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

WRAPPER = Path(__file__).resolve().parents[2] / "controlplane" / "kind" / "docker"
CAP_SYS_RESOURCE = 24


def host_grants_sys_resource() -> bool:
    status = Path("/proc/self/status").read_text()
    bounding = next(line.split()[1] for line in status.splitlines() if line.startswith("CapBnd:"))
    return bool((int(bounding, 16) >> CAP_SYS_RESOURCE) & 1)


def run_wrapper(tmp_path: Path, *args: str, real: bool = True) -> subprocess.CompletedProcess[str]:
    """The wrapper first on PATH (through a symlink, as the tools folder has it), a fake docker after
    it that prints its arguments one per line."""
    wrapper_dir = tmp_path / "tools"
    wrapper_dir.mkdir(exist_ok=True)
    if not (wrapper_dir / "docker").exists():
        (wrapper_dir / "docker").symlink_to(WRAPPER)
    fake_dir = tmp_path / "real"
    fake_dir.mkdir(exist_ok=True)
    (fake_dir / "docker").write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")
    (fake_dir / "docker").chmod(0o755)
    if real:
        path = f"{wrapper_dir}:{fake_dir}:/usr/bin:/bin"
    else:  # the tools the wrapper itself runs, and no docker
        basics = tmp_path / "basics"
        basics.mkdir(exist_ok=True)
        for tool in ("bash", "dirname", "readlink"):
            (basics / tool).symlink_to(shutil.which(tool) or tool)
        path = f"{wrapper_dir}:{basics}"
    return subprocess.run(
        [str(wrapper_dir / "docker"), *args], capture_output=True, text=True, env={"PATH": path}, check=False
    )


def test_run_privileged_becomes_what_the_host_can_grant(tmp_path: Path) -> None:
    result = run_wrapper(tmp_path, "run", "--name", "node", "--privileged", "--tmpfs", "/tmp", "node-image")
    args = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    if host_grants_sys_resource():
        assert args == ["run", "--name", "node", "--privileged", "--tmpfs", "/tmp", "node-image"]
    else:
        assert args == [
            "run",
            "--name",
            "node",
            "--cap-add=ALL",
            "--cap-drop=SYS_RESOURCE",
            "--security-opt",
            "systempaths=unconfined",
            "--device-cgroup-rule=a *:* rwm",
            "--tmpfs",
            "/tmp",
            "node-image",
        ]


def test_exec_privileged_runs_with_the_containers_capabilities(tmp_path: Path) -> None:
    args = run_wrapper(tmp_path, "exec", "--privileged", "node", "cat", "/kind/version").stdout.splitlines()
    expected = ["exec", "node", "cat", "/kind/version"]
    assert args == (["exec", "--privileged", *expected[1:]] if host_grants_sys_resource() else expected)


def test_other_commands_pass_unchanged(tmp_path: Path) -> None:
    args = ["inspect", "--format", "{{.Id}}", "--privileged-looking-value", "x y"]
    assert run_wrapper(tmp_path, *args).stdout.splitlines() == args


def test_without_a_real_docker_it_says_so(tmp_path: Path) -> None:
    result = run_wrapper(tmp_path, "ps", real=False)
    assert result.returncode == 127 and "no docker client on PATH" in result.stderr
