"""ai-scheduler's Pools (`resource.aibee.cn/v1alpha1`, kind Pool, cluster-scoped) read into yuniplace's
queue model. ai-scheduler divides the nodes into pools by label; a pod names its pool with the
annotation `resource.aibee.cn/pool`, and a pool's own pods rank above pods of other pools that borrow
its idle nodes, whose room it takes back when it needs it.

- Each Pool is the queue `root.<name>` (a dot in the name becomes `_dot_`); pods name it by the Pool's
  name (QueueConfig.names).
- `spec.nodeSelector` is the queue's pool: its gangs go to those nodes only. yuniplace's pool is a set
  of labels with one value each, so `matchLabels` (and `matchExpressions` of operator In with one value)
  are read; any other expression is refused. A Pool without a node selector owns no node, as in
  ai-scheduler: its gangs can only use other Pools' idle nodes.
- A Pool is guaranteed what its nodes hold (the nodes' allocatable and their DRA devices, counted per
  class as `deviceclass.resource.kubernetes.io/<class>`, summed), so that it takes back what it lends:
  reclaim only ever takes back room a queue is guaranteed. The model has no "capacity of these nodes", so
  the reader is given the nodes and their devices, and the guarantee follows them as they are added,
  removed or relabelled. A node that more than one Pool selects is ai-scheduler's default pool's: it counts in no
  Pool's guarantee (each such Pool is warned of it), but the gangs of those Pools may still be placed on
  it, since a pool cannot keep its gangs off the nodes another pool also selects.
- `spec.disableSharing` is the inverse of `sharing`: a Pool that does not share is kept off by every
  other queue's gangs (node affinity), so nobody borrows its nodes.
- `spec.disableBorrowing` is the inverse of `borrowing`. In ai-scheduler a pool that borrows may have
  its pods placed on the idle nodes of other pools; in yuniplace a queue's gangs never leave its pool,
  so a Pool with nodes only ever uses its own (a Pool without nodes borrows, as in ai-scheduler).
- `spec.disablePreemption` is the inverse of `preemption` and of `preempts_within`: ai-scheduler
  documents it as whether the pool's own pods may preempt to get room in their pool, its borrowers
  first, then (a short pool preempting inside itself) its own pods of lower priority; it never preempts
  for a pool that sets it. The pool's pods may still be preempted, so `reclaimable` stays on: what is
  borrowed is always taken back by its owner.
- `spec.borrowingPools` and the fields of older releases (`supportResources`, `weight`, `quota`,
  `priorities`, `priority`) have no effect, and any other field is unknown: each is warned of.

ai-scheduler's default pool, which takes every pod naming no pool or one that does not exist, is
`root.default` (see `default_pool`): placement puts there whatever names no Pool. It cannot own "the
nodes no Pool selects" (no node selector says that), so its gangs may use the idle nodes of every Pool
that shares, as borrowers that are taken back whole when the Pool's own gang needs the room; ai-scheduler
keeps them on the default pool's nodes instead. A Pool named `default` is refused: that name is the
default pool's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from yuniplace.kube.names import LABEL_KEY, LABEL_VALUE, MAX_LABEL_KEY
from yuniplace.queues.model import ROOT, QueueConfig, QueueSpec
from yuniplace.queues.placement import DEFAULT_QUEUE, QUEUE_NAME
from yuniplace.queues.problems import Findings
from yuniplace.queues.quantity import BadQuantity, kubernetes_milli

API_VERSION = "resource.aibee.cn/v1alpha1"
KIND = "Pool"
MAX_POOLS = 1000  # ai-scheduler runs a scheduling loop per pool: thousands would be a mistake
MAX_LABELS = 16  # labels of one node selector (keeping off a pool takes a node-affinity term per label)
MAX_NODES_SHOWN = 3  # nodes named in a warning
DEFAULT_POOL = ""  # where _guarantees counts the default pool's room (no Pool has an empty name)
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SWITCHES = ("disablePreemption", "disableBorrowing", "disableSharing")
WITHOUT_EFFECT = {
    "supportResources": "has no effect: a Pool's nodes are the ones its node selector selects",
    "weight": "has no effect: a Pool is guaranteed what its nodes hold",
    "quota": "has no effect: a Pool is guaranteed what its nodes hold",
    "priorities": "has no effect: kube-scheduler scores the nodes",
    "priority": "has no effect: yuniplace does not order Pools by priority",
}
KNOWN = ("nodeSelector", "borrowingPools", *SWITCHES, *WITHOUT_EFFECT)


def source_of(name: str) -> str:
    return f"ai-scheduler Pool {name}"


def default_pool(home_nodes: Sequence[str] = (), guaranteed: Mapping[str, int] | None = None) -> QueueSpec:
    """ai-scheduler's default pool, for pods naming no Pool or one that does not exist: it owns the nodes
    no Pool selects and those more than one selects (`home_nodes`), is guaranteed what they hold, lends
    them while idle, and, like any Pool, borrows the idle nodes of Pools that share when its own do not
    hold a gang, and takes back what it lent."""
    return QueueSpec(
        DEFAULT_QUEUE,
        guaranteed=dict(guaranteed or {}),
        sharing=True,
        borrowing=True,
        preemption=True,
        owns_the_rest=True,
        home_nodes=tuple(home_nodes),
        source="ai-scheduler's default pool (implicit)",
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _plain(value: Any) -> Any:
    """A value as messages can show it (JSON): one that is not, a YAML date say, as its text."""
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return f"<{type(value).__name__}>"
    return value


@dataclass
class _Pool:
    name: str
    spec: QueueSpec
    written: Mapping[str, Any] = field(default_factory=dict)  # the node selector as written, for messages
    lenders: list[str] | None = None  # spec.borrowingPools, when it names any


def read_ai_scheduler_pools(
    pools: Sequence[Any], nodes: Sequence[Any] = (), devices: Mapping[str, Mapping[str, int]] | None = None
) -> QueueConfig:
    """The Pools as a queue configuration (root included, each Pool's name in QueueConfig.names), each
    Pool guaranteed what the `nodes` it alone selects hold, their DRA `devices` (node name -> resource ->
    milli-units, as devices/inventory.node_devices has them) included; empty without any Pool.
    InvalidQueues lists every problem, each naming the Pool and the field."""
    if not pools:
        return QueueConfig()
    findings = Findings("ai-scheduler Pools")
    if len(pools) > MAX_POOLS:
        findings.error("", "", len(pools), f"Pools are more than the limit of {MAX_POOLS}")
        findings.raise_errors()
    read: dict[str, _Pool] = {}
    for index, raw in enumerate(pools):
        pool = _read(raw, index, findings)
        if pool is None:
            continue
        if pool.name in read:
            findings.error("", "metadata.name", pool.name, "is the name of another Pool", source=pool.spec.source)
            continue
        read[pool.name] = pool
    _same_selectors(read.values(), findings)
    _lenders(read, findings)
    findings.raise_errors()
    guaranteed, shared = _guarantees(read, nodes, devices or {}, findings)
    specs = {ROOT: QueueSpec(ROOT, parent_queue=True, source="ai-scheduler Pools")}
    for pool in sorted(read.values(), key=lambda p: p.spec.path):
        specs[pool.spec.path] = replace(pool.spec, guaranteed=guaranteed.get(pool.name, {}))
    # A root.default configured by another source wins over the default pool (queues.config.merge).
    specs[DEFAULT_QUEUE] = default_pool(shared, guaranteed.get(DEFAULT_POOL, {}))
    return QueueConfig(specs, (), {p.name: p.spec.path for p in read.values()}, findings.warning_lines())


def _lenders(pools: Mapping[str, _Pool], findings: Findings) -> None:
    """Each Pool's borrowingPools as the queues it may borrow from; a name that is no Pool, or a Pool
    that does not share, is warned of and left out."""
    for pool in pools.values():
        written = pool.lenders
        if written is None:
            continue
        lenders = []
        for name in written:
            lender = pools.get(name)
            if lender is None or name == pool.name:
                findings.warn(
                    "", "spec.borrowingPools", name, "names no other Pool: it is left out", source=pool.spec.source
                )
            elif not lender.spec.sharing:
                findings.warn(
                    "",
                    "spec.borrowingPools",
                    name,
                    "does not share (disableSharing): it lends nothing",
                    source=pool.spec.source,
                )
            else:
                lenders.append(lender.spec.path)
        pool.spec = replace(pool.spec, lenders=tuple(lenders))


def _read(raw: Any, index: int, findings: Findings) -> _Pool | None:
    where = f"ai-scheduler Pool #{index}"
    if not isinstance(raw, Mapping):
        findings.error("", "", _plain(raw), "must be a Pool object", source=where)
        return None
    name = _mapping(raw.get("metadata")).get("name")
    if not isinstance(name, str) or not name:
        findings.error("", "metadata.name", _plain(name), "must be the Pool's name", source=where)
        return None
    source = source_of(name)
    if raw.get("apiVersion") != API_VERSION or raw.get("kind") != KIND:
        found = f"{_plain(raw.get('apiVersion'))} {_plain(raw.get('kind'))}"
        findings.error("", "kind", found, f"must be {API_VERSION} {KIND}", source=source)
        return None
    if len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        findings.error("", "metadata.name", name, "is not a Kubernetes object name", source=source)
        return None
    queue_name = name.replace(".", "_dot_")
    if not QUEUE_NAME.match(queue_name):
        findings.error(
            "",
            "metadata.name",
            name,
            "is longer than a queue name may be (64 characters, a dot counting 5)",
            source=source,
        )
        return None
    if f"{ROOT}.{queue_name}" == DEFAULT_QUEUE:
        findings.error(
            "",
            "metadata.name",
            name,
            "is the name of ai-scheduler's default pool, which takes every pod naming no Pool: name the Pool otherwise",
            source=source,
        )
        return None
    spec = raw.get("spec") if raw.get("spec") is not None else {}
    if not isinstance(spec, Mapping):
        findings.error("", "spec", _plain(spec), "must be a mapping", source=source)
        return None
    reader = _Reader(findings, source)
    selector = reader.node_selector(spec.get("nodeSelector"))
    disable = {switch: reader.flag(spec.get(switch), f"spec.{switch}") for switch in SWITCHES}
    lenders = reader.names(spec.get("borrowingPools"), "spec.borrowingPools")
    if lenders and disable["disableBorrowing"]:
        reader.warn("spec.borrowingPools", lenders, "has no effect: the Pool does not borrow (disableBorrowing)")
    reader.ignored(spec)
    return _Pool(
        name,
        QueueSpec(
            path=f"{ROOT}.{queue_name}",
            node_selector=selector,
            sharing=not disable["disableSharing"],
            borrowing=not disable["disableBorrowing"],
            preemption=not disable["disablePreemption"],
            preempts_within=not disable["disablePreemption"],
            source=source,
        ),
        _mapping(spec.get("nodeSelector")),
        lenders or None,
    )


class _Reader:
    def __init__(self, findings: Findings, source: str) -> None:
        self.findings = findings
        self.source = source

    def error(self, field_: str, value: Any, expected: str) -> None:
        self.findings.error("", field_, _plain(value), expected, source=self.source)

    def warn(self, field_: str, value: Any, expected: str) -> None:
        self.findings.warn("", field_, _plain(value), expected, source=self.source)

    def names(self, raw: Any, where: str) -> list[str]:
        """A list of Pool names (None or empty: none)."""
        if raw is None:
            return []
        if not isinstance(raw, list) or not all(isinstance(item, str) and item for item in raw):
            self.error(where, raw, "must be a list of Pool names")
            return []
        return list(dict.fromkeys(raw))

    def flag(self, raw: Any, where: str) -> bool:
        if raw is None:
            return False
        if not isinstance(raw, bool):
            self.error(where, raw, "must be true or false")
            return False
        return raw

    def node_selector(self, raw: Any) -> dict[str, str]:
        """The labels the Pool's nodes carry; {} for a Pool without a node selector (it owns no node)."""
        if raw is None:
            return {}
        where = "spec.nodeSelector"
        errors = len(self.findings.errors)
        if not isinstance(raw, Mapping):
            self.error(where, raw, "must be a label selector (matchLabels)")
            return {}
        selector: dict[str, str] = {}
        labels = raw.get("matchLabels")
        if labels is not None and not isinstance(labels, Mapping):
            self.error(f"{where}.matchLabels", labels, "must be a mapping of label keys to values")
            labels = None
        for key, value in (labels or {}).items():
            self.label(f"{where}.matchLabels", key, value, selector)
        expressions = raw.get("matchExpressions")
        if expressions is not None and not isinstance(expressions, list):
            self.error(f"{where}.matchExpressions", expressions, "must be a list of label requirements")
            expressions = None
        for index, written in enumerate(expressions or []):
            entry = f"{where}.matchExpressions[{index}]"
            expression = _mapping(written)
            values = expression.get("values")
            if expression.get("operator") != "In" or not isinstance(values, list) or len(values) != 1:
                self.error(
                    entry,
                    written,
                    "cannot be part of a yuniplace pool, which is a set of labels with one value each: "
                    "use matchLabels (or the operator In with one value)",
                )
                continue
            key = expression.get("key")
            if isinstance(key, str) and key in selector and selector[key] != values[0]:
                self.error(entry, dict(expression), f"contradicts {where}.matchLabels.{key}: no node has both")
                continue
            self.label(entry, key, values[0], selector)
        unknown = sorted(str(k) for k in raw if k not in ("matchLabels", "matchExpressions"))
        if unknown:
            self.warn(where, unknown, "are not fields of a label selector: they have no effect")
        if not selector and len(self.findings.errors) == errors:
            self.error(
                where,
                dict(raw),
                "selects every node, which no yuniplace pool can own beside the others: name its labels in "
                "matchLabels, or leave the node selector out for a Pool without nodes",
            )
        if len(selector) > MAX_LABELS:
            self.error(where, len(selector), f"labels are more than the limit of {MAX_LABELS}")
            return {}
        return selector

    def label(self, where: str, key: Any, value: Any, selector: dict[str, str]) -> None:
        if not isinstance(key, str) or len(key) > MAX_LABEL_KEY or not LABEL_KEY.match(key):
            self.error(where, key, "is not a label key")
        elif not isinstance(value, str):
            self.error(f"{where}.{key}", value, 'must be a string (a label value; quote it: "true")')
        elif not LABEL_VALUE.match(value):
            self.error(f"{where}.{key}", value, "is not a label value")
        else:
            selector[key] = value

    def ignored(self, spec: Mapping[str, Any]) -> None:
        for key, value in spec.items():
            if key in WITHOUT_EFFECT:
                if value not in (None, [], {}, 0, False, ""):
                    self.warn(f"spec.{key}", value, WITHOUT_EFFECT[key])
            elif key not in KNOWN:
                self.warn(f"spec.{key}", value, "is not a field of ai-scheduler's Pool: it has no effect")


def _same_selectors(pools: Iterable[_Pool], findings: Findings) -> None:
    """Two Pools selecting by the same labels: ai-scheduler gives their nodes to neither (each node
    matches both), which is never what was meant; refused on the second."""
    owners: dict[tuple[tuple[str, str], ...], str] = {}
    for pool in pools:
        if not pool.spec.node_selector:
            continue
        labels = tuple(sorted(pool.spec.node_selector.items()))
        if labels in owners:
            findings.error(
                "",
                "spec.nodeSelector",
                dict(pool.written),
                f"selects the same nodes as Pool {owners[labels]}: ai-scheduler gives them to neither",
                source=pool.spec.source,
            )
        else:
            owners[labels] = pool.name


def _guarantees(
    pools: Mapping[str, _Pool], nodes: Sequence[Any], devices: Mapping[str, Mapping[str, int]], findings: Findings
) -> tuple[dict[str, dict[str, int]], list[str]]:
    """What each Pool is guaranteed: the allocatable room of the nodes it alone selects, and their DRA
    devices (a device resource the node advertises itself, a device plugin's, is counted once); what the default
    pool is (under DEFAULT_POOL): the room of the nodes no Pool or more than one selects; and the names of
    the latter. Nodes more than one Pool selects are warned of on each such Pool (the first other Pool
    named)."""
    by_label: dict[tuple[str, str], list[_Pool]] = {}
    for pool in pools.values():
        if pool.spec.node_selector:
            by_label.setdefault(min(pool.spec.node_selector.items()), []).append(pool)
    guaranteed: dict[str, dict[str, int]] = {}
    shared: dict[str, tuple[str, list[str]]] = {}  # a Pool → another Pool selecting its nodes, and those nodes
    conflicts: list[str] = []  # the nodes more than one Pool selects
    for node in nodes:
        metadata = _mapping(_mapping(node).get("metadata"))
        labels = _mapping(metadata.get("labels"))
        matching = [
            pool
            for key, value in labels.items()
            if isinstance(value, str)
            for pool in by_label.get((key, value), ())
            if all(labels.get(k) == v for k, v in pool.spec.node_selector.items())
        ]
        if len(matching) > 1:
            names = sorted(pool.name for pool in matching)
            for pool in matching:
                other = next(name for name in names if name != pool.name)
                shared.setdefault(pool.name, (other, []))[1].append(str(metadata.get("name")))
            conflicts.append(str(metadata.get("name")))
        into = guaranteed.setdefault(matching[0].name if len(matching) == 1 else DEFAULT_POOL, {})
        allocatable = _allocatable(node)
        held = {**devices.get(str(metadata.get("name")), {}), **allocatable}
        for resource, amount in held.items():
            into[resource] = into.get(resource, 0) + amount
    for name, (other, node_names) in sorted(shared.items()):
        shown = ", ".join(node_names[:MAX_NODES_SHOWN]) + (", …" if len(node_names) > MAX_NODES_SHOWN else "")
        findings.warn(
            "",
            "spec.nodeSelector",
            dict(pools[name].written),
            f"selects {len(node_names)} node(s) Pool {other} selects too ({shown}): they are the default pool's, "
            "as ai-scheduler gives them to it; they count in neither Pool's guarantee, and the gangs of both may "
            "still be placed on them",
            source=pools[name].spec.source,
        )
    return guaranteed, sorted(conflicts)


def _allocatable(node: Any) -> dict[str, int]:
    """The node's allocatable room (its capacity where it reports none), in milli-units; a quantity the
    API server would not have stored is left out rather than guessed."""
    status = _mapping(_mapping(node).get("status"))
    room = _mapping(status.get("allocatable")) or _mapping(status.get("capacity"))
    amounts: dict[str, int] = {}
    for resource, value in room.items():
        try:
            amount = kubernetes_milli(value)
        except BadQuantity:
            continue
        if isinstance(resource, str) and amount:
            amounts[resource] = amount
    return amounts
