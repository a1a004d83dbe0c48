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
    """Where a queue's gangs may go: the pool it owns (`require`; empty: no pool of its own) and the
    pools of others it may not use (`avoid`)."""

    require: Mapping[str, str] = dataclasses.field(default_factory=dict)
    avoid: tuple[Mapping[str, str], ...] = ()

    @property
    def free(self) -> bool:
        return not self.require and not self.avoid


def pool_of(config: QueueConfig, queue: str) -> Pool:
    """The pool of the queue (its own node selector, or its nearest ancestor's), and the pools of
    queues that do not share, other than its own."""
    require: Mapping[str, str] = next((q.node_selector for q in config.ancestors(queue) if q.node_selector), {})
    avoid = tuple(
        dict(q.node_selector)
        for q in config.queues.values()
        if q.node_selector and not q.sharing and dict(q.node_selector) != dict(require)
    )
    return Pool(dict(require), avoid)


def _avoiding(term: Mapping[str, Any], selector: Mapping[str, str]) -> list[dict[str, Any]]:
    """The node-selector terms equal to `term` and keeping off nodes `selector` matches: a node is off
    the pool when any one of the selector's labels differs (one term per label)."""
    expressions = list(term.get("matchExpressions") or [])
    return [
        {**term, "matchExpressions": [*expressions, {"key": key, "operator": "NotIn", "values": [value]}]}
        for key, value in sorted(selector.items())
    ]


def confine(group: TaskGroup, pool: Pool) -> TaskGroup:
    """The task group as the queue's pool allows it to be placed."""
    if pool.free:
        return group
    node_selector = {**group.node_selector, **pool.require}
    affinity: dict[str, Any] = dict(group.affinity)
    if pool.avoid:
        node_affinity = dict(affinity.get("nodeAffinity") or {})
        required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms: list[dict[str, Any]] = [dict(t) for t in required.get("nodeSelectorTerms") or []] or [{}]
        for selector in pool.avoid:
            terms = list(itertools.chain.from_iterable(_avoiding(term, selector) for term in terms))
            if len(terms) > MAX_AVOIDED_TERMS:
                raise ValueError(f"keeping off {len(pool.avoid)} pools takes more than {MAX_AVOIDED_TERMS} node terms")
        required["nodeSelectorTerms"] = terms
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
        affinity["nodeAffinity"] = node_affinity
    return dataclasses.replace(group, node_selector=node_selector, affinity=affinity)
