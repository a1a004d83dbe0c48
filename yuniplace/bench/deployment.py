"""yuniplace as its chart deploys it, run from this checkout beside a local cluster: controller replicas
under leader election, each started again when it exits as its Deployment's pods are, and the webhook
in a process of its own. What a fault campaign kills, cuts off and measures."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from yuniplace.kube import KubeClient, NotFound
from yuniplace.localcluster import wait_until
from yuniplace.localcluster.chartinstall import Installation
from yuniplace.localcluster.ports import free_ports

READY_TIMEOUT_S = 60.0
SUPERVISE_INTERVAL_S = 0.5
# A replica that exits is started again after these waits, the last repeated, as the kubelet backs off
# a crashing container (capped far lower than its five minutes: a campaign is short).
RESTART_BACKOFF_S = (1.0, 2.0, 4.0, 8.0)
# What `yuniplace webhook` takes of the controller's arguments the chart renders.
WEBHOOK_FLAGS = ("--rewrite-scheduler-name", "--no-trust-controllers", "--system-users", "--external-")


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@dataclass
class Process:
    """One yuniplace process: its command line, its log, and how often it was started."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    popen: subprocess.Popen[bytes] | None = None
    port: int = 0
    starts: int = 0

    def start(self) -> None:
        (self.port,) = free_ports(1)
        self.starts += 1
        with self.log.open("ab") as output:
            output.write(f"--- start {self.starts} at {time.strftime('%H:%M:%S')}\n".encode())
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "yuniplace", *self.argv, f"--http-address=127.0.0.1:{self.port}"],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
            )

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None and self.popen.poll() is None else None

    def exited(self) -> int | None:
        """Its exit code once it has exited, else None."""
        return None if self.popen is None else self.popen.poll()

    def ready(self) -> bool:
        code = self.exited()
        if code is not None:
            raise RuntimeError(f"{self.name} exited ({code}); see {self.log}")
        return _ready(self.port)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, as when its node dies."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(30)

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()


class Deployment:
    """Controller replicas under leader election, started again whenever one exits (after a backoff),
    unless held down for a while as a fault says."""

    def __init__(
        self,
        client: KubeClient,
        installation: Installation,
        log_dir: Path,
        *,
        replicas: int = 2,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self._client = client
        self._installation = installation
        argv = [
            "controller",
            f"--kubeconfig={installation.kubeconfig}",
            "--leader-elect",
            f"--leader-election-namespace={installation.namespace}",
            f"--leader-election-id={installation.lease}",
            *installation.extra_args,
            *extra_args,
        ]
        self.replicas = [
            Process(f"replica-{i}", argv, log_dir / f"controller-{i}.log", {"POD_NAME": f"replica-{i}"})
            for i in range(replicas)
        ]
        self.restarts: list[tuple[float, str, int]] = []  # when, which, its exit code
        self._held: dict[str, float] = {}  # replica -> not started again before then
        self._backoff: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name="deployment", daemon=True)

    def start(self) -> None:
        for replica in self.replicas:
            replica.start()
        for replica in self.replicas:
            wait_until(replica.ready, READY_TIMEOUT_S)
        self._thread.start()

    def _supervise(self) -> None:
        while not self._stop.wait(SUPERVISE_INTERVAL_S):
            for replica in self.replicas:
                code = replica.exited()
                if code is None:
                    continue
                now = time.monotonic()
                with self._lock:
                    held = self._held.get(replica.name)
                    if held is None:
                        attempt = self._backoff.get(replica.name, 0)
                        self._held[replica.name] = now + RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)]
                        self._backoff[replica.name] = attempt + 1
                        self.restarts.append((time.time(), replica.name, code))
                        continue
                    if now < held:
                        continue
                    del self._held[replica.name]
                replica.start()
            for replica in self.replicas:
                if replica.exited() is None and replica.starts and _ready(replica.port):
                    with self._lock:
                        self._backoff.pop(replica.name, None)

    def leader(self) -> Process | None:
        """The replica holding the Lease now, if a live one does."""
        installation = self._installation
        try:
            lease = self._client.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{installation.namespace}/leases/{installation.lease}"
            )
        except NotFound:
            return None
        holder = lease.get("spec", {}).get("holderIdentity")
        return next((r for r in self.replicas if r.name == holder and r.exited() is None), None)

    def kill(self, replica: Process, down_s: float) -> None:
        """SIGKILL one replica; it is started again `down_s` seconds later."""
        with self._lock:
            self._held[replica.name] = time.monotonic() + down_s
            self.restarts.append((time.time(), replica.name, -9))
        replica.kill()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(RuntimeError):
            self._thread.join(10)
        for replica in self.replicas:
            replica.stop()


def webhook_process(installation: Installation, address: str, log_dir: Path) -> Process:
    """`yuniplace webhook` serving the chart's webhooks at `address` with the chart's certificate."""
    argv = [
        "webhook",
        f"--webhook-address={address}",
        f"--tls-cert-file={installation.tls_cert}",
        f"--tls-key-file={installation.tls_key}",
        f"--kubeconfig={installation.kubeconfig}",
        *(a for a in installation.extra_args if a.startswith(WEBHOOK_FLAGS)),
    ]
    return Process("webhook", argv, log_dir / "webhook.log")
