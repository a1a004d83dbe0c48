"""What a campaign observes: every change of the pods of its namespaces, from one watch (so in the
order etcd stored them), kept per pod as a PodTrace for the invariants; the events of its
namespaces, read when the invariants are checked; and, on real nodes, when each node was in trouble
(tainted NotReady or unreachable) and not Ready. A watch broken by a fault re-lists, and a pod that
went meanwhile is taken as gone when the re-list no longer has it."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from yuniplace.bench.invariants import EventSeen, PodTrace
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.record import read_record
from yuniplace.gang.taskgroups import InvalidGang
from yuniplace.kube import KubeClient
from yuniplace.kube.nodes import trouble
from yuniplace.kube.watch import ListWatch

Pod = dict[str, Any]
DISRUPTION_TARGET = "DisruptionTarget"


def _disruption(pod: Pod) -> str | None:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
            return str(condition.get("reason") or "")
    return None


def _ready(pod: Pod) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _record_times(pod: Pod) -> tuple[float | None, float | None]:
    """The reservation's start and the queue clock on the pod's record (None where unreadable)."""
    try:
        record = read_record(p.annotations_of(pod))
    except InvalidGang:
        return None, None
    return record.reservation_started, record.queued_since


def take_in(trace: PodTrace, pod: Pod, now: float) -> None:
    """Fold one observed version of a pod into its trace."""
    if p.is_gated(pod):
        if trace.gated_since is None:
            trace.gated_since = now
    elif trace.gated_since is not None and trace.ungated_at is None:
        trace.ungated_at = now
    node = p.node_name(pod)
    if node and trace.bound_at is None:
        trace.bound_at, trace.node = now, node
    trace.phase = p.phase(pod) or trace.phase
    if trace.phase == "Running" and trace.running_at is None:
        trace.running_at = now
    if trace.ready_at is None and _ready(pod):
        trace.ready_at = now
    if p.is_terminal(pod) and trace.terminal_at is None:
        trace.terminal_at = now
        trace.reason = pod.get("status", {}).get("reason")
    if p.is_deleting(pod) and trace.deleting_at is None:
        trace.deleting_at = now
    trace.disruption = _disruption(pod) or trace.disruption
    notes = p.annotations_of(pod)
    trace.claims = notes.get(keys.SWAP_PLACEHOLDER, trace.claims)
    state = notes.get(keys.STATE)
    if state is not None and (not trace.states or trace.states[-1][1] != state):
        trace.states.append((now, state))
    started, queued = _record_times(pod)
    if started is not None and (not trace.reservation_starts or trace.reservation_starts[-1] != started):
        trace.reservation_starts.append(started)
    trace.queued_since = queued


def new_trace(pod: Pod, now: float) -> PodTrace | None:
    """A trace for a pod of an application, None for any other pod."""
    key = p.app_key(pod)
    if key is None:
        return None
    meta = pod["metadata"]
    return PodTrace(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        app=str(key),
        placeholder=p.is_placeholder(pod),
        group=p.task_group_name(pod),
        first_seen=now,
    )


class PodObserver:
    """Watches the pods of `namespaces` (in a thread of its own, from `start()` to `stop()`)."""

    def __init__(
        self, client: KubeClient, namespaces: Collection[str], *, clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._namespaces = frozenset(namespaces)
        self._clock = clock
        self._lock = threading.Lock()
        self._traces: dict[str, PodTrace] = {}
        self._by_app: dict[str, list[PodTrace]] = {}
        self._watch = ListWatch(client, "/api/v1/pods", on_list=self._listed, on_event=self._changed, name="observer")
        self._thread = threading.Thread(target=self._watch.run, name="observer", daemon=True)

    def start(self, timeout_s: float = 60.0) -> None:
        self._thread.start()
        if not self._watch.synced.wait(timeout_s):
            raise TimeoutError(f"the observer's pod list did not arrive within {timeout_s:.0f}s")

    def stop(self) -> None:
        self._watch.stop()

    def _ours(self, pod: Pod) -> bool:
        return pod.get("metadata", {}).get("namespace") in self._namespaces

    def _seen(self, pod: Pod, now: float) -> PodTrace | None:
        uid = str(pod.get("metadata", {}).get("uid", ""))
        trace = self._traces.get(uid)
        if trace is None:
            trace = new_trace(pod, now)
            if trace is None:
                return None
            self._traces[uid] = trace
            self._by_app.setdefault(trace.app, []).append(trace)
        take_in(trace, pod, now)
        return trace

    def _listed(self, pods: list[Pod]) -> None:
        now = self._clock()
        with self._lock:
            listed = {str(pod["metadata"].get("uid", "")) for pod in pods if self._ours(pod)}
            for pod in pods:
                if self._ours(pod):
                    self._seen(pod, now)
            for uid, trace in self._traces.items():
                if uid not in listed and trace.gone_at is None:
                    trace.gone_at = now  # it went while the watch was broken

    def _changed(self, kind: str, pod: Pod) -> None:
        if not self._ours(pod):
            return
        now = self._clock()
        with self._lock:
            trace = self._seen(pod, now)
            if trace is not None and kind == "DELETED" and trace.gone_at is None:
                trace.gone_at = now

    def snapshot(self) -> dict[str, PodTrace]:
        """A copy of every trace, by UID, for a check to read while the watch goes on."""
        with self._lock:
            return copy.deepcopy(self._traces)

    def of_app(self, app: str) -> list[PodTrace]:
        with self._lock:
            return copy.deepcopy(self._by_app.get(app, []))

    def events(self) -> list[EventSeen]:
        """The events of the observed namespaces, as the API holds them now."""
        seen = []
        for namespace in sorted(self._namespaces):
            listed = self._client.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
            for event in listed:
                regarding = event.get("regarding") or {}
                seen.append(
                    EventSeen(
                        str(event.get("reason", "")),
                        str(regarding.get("namespace", namespace)),
                        str(regarding.get("name", "")),
                        str(regarding.get("uid", "")),
                        p.parse_time(event.get("eventTime") or event.get("deprecatedFirstTimestamp")),
                        str(event.get("note") or ""),
                    )
                )
        return seen


Interval = list[float | None]  # [since, until]; until None while it lasts


@dataclass
class NodeTrace:
    """One node as the observer saw it change."""

    name: str
    troubled: list[Interval] = field(default_factory=list)  # tainted NotReady or unreachable, or gone
    not_ready: list[Interval] = field(default_factory=list)  # its Ready condition not True


def _follow(intervals: list[Interval], now: float, *, on: bool) -> None:
    """Open an interval when `on` begins, close the open one when it ends."""
    open_ = bool(intervals) and intervals[-1][1] is None
    if on and not open_:
        intervals.append([now, None])
    elif not on and open_:
        intervals[-1][1] = now


class NodeObserver:
    """Watches the nodes (in a thread of its own, from `start()` to `stop()`): when each was in trouble,
    as admission sees it (gang/losses.py), and when its Ready condition was not True, as the node
    lifecycle controller marks it."""

    def __init__(self, client: KubeClient, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeTrace] = {}
        self._watch = ListWatch(client, "/api/v1/nodes", on_list=self._listed, on_event=self._changed, name="nodes")
        self._thread = threading.Thread(target=self._watch.run, name="nodes", daemon=True)

    def start(self, timeout_s: float = 60.0) -> None:
        self._thread.start()
        if not self._watch.synced.wait(timeout_s):
            raise TimeoutError(f"the node list did not arrive within {timeout_s:.0f}s")

    def stop(self) -> None:
        self._watch.stop()

    def _seen(self, node: dict[str, Any], now: float, *, gone: bool = False) -> None:
        name = str(node.get("metadata", {}).get("name", ""))
        trace = self._nodes.setdefault(name, NodeTrace(name))
        taints = node.get("spec", {}).get("taints") or []
        _follow(trace.troubled, now, on=gone or trouble(taints) is not None)
        _follow(trace.not_ready, now, on=gone or not _ready(node))

    def _listed(self, nodes: list[dict[str, Any]]) -> None:
        now = self._clock()
        with self._lock:
            listed = {str(node["metadata"].get("name", "")) for node in nodes}
            for node in nodes:
                self._seen(node, now)
            for name in set(self._nodes) - listed:
                self._seen({"metadata": {"name": name}}, now, gone=True)

    def _changed(self, kind: str, node: dict[str, Any]) -> None:
        with self._lock:
            self._seen(node, self._clock(), gone=kind == "DELETED")

    def snapshot(self) -> dict[str, NodeTrace]:
        with self._lock:
            return copy.deepcopy(self._nodes)

    def troubles(self) -> dict[str, list[tuple[float, float | None]]]:
        """When each node was in trouble, for the invariants."""
        with self._lock:
            return {
                name: [(since, until) for since, until in trace.troubled if since is not None]
                for name, trace in self._nodes.items()
            }
