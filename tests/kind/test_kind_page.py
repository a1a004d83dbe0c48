"""The docs' "On kind, with Helm" commands (docs/getting-started/kind.md), run as written, in one shell, from a clean checkout's
root: a kind cluster of its own (KIND_CLUSTER_NAME and KUBECONFIG keep it apart from the session's and
from the user's), yuniplace loaded and installed with Helm, the batch Job applied, and the gang's story
read from `kubectl events -w` (oldest first, then as they come) until both pods are bound on the nodes admission chose for them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path

from tests.kind.support import REPO, kind_page_block, wait
from yuniplace.localcluster.kind import KindCluster
from yuniplace.localcluster.kindimage import KindImages

GANG_FLOW = ("TaskGroupMatch", "GangStarting", "GangStarted")


def reasons(lines: list[str]) -> list[tuple[str, str]]:
    """(reason, whole line) of each `kubectl events` row (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE)."""
    rows = []
    for line in lines:
        columns = line.split()
        if len(columns) >= 4 and columns[1] in ("Normal", "Warning"):
            rows.append((columns[2], line))
    return rows


def test_the_kind_page_commands_run_as_written(images: KindImages, tmp_path: Path) -> None:
    block = kind_page_block()
    assert "kind create cluster" in block and "helm install" in block and "kubectl events -w" in block
    name = f"yp-readme-{os.getpid()}"
    script = tmp_path / "readme.sh"
    script.write_text("set -euo pipefail\n" + block)
    env = {**os.environ, "KIND_CLUSTER_NAME": name, "KUBECONFIG": str(tmp_path / "kubeconfig")}
    process = subprocess.Popen(
        ["bash", str(script)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    output = process.stdout
    assert output is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(output.readline, "")), daemon=True)
    reader.start()

    def flow_told() -> bool:
        if process.poll() is not None:
            raise AssertionError(
                f"the kind page's commands stopped ({process.returncode}):\n{''.join(lines)[-4000:]}\n"
                f"what the cluster held then:\n{_release_state(env)}"
            )
        seen = reasons(list(lines))
        started = [
            line
            for reason, line in seen
            if reason == "GangStarted" and "2 member(s) bound" in line and "2 on the nodes admission chose" in line
        ]
        return all(any(reason == r for reason, _ in seen) for r in GANG_FLOW) and len(started) == 1

    try:
        wait(flow_told, 600, "the batch Job's gang flow in `kubectl events -w`")
        order = [reason for reason, _ in reasons(list(lines)) if reason in GANG_FLOW]
        firsts = [order.index(reason) for reason in GANG_FLOW]
        assert firsts == sorted(firsts), f"events out of order: {order}"
        placeholders = [line for _, line in reasons(list(lines)) if "pod/tg-batch-sleep-job-9-" in line]
        assert not placeholders, placeholders  # both pods exist and fit: no placeholder is needed
    finally:
        with contextlib.suppress(ProcessLookupError):  # the commands may have stopped by themselves
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
        KindCluster(name, images).down()


def _release_state(env: dict[str, str]) -> str:
    """The release's pods, their events and the controller's last log lines, for a failed install."""
    commands = (
        ["kubectl", "get", "pods", "-A", "-o", "wide"],
        ["kubectl", "get", "events", "-n", "yuniplace-system", "--sort-by=.lastTimestamp"],
        [
            "kubectl",
            "logs",
            "-n",
            "yuniplace-system",
            "-l",
            "app.kubernetes.io/name=yuniplace",
            "--tail=40",
            "--all-containers",
        ],
    )
    shown = []
    for command in commands:
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
        shown.append(f"$ {' '.join(command)}\n{run.stdout}{run.stderr}")
    return "\n".join(shown)[-6000:]
