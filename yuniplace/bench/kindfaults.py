"""The faults of a campaign on kind, each made with a real tool on a real kubelet: a worker node's
container stopped and started again (`docker stop`/`start`), its kubelet killed and kept down a while
(`systemctl kill`/`stop`/`start` inside it), its network cut from the control plane and restored
(iptables and ip6tables inside it: kind's network is dual-stack), the node holding yuniplace's leader
stopped, a gang member's program told to stop (it exits 1), and a gang submitted with a member whose
image no node has and no registry serves (ErrImagePull).

One fault at a time, each node fault held for its time and undone before the next begins (and the node
Ready again), so the cluster never loses more than one worker; every kind once per round in an order
drawn anew each round, all from one seeded generator. The primitives are functions, so the kind tests
make the same faults."""

from __future__ import annotations

import enum
import random
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from yuniplace.bench.faults import Fault, counted, once_a_round
from yuniplace.bench.observer import PodObserver
from yuniplace.bench.stream import GangPlan, GangStream, Group
from yuniplace.kube import ApiError, KubeClient, NotFound
from yuniplace.kube.nodes import is_ready
from yuniplace.localcluster.cluster import wait_until
from yuniplace.localcluster.kinddocker import docker

NODE_READY_S = 180.0  # a node started again (or its kubelet, or its network) is Ready within this
PROGRAM_ENDED_S = 20.0  # a program told to stop has ended, as its pod's status says, within this
FAULT_COMMENT = "yuniplace-fault"  # marks the firewall rules a network cut adds, for their removal
BROKEN_POLICIES = ("restart", "release")  # what a gang whose image cannot be pulled asks
BROKEN_RESTART_LIMIT = 1  # its second loss fails it: every attempt of it meets the same image


class Kind(enum.StrEnum):
    NODE_RESTARTED = "worker node stopped and started (docker stop/start)"
    KUBELET_KILLED = "kubelet killed, started again later"
    NETWORK_CUT = "worker cut off from the control plane, then restored"
    LEADER_NODE = "node of the yuniplace leader stopped and started"
    MEMBER_EXITED = "gang member's container exited 1"
    IMAGE_PULL = "gang member's image cannot be pulled"


NODE_FAULTS = frozenset({Kind.NODE_RESTARTED, Kind.KUBELET_KILLED, Kind.NETWORK_CUT, Kind.LEADER_NODE})


# -- the primitives ----------------------------------------------------------------------------------------


def stop_node(node: str) -> None:
    """The node's container stopped (its systemd halts: kubelet, containerd and every container with it)."""
    docker("stop", node)


def start_node(node: str) -> None:
    docker("start", node)


def kill_kubelet(node: str) -> None:
    """SIGKILL to the kubelet, which systemd would start again a second later: held down instead. Its
    pods' containers keep running; no one reports them."""
    docker("exec", node, "systemctl", "kill", "--signal=SIGKILL", "kubelet")
    docker("exec", node, "systemctl", "stop", "kubelet")


def start_kubelet(node: str) -> None:
    docker("exec", node, "systemctl", "start", "kubelet")


def addresses(container: str) -> tuple[str, ...]:
    """The container's IPv4 and IPv6 addresses on kind's network."""
    result = docker(
        "inspect",
        "--format",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{.GlobalIPv6Address}}{{end}}",
        container,
    )
    return tuple(result.stdout.split())


def _rules(peer: str) -> list[list[str]]:
    """Drop everything between the node (its kubelet, its pods) and `peer`, both ways."""
    return [
        [chain, flag, peer, "-m", "comment", "--comment", FAULT_COMMENT, "-j", "DROP"]
        for chain, flag in (("OUTPUT", "-d"), ("FORWARD", "-d"), ("INPUT", "-s"), ("FORWARD", "-s"))
    ]


def cut_network(node: str, control_plane: str) -> None:
    """Nothing passes between the node and the control plane's node (the API server, the webhook's
    callers) over either address family; other workers still reach it."""
    for peer in addresses(control_plane):
        tool = "ip6tables" if ":" in peer else "iptables"
        for rule in _rules(peer):
            docker("exec", node, tool, "-I", *rule)


def restore_network(node: str, control_plane: str) -> None:
    for peer in addresses(control_plane):
        tool = "ip6tables" if ":" in peer else "iptables"
        for rule in _rules(peer):
            # Repeated until none is left: a rule inserted twice is removed twice.
            while docker("exec", node, tool, "-D", *rule, check=False).returncode == 0:
                pass


def node_ready(client: KubeClient, node: str) -> bool:
    try:
        return is_ready(client.get(f"/api/v1/nodes/{node}"))
    except NotFound:
        return False


def wait_ready(client: KubeClient, node: str, timeout_s: float = NODE_READY_S) -> None:
    wait_until(lambda: node_ready(client, node), timeout_s, interval_s=1.0)


def lease_holder(client: KubeClient, namespace: str, lease: str) -> str:
    try:
        found = client.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease}")
    except NotFound:
        return ""
    return str(found.get("spec", {}).get("holderIdentity") or "")


def leader_node(client: KubeClient, namespace: str, lease: str) -> tuple[str, str] | None:
    """The pod holding the Lease (the identity is its name) and its node, if a pod holds it."""
    holder = lease_holder(client, namespace, lease)
    if not holder:
        return None
    try:
        pod = client.get(f"/api/v1/namespaces/{namespace}/pods/{holder}")
    except NotFound:
        return None
    node = pod.get("spec", {}).get("nodeName")
    return (holder, str(node)) if node else None


def stop_program(client: KubeClient, env: Mapping[str, str], namespace: str, pod: str) -> None:
    """SIGTERM to the member's program (PID 1 of its container), which exits 1: a program that failed.
    Through `kubectl exec`, as a user reaches a container; the exec may end with the container it runs
    in (137), which is the fault made, not failed."""
    command = ["kubectl", "exec", "-n", namespace, pod, "-c", "main", "--", "sh", "-c", "kill 1"]
    result = subprocess.run(command, env=dict(env), capture_output=True, text=True, timeout=60, check=False)
    if result.returncode == 0:
        return
    try:
        wait_until(lambda: not _still_running(client, namespace, pod), PROGRAM_ENDED_S, interval_s=0.5)
    except TimeoutError:
        raise subprocess.CalledProcessError(result.returncode, command, result.stdout, result.stderr) from None


def _still_running(client: KubeClient, namespace: str, pod: str) -> bool:
    try:
        found = client.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
    except NotFound:
        return False
    statuses = found.get("status", {}).get("containerStatuses") or []
    return any("running" in (s.get("state") or {}) for s in statuses)


# -- the campaign's injector -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What the injector needs to know of the cluster and of yuniplace's release in it."""

    client: KubeClient
    workers: tuple[str, ...]  # node names, which are their containers' names
    control_plane: str  # the control plane node's container
    namespace: str  # yuniplace's
    lease: str
    env: Mapping[str, str]  # kubectl on PATH and KUBECONFIG set


class KindFaultInjector:
    """Injects a fault `interval_s` (drawn from the range) after the last one ended, from `run(stop)`
    until stopped; each node fault is undone, and its node Ready, before `run` goes on."""

    def __init__(
        self,
        setup: Setup,
        stream: GangStream,
        observer: PodObserver,
        rng: random.Random,
        *,
        interval_s: tuple[float, float] = (20.0, 40.0),
        report: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self._setup = setup
        self._client = setup.client
        self._stream = stream
        self._observer = observer
        self._rng = rng
        self._interval_s = interval_s
        self._report = report
        self.faults: list[Fault] = []
        self._broken = 0

    def run(self, stop: threading.Event) -> None:
        kinds = once_a_round(Kind, self._rng)
        while not stop.wait(self._rng.uniform(*self._interval_s)):
            kind = next(kinds)
            at = time.time()
            try:
                fault = self._inject(kind, at)
            except (ApiError, OSError, subprocess.SubprocessError, TimeoutError) as error:
                fault = Fault(kind.value, at, f"not made: {error}"[:300], 0.0)
            self.faults.append(fault)
            self._report(f"fault {len(self.faults)}: {kind.value}: {fault.detail}")

    def counts(self) -> dict[str, int]:
        return counted(Kind, self.faults)

    def _inject(self, kind: Kind, at: float) -> Fault:
        if kind == Kind.MEMBER_EXITED:
            return Fault(kind.value, at, self._exit_member(), 0.0)
        if kind == Kind.IMAGE_PULL:
            return Fault(kind.value, at, self._broken_gang(), 0.0)
        if kind == Kind.LEADER_NODE:
            led = leader_node(self._client, self._setup.namespace, self._setup.lease)
            if led is None:
                return Fault(kind.value, at, "no pod led at that moment", 0.0)
            return self._hold(kind, led[1], at, f"leader {led[0]} on it")
        return self._hold(kind, self._member_node(), at, "")

    def _live_members(self) -> list[tuple[str, str, str, str]]:
        """(app, namespace, pod, node) of every member running now, of a gang of the stream still live."""
        plans = {plan.key: plan for plan in self._stream.live() if plan.outcome is None}
        traces = sorted(self._observer.snapshot().values(), key=lambda t: (t.first_seen, t.uid))
        return [
            (t.app, t.namespace, t.name, t.node)
            for t in traces
            if not t.placeholder and t.phase == "Running" and t.ended_at is None and t.node and t.app in plans
        ]

    def _member_node(self) -> str:
        """A worker a running member is on (a gang with a policy on a lost member first), else any."""
        plans = {plan.key: plan for plan in self._stream.live()}
        members = self._live_members()
        asking = [m for m in members if plans[m[0]].on_loss is not None]
        nodes = sorted({m[3] for m in (asking or members)} & set(self._setup.workers))
        return self._rng.choice(nodes or list(self._setup.workers))

    def _hold(self, kind: Kind, node: str, at: float, note: str) -> Fault:
        """Take the node away for a drawn time, give it back, and wait until it is Ready again."""
        down_s = self._rng.uniform(20.0, 100.0) if kind == Kind.KUBELET_KILLED else self._rng.uniform(60.0, 100.0)
        control_plane = self._setup.control_plane
        take: Callable[[], None]
        give: Callable[[], None]
        if kind == Kind.KUBELET_KILLED:
            take, give = (lambda: kill_kubelet(node)), (lambda: start_kubelet(node))
        elif kind == Kind.NETWORK_CUT:
            take, give = (lambda: cut_network(node, control_plane)), (lambda: restore_network(node, control_plane))
        else:
            take, give = (lambda: stop_node(node)), (lambda: start_node(node))
        try:
            take()
            time.sleep(down_s)  # the fault's schedule: it lasts this long
        finally:
            give()
        back_at = time.time()
        wait_ready(self._client, node)
        ready_s = time.time() - back_at
        detail = (
            f"{node}{f' ({note})' if note else ''} away {down_s:.0f}s, Ready {ready_s:.0f}s after it was given back"
        )
        return Fault(kind.value, at, detail, round(down_s, 1), node=node, back_at=back_at)

    def _exit_member(self) -> str:
        plans = {plan.key: plan for plan in self._stream.live()}
        members = self._live_members()
        asking = [m for m in members if plans[m[0]].on_loss is not None]
        if not members:
            return "nothing (no member running)"
        app, namespace, pod, _node = self._rng.choice(asking or members)
        self._stream.note_failed(app, time.time())
        stop_program(self._client, self._setup.env, namespace, pod)
        return f"{pod} of {app} told to stop (its gang: {plans[app].on_loss or 'no policy'})"

    def _broken_gang(self) -> str:
        """A Job gang of two workers and a parameter server whose image cannot be pulled."""
        self._broken += 1
        plan = GangPlan(
            app=f"b{self._broken:03d}-job",
            namespace=self._rng.choice(self._stream.namespaces),
            kind="job",
            style="Soft",
            timeout_s=60,
            groups=[Group("workers", 2, "500m", "512Mi"), Group("ps", 1, "500m", "512Mi")],
            fits=True,
            lifetime_s=self._rng.uniform(40.0, 90.0),
            delete_after_s=None,
            on_loss=self._rng.choice(BROKEN_POLICIES),
            restart_limit=BROKEN_RESTART_LIMIT,
            broken_group="ps",
        )
        self._stream.add(plan)
        return f"{plan.key} submitted, its ps naming an image no node has ({plan.on_loss})"
