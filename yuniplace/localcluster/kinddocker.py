"""Docker for kind clusters: the engine installed from Debian's docker.io and started when absent,
and the few docker calls the image builds make."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import IO

from yuniplace.localcluster.build import BuildError
from yuniplace.localcluster.cluster import wait_until

DOCKERD_LOG = Path("/var/log/yuniplace-dockerd.log")
DOCKERD_START_S = 60.0
_apt_updated = False


class DockerError(BuildError):
    """Docker is missing and cannot be installed or started here; the message says why."""


def docker(*args: str, check: bool = True, stdin: IO[bytes] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["docker", *args], stdin=stdin, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise DockerError(
            f"docker {' '.join(args[:3])} ... failed ({result.returncode}): {result.stderr.strip()[-3000:]}"
        )
    return result


def image_label(image: str, label: str) -> str | None:
    """A label of a local image, None when the image (or the label) is absent."""
    result = docker("image", "inspect", "--format", "{{json .Config.Labels}}", image, check=False)
    if result.returncode != 0:
        return None
    labels = json.loads(result.stdout.strip() or "null") or {}
    return labels.get(label)


def ensure_package(command: str, package: str) -> None:
    """Install a Debian package when its command is missing (as root, with apt-get)."""
    global _apt_updated
    if shutil.which(command):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise DockerError(f"{command} is missing: install Debian's {package} package (apt-get install {package})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if not _apt_updated:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, check=False)
        _apt_updated = True
    result = subprocess.run(
        ["apt-get", "install", "-y", "-q", package], capture_output=True, text=True, env=env, check=False
    )
    if result.returncode != 0 or not shutil.which(command):
        raise DockerError(f"apt-get install {package} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")


def docker_ready() -> bool:
    return shutil.which("docker") is not None and docker("info", check=False).returncode == 0


def ensure_docker() -> None:
    """A running Docker engine: Debian's docker.io installed and dockerd started (as root) when none
    answers. The engine is left running for later builds and clusters."""
    if docker_ready():
        return
    ensure_package("dockerd", "docker.io")
    if os.geteuid() != 0:
        raise DockerError("the Docker engine is not running and only root can start it here (run dockerd)")
    with DOCKERD_LOG.open("ab") as log:
        subprocess.Popen(
            ["dockerd"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        wait_until(docker_ready, DOCKERD_START_S, interval_s=0.5)
    except TimeoutError:
        tail = "\n".join(DOCKERD_LOG.read_text(errors="replace").splitlines()[-20:])
        raise DockerError(
            f"dockerd did not answer within {DOCKERD_START_S:.0f}s; end of {DOCKERD_LOG}:\n{tail}"
        ) from None
