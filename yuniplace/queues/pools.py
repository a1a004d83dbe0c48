"""Node pools: a queue with a node selector owns the nodes it selects. Its gangs are placed on them
only; other queues' gangs may use them only while the pool is shared. Both are written into the task
groups (a node selector; required node affinity that keeps off a pool), so that admission's fit and
kube-scheduler's placement of the placeholders obey the same rule.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from yuniplace.gang.taskgroups import TaskGroup
from yuniplace.queues.model import QueueConfig

# A selector of more labels is avoided with one node-selector term per label combination.
MAX_AVOIDED_TERMS = 64


@dataclass(frozen=True)
class Pool:
    """Where a queue's gangs may go: the pool it owns (`require`; empty: no pool of its own), the pools of
    others it may not use (`avoid`), the nodes it owns besides by name (`named`: ai-scheduler's default
    pool owns those more than one Pool selects), and, for a gang that borrows, the pool of the queue
    whose idle nodes it may use besides its own (`lender`)."""

    require: Mapping[str, str] = dataclasses.field(default_factory=dict)
    avoid: tuple[Mapping[str, str], ...] = ()
    named: tuple[str, ...] = ()
    lender: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def free(self) -> bool:
        return not self.require and not self.avoid and not self.named and not self.lender

    def lent(self, lender: Mapping[str, str]) -> Pool:
        """This pool with the nodes of the pool `lender` selects borrowed besides."""
        return dataclasses.replace(self, lender=dict(lender))

    def owns(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether a node (its name and labels) is one of the pool's own (those it borrows aside)."""
        if name in self.named:
            return True
        return all(labels.get(k) == v for k, v in self.require.items()) and not any(
            all(labels.get(k) == v for k, v in avoided.items()) for avoided in self.avoid
        )


def pool_of(config: QueueConfig, queue: str) -> Pool:
    """The pool of the queue (its own node selector, or its nearest ancestor's), and the pools of
    queues that do not share, other than its own; for a queue that owns the rest (ai-scheduler's default
    pool), every queue's pool is another's, and the nodes more than one selects are its own by name."""
    spec = config.queues.get(queue)
    if spec is not None and spec.owns_the_rest:
        owned = tuple(dict(q.node_selector) for q in config.queues.values() if q.node_selector and q.path != queue)
        return Pool({}, owned, tuple(spec.home_nodes))
    require: Mapping[str, str] = next((q.node_selector for q in config.ancestors(queue) if q.node_selector), {})
    avoid = tuple(
        dict(q.node_selector)
        for q in config.queues.values()
        if q.node_selector and not q.sharing and dict(q.node_selector) != dict(require)
    )
    return Pool(dict(require), avoid)


def pool_owners(config: QueueConfig) -> dict[str, Pool]:
    """The queues that own nodes, each with its pool (the nodes it owns, whatever it may borrow): the
    first configured with each node selector, and a queue that owns the rest (ai-scheduler's default
    pool)."""
    owners: dict[tuple[tuple[str, str], ...], str] = {}
    for queue in config.queues.values():
        if queue.node_selector:
            owners.setdefault(tuple(sorted(queue.node_selector.items())), queue.path)
    owning = {path: Pool(dict(selector)) for selector, path in owners.items()}
    owning.update({q.path: pool_of(config, q.path) for q in config.queues.values() if q.owns_the_rest})
    return owning


def _avoiding(term: Mapping[str, Any], selector: Mapping[str, str]) -> list[dict[str, Any]]:
    """The node-selector terms equal to `term` and keeping off nodes `selector` matches: a node is off
    the pool when any one of the selector's labels differs (one term per label)."""
    expressions = list(term.get("matchExpressions") or [])
    return [
        {**term, "matchExpressions": [*expressions, {"key": key, "operator": "NotIn", "values": [value]}]}
        for key, value in sorted(selector.items())
    ]


def _avoiding_all(terms: list[dict[str, Any]], selectors: tuple[Mapping[str, str], ...]) -> list[dict[str, Any]]:
    for selector in selectors:
        terms = list(itertools.chain.from_iterable(_avoiding(term, selector) for term in terms))
        if len(terms) > MAX_AVOIDED_TERMS:
            raise ValueError(f"keeping off {len(selectors)} pools takes more than {MAX_AVOIDED_TERMS} node terms")
    return terms


def _within(labels: Mapping[str, str]) -> dict[str, Any]:
    """A node-selector term selecting the nodes that carry every one of `labels`."""
    return {"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(labels.items())]}


def _joined(term: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """The term selecting the nodes both terms select."""
    joined = dict(term)
    for part in ("matchExpressions", "matchFields"):
        items = [*(term.get(part) or []), *(other.get(part) or [])]
        if items:
            joined[part] = items
    return joined


def confine(group: TaskGroup, pool: Pool) -> TaskGroup:
    """The task group as the queue's pool allows it to be placed."""
    if pool.free:
        return group
    affinity: dict[str, Any] = dict(group.affinity)
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms: list[dict[str, Any]] = [dict(t) for t in required.get("nodeSelectorTerms") or []] or [{}]
    if not pool.named and not pool.lender:
        # Its own pool alone: the node selector holds it, and terms keep it off the pools it may not use.
        if pool.avoid:
            required["nodeSelectorTerms"] = _avoiding_all(terms, pool.avoid)
            node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
            affinity["nodeAffinity"] = node_affinity
        return dataclasses.replace(group, node_selector={**group.node_selector, **pool.require}, affinity=affinity)
    if not pool.require and not pool.avoid:
        return group  # it may use every node already, the lender's among them
    # Its own nodes, those it owns by name, or the lender's: one set of terms for each, any of which may hold it.
    places = _avoiding_all([_within(pool.require)], pool.avoid)
    if pool.named:
        places.append({"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(pool.named)}]})
    if pool.lender:
        places += _avoiding_all([_within(pool.lender)], tuple(s for s in pool.avoid if dict(s) != dict(pool.lender)))
    required["nodeSelectorTerms"] = [_joined(term, place) for term in terms for place in places]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    return dataclasses.replace(group, affinity=affinity)
