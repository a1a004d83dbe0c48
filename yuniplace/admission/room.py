"""What every node has, and what the pods on it already take: the room admission decides on.

Fed by a node watch and by the pod watch (every pod of the cluster, not only gang pods: a node's room
is taken by whatever runs there). A pod takes room on the node it is bound to, or the node it is
nominated or steered to while a swap or a preemption is in flight, so room being handed from a
placeholder to its real pod never looks free in between.
"""

from __future__ import annotations

import bisect
import sys
import threading
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from yuniplace.devices.inventory import DeviceCounts
from yuniplace.gang import pods as p
from yuniplace.gang.fit import Amounts, Constraints, Node, Room, constraints_key, from_decimals
from yuniplace.gang.resources import pod_requests
from yuniplace.kube.nodes import trouble
from yuniplace.queues.pools import Pool

Pod = Mapping[str, Any]


def _steered_node(pod: Pod) -> str | None:
    """The node a released swap member is steered to by the preferred affinity term yuniplace adds."""
    affinity = (pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
    for term in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        for match in (term.get("preference") or {}).get("matchFields") or []:
            if (
                match.get("key") == "metadata.name"
                and match.get("operator") == "In"
                and len(match.get("values") or []) == 1
            ):
                return str(match["values"][0])
    return None


def room_node(pod: Pod) -> str | None:
    """The node whose room the pod takes, if any."""
    if p.is_terminal(pod):
        return None
    bound = p.node_name(pod)
    if bound:
        return bound
    if p.is_gated(pod) or p.is_deleting(pod):
        return None
    nominated = p.nominated_node(pod)
    if nominated:
        return nominated
    return _steered_node(pod) if p.is_handed_off(pod) else None


def _sum_into(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, 0) + amount


@dataclass
class PoolRoom:
    nodes: int = 0
    capacity: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    taken: dict[str, int] = field(default_factory=dict)


Take = tuple[str, Amounts]  # the node a pod takes room on, and what it takes there


@dataclass(frozen=True)
class RoomView:
    """Every node's free room and what each pod (by uid) takes, as they stood at one moment."""

    nodes: Sequence[Node]  # by name
    free: Mapping[str, Mapping[str, int]]
    takes: Mapping[str, Take]
    # Where the pods that may take free room any moment (pods.competes_for_room) may go, each set once.
    competing: tuple[Constraints, ...] = ()

    def contended(self, nodes: Iterable[str]) -> bool:
        """Whether a pod that may take free room any moment could go to one of `nodes`."""
        names = set(nodes)
        return any(c.accepts(node) for node in self.nodes if node.name in names for c in self.competing)

    def seats_taken(self, seated: Iterable[tuple[str, Pod]]) -> list[str]:
        """The nodes among `seated` (each a node and the gated pod seated there) that no longer hold
        all the pods seated on them: another pod was bound into the room they were given."""
        left: dict[str, dict[str, int]] = {}
        for node, pod in seated:
            room = left.setdefault(node, dict(self.free.get(node, {})))
            for name, amount in {**from_decimals(pod_requests(pod.get("spec", {}))), "pods": 1000}.items():
                if name in room:
                    room[name] -= amount
        return sorted(node for node, room in left.items() if node not in self.free or min(room.values(), default=0) < 0)

    def room(self, released: Iterable[str] = ()) -> Room:
        """The free room, with what the pods `released` (uids) take given back, as if they were gone.
        The view itself is left as it was: the released room lies over it, so trying a removal costs
        the pods removed, and undoing it costs nothing."""
        freed: dict[str, Mapping[str, int]] = {}
        for uid in released:
            take = self.takes.get(uid)
            if take is None or take[0] not in self.free:
                continue
            node, amounts = take
            room = dict(freed.get(node, self.free[node]))
            for name, amount in {**amounts, "pods": 1000}.items():
                if name in room:
                    room[name] += amount
            freed[node] = room
        # ChainMap only reads the view here (its type asks for a mutable mapping it never writes to).
        return Room.of_free(
            self.nodes, ChainMap(freed, cast(dict[str, Mapping[str, int]], self.free)) if freed else self.free
        )

    def with_coming(self, coming: Sequence[Node]) -> RoomView:
        """The view with nodes yet to come (an autoscaler's, named to sort after every node there is)
        added, empty."""
        free = {**self.free, **{node.name: node.allocatable for node in coming}}
        return RoomView([*self.nodes, *coming], free, self.takes, self.competing)

    def with_devices(self, counts: DeviceCounts, aliases: Mapping[str, str] = {}) -> RoomView:
        """The view with each node's DRA devices of the kinds counted added to its room, as resources
        (devices/claims.py names them): what it has, and what no claim holds; what each pod takes, with
        the devices held for it alone, which its going frees. `aliases`: the extended
        resources DeviceClasses let pods ask devices by (resource -> its class's resource), counted
        from the devices on every node that does not advertise that resource itself (a device
        plugin's node does)."""
        if not counts.total:
            return self
        nodes: list[Node] = []
        free = dict(self.free)
        for node in self.nodes:
            total = counts.total.get(node.name)
            if total is None:
                nodes.append(node)
                continue
            unused = counts.free.get(node.name, {})
            added = dict(total)
            left = dict(unused)
            for alias, resource in aliases.items():
                if alias not in node.allocatable and resource in total:
                    added[alias], left[alias] = total[resource], unused.get(resource, 0)
            nodes.append(replace(node, allocatable={**node.allocatable, **added}))
            if node.name in free:
                free[node.name] = {**free[node.name], **left}
        takes = self.takes
        if counts.held:
            takes = dict(takes)
            for uid, devices in counts.held.items():
                take = takes.get(uid)
                if take is not None:
                    takes[uid] = (take[0], {**take[1], **devices})
        return RoomView(nodes, free, takes, self.competing)

    def whole_room(self, coming: Sequence[Node]) -> Room:
        """Every node's whole allocatable room, those yet to come included: what a gang could ever get."""
        nodes = [*self.nodes, *coming]
        return Room.of_free(nodes, {node.name: node.allocatable for node in nodes})

    def held(self, uids: Iterable[str]) -> dict[str, int]:
        """What the pods `uids` take on their nodes, summed (`pods` counting 1000 a pod)."""
        total: dict[str, int] = {}
        for uid in uids:
            take = self.takes.get(uid)
            if take is not None:
                _sum_into(total, {**take[1], "pods": 1000})
        return total


def pool_room(nodes: Iterable[Node], takes: Mapping[str, Take], pool: Pool, counted: Callable[[str], bool]) -> PoolRoom:
    """The nodes `pool` owns, summed: what they have and what the pods `counted` (by uid) take on them
    (`pods` counting 1000 a pod)."""
    room = PoolRoom()
    names = set()
    for node in nodes:
        if pool.owns(node.name, node.labels):
            names.add(node.name)
            _sum_into(room.capacity, node.capacity)
            _sum_into(room.allocatable, node.allocatable)
    room.nodes = len(names)
    for uid, (node_name, amounts) in takes.items():
        if node_name in names and counted(uid):
            _sum_into(room.taken, {**amounts, "pods": 1000})
    return room


class ClusterRoom:
    def __init__(self, on_freed: Callable[[], None] = lambda: None) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, Node] = {}
        self._takes: dict[str, Take] = {}  # pod uid -> (node, requests)
        self._used: dict[str, Amounts] = {}
        # Each node's free room, kept as pods come and go (a new dict on each change, so a snapshot of
        # the map is a consistent, shallow copy), and the nodes in name order: a cycle's room is taken
        # without a pass over every node.
        self._free: dict[str, Mapping[str, int]] = {}
        self._ordered: list[Node] = []  # replaced, never changed in place: rooms handed out keep theirs
        self._names: list[str] = []  # the same order, for bisect
        self._empty: Room | None = None  # built again after the nodes change, when next asked for
        # Pods of a gang ask for the same amounts on a few hundred nodes: one shared copy of each
        # keeps the room small at tens of thousands of pods.
        self._shapes: dict[tuple[tuple[str, int], ...], Amounts] = {}
        self._competing: dict[str, Constraints] = {}  # pods that may take free room any moment, by uid
        self._on_freed = on_freed
        self.nodes_synced = threading.Event()

    # -- nodes -------------------------------------------------------------------------------------

    def node_count(self) -> int:
        """The nodes admission knows: what an operator compares with `kubectl get nodes` when a gang is
        said not to fit."""
        return len(self._names)

    def nodes_taking_pods(self) -> int:
        """Of those, the nodes the control plane does not keep new pods off (not Ready yet, unreachable,
        cordoned): only their room counts for a gang."""
        return sum(1 for node in self._ordered if node.takes_new_pods)

    def has_node(self, name: str) -> bool:
        return name in self._nodes

    def node_health(self, name: str) -> str | None:
        """How the pods on a node stand, for a started gang's losses (gang/losses.py): None while it is
        there and well (or before the nodes are listed), "is gone", or why it is in trouble."""
        if not self.nodes_synced.is_set():
            return None
        node = self._nodes.get(name)
        return "is gone" if node is None else trouble(node.taints)

    def nodes_listed(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            self._nodes = {(n := Node.of(node)).name: n for node in nodes}
            self._nodes_changed()
        self.nodes_synced.set()
        self._on_freed()

    def node_event(self, kind: str, node: Mapping[str, Any]) -> None:
        """A node added, changed or gone; room may only have been freed (and admission need look again)
        when the node as admission sees it changed, not on each of its status heartbeats. One node's
        change costs about one node's work: thousands of nodes change their taints or conditions
        often (a flapping lease, say), and a pass over every node for each would grow as nodes²."""
        name = node["metadata"]["name"]
        with self._lock:
            before = self._nodes.get(name)
            after = None if kind == "DELETED" else Node.of(node)
            if after == before:
                return
            index = bisect.bisect_left(self._names, name)
            ordered = list(self._ordered)
            if after is None:
                del self._nodes[name], ordered[index], self._names[index]
                self._free.pop(name, None)
            else:
                self._nodes[name] = after
                if before is None:
                    ordered.insert(index, after)
                    self._names.insert(index, name)
                else:
                    ordered[index] = after
                self._refresh(name)
            self._ordered = ordered
            self._empty = None
        if after is not None:
            self._on_freed()

    def _nodes_changed(self) -> None:
        self._ordered = sorted(self._nodes.values(), key=lambda n: n.name)
        self._names = [n.name for n in self._ordered]
        self._empty = None
        self._free = {}
        for name in self._nodes:
            self._refresh(name)

    def _refresh(self, name: str) -> None:
        node = self._nodes.get(name)
        if node is None:
            return
        self._free[name] = node.free(self._used.get(name, {}))

    # -- pods --------------------------------------------------------------------------------------

    def _add(self, node: str, requests: Amounts, sign: int) -> None:
        used = self._used.setdefault(node, {})
        for name, amount in requests.items():
            used[name] = used.get(name, 0) + sign * amount
        used["pods"] = used.get("pods", 0) + sign * 1000
        self._refresh(node)

    def _take(self, node: str, pod: Pod) -> Take:
        amounts = from_decimals(pod_requests(pod.get("spec", {})))
        shape = self._shapes.setdefault(tuple(sorted(amounts.items())), amounts)
        return sys.intern(node), shape

    def _set(self, uid: str, take: Take | None) -> bool:
        """Record what pod `uid` takes; return whether room was freed."""
        before = self._takes.pop(uid, None)
        if before is not None:
            self._add(before[0], before[1], -1)
        if take is not None:
            self._takes[uid] = take
            self._add(take[0], take[1], +1)
        return before is not None and (take is None or take[0] != before[0])

    def pods_listed(self, pods: Iterable[Pod]) -> None:
        with self._lock:
            self._takes.clear()
            self._used.clear()
            self._competing = {
                p.uid(pod): Constraints.of_pod(pod.get("spec", {})) for pod in pods if p.competes_for_room(pod)
            }
            for pod in pods:
                node = room_node(pod)
                if node is not None:
                    self._set(p.uid(pod), self._take(node, pod))
            self._nodes_changed()
        self._on_freed()

    def pod_event(self, kind: str, pod: Pod) -> None:
        node = None if kind == "DELETED" else room_node(pod)
        uid = p.uid(pod)
        with self._lock:
            if kind != "DELETED" and p.competes_for_room(pod):
                self._competing[uid] = Constraints.of_pod(pod.get("spec", {}))
            else:
                self._competing.pop(uid, None)
            before = self._takes.get(uid)
            if before is not None and node == before[0]:
                return  # requests cannot change while a pod has a node
            take = self._take(node, pod) if node is not None else None
            freed = self._set(uid, take)
        if freed:
            self._on_freed()

    # -- reading -----------------------------------------------------------------------------------

    def view(self) -> RoomView:
        """The room as it stands now, for one admission cycle to decide on: shallow copies, since what
        they hold is replaced on each change and never changed in place."""
        with self._lock:
            competing = {constraints_key([c]): c for c in self._competing.values()}
            return RoomView(self._ordered, dict(self._free), dict(self._takes), tuple(competing.values()))

    def pool(self, pool: Pool, counted: Callable[[str], bool]) -> PoolRoom:
        """The nodes `pool` owns, summed, and what the pods `counted` take on them."""
        with self._lock:
            return pool_room(self._ordered, self._takes, pool, counted)

    def empty_room(self) -> Room:
        """Every node's whole allocatable room, as if nothing ran: what a gang could ever get. (A copy of
        one kept until the nodes change, so what it learns of the nodes serves each cycle.)"""
        with self._lock:
            if self._empty is None:
                self._empty = Room.of_free(self._ordered, {n.name: n.allocatable for n in self._ordered})
            return self._empty.copy()
