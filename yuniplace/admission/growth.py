"""Room that can come: the nodes a cluster autoscaler (Karpenter's NodePools) may still make, as admission
counts them.

A gang that fits no free room waits gated, and a gated pod is invisible to an autoscaler: nothing makes
the cluster grow for it. So admission counts what each NodePool can still make (its `limits`, less what
its NodeClaims have made) as nodes yet to come, shaped like the nodes it launches, and a gang that fits
only with them is admitted at once: its placeholders, pending pods of its members' shapes, are what the
autoscaler provisions for, all of them in one round. Gangs take such nodes in admission's order like any
room, so two gangs never hold half of what a pool can still make each.

A NodeClaim launched whose node has not registered yet is a node yet to come too (with the room it was
made with): its pool's limit already counts it, and the placeholders waiting for it take its room.

A node yet to come carries the labels the NodePool gives every node (its template's labels, and the
requirements with one value); a label whose value is chosen as the node is made (a zone among several,
an architecture the pool leaves open) is "open": a pod that asks for any value it may take may go there.
Topology domains are chosen among the nodes there are: a gang that requires one counts on no growth.

NodePools and NodeClaims are an administrator's and Karpenter's; still, nothing here trusts their shape:
a value that cannot be read leaves that part out (an unread limit is no limit, an unread shape unknown).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from yuniplace.gang.fit import PODS, Amounts, Node, milli

NODEPOOL_LABEL = "karpenter.sh/nodepool"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
# Where nodes yet to come sort: after every real node (node names are DNS subdomains, all below "~"),
# so first-fit placement uses the room there is before the room to come.
COMING_PREFIX = "~"
# Nodes yet to come counted for one pool at most: room for the largest gang admission takes (a node a
# member), and a bound on each cycle's work however large a pool's limit.
MAX_COMING_PER_POOL = 1000
NODES = "nodes"  # a NodePool limit on how many nodes it makes, not a resource of one
PODS_PER_NODE = 110_000  # kubelet's default pod slots, in milli-pods, where a pool's nodes do not say
UNBOUNDED = 10**15  # milli-units of a resource no limit bounds (a petacore): more than any gang asks
# Labels the autoscaler gives every node it makes, with a value it chooses where the pool leaves it open.
WELL_KNOWN = (
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "karpenter.sh/capacity-type",
)
# Requirements that bound the size of the nodes a pool makes: (label, resource, how a value reads).
INSTANCE_SIZE_LABELS = (
    ("karpenter.kwok.sh/instance-cpu", "cpu", "quantity"),
    ("karpenter.kwok.sh/instance-memory", "memory", "quantity"),
    ("karpenter.k8s.aws/instance-cpu", "cpu", "quantity"),
    ("karpenter.k8s.aws/instance-memory", "memory", "mebibytes"),
    ("karpenter.k8s.aws/instance-gpu-count", "nvidia.com/gpu", "quantity"),
    ("karpenter.azure.com/sku-cpu", "cpu", "quantity"),
    ("karpenter.azure.com/sku-memory", "memory", "mebibytes"),
    ("karpenter.azure.com/sku-gpu-count", "nvidia.com/gpu", "quantity"),
)
# What any node has: where a pool's requirements do not bound it, a node is taken to hold as much as a
# pod asks (its limits still bound the pool in all). Accelerators only a pool of unknown size may have.
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage")
ACCELERATORS = ("nvidia.com/gpu", "amd.com/gpu")
WHOLE = re.compile(r"^[0-9]{1,12}$")


def is_coming(node: str) -> bool:
    return node.startswith(COMING_PREFIX)


def _read_amounts(raw: Any) -> Amounts:
    """Resource amounts in milli-units; an amount that cannot be read is left out."""
    read: Amounts = {}
    for name, value in (raw or {}).items() if isinstance(raw, Mapping) else ():
        try:
            read[str(name)] = milli(value)
        except (ValueError, TypeError, ArithmeticError):
            continue
    return read


def _size(value: str, reads: str) -> int | None:
    """A size label's value in milli-units: a quantity, or a whole number of mebibytes."""
    try:
        if reads == "mebibytes":
            return int(value) * 1024 * 1024 * 1000 if WHOLE.match(value) else None
        return milli(value)
    except (ValueError, TypeError, ArithmeticError):
        return None


def _largest(requirement: Mapping[str, Any], reads: str) -> int | None:
    """The largest size a requirement on a size label lets a node have (None: no bound)."""
    operator, values = requirement.get("operator"), requirement.get("values") or []
    if not isinstance(values, list):
        return None
    sizes = [size for value in values if (size := _size(str(value), reads)) is not None]
    if operator == "In" and sizes:
        return max(sizes)
    if operator == "Lt" and sizes:
        return min(sizes) - (1000 if reads == "quantity" else 1024 * 1024 * 1000)
    return None


@dataclass(frozen=True)
class GrowingPool:
    """A NodePool as admission counts it: the node it makes (labels, open labels, taints, the room of one
    node where its requirements bound it), what it may make in all and what it has made."""

    name: str
    template: Node  # one node as the pool makes it; its room is a node's, or UNBOUNDED where unknown
    limits: Amounts  # what its nodes may have in all (NODES: how many); none given, no limit
    made: Amounts  # what its NodeClaims have, summed (NODES: how many)
    shape_known: bool  # whether its requirements say how large its nodes are

    def left(self) -> Amounts:
        """What it may still make, per limited resource."""
        return {name: max(0, limit - self.made.get(name, 0)) for name, limit in self.limits.items()}

    def coming(self) -> list[Node]:
        """The nodes it can still make, as nodes yet to come: as many of its shape as its limits hold, or,
        its nodes' size unknown, one as large as its limits leave."""
        left = self.left()
        if not self.shape_known:
            room = {**self.template.allocatable, **{r: a for r, a in left.items() if r != NODES}}
            return [self._node(0, room)] if left.get(NODES, 1000) > 0 else []
        count = MAX_COMING_PER_POOL
        for resource, amount in left.items():
            per_node = 1000 if resource == NODES else self.template.allocatable.get(resource, 0)
            if 0 < per_node < UNBOUNDED:
                count = min(count, amount // per_node)
        return [self._node(index, self.template.allocatable) for index in range(count)]

    def _node(self, index: int, room: Mapping[str, int]) -> Node:
        return Node(
            name=f"{self.template.name}/{index}",
            labels=self.template.labels,
            taints=self.template.taints,
            allocatable=dict(room),
            capacity=dict(room),
            open_labels=self.template.open_labels,
            coming_from=self.name,
        )

    def describe(self) -> str:
        """How a message names it: its node size and its limits, with what is made of them."""
        shape = ", ".join(
            f"{name} {_shown(amount)}"
            for name, amount in sorted(self.template.allocatable.items())
            if name != PODS and amount < UNBOUNDED
        )
        size = f"nodes of {shape}" if self.shape_known else "nodes of any size"
        limits = "; ".join(
            f"{name} limit {_shown(limit)}, {_shown(self.made.get(name, 0))} made"
            for name, limit in sorted(self.limits.items())
        )
        return f"NodePool {self.name} ({size}; {limits or 'no limits'})"


def _shown(amount: int) -> str:
    return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"


def _labels_of(
    template: Any, requirements: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, str], dict[str, frozenset[str] | None]]:
    """A node's fixed labels and open ones, from a pool's (or claim's) labels and requirements."""
    labels = {str(k): str(v) for k, v in template.items()} if isinstance(template, Mapping) else {}
    open_labels: dict[str, frozenset[str] | None] = {key: None for key in WELL_KNOWN if key not in labels}
    for requirement in requirements:
        key, operator = str(requirement.get("key") or ""), requirement.get("operator")
        values = requirement.get("values") or []
        if not key or not isinstance(values, list):
            continue
        if operator == "In" and len(values) == 1:
            labels[key] = str(values[0])
            open_labels.pop(key, None)
        elif operator == "In" and key not in labels:
            allowed = frozenset(str(v) for v in values)
            already = open_labels.get(key)
            open_labels[key] = allowed if already is None else already & allowed
        elif operator == "DoesNotExist":
            open_labels.pop(key, None)
        elif key not in labels and key not in open_labels:
            open_labels[key] = None  # chosen as the node is made, within bounds admission does not follow
    for key in list(open_labels):
        if key in labels:
            del open_labels[key]
    return labels, open_labels


def _requirements(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = spec.get("requirements") or []
    return [r for r in found if isinstance(r, Mapping)] if isinstance(found, list) else []


def _taints(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    found = spec.get("taints") or []
    return tuple(t for t in found if isinstance(t, Mapping)) if isinstance(found, list) else ()


def _shape(requirements: Iterable[Mapping[str, Any]]) -> Amounts:
    """The largest node a pool's requirements let it make, per resource they bound."""
    shape: Amounts = {}
    for requirement in requirements:
        for label, resource, reads in INSTANCE_SIZE_LABELS:
            if requirement.get("key") == label and (largest := _largest(requirement, reads)) is not None:
                shape[resource] = min(shape.get(resource, largest), largest)
    return shape


def growing_pool(nodepool: Mapping[str, Any], made: Amounts) -> GrowingPool | None:
    """A NodePool as admission counts it, given what its NodeClaims have made; None where it has no name."""
    name = str((nodepool.get("metadata") or {}).get("name") or "")
    if not name:
        return None
    spec = _mapping(nodepool.get("spec"))
    template = _mapping(spec.get("template"))
    node_spec = _mapping(template.get("spec"))
    requirements = _requirements(node_spec)
    labels, open_labels = _labels_of(_mapping(template.get("metadata")).get("labels") or {}, requirements)
    labels[NODEPOOL_LABEL] = name
    limits = {r: a for r, a in _read_amounts(spec.get("limits")).items() if r != PODS}
    shape = _shape(requirements)
    # A node holds what its requirements bound, and whatever else of a node's usual resources it is
    # asked (accelerators only where its requirements give it some); its size unknown, anything.
    accelerators = () if shape else ACCELERATORS
    unbounded = [r for r in (*BASE_RESOURCES, *accelerators, *limits) if r != NODES]
    room = {**dict.fromkeys(unbounded, UNBOUNDED), **shape}
    room[PODS] = PODS_PER_NODE if shape else UNBOUNDED
    reported = _read_amounts(_mapping(nodepool.get("status")).get("resources"))
    counted = {r: max(made.get(r, 0), reported.get(r, 0)) for r in {*made, *reported}}
    node = Node(
        name=f"{COMING_PREFIX}{name}",
        labels=labels,
        taints=_taints(node_spec),
        allocatable=room,
        open_labels=open_labels,
        coming_from=name,
    )
    return GrowingPool(name, node, limits, counted, bool(shape))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def claim_node(claim: Mapping[str, Any], pool: GrowingPool | None) -> Node | None:
    """A NodeClaim whose node has not registered yet, as a node yet to come with the room it was made
    with (its pool's node, before it is launched); None when it is going away or has no name."""
    meta = claim.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name or meta.get("deletionTimestamp"):
        return None
    spec, status = _mapping(claim.get("spec")), _mapping(claim.get("status"))
    labels, open_labels = _labels_of(meta.get("labels") or {}, _requirements(spec))
    room = _read_amounts(status.get("allocatable")) or _read_amounts(status.get("capacity"))
    if not room and pool is not None:
        room = dict(pool.template.allocatable)
    if not room:
        return None
    room.setdefault(PODS, PODS_PER_NODE)
    return Node(
        name=f"{COMING_PREFIX}{labels.get(NODEPOOL_LABEL, '')}/claim/{name}",
        labels=labels,
        taints=_taints(spec),
        allocatable=room,
        capacity=room,
        open_labels=open_labels,
        coming_from=labels.get(NODEPOOL_LABEL) or None,
    )


@dataclass(frozen=True)
class Coming:
    """What the autoscaler can still add, for one admission cycle: each pool, and the nodes yet to come
    (NodeClaims not registered yet, then what each pool's limits still hold)."""

    pools: tuple[GrowingPool, ...] = ()
    nodes: tuple[Node, ...] = field(default_factory=tuple)

    def pools_for(self, accepts: Callable[[Node], bool]) -> list[GrowingPool]:
        """The pools whose nodes `accepts` takes (a gang's pods could go there)."""
        return [pool for pool in self.pools if accepts(pool.template)]


class Growth:
    """The NodePools and NodeClaims as their watches deliver them; `coming` reads them for a cycle."""

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self._lock = threading.Lock()
        self._pools: dict[str, Mapping[str, Any]] = {}
        self._claims: dict[str, Mapping[str, Any]] = {}
        self._on_change = on_change

    def pools_listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            self._pools = {_name(item): item for item in items}
        self._on_change()

    def pool_event(self, kind: str, item: Mapping[str, Any]) -> None:
        self._event(self._pools, kind, item)

    def claims_listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            self._claims = {_name(item): item for item in items}
        self._on_change()

    def claim_event(self, kind: str, item: Mapping[str, Any]) -> None:
        self._event(self._claims, kind, item)

    def _event(self, into: dict[str, Mapping[str, Any]], kind: str, item: Mapping[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                into.pop(_name(item), None)
            else:
                into[_name(item)] = item
        self._on_change()

    def coming(self, registered: Callable[[str], bool]) -> Coming:
        """The pools and the nodes yet to come; `registered`: whether a node of that name is there (a
        NodeClaim whose node is, is room there is)."""
        with self._lock:
            pools, claims = list(self._pools.values()), list(self._claims.values())
        made: dict[str, Amounts] = {}
        for claim in claims:
            total = made.setdefault(_pool_of(claim), {NODES: 0})
            total[NODES] += 1000
            for resource, amount in _read_amounts(_mapping(claim.get("status")).get("capacity")).items():
                total[resource] = total.get(resource, 0) + amount
        growing = [g for raw in pools if (g := growing_pool(raw, made.get(_name(raw), {}))) is not None]
        by_name = {g.name: g for g in growing}
        unregistered = []
        for claim in claims:
            node = str(_mapping(claim.get("status")).get("nodeName") or "")
            if node and registered(node):
                continue
            if (made_node := claim_node(claim, by_name.get(_pool_of(claim)))) is not None:
                unregistered.append(made_node)
        nodes = sorted([*unregistered, *(n for g in growing for n in g.coming())], key=lambda n: n.name)
        return Coming(tuple(sorted(growing, key=lambda g: g.name)), tuple(nodes))


def _name(item: Mapping[str, Any]) -> str:
    return str(_mapping(item.get("metadata")).get("name") or "")


def _pool_of(claim: Mapping[str, Any]) -> str:
    return str(_mapping(_mapping(claim.get("metadata")).get("labels")).get(NODEPOOL_LABEL) or "")
