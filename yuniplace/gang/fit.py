"""Whether pods fit on nodes: the part of kube-scheduler's filtering that decides if a gang can be
reserved at all (resources, node selector, taints and tolerations, required node affinity).

Admission only needs a sound estimate: it asks "could every placeholder of this gang be placed on the
free room now?" and kube-scheduler still does the real placement. Amounts are integers in
milli-units, so the arithmetic over thousands of nodes stays cheap.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from yuniplace.kube import parse_quantity
from yuniplace.kube.nodes import takes_new_pods

Amounts = dict[str, int]
PODS = "pods"  # every pod takes one of a node's pod slots
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
# Pod shapes and constraint sets whose nodes a room remembers. Tenants write the shapes, and the room of
# an idle node set is kept from cycle to cycle: past this many, it forgets them all and starts again.
MAX_REMEMBERED = 256


def milli(value: Any) -> int:
    return math.ceil(Decimal(parse_quantity(value)) * 1000)


def amounts(raw: Mapping[str, Any]) -> Amounts:
    return {name: milli(value) for name, value in raw.items()}


def from_decimals(raw: Mapping[str, Decimal]) -> Amounts:
    return {name: math.ceil(value * 1000) for name, value in raw.items()}


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    allocatable: Mapping[str, int]
    capacity: Mapping[str, int] = field(default_factory=dict)  # for reports: what the node has before reservations
    takes_new_pods: bool = True  # for reports: the control plane does not keep new pods off it
    # A node that is yet to come (an autoscaler's): labels whose value is chosen as it is made, each the
    # values it may take (None: any), and the node pool that would make it.
    open_labels: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    coming_from: str | None = None

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> Node:
        """A node as admission sees it; cordoned nodes keep their room for nobody new."""
        spec = node.get("spec") or {}
        taints = tuple(spec.get("taints") or ())
        if spec.get("unschedulable"):
            taints += ({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},)
        return cls(
            name=node["metadata"]["name"],
            labels=node["metadata"].get("labels") or {},
            taints=taints,
            allocatable=amounts((node.get("status") or {}).get("allocatable") or {}),
            capacity=amounts((node.get("status") or {}).get("capacity") or {}),
            takes_new_pods=takes_new_pods(node),
        )

    def free(self, used: Mapping[str, int]) -> Amounts:
        """What the node has left for new pods once `used` is taken (negative where overcommitted)."""
        return {name: amount - used.get(name, 0) for name, amount in self.allocatable.items()}


@dataclass(frozen=True)
class Constraints:
    """Where a pod may go: the node-related parts of its spec (or of a task group)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of_pod(cls, spec: Mapping[str, Any]) -> Constraints:
        """Where a pod may go, as its own spec says."""
        return cls(spec.get("nodeSelector") or {}, tuple(spec.get("tolerations") or ()), spec.get("affinity") or {})

    def accepts(self, node: Node) -> bool:
        return (
            all(_label_may_be(node, k, v) for k, v in self.node_selector.items())
            and all(_tolerated(t, self.tolerations) for t in node.taints if t.get("effect") in BLOCKING_EFFECTS)
            and _required_affinity_holds(self.affinity, node)
        )


def _label_may_be(node: Node, key: str, value: str) -> bool:
    """Whether the node's label `key` is `value`, or, on a node yet to come, may be made so."""
    if key in node.open_labels:
        allowed = node.open_labels[key]
        return allowed is None or value in allowed
    return node.labels.get(key) == value


def _tolerated(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        operator = toleration.get("operator") or "Equal"
        key = toleration.get("key") or ""
        if operator == "Exists" and (not key or key == taint.get("key")):
            return True
        if (
            operator == "Equal"
            and key == taint.get("key")
            and (toleration.get("value") or "") == (taint.get("value") or "")
        ):
            return True
    return False


def _expression_holds(expression: Mapping[str, Any], value: str | None) -> bool:
    operator, values = expression.get("operator"), expression.get("values") or []
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _open_expression_holds(expression: Mapping[str, Any], allowed: frozenset[str] | None) -> bool:
    """Whether a label whose value a node yet to come chooses among `allowed` (None: any) may be made to
    satisfy the expression."""
    operator = expression.get("operator")
    if operator == "DoesNotExist":
        return False  # the node pool gives every node the label
    if allowed is None or operator == "Exists":
        return True
    return any(_expression_holds(expression, value) for value in allowed)


def _label_expression_holds(expression: Mapping[str, Any], node: Node) -> bool:
    key = expression.get("key", "")
    if key in node.open_labels:
        return _open_expression_holds(expression, node.open_labels[key])
    return _expression_holds(expression, node.labels.get(key))


def _required_affinity_holds(affinity: Mapping[str, Any], node: Node) -> bool:
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = (required or {}).get("nodeSelectorTerms") or []
    if not terms:
        return True
    fields = {"metadata.name": node.name}
    return any(
        all(_label_expression_holds(e, node) for e in term.get("matchExpressions") or [])
        and all(_expression_holds(e, fields.get(e.get("key", ""))) for e in term.get("matchFields") or [])
        and (term.get("matchExpressions") or term.get("matchFields"))
        for term in terms
    )


@dataclass(frozen=True)
class Need:
    """`count` identical pods of `requests`, each needing a node its constraints accept."""

    count: int
    requests: Mapping[str, int]
    constraints: Constraints = field(default_factory=Constraints)
    label: str = ""  # what the pods are, for messages ("task group executor")
    slot: bool = True  # each takes a pod slot (False: devices of a claim pods share, allocated once)


def _wanted(need: Need) -> Amounts:
    """What one pod of the need takes of a node: its requests and one pod slot."""
    requests = need.requests
    return {**requests, PODS: requests.get(PODS, 0) + 1000} if need.slot else dict(requests)


def _copies(free: Mapping[str, int], wanted: Mapping[str, int]) -> int:
    """How many pods that each take `wanted` (a pod slot among it) fit in `free`."""
    # A pod slot is always wanted, so at least one amount is positive and bounds the count.
    return min(free.get(name, 0) // amount for name, amount in wanted.items() if amount > 0)


def _shape(amounts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(amounts.items()))


def constraints_key(constraints: Iterable[Constraints]) -> str:
    return json.dumps([dataclasses.asdict(c) for c in constraints], sort_keys=True, default=str)


class Room:
    """Free room per node, consumed as pods are (hypothetically) placed.

    Admission tries every waiting gang against the whole cluster's room in each cycle, so a try must
    cost about what it places, not a pass over every node: copies share the room they started from and
    keep apart only the nodes they took room on, and the nodes that can hold a pod of a given shape are
    found once per starting room (placing only takes room, so a node that could not hold such a pod at
    the start never can). What a set of constraints accepts is likewise found once per set."""

    def __init__(self, nodes: Iterable[Node], used: Mapping[str, Mapping[str, int]]) -> None:
        ordered = sorted(nodes, key=lambda n: n.name)
        self._begin(ordered, {node.name: node.free(used.get(node.name, {})) for node in ordered})

    @classmethod
    def of_free(cls, ordered: Sequence[Node], free: Mapping[str, Mapping[str, int]]) -> Room:
        """The room of `ordered` nodes (sorted by name) with the `free` room of each, which the room
        only reads: the caller hands over a snapshot it will not change."""
        room = cls.__new__(cls)
        room._begin(ordered, free)
        return room

    def _begin(self, ordered: Sequence[Node], free: Mapping[str, Mapping[str, int]]) -> None:
        self.nodes = ordered
        self._start = free
        self._changed: dict[str, Mapping[str, int]] = {}  # replaced, never changed in place: copies share them
        self._open: dict[tuple[tuple[str, int], ...], list[Node]] = {}  # shared by copies, as `_start` is
        self._accepted: dict[str, tuple[list[Node], frozenset[str]]] = {}
        self._accepted_free: dict[str, Amounts] = {}
        self._domains: dict[str, Mapping[str, Sequence[Node]]] = {}  # by label key, shared by copies

    def free_of(self, node: str) -> Mapping[str, int]:
        changed = self._changed.get(node)
        return self._start[node] if changed is None else changed

    def copy(self) -> Room:
        twin = Room.__new__(Room)
        twin.__dict__.update(self.__dict__)
        twin._changed = dict(self._changed)
        return twin

    def _open_for(self, wanted: Mapping[str, int]) -> list[Node]:
        shape = _shape(wanted)
        nodes = self._open.get(shape)
        if nodes is None:
            _make_room_in(self._open)
            nodes = self._open[shape] = [n for n in self.nodes if _copies(self._start[n.name], wanted) > 0]
        return nodes

    def take(self, need: Need, among: Sequence[Node] | None = None, seats: list[str] | None = None) -> int:
        """Place up to `need.count` pods, first fit in node order (on the nodes `among` only, when
        given: one topology domain, say); return how many were placed, and append the node of each to
        `seats`, when given."""
        wanted = _wanted(need)
        left = need.count
        for node in self._open_for(wanted) if among is None else among:
            if left == 0:
                break
            free = self.free_of(node.name)
            copies = _copies(free, wanted)
            if copies <= 0 or not need.constraints.accepts(node):
                continue
            placed = min(left, copies)
            self._take_on(node.name, wanted, placed)
            if seats is not None:
                seats += [node.name] * placed
            left -= placed
        return need.count - left

    def _take_on(self, node: str, wanted: Mapping[str, int], count: int) -> None:
        free = self.free_of(node)
        self._changed[node] = {**free, **{name: free.get(name, 0) - amount * count for name, amount in wanted.items()}}

    def take_seats(self, needs: Sequence[Need], seats: Sequence[Sequence[str]]) -> None:
        """Take the room of pods already given their nodes (`seats`: for each need, a node per pod), on
        those nodes, whether or not it is still free there."""
        for need, nodes in zip(needs, seats, strict=True):
            wanted = _wanted(need)
            for node in nodes:
                if node in self._start:
                    self._take_on(node, wanted, 1)

    def reserve(self, needs: Sequence[Need]) -> bool:
        """Take the room of every need if all of them fit, else take nothing; whether they fit."""
        return self.seat(needs) is not None

    def seat(self, needs: Sequence[Need], among: Sequence[Node] | None = None) -> list[list[str]] | None:
        """Take the room of every need if all of them fit (on the nodes `among` only, when given), and
        say where: for each need, the node of each of its pods. None, and nothing taken, when they do
        not all fit."""
        trial = self.copy()
        seats: list[list[str]] = [[] for _ in needs]
        if any(trial.take_all(needs, among, seats)):
            return None
        self.adopt(trial)
        return seats

    def adopt(self, trial: Room) -> None:
        """Take what a copy of this room took (and nothing else happened to this room meanwhile)."""
        self._changed = trial._changed

    def take_all(
        self, needs: Sequence[Need], among: Sequence[Node] | None = None, seats: Sequence[list[str]] | None = None
    ) -> list[int]:
        """Place every need, largest pods first (fewer nodes can hold them), on the nodes `among` only
        when given; return the shortfall of each need, in the order given, and append where each pod
        went to that need's `seats`, when given."""
        order = sorted(range(len(needs)), key=lambda i: -sum(needs[i].requests.values()))
        short = [0] * len(needs)
        for index in order:
            short[index] = needs[index].count - self.take(needs[index], among, None if seats is None else seats[index])
        return short

    def copies(self, need: Need, among: Sequence[Node]) -> int:
        """How many pods of the need's size the nodes `among` hold now (its constraints aside)."""
        wanted = _wanted(need)
        return sum(_copies(self.free_of(node.name), wanted) for node in among)

    def domains(self, key: str) -> Mapping[str, Sequence[Node]]:
        """The nodes by their value of label `key` (nodes without it in none), each in name order;
        found once per starting room, as the nodes' labels do not change while it lives."""
        found = self._domains.get(key)
        if found is None:
            _make_room_in(self._domains)
            grouped: dict[str, list[Node]] = {}
            for node in self.nodes:
                value = node.labels.get(key)
                if value is not None:
                    grouped.setdefault(value, []).append(node)
            found = self._domains[key] = grouped
        return found

    def _accepting(self, key: str, constraints: Sequence[Constraints]) -> tuple[list[Node], frozenset[str]]:
        accepted = self._accepted.get(key)
        if accepted is None:
            _make_room_in(self._accepted)
            nodes = [n for n in self.nodes if any(c.accepts(n) for c in constraints)]
            accepted = self._accepted[key] = (nodes, frozenset(n.name for n in nodes))
        return accepted

    def accepting(self, constraints: Sequence[Constraints]) -> frozenset[str]:
        """The names of the nodes any of `constraints` accepts."""
        return self._accepting(constraints_key(constraints), constraints)[1]

    def free_on(self, constraints: Sequence[Constraints]) -> Amounts:
        """The free room (what is not overcommitted) of the nodes any of `constraints` accepts, summed."""
        key = constraints_key(constraints)
        accepted, names = self._accepting(key, constraints)
        start = self._accepted_free.get(key)
        if start is None:
            _make_room_in(self._accepted_free)
            start = self._accepted_free[key] = _positive_sum(self._start[n.name] for n in accepted)
        total = dict(start)
        if self._changed:
            for name, free in self._changed.items():
                if name in names:
                    for resource, amount in self._start[name].items():
                        total[resource] = total.get(resource, 0) - max(0, amount)
                    for resource, amount in free.items():
                        total[resource] = total.get(resource, 0) + max(0, amount)
        return total


def _make_room_in(remembered: dict[Any, Any]) -> None:
    if len(remembered) >= MAX_REMEMBERED:
        remembered.clear()


def _positive_sum(frees: Iterable[Mapping[str, int]]) -> Amounts:
    total: Amounts = {}
    for free in frees:
        for name, amount in free.items():
            total[name] = total.get(name, 0) + max(0, amount)
    return total
