"""Whether pods fit on nodes: the part of kube-scheduler's filtering that decides if a gang can be
reserved at all (resources, node selector, taints and tolerations, required node affinity).

Admission only needs a sound estimate: it asks "could every placeholder of this gang be placed on the
free room now?" and kube-scheduler still does the real placement. Amounts are integers in
milli-units, so the arithmetic over thousands of nodes stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from yuniplace.kube import parse_quantity

Amounts = dict[str, int]
PODS = "pods"  # every pod takes one of a node's pod slots
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


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
        )


@dataclass(frozen=True)
class Constraints:
    """Where a pod may go: the node-related parts of its spec (or of a task group)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] = field(default_factory=dict)

    def accepts(self, node: Node) -> bool:
        return (
            all(node.labels.get(k) == v for k, v in self.node_selector.items())
            and all(_tolerated(t, self.tolerations) for t in node.taints if t.get("effect") in BLOCKING_EFFECTS)
            and _required_affinity_holds(self.affinity, node)
        )


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


def _required_affinity_holds(affinity: Mapping[str, Any], node: Node) -> bool:
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = (required or {}).get("nodeSelectorTerms") or []
    if not terms:
        return True
    fields = {"metadata.name": node.name}
    return any(
        all(_expression_holds(e, node.labels.get(e.get("key", ""))) for e in term.get("matchExpressions") or [])
        and all(_expression_holds(e, fields.get(e.get("key", ""))) for e in term.get("matchFields") or [])
        and (term.get("matchExpressions") or term.get("matchFields"))
        for term in terms
    )


@dataclass(frozen=True)
class Need:
    """`count` identical pods of `requests`, each needing a node its constraints accept."""

    count: int
    requests: Mapping[str, int]
    constraints: Constraints
    label: str = ""  # what the pods are, for messages ("task group executor")


def _copies(free: Mapping[str, int], requests: Mapping[str, int]) -> int:
    """How many pods of `requests` fit in `free` (one pod slot each)."""
    wanted = {**requests, PODS: requests.get(PODS, 0) + 1000}
    # A pod slot is always wanted, so at least one amount is positive and bounds the count.
    return min(free.get(name, 0) // amount for name, amount in wanted.items() if amount > 0)


class Room:
    """Free room per node, consumed as pods are (hypothetically) placed."""

    def __init__(self, nodes: Iterable[Node], used: Mapping[str, Mapping[str, int]]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.free: dict[str, Amounts] = {}
        for node in self.nodes:
            taken = used.get(node.name, {})
            self.free[node.name] = {name: amount - taken.get(name, 0) for name, amount in node.allocatable.items()}

    def copy(self) -> Room:
        twin = Room.__new__(Room)
        twin.nodes = self.nodes
        twin.free = {name: dict(free) for name, free in self.free.items()}
        return twin

    def take(self, need: Need) -> int:
        """Place up to `need.count` pods, first fit in node order; return how many were placed."""
        left = need.count
        for node in self.nodes:
            if left == 0:
                break
            free = self.free[node.name]
            copies = _copies(free, need.requests)
            if copies <= 0 or not need.constraints.accepts(node):
                continue
            placed = min(left, copies)
            for name, amount in need.requests.items():
                free[name] = free.get(name, 0) - amount * placed
            free[PODS] = free.get(PODS, 0) - 1000 * placed
            left -= placed
        return need.count - left

    def reserve(self, needs: Sequence[Need]) -> bool:
        """Take the room of every need if all of them fit, else take nothing; whether they fit."""
        trial = self.copy()
        if any(trial.take_all(needs)):
            return False
        self.free = trial.free
        return True

    def take_all(self, needs: Sequence[Need]) -> list[int]:
        """Place every need, largest pods first (fewer nodes can hold them); return the shortfall of
        each need, in the order given."""
        order = sorted(range(len(needs)), key=lambda i: -sum(needs[i].requests.values()))
        short = [0] * len(needs)
        for index in order:
            short[index] = needs[index].count - self.take(needs[index])
        return short
