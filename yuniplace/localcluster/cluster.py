"""A local Kubernetes cluster of real components on loopback: etcd, kube-apiserver, kube-scheduler,
kube-controller-manager and kwok, started as background processes that outlive the command that
started them and are found again through a state file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from yuniplace.kube import KubeClient, NotFound
from yuniplace.localcluster import components as comp
from yuniplace.localcluster.build import DEFAULT_KUBERNETES, Binaries, ensure_built
from yuniplace.localcluster.nodes import NodePool, create_nodes, ready_node_names, release_node_leases
from yuniplace.localcluster.pki import CertificateAuthority, write_service_account_keys
from yuniplace.localcluster.ports import free_ports

DEFAULT_NAME = "default"
COMPONENT_TIMEOUT_S = 90.0
POLL_INTERVAL_S = 0.1
STOP_TIMEOUT_S = 15.0
LOG_TAIL_LINES = 30
# The parts of the control plane that can be stopped and started one at a time, in the order `up` starts them.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

# Client identities: user (CN) and group (O) as the apiserver's x509 authenticator reads them.
IDENTITIES = {
    "admin": ("kubernetes-admin", "system:masters"),
    "kube-scheduler": ("system:kube-scheduler", None),
    "kube-controller-manager": ("system:kube-controller-manager", None),
    # kwok plays every kubelet at once, so it needs more than one node's NodeRestriction-bound rights.
    "kwok": ("kwok-controller", "system:masters"),
}


class ClusterError(RuntimeError):
    """A cluster could not be started, found or stopped; the message says which part and why."""


def command_dir() -> Path | None:
    """The folder of the `yuniplace` and `kubectl-yuniplace` commands, as this interpreter installed them
    (the virtualenv's bin that scripts/venv-python makes): `env` puts it on PATH, so a fresh clone's
    shell has the commands the docs run. None when they are not installed as commands."""
    folder = Path(sysconfig.get_path("scripts"))
    return folder if (folder / "yuniplace").is_file() else None


def state_root() -> Path:
    return Path(os.environ.get("YUNIPLACE_CLUSTERS_DIR", Path(tempfile.gettempdir()) / "yuniplace-clusters"))


def _start_ticks(pid: int) -> int | None:
    """The start time of a live process from /proc, so a recycled PID is never taken for ours.
    None for a process that is gone or a zombie (exited, not yet reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Process:
    name: str
    pid: int
    start_ticks: int
    log: str
    # How it was started, so a component stopped on purpose comes back exactly as it was.
    argv: list[str] = field(default_factory=list)
    health_url: str = ""

    def alive(self) -> bool:
        return _start_ticks(self.pid) == self.start_ticks

    @property
    def component(self) -> comp.Component:
        return comp.Component(self.name, self.argv, self.health_url)


def _gone(process: Process) -> bool:
    return not process.alive()


def wait_until(condition: Callable[[], Any], timeout_s: float, interval_s: float = POLL_INTERVAL_S) -> Any:
    """Poll `condition` until it returns something truthy and return that; TimeoutError at the
    deadline. An exception from `condition` ends the wait at once."""
    retrying = Retrying(
        stop=stop_after_delay(timeout_s), wait=wait_fixed(interval_s), retry=retry_if_result(lambda result: not result)
    )
    try:
        return retrying(condition)
    except RetryError:
        raise TimeoutError(f"condition not met within {timeout_s:.0f}s") from None


class LocalCluster:
    """One named cluster. `up` starts it, `down` stops it; both are safe to repeat."""

    def __init__(self, name: str = DEFAULT_NAME, *, root: Path | None = None) -> None:
        if not name.replace("-", "").isalnum():
            raise ClusterError(f"cluster name {name!r} must be letters, digits and dashes")
        self.name = name
        self.layout = comp.Layout((root or state_root()) / name)
        self._state_file = self.layout.root / "state.json"

    # -- state ------------------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.layout.admin_kubeconfig

    def _read_state(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._state_file.read_text()))
        except (OSError, ValueError):
            return None

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self._state_file)

    def processes(self) -> list[Process]:
        state = self._read_state() or {}
        return [Process(**p) for p in state.get("processes", [])]

    def bin_dir(self) -> Path:
        state = self._read_state()
        if state is None:
            raise ClusterError(f"cluster {self.name!r} is not running (scripts/cluster up --name {self.name})")
        return Path(state["bin_dir"])

    def stopped(self) -> list[Process]:
        """Components stopped on purpose (`stop_component`), to be started again as they were."""
        state = self._read_state() or {}
        return [Process(**p) for p in state.get("stopped", [])]

    def is_running(self) -> bool:
        """Every component runs: none exited, none stopped."""
        processes = self.processes()
        return bool(processes) and all(p.alive() for p in processes) and not self.stopped()

    def client(self) -> KubeClient:
        return KubeClient.from_kubeconfig(str(self.kubeconfig))

    # -- up ---------------------------------------------------------------------------------------

    def up(
        self,
        pools: Sequence[NodePool] = (NodePool(),),
        *,
        kubernetes: str = DEFAULT_KUBERNETES,
        features: comp.Features = comp.Features(),
        timeout_s: float = COMPONENT_TIMEOUT_S,
        binaries: Binaries | None = None,
        report: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> dict[str, float]:
        """Start a cluster of one supported Kubernetes minor version (with `features` switched on) and
        return how long each stage took (seconds since the start). On failure every started process is
        stopped and the logs are kept for inspection."""
        if self.is_running():
            raise ClusterError(
                f"cluster {self.name!r} is already running (scripts/cluster down --name {self.name} stops it)"
            )
        if any(p.alive() for p in self.processes()) and self.stopped():
            names = ", ".join(p.name for p in self.stopped())
            raise ClusterError(
                f"cluster {self.name!r} is running with {names} stopped (scripts/cluster start --component NAME "
                f"--name {self.name} starts it again; scripts/cluster down --name {self.name} stops the cluster)"
            )
        self.down(quiet=True)
        binaries = binaries or ensure_built(kubernetes)
        started = time.monotonic()
        timings: dict[str, float] = {}

        def mark(stage: str, detail: str = "") -> None:
            timings[stage] = round(time.monotonic() - started, 2)
            report(f"  {stage} ready{detail} ({timings[stage]:.1f}s)")

        for directory in (self.layout.root, self.layout.pki, self.layout.logs):
            directory.mkdir(parents=True, exist_ok=True)
        ports = comp.Ports(*free_ports(6))
        self._write_pki()
        state: dict[str, Any] = {
            "name": self.name,
            "bin_dir": str(binaries.bin_dir),
            "versions": binaries.versions,
            "feature_gates": dict(features.gates),
            "apis": list(features.apis),
            "ports": ports.__dict__,
            "kubeconfig": str(self.kubeconfig),
            "processes": [],
        }
        self._write_state(state)
        switched_on = ", ".join([*(f"{g}={str(v).lower()}" for g, v in features.gates.items()), *features.apis])
        report(
            f"Starting cluster {self.name!r} (Kubernetes {binaries.versions['kubernetes']}"
            f"{'; ' + switched_on if switched_on else ''}) in {self.layout.root}"
        )
        try:
            self._launch(comp.etcd(binaries.bin_dir, self.layout, ports), state, timeout_s)
            mark("etcd")
            self._launch(comp.kube_apiserver(binaries.bin_dir, self.layout, ports, features), state, timeout_s)
            mark("kube-apiserver")
            self._write_kubeconfigs(f"https://127.0.0.1:{ports.apiserver}")
            (self.layout.root / "kube-scheduler.yaml").write_text(comp.scheduler_configuration(self.layout))
            (self.layout.root / "kwok.yaml").write_text(comp.kwok_stages())
            rest = [
                comp.kube_controller_manager(binaries.bin_dir, self.layout, ports, features),
                comp.kube_scheduler(binaries.bin_dir, self.layout, ports, features),
                comp.kwok(binaries.bin_dir, self.layout, ports),
            ]
            for component in rest:
                self._spawn(component, state)
            client = self.client()
            for pool in pools:
                create_nodes(client, pool)
            for component in rest:
                self._wait_healthy(component, state, timeout_s)
                mark(component.name)
            expected = sum(pool.count for pool in pools)
            self._wait_for(
                "kwok", state, lambda: len(ready_node_names(client)) >= expected, timeout_s, f"{expected} nodes Ready"
            )
            mark("nodes", f": {expected} Ready")
            self._wait_for(
                "kube-controller-manager",
                state,
                lambda: self._service_account_exists(client, "default", "default"),
                timeout_s,
                "the default ServiceAccount of namespace default",
            )
            mark("service accounts")
        except BaseException:
            self._stop_processes(self.processes())
            raise
        report(f"Cluster {self.name!r} is up in {timings['service accounts']:.1f}s. Use it with:")
        report(f'  eval "$(scripts/cluster env --name {self.name})"')
        return timings

    def add_nodes(self, pool: NodePool, *, timeout_s: float = COMPONENT_TIMEOUT_S) -> list[str]:
        """Add a pool of nodes to a running cluster and wait until kwok has made them Ready."""
        client = self.client()
        names = create_nodes(client, pool)
        wait_until(lambda: set(names) <= ready_node_names(client), timeout_s)
        return names

    def create_namespace(self, name: str, *, labels: dict[str, str] | None = None, timeout_s: float = 30.0) -> None:
        """Create a namespace and wait until pods can be created in it: the ServiceAccount admission
        plugin refuses pods until kube-controller-manager has made the namespace's default account."""
        client = self.client()
        client.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels or {}}})
        wait_until(lambda: self._service_account_exists(client, name, "default"), timeout_s)

    @staticmethod
    def _service_account_exists(client: KubeClient, namespace: str, name: str) -> bool:
        try:
            client.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}")
        except NotFound:
            return False
        return True

    def _write_pki(self) -> None:
        ca = CertificateAuthority(self.layout.pki, f"yuniplace-local-{self.name}-ca")
        ca.issue(
            "apiserver",
            "kube-apiserver",
            dns_names=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            ip_addresses=("127.0.0.1", "10.96.0.1"),
        )
        for stem, (user, group) in IDENTITIES.items():
            ca.issue(stem, user, organization=group, dns_names=("localhost",), ip_addresses=("127.0.0.1",))
        write_service_account_keys(self.layout.pki)

    def _write_kubeconfigs(self, server: str) -> None:
        ca = self.layout.cert("ca")
        for stem, (user, _) in IDENTITIES.items():
            text = comp.kubeconfig(server, ca, self.layout.cert(stem), self.layout.key(stem), user)
            path = self.kubeconfig if stem == "admin" else self.layout.kubeconfig(stem)
            path.write_text(text)
            path.chmod(0o600)

    def _spawn(self, component: comp.Component, state: dict[str, Any]) -> None:
        log = self.layout.logs / f"{component.name}.log"
        with log.open("ab") as output:
            # A session of its own: the component outlives this command and `down` can end its group.
            child = subprocess.Popen(
                component.argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=self.layout.root,
                start_new_session=True,
            )
        ticks = _start_ticks(child.pid)
        if ticks is None:
            raise ClusterError(f"{component.name} exited at once:\n{_tail(log)}")
        process = Process(component.name, child.pid, ticks, str(log), component.argv, component.health_url)
        state["processes"].append(process.__dict__)
        self._write_state(state)

    def spawn(self, name: str, argv: list[str], health_url: str, *, timeout_s: float = COMPONENT_TIMEOUT_S) -> None:
        """Run another process as part of this cluster (a controller under test, say) and wait until
        `health_url` answers 200: its log goes beside the components' and `down` stops it with them."""
        state = self._read_state()
        if state is None:
            raise ClusterError(f"cluster {self.name!r} is not running")
        self._launch(comp.Component(name, argv, health_url), state, timeout_s)

    def set_note(self, key: str, value: str) -> None:
        """Remember a small fact about the cluster (an address, say) in its state file."""
        state = self._read_state()
        if state is None:
            raise ClusterError(f"cluster {self.name!r} is not running")
        state.setdefault("notes", {})[key] = value
        self._write_state(state)

    def note(self, key: str) -> str:
        return str((self._read_state() or {}).get("notes", {}).get(key, ""))

    def _launch(self, component: comp.Component, state: dict[str, Any], timeout_s: float) -> None:
        self._spawn(component, state)
        self._wait_healthy(component, state, timeout_s)

    def _wait_healthy(self, component: comp.Component, state: dict[str, Any], timeout_s: float) -> None:
        http = urllib3.PoolManager(
            cert_reqs="CERT_REQUIRED",
            ca_certs=str(self.layout.cert("ca")),
            cert_file=str(self.layout.cert("admin")),
            key_file=str(self.layout.key("admin")),
            retries=False,
            timeout=urllib3.Timeout(total=2.0),
        )

        def healthy() -> bool:
            try:
                return http.request("GET", component.health_url).status == 200
            except urllib3.exceptions.HTTPError:
                return False

        self._wait_for(component.name, state, healthy, timeout_s, f"healthy at {component.health_url}")

    def _wait_for(
        self, name: str, state: dict[str, Any], condition: Callable[[], Any], timeout_s: float, what: str
    ) -> None:
        """Wait for a condition that one component is responsible for; fail fast if any of our
        processes dies, and name the component with the tail of its log either way."""

        def check() -> Any:
            for process in (Process(**p) for p in state["processes"]):
                if not process.alive():
                    raise ClusterError(
                        f"{process.name} exited while waiting for {name} ({what}); last lines of {process.log}:\n"
                        f"{_tail(Path(process.log))}"
                    )
            return condition()

        try:
            wait_until(check, timeout_s)
        except TimeoutError:
            log = self.layout.logs / f"{name}.log"
            raise ClusterError(
                f"{name} did not become ready within {timeout_s:.0f}s (waited for {what}); last lines of {log}:\n"
                f"{_tail(log)}"
            ) from None

    # -- one component at a time ------------------------------------------------------------------

    def _running_state(self, component: str) -> dict[str, Any]:
        """The state of a running cluster, for stopping or starting one of its components (or a process
        spawned beside them: an autoscaler, say)."""
        state = self._read_state()
        spawned = {e["name"] for e in [*(state or {}).get("processes", []), *(state or {}).get("stopped", [])]}
        if component not in COMPONENTS and component not in spawned:
            raise ClusterError(f"unknown component {component!r}: the components are {', '.join(COMPONENTS)}")
        if state is None or not any(p.alive() for p in self.processes()):
            raise ClusterError(f"cluster {self.name!r} is not running (scripts/cluster up --name {self.name})")
        return state

    def stop_component(self, component: str, *, kill: bool = False) -> None:
        """Stop one component and leave the others running: SIGTERM (SIGKILL if it outlives
        STOP_TIMEOUT_S), or at once SIGKILL with `kill`, as a crash ends it. Its files stay (etcd's
        data directory too), so `start_component` brings it back as it was."""
        state = self._running_state(component)
        entry = next((e for e in state["processes"] if e["name"] == component), None)
        if entry is None:
            raise ClusterError(
                f"{component} of cluster {self.name!r} is already stopped "
                f"(scripts/cluster start --component {component} --name {self.name} starts it)"
            )
        self._stop_processes([Process(**entry)], kill=kill)
        state["processes"].remove(entry)
        state.setdefault("stopped", []).append(entry)
        self._write_state(state)

    def start_component(self, component: str, *, timeout_s: float = COMPONENT_TIMEOUT_S) -> None:
        """Start a stopped (or exited) component again with the command line it had, so on the same
        ports with the same flags, and wait until it is healthy."""
        state = self._running_state(component)
        entry = next((e for e in state["processes"] if e["name"] == component), None)
        if entry is not None and Process(**entry).alive():
            raise ClusterError(
                f"{component} of cluster {self.name!r} is already running "
                f"(scripts/cluster stop --component {component} --name {self.name} stops it)"
            )
        if entry is None:
            entry = next(e for e in state.get("stopped", []) if e["name"] == component)
            state["stopped"].remove(entry)
        else:
            state["processes"].remove(entry)  # exited on its own
        if component == "kwok":
            release_node_leases(self.client())  # so it takes its nodes back at once, as a kubelet does
        self._launch(Process(**entry).component, state, timeout_s)

    def restart_component(self, component: str, *, kill: bool = False, timeout_s: float = COMPONENT_TIMEOUT_S) -> None:
        """Stop a component and start it again at once (see stop_component and start_component)."""
        self.stop_component(component, kill=kill)
        self.start_component(component, timeout_s=timeout_s)

    def switch_on(
        self,
        features: comp.Features,
        components: Sequence[str] = ("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
        *,
        timeout_s: float = COMPONENT_TIMEOUT_S,
    ) -> None:
        """Restart `components` with `features` on besides those they had, as an administrator switches a
        feature gate on (the Workload API, say): one at a time, in that order (the API server first), each
        on its ports, the others left running; each is healthy when this returns."""
        state = self._running_state("kube-apiserver")
        merged = comp.Features(state["feature_gates"], tuple(state["apis"])).merged(features)
        bin_dir, ports = Path(state["bin_dir"]), comp.Ports(**state["ports"])
        made = {
            "kube-apiserver": comp.kube_apiserver,
            "kube-controller-manager": comp.kube_controller_manager,
            "kube-scheduler": comp.kube_scheduler,
        }
        for name in components:
            component = made[name](bin_dir, self.layout, ports, merged)
            self.stop_component(name)
            state = self._running_state(name)
            state["stopped"] = [e for e in state.get("stopped", []) if e["name"] != name]
            state["feature_gates"], state["apis"] = dict(merged.gates), list(merged.apis)
            self._launch(component, state, timeout_s)

    # -- down -------------------------------------------------------------------------------------

    def _stop_processes(self, processes: list[Process], *, kill: bool = False) -> None:
        """SIGTERM each component's process group (newest first), SIGKILL what outlives the timeout;
        with `kill`, SIGKILL at once. Only processes whose PID and start time match what we started
        are touched."""
        live = [p for p in reversed(processes) if p.alive()]
        for process in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in live:
            try:
                wait_until(functools.partial(_gone, process), max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)

    def down(self, *, quiet: bool = False) -> bool:
        """Stop every process this cluster started and remove its state. True if anything was running."""
        processes = self.processes()
        was_running = any(p.alive() for p in processes)
        self._stop_processes(processes)
        if self.layout.root.exists():
            shutil.rmtree(self.layout.root, ignore_errors=True)
        if not quiet:
            print(
                f"Cluster {self.name!r} "
                + ("stopped and removed." if was_running else "was not running; state removed."),
                file=sys.stderr,
            )
        return was_running

    # -- status / env -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        state = self._read_state()
        if state is None:
            return {"name": self.name, "running": False}
        components = {p.name: ("running" if p.alive() else "exited") for p in self.processes()}
        components.update({p.name: "stopped" for p in self.stopped()})
        result: dict[str, Any] = {
            "name": self.name,
            "running": bool(components) and all(s == "running" for s in components.values()),
            "components": components,
            "kubeconfig": state["kubeconfig"],
            "versions": state["versions"],
            "state_dir": str(self.layout.root),
        }
        if result["running"]:
            client = self.client()
            nodes = client.get("/api/v1/nodes", resourceVersion="0")["items"]
            result["nodes"] = {"total": len(nodes), "ready": len(ready_node_names(client))}
        return result

    def env(self) -> str:
        """Shell lines that point kubectl and helm at this cluster, with them and yuniplace's own commands
        on PATH."""
        folders = ":".join(str(folder) for folder in (self.bin_dir(), command_dir()) if folder)
        return f"export KUBECONFIG={self.kubeconfig}\nexport PATH={folders}:$PATH\n"
