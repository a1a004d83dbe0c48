"""Whether a tree of queues' guarantees and limits can all hold at once, checked as YuniKorn checks its
queues.yaml (and as Volcano checks hierarchical queues):

- a queue's max is at least its guarantee;
- a queue's max is no more than what its parents allow (the least max on the way up);
- the guarantees of a queue's children add up to no more than its guarantee, and no more than its max.
  A queue without a guarantee passes its children's sum up to be checked against its own parent.

A resource a queue does not name is not limited for it (YuniKorn's rule), so it is never compared.
Each source reports the problems in its own words, so the check hands back paths and resource names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Amounts = Mapping[str, int]


@dataclass
class Node:
    path: str
    guaranteed: Amounts
    max: Amounts | None
    children: list[Node] = field(default_factory=list)


@dataclass(frozen=True)
class Excess:
    """`path`'s `kind` amount of `resource` (guaranteed or max) breaks one of the rules: it is above
    (or, for a max, below) `bound`, set by `bound_kind` at `bound_path` (`children` for a sum)."""

    path: str
    kind: str  # "guaranteed" | "max"
    resource: str
    amount: int
    bound: int
    bound_path: str
    bound_kind: str  # "max" | "guaranteed" | "children"


def check(root: Node, report: Callable[[Excess], None]) -> None:
    """Report every broken rule in the tree under `root` (whose own amounts are not limited)."""
    _check(root, {}, report)


def _check(node: Node, parents_max: dict[str, tuple[int, str]], report: Callable[[Excess], None]) -> dict[str, int]:
    """The guarantee `node` stands for towards its parent: its own, or its children's sum without one."""
    own_max = node.max or {}
    for resource, amount in node.guaranteed.items():
        if resource in own_max and amount > own_max[resource]:
            report(Excess(node.path, "guaranteed", resource, amount, own_max[resource], node.path, "max"))
    effective = dict(parents_max)
    for resource, amount in own_max.items():
        bound = parents_max.get(resource)
        if bound is not None and amount > bound[0]:
            report(Excess(node.path, "max", resource, amount, bound[0], bound[1], "max"))
        if bound is None or amount < bound[0]:
            effective[resource] = (amount, node.path)
    children_sum: dict[str, int] = {}
    for child in node.children:
        for resource, amount in _check(child, effective, report).items():
            children_sum[resource] = children_sum.get(resource, 0) + amount
    for resource, total in sorted(children_sum.items()):
        if resource in node.guaranteed and total > node.guaranteed[resource]:
            report(Excess(node.path, "guaranteed", resource, node.guaranteed[resource], total, node.path, "children"))
        if resource in effective and total > effective[resource][0]:
            amount, where = effective[resource]
            report(Excess(where, "max", resource, amount, total, node.path, "children"))
    if any(node.guaranteed.values()):
        return dict(node.guaranteed)
    return children_sum
