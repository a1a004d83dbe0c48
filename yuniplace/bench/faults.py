"""The faults of a campaign: every 20-40 s one of them, each kind once per round in an order drawn anew
each round, all from one seeded generator, so a run with the same seed injects the same faults in the
same order with the same parameters.

The leader controller SIGKILLed (its Deployment starts it again); etcd, kube-apiserver, kube-scheduler
or kube-controller-manager stopped and started again, the others left alone; the webhook unreachable
for a while; a burst of deletions of originators and placeholders; a node under a reservation tainted
(NoSchedule or NoExecute) or deleted, then given back; a running member failed."""

from __future__ import annotations

import enum
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

from yuniplace.bench.deployment import Deployment, Process
from yuniplace.bench.observer import PodObserver
from yuniplace.bench.stream import GangStream
from yuniplace.kube import ApiError, KubeClient, NotFound
from yuniplace.localcluster import LocalCluster, NodePool, wait_until
from yuniplace.localcluster.nodes import create_nodes

FAULT_TAINT = "faults.yuniplace.io/fault"
COMPONENT_START_TIMEOUT_S = 120.0
RECOVERY_RETRY_S = 5.0
RECOVERY_ATTEMPTS = 10

K = TypeVar("K")


class Kind(enum.StrEnum):
    LEADER_KILLED = "leader controller SIGKILLed"
    ETCD = "etcd restarted"
    API_SERVER = "kube-apiserver restarted"
    SCHEDULER = "kube-scheduler restarted"
    CONTROLLER_MANAGER = "kube-controller-manager restarted"
    WEBHOOK = "webhook unreachable"
    DELETIONS = "originators and placeholders deleted"
    TAINTED = "node under a reservation tainted"
    NODE_DELETED = "node under a reservation deleted"
    MEMBER_LOST = "member of a running gang failed"


COMPONENT_OF = {
    Kind.ETCD: "etcd",
    Kind.API_SERVER: "kube-apiserver",
    Kind.SCHEDULER: "kube-scheduler",
    Kind.CONTROLLER_MANAGER: "kube-controller-manager",
}


@dataclass(frozen=True)
class Fault:
    kind: str
    at: float  # seconds since the epoch
    detail: str
    down_s: float  # how long the part was away (0: a deletion)
    node: str | None = None  # the node a node fault took away
    back_at: float | None = None  # when it was given back


def once_a_round(kinds: Iterable[K], rng: random.Random) -> Iterator[K]:
    """Every kind once per round, in an order drawn anew each round: a short campaign still meets
    each of them, and no kind waits long for its turn."""
    while True:
        drawn = list(kinds)
        rng.shuffle(drawn)
        yield from drawn


def counted(kinds: Iterable[enum.StrEnum], faults: Iterable[Fault]) -> dict[str, int]:
    """How many faults of each kind were made, every kind named."""
    counts = dict.fromkeys((k.value for k in kinds), 0)
    for fault in faults:
        counts[fault.kind] += 1
    return counts


class FaultInjector:
    """Injects a fault every `interval_s` (drawn from the range) from `run(stop)` until stopped."""

    def __init__(
        self,
        cluster: LocalCluster,
        deployment: Deployment,
        webhook: Process,
        stream: GangStream,
        observer: PodObserver,
        pool: NodePool,
        rng: random.Random,
        *,
        interval_s: tuple[float, float] = (20.0, 40.0),
        report: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self._cluster = cluster
        self._client: KubeClient = cluster.client()
        self._deployment = deployment
        self._webhook = webhook
        self._stream = stream
        self._observer = observer
        self._pool = pool
        self._rng = rng
        self._interval_s = interval_s
        self._report = report
        self.faults: list[Fault] = []
        self._recoveries: list[threading.Thread] = []

    def run(self, stop: threading.Event) -> None:
        kinds = once_a_round(Kind, self._rng)
        while not stop.wait(self._rng.uniform(*self._interval_s)):
            kind = next(kinds)
            at = time.time()
            detail, down_s = self._inject(kind)
            fault = Fault(kind.value, at, detail, round(down_s, 1))
            self.faults.append(fault)
            self._report(f"fault {len(self.faults)}: {kind.value}: {detail}")
        for recovery in self._recoveries:
            recovery.join()

    def _pause(self, seconds: float) -> None:
        """A fault's part stays away this long (a schedule: the campaign's stop does not cut it short, so
        every part comes back)."""
        time.sleep(seconds)

    def _inject(self, kind: Kind) -> tuple[str, float]:
        if kind == Kind.LEADER_KILLED:
            return self._kill_leader()
        if kind in COMPONENT_OF:
            return self._restart(COMPONENT_OF[kind])
        if kind == Kind.WEBHOOK:
            return self._cut_webhook()
        if kind == Kind.DELETIONS:
            return self._delete_some()
        if kind == Kind.MEMBER_LOST:
            return self._fail_member()
        return self._disturb_node(kind)

    def _kill_leader(self) -> tuple[str, float]:
        down_s = self._rng.uniform(1.0, 5.0)
        leader = self._deployment.leader()
        if leader is None:
            return "no replica led at that moment; none killed", 0.0
        pid = leader.pid
        self._deployment.kill(leader, down_s)
        return f"{leader.name} (pid {pid}) killed, started again after {down_s:.0f}s", down_s

    def _restart(self, component: str) -> tuple[str, float]:
        down_s = self._rng.uniform(2.0, 10.0)
        kill = self._rng.random() < 0.5
        started = time.monotonic()
        self._cluster.stop_component(component, kill=kill)
        self._pause(down_s)
        self._cluster.start_component(component, timeout_s=COMPONENT_START_TIMEOUT_S)
        took = time.monotonic() - started
        return f"{'SIGKILL' if kill else 'SIGTERM'}, started again after {down_s:.0f}s, healthy after {took:.0f}s", took

    def _cut_webhook(self) -> tuple[str, float]:
        down_s = self._rng.uniform(10.0, 30.0)
        started = time.monotonic()
        self._webhook.kill()
        self._pause(down_s)
        self._webhook.start()
        wait_until(self._webhook.ready, 60)
        return f"down {down_s:.0f}s", time.monotonic() - started

    def _delete_some(self) -> tuple[str, float]:
        """Up to 1-3 drivers of running or reserving applications and 2-6 placeholders, at once."""
        originators = self._rng.randint(1, 3)
        placeholders = self._rng.randint(2, 6)
        traces = sorted(self._observer.snapshot().values(), key=lambda t: (t.first_seen, t.uid))
        drivers = [
            t
            for t in traces
            if not t.placeholder
            and t.name.endswith("-driver-0")
            and t.ended_at is None
            and t.app in {plan.key for plan in self._stream.live()}
        ]
        held = [t for t in traces if t.placeholder and t.ended_at is None]
        chosen = self._rng.sample(drivers, min(originators, len(drivers))) + self._rng.sample(
            held, min(placeholders, len(held))
        )
        deleted = []
        for trace in chosen:
            if not trace.placeholder:
                self._stream.note_deleted(trace.app, trace.uid, time.time())
            try:
                self._client.delete(
                    f"/api/v1/namespaces/{trace.namespace}/pods/{trace.name}",
                    {"gracePeriodSeconds": 0, "preconditions": {"uid": trace.uid}},
                )
                deleted.append(trace.name)
            except ApiError:
                pass  # gone, or another pod of that name now
        return f"deleted {', '.join(deleted) or 'nothing (none live)'}", 0.0

    def _fail_member(self) -> tuple[str, float]:
        """One running member of a live gang fails, as a crashed program's pod does: of a gang that asks
        to be restarted whole when there is one, else of any."""
        traces = sorted(self._observer.snapshot().values(), key=lambda t: (t.first_seen, t.uid))
        plans = {plan.key: plan for plan in self._stream.live() if plan.outcome is None}
        running = [
            t for t in traces if not t.placeholder and t.phase == "Running" and t.ended_at is None and t.app in plans
        ]
        restarting = [t for t in running if plans[t.app].restarts_on_loss]
        candidates = restarting or running
        if not candidates:
            return "nothing (no member running)", 0.0
        trace = self._rng.choice(candidates)
        self._stream.note_failed(trace.app, time.time())
        try:
            self._client.patch(
                f"/api/v1/namespaces/{trace.namespace}/pods/{trace.name}/status", {"status": {"phase": "Failed"}}
            )
        except ApiError as error:
            return f"{trace.name} not failed ({error})", 0.0
        policy = "restart" if plans[trace.app].restarts_on_loss else "none"
        return f"{trace.name} of {trace.app} failed (its gang: {policy})", 0.0

    def _reserved_node(self) -> str:
        """A node a live placeholder is on, else any node of the pool."""
        traces = sorted(self._observer.snapshot().values(), key=lambda t: (t.first_seen, t.uid))
        nodes = sorted({t.node for t in traces if t.placeholder and t.node and t.ended_at is None})
        return self._rng.choice(nodes) if nodes else self._rng.choice(list(self._pool.names()))

    def _disturb_node(self, kind: Kind) -> tuple[str, float]:
        node = self._reserved_node()
        try:
            return self._disturb(kind, node)
        except NotFound:  # deleted by an earlier fault, and not back yet
            return f"nothing ({node} is away for another fault)", 0.0

    def _disturb(self, kind: Kind, node: str) -> tuple[str, float]:
        hold_s = self._rng.uniform(20.0, 40.0) if kind == Kind.TAINTED else self._rng.uniform(45.0, 70.0)
        effect = self._rng.choice(["NoSchedule", "NoExecute"])
        path = f"/api/v1/nodes/{node}"
        if kind == Kind.TAINTED:
            taints = self._client.get(path).get("spec", {}).get("taints") or []
            taints = [*taints, {"key": FAULT_TAINT, "value": "true", "effect": effect}]
            self._client.patch(path, {"spec": {"taints": taints}})

            def recover() -> None:
                return self._untaint(path)

            what = f"{node} tainted {effect} for {hold_s:.0f}s"
        else:
            self._client.delete(path)
            recover = self._recreate_nodes
            what = f"{node} deleted, created again after {hold_s:.0f}s"
        thread = threading.Thread(target=self._recover_after, args=(hold_s, recover, what), daemon=True)
        thread.start()
        self._recoveries.append(thread)
        return what, hold_s

    def _untaint(self, path: str) -> None:
        try:
            taints = self._client.get(path).get("spec", {}).get("taints") or []
        except NotFound:
            return
        self._client.patch(path, {"spec": {"taints": [t for t in taints if t.get("key") != FAULT_TAINT]}})

    def _recreate_nodes(self) -> None:
        create_nodes(self._client, self._pool)

    def _recover_after(self, hold_s: float, recover: Callable[[], None], what: str) -> None:
        self._pause(hold_s)
        # The API server may be away a while for another fault, longer than the client's own retries.
        retrying = Retrying(
            retry=retry_if_exception_type((ApiError, OSError)),
            wait=wait_fixed(RECOVERY_RETRY_S),
            stop=stop_after_attempt(RECOVERY_ATTEMPTS),
            reraise=True,
        )
        try:
            retrying(recover)
        except (ApiError, OSError) as error:
            self._report(f"could not recover ({what}): {error}")

    def counts(self) -> dict[str, int]:
        return counted(Kind, self.faults)
