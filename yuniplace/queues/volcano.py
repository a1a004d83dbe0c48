"""Volcano's Queues (`scheduling.volcano.sh/v1beta1`, kind Queue) read into yuniplace's queue model.

- `spec.capability` is the queue's max.
- `spec.deserved` is what the queue gets back under contention and lends while idle: yuniplace's
  guarantee. `spec.guarantee.resource`, what Volcano reserves for the queue and never lends, is its
  guarantee too where deserved does not name the resource; since yuniplace cannot lend one part of a
  guarantee and keep the other, a queue with a reservation does not lend (sharing off) unless its
  annotation `yuniplace.io/sharing` says otherwise. guarantee ≤ deserved ≤ capability, per resource.
- `spec.reclaimable: false`: what it uses beyond its share is never taken back (QueueSpec.reclaimable).
- `spec.weight` is checked, and warned of when it is not 1: yuniplace does not divide room by weight.
- `spec.parent` builds the tree (Volcano's hierarchical queues): `root.<parent chain>.<name>`; a queue
  without one sits under root; the Queue named root is the root, whose room is the cluster's. A dot in a
  name becomes `_dot_` in the path (YuniKorn's rule for names made into queues); applications may still
  name the queue by its name (QueueConfig.names).
- `status.state` (or the older `spec.state`) Closed or Closing: the queue takes no new applications.
- `spec.affinity.nodeGroupAffinity` with one required node group: the queue's pool is the nodes labelled
  `volcano.sh/nodegroup-name=<group>`. Annotations `yuniplace.io/node-selector`, `yuniplace.io/sharing`
  and `yuniplace.io/borrowing` set what Volcano has no field for.
Volcano's Queues have no ACL: anyone may submit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from yuniplace.gang.keys import Key
from yuniplace.gang.resources import format_quantity
from yuniplace.gang.taskgroups import RESOURCE_NAME
from yuniplace.queues import tree
from yuniplace.queues.model import ROOT, QueueConfig, QueueSpec
from yuniplace.queues.problems import Findings
from yuniplace.queues.quantity import BadQuantity, kubernetes_milli
from yuniplace.queues.settings import Source, keys
from yuniplace.queues.values import BadValue

API_VERSION = "scheduling.volcano.sh/v1beta1"
KIND = "Queue"
NODE_GROUP_LABEL = "volcano.sh/nodegroup-name"
KEYS = (
    Key(
        NODE_GROUP_LABEL,
        "label",
        "node",
        "you",
        "the node group a Volcano Queue's one required node group "
        "(`spec.affinity.nodeGroupAffinity`) names: the nodes of its pool",
    ),
)
CLOSED_STATES = ("Closed", "Closing")
KNOWN_STATES = ("Open", "Closed", "Closing", "Unknown")
MAX_QUEUES = 10_000
MAX_DEPTH = 32
MAX_WEIGHT = 2**31 - 1
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
ANNOTATIONS = keys(Source.VOLCANO)  # yuniplace's settings for what Volcano has no field for
OWN_PREFIX = "yuniplace.io/"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def source_of(name: str) -> str:
    return f"Volcano Queue {name}"


@dataclass
class _Queue:
    name: str
    parent: str
    spec: QueueSpec
    written: dict[tuple[str, str], tuple[str, Any]] = field(default_factory=dict)  # (kind, resource) → (field, value)
    children: list[_Queue] = field(default_factory=list)
    path: str = ""
    broken: bool = False  # its chain of parents cannot be followed to the root


def read_volcano_queues(queues: Sequence[Mapping[str, Any]]) -> QueueConfig:
    """The Volcano Queues as a queue configuration (root included, and each Queue's name in
    QueueConfig.names); empty without any Queue. InvalidQueues lists every problem, each naming the
    Queue and the field."""
    if not queues:
        return QueueConfig()  # no Queue: no configuration (admission then behaves as without one)
    findings = Findings("Volcano Queues")
    if len(queues) > MAX_QUEUES:
        findings.error("", "", len(queues), f"Queues are more than the limit of {MAX_QUEUES}")
        findings.raise_errors()
    read: dict[str, _Queue] = {}
    root_source = source_of(ROOT)
    seen: set[str] = set()
    for index, raw in enumerate(queues):
        queue = _read(raw, index, findings)
        if queue is None:
            continue
        if queue.name in seen:
            findings.error("", "metadata.name", queue.name, "is the name of another Queue", source=queue.spec.source)
            continue
        seen.add(queue.name)
        if queue.name == ROOT:
            _root(raw, findings)
            root_source = queue.spec.source
        else:
            read[queue.name] = queue
    _place(read, findings)
    root = _Queue(ROOT, "", QueueSpec(ROOT, parent_queue=True, source=root_source), path=ROOT)
    root.children = [q for q in read.values() if q.parent == ROOT and q.path]
    tree.check(_tree_node(root), lambda excess: _report(excess, read, findings))
    findings.raise_errors()
    specs = {ROOT: root.spec}
    for queue in sorted(read.values(), key=lambda q: q.path.split(".")):
        specs[queue.path] = replace(queue.spec, path=queue.path)
    return QueueConfig(specs, (), {q.name: q.path for q in read.values()}, findings.warning_lines())


def _read(raw: Any, index: int, findings: Findings) -> _Queue | None:
    where = f"Volcano Queue #{index}"
    if not isinstance(raw, Mapping):
        findings.error("", "", raw, "must be a Queue object", source=where)
        return None
    metadata = _mapping(raw.get("metadata"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        findings.error("", "metadata.name", name, "must be the Queue's name", source=where)
        return None
    source = source_of(name)
    if raw.get("apiVersion") != API_VERSION or raw.get("kind") != KIND:
        findings.error(
            "", "kind", f"{raw.get('apiVersion')} {raw.get('kind')}", f"must be {API_VERSION} {KIND}", source=source
        )
        return None
    if len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        findings.error("", "metadata.name", name, "is not a Kubernetes object name", source=source)
        return None
    reader = _Reader(findings, source)
    spec = raw.get("spec") if raw.get("spec") is not None else {}
    if not isinstance(spec, Mapping):
        reader.error("spec", spec, "must be a mapping")
        return None
    annotations = _mapping(metadata.get("annotations"))
    return reader.queue(name, spec, raw.get("status") or {}, annotations)


class _Reader:
    def __init__(self, findings: Findings, source: str) -> None:
        self.findings = findings
        self.source = source

    def error(self, field_: str, value: Any, expected: str) -> None:
        self.findings.error("", field_, value, expected, source=self.source)

    def warn(self, field_: str, value: Any, expected: str) -> None:
        self.findings.warn("", field_, value, expected, source=self.source)

    def queue(self, name: str, spec: Mapping[str, Any], status: Any, annotations: Mapping[str, Any]) -> _Queue:
        written: dict[tuple[str, str], tuple[str, Any]] = {}
        capability = self.resources(spec.get("capability"), "spec.capability")
        guarantee_spec = _mapping(spec.get("guarantee"))
        reserved = self.resources(guarantee_spec.get("resource"), "spec.guarantee.resource")
        deserved = self.resources(spec.get("deserved"), "spec.deserved")
        self.ordered(reserved, "spec.guarantee.resource", deserved, "spec.deserved")
        guaranteed = {**{r: a for r, (a, _) in reserved.items()}, **{r: a for r, (a, _) in deserved.items()}}
        for resource in guaranteed:
            origin = ("spec.deserved", deserved) if resource in deserved else ("spec.guarantee.resource", reserved)
            written[("guaranteed", resource)] = (f"{origin[0]}.{resource}", origin[1][resource][1])
        for resource, (_, text) in capability.items():
            written[("max", resource)] = (f"spec.capability.{resource}", text)
        parent = spec.get("parent") or ROOT
        if not isinstance(parent, str):
            self.error("spec.parent", parent, "must be the name of the parent Queue")
            parent = ROOT
        self.ignored(spec)
        own = self.annotations(annotations)
        selector = self.pool(spec.get("affinity"), own.get("node_selector", {}))
        self.weight(spec.get("weight"))
        return _Queue(
            name,
            parent,
            QueueSpec(
                path="",
                guaranteed=guaranteed,
                max={r: a for r, (a, _) in capability.items()} or None,
                node_selector=selector,
                sharing=own.get("sharing", not reserved),
                borrowing=own.get("borrowing", True),
                source=self.source,
                reclaimable=self.flag(spec.get("reclaimable"), "spec.reclaimable"),
                open=self.open(status, spec.get("state")),
            ),
            written,
        )

    def resources(self, raw: Any, where: str) -> dict[str, tuple[int, Any]]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.error(where, raw, 'must be a mapping of resources to quantities ({cpu: "4", memory: 8Gi})')
            return {}
        amounts: dict[str, tuple[int, Any]] = {}
        for resource, value in raw.items():
            entry = f"{where}.{resource}"
            if not isinstance(resource, str) or not RESOURCE_NAME.match(resource) or len(resource) > 253:
                self.error(entry, resource, "is not a resource name (cpu, memory, pods, nvidia.com/gpu…)")
                continue
            try:
                amounts[resource] = (kubernetes_milli(value), value)
            except BadQuantity as error:
                self.error(entry, value, str(error))
        return amounts

    def ordered(
        self,
        small: Mapping[str, tuple[int, Any]],
        small_field: str,
        large: Mapping[str, tuple[int, Any]],
        large_field: str,
    ) -> None:
        for resource, (amount, text) in small.items():
            if resource in large and amount > large[resource][0]:
                self.error(
                    f"{small_field}.{resource}", text, f"is above {large_field}.{resource} ({large[resource][1]})"
                )

    def flag(self, raw: Any, where: str) -> bool:
        if raw is None:
            return True
        if not isinstance(raw, bool):
            self.error(where, raw, "must be true or false")
            return True
        return raw

    def weight(self, raw: Any) -> None:
        if raw is None or raw == 1:
            return
        if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_WEIGHT:
            self.error("spec.weight", raw, f"must be a whole number from 1 to {MAX_WEIGHT}")
        else:
            self.warn("spec.weight", raw, "has no effect: yuniplace does not divide room between queues by weight")

    def open(self, status: Any, deprecated: Any) -> bool:
        """Closed or Closing in the status (Volcano's word), or, without one, in the older spec.state."""
        state = status.get("state") if isinstance(status, Mapping) else None
        where = "status.state"
        if not state:
            state, where = deprecated, "spec.state"
        if not state:
            return True
        if state not in KNOWN_STATES:
            self.warn(where, state, f"is not a Volcano Queue state ({', '.join(KNOWN_STATES)}): taken as Open")
        return state not in CLOSED_STATES

    def annotations(self, annotations: Mapping[str, Any]) -> dict[str, Any]:
        """The settings yuniplace's annotations set (field → value), read by the settings table."""
        own: dict[str, Any] = {}
        for key, value in annotations.items():
            if not isinstance(key, str) or not key.startswith(OWN_PREFIX):
                continue
            where = f"metadata.annotations.{key}"
            if key not in ANNOTATIONS.by_key or not isinstance(value, str):
                self.error(where, value, f"is not a yuniplace setting (there are {', '.join(ANNOTATIONS.by_key)})")
                continue
            try:
                own.update(ANNOTATIONS.read(key, value))
            except BadValue as bad:
                self.error(where, value, str(bad))
        return own

    def pool(self, affinity: Any, annotated: Mapping[str, str]) -> dict[str, str]:
        selector = dict(annotated)
        if affinity is None:
            return selector
        affinity = _mapping(affinity)
        groups = _mapping(affinity.get("nodeGroupAffinity"))
        required = groups.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        where = "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        if groups.get("preferredDuringSchedulingIgnoredDuringExecution") or affinity.get("nodeGroupAntiAffinity"):
            self.warn(
                "spec.affinity",
                dict(affinity),
                "has no effect beyond one required node group: a pool is one node selector",
            )
        if not required:
            return selector
        if not isinstance(required, list) or len(required) != 1 or not isinstance(required[0], str):
            self.error(where, required, "must name one node group: a yuniplace pool is one node selector")
            return selector
        if selector.get(NODE_GROUP_LABEL, required[0]) != required[0]:
            self.error(where, required, f"contradicts the annotation {OWN_PREFIX}node-selector")
        return {**selector, NODE_GROUP_LABEL: required[0]}

    def ignored(self, spec: Mapping[str, Any]) -> None:
        for key, why in (
            ("priority", "has no effect: yuniplace does not order queues by priority"),
            ("extendClusters", "has no effect: yuniplace schedules one cluster"),
            ("type", "has no effect in yuniplace"),
        ):
            if spec.get(key):
                self.warn(f"spec.{key}", spec[key], why)


def _root(raw: Mapping[str, Any], findings: Findings) -> None:
    spec = _mapping(raw.get("spec"))
    set_ = [key for key in ("capability", "guarantee", "deserved") if spec.get(key)]
    if set_:
        findings.warn(
            "",
            "spec",
            set_,
            "of the root Queue have no effect: the root's room is the cluster's",
            source=source_of(ROOT),
        )


def _place(queues: Mapping[str, _Queue], findings: Findings) -> None:
    """Give every Queue its path from its chain of parents; unknown parents, cycles and chains deeper
    than the limit are errors (once, on the Queue where the chain breaks)."""
    for queue in queues.values():
        chain: list[_Queue] = []
        current = queue
        base = ""
        while not current.path and not current.broken:
            if current in chain:
                names = " → ".join(q.name for q in [*chain[chain.index(current) :], current])
                findings.error(
                    "", "spec.parent", current.parent, f"makes a cycle ({names})", source=current.spec.source
                )
                break
            chain.append(current)
            if current.parent == ROOT:
                base = ROOT
                break
            parent = queues.get(current.parent)
            if parent is None:
                findings.error("", "spec.parent", current.parent, "is not a Volcano Queue", source=current.spec.source)
                break
            current = parent
        else:
            base = current.path
        if base and base.count(".") + len(chain) > MAX_DEPTH:
            findings.error(
                "",
                "spec.parent",
                queue.parent,
                f"makes parents more than {MAX_DEPTH} levels deep",
                source=queue.spec.source,
            )
            base = ""
        for link in reversed(chain):
            link.broken = not base
            if base:
                base = f"{base}.{link.name.replace('.', '_dot_')}"
                link.path = base
    for queue in queues.values():
        if queue.path and queue.parent != ROOT:
            queues[queue.parent].children.append(queue)


def _tree_node(queue: _Queue) -> tree.Node:
    return tree.Node(queue.name, queue.spec.guaranteed, queue.spec.max, [_tree_node(c) for c in queue.children])


def _report(excess: tree.Excess, queues: Mapping[str, _Queue], findings: Findings) -> None:
    queue = queues[excess.path]
    field_, shown = queue.written.get((excess.kind, excess.resource), (f"spec.{excess.kind}", excess.amount))
    bound = format_quantity(Decimal(excess.bound) / 1000)
    if excess.bound_kind == "children":
        under = (
            "its children" if excess.bound_path == excess.path else f"the children of {source_of(excess.bound_path)}"
        )
        expected = f"is below the sum of what {under} are guaranteed ({bound})"
    elif excess.bound_path == excess.path:
        expected = f"is above spec.capability.{excess.resource} ({bound})"
    else:
        expected = f"is above the capability of its parent {source_of(excess.bound_path)} ({bound})"
    findings.error("", field_, shown, expected, source=queue.spec.source)
