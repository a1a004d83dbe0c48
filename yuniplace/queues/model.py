"""The queue model every configuration source is read into: a tree of queues (`root.<a>.<b>`), each
with what it is guaranteed, what it may use at most, the nodes it owns (a pool), and whether it lends
its idle room, borrows others' and reclaims its own; and the rules that place an application in a
queue.

Amounts are integers in milli-units per Kubernetes resource name (cpu, memory, nvidia.com/gpu, pods),
as admission's node arithmetic counts them, whatever units the source wrote them in.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

ROOT = "root"
Amounts = Mapping[str, int]


@dataclass(frozen=True)
class Submitters:
    """Who may place applications in a queue (YuniKorn's submitacl, as far as it maps to Kubernetes):
    namespaces, and service accounts as `system:serviceaccount:<namespace>:<name>`. Anyone when `anyone`."""

    anyone: bool = True
    namespaces: frozenset[str] = frozenset()
    service_accounts: frozenset[str] = frozenset()

    def allow(self, namespace: str, service_account: str | None) -> bool:
        if self.anyone or namespace in self.namespaces:
            return True
        return (
            service_account is not None
            and f"system:serviceaccount:{namespace}:{service_account}" in self.service_accounts
        )


class Ordering(enum.Enum):
    """How applications of one queue are ordered for admission (after priority, where it counts)."""

    FIFO = "fifo"  # by arrival (the default)
    FAIR = "fair"  # the application using least first (what its pods take on nodes), then by arrival


WILDCARD = "*"


@dataclass(frozen=True)
class Limit:
    """One of YuniKorn's user and group limits: for each user named (or, with `*`, every user without a
    limit of their own) and each group named (`*`: every group without one), at most `max_applications`
    running applications and `max_resources` held, in the queue and the queues below it."""

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    max_applications: int = 0  # 0: not limited
    max_resources: Amounts = field(default_factory=dict)  # a resource left out is not limited
    name: str = ""  # its `limit` description, for messages


@dataclass(frozen=True)
class QueueSpec:
    path: str  # "root.team-a.ml"
    guaranteed: Amounts = field(default_factory=dict)  # a resource left out is guaranteed nothing
    max: Amounts | None = None  # a resource left out is not limited (YuniKorn's rule); None: no limit at all
    node_selector: Mapping[str, str] = field(default_factory=dict)  # a pool: the nodes this queue owns
    sharing: bool = True  # others may borrow its idle guarantee (and its pool's idle nodes)
    borrowing: bool = True  # it may use more than its guarantee
    preemption: bool = True  # it may reclaim its guarantee from borrowers
    ordering: Ordering = Ordering.FIFO
    by_priority: bool = True  # the pods' priority orders first (YuniKorn's application.sort.priority)
    submitters: Submitters = Submitters()
    source: str = ""  # where it was configured, for messages ("queues.yaml", "Volcano Queue ml")
    # A parent even while it has no children (YuniKorn's `parent: true`): applications are only placed
    # below it, in queues the placement rules create.
    parent_queue: bool = False
    # What it uses beyond its guarantee may be taken back when another queue reclaims its own. False:
    # YuniKorn's preemption.policy disabled (its pods are never victims), Volcano's reclaimable: false.
    reclaimable: bool = True
    open: bool = True  # takes new applications (False: a Volcano Queue that is Closed or Closing)
    max_applications: int = 0  # YuniKorn's maxapplications: applications running at once; 0: no limit
    limits: tuple[Limit, ...] = ()  # per user and per group
    # A gang that does not fit may evict lower-priority gangs of its own queue, once nothing lent is left
    # to take back (ai-scheduler's pools: a short pool preempts inside itself).
    preempts_within: bool = False
    # The queues whose pools' idle nodes its gangs may borrow, when they do not fit on its own (None: every
    # queue's whose pool is shared; ai-scheduler's borrowingPools).
    lenders: tuple[str, ...] | None = None
    # It owns the nodes no queue's pool selects, and those more than one selects (ai-scheduler's default
    # pool); `home_nodes` names the latter, as labels cannot.
    owns_the_rest: bool = False
    home_nodes: tuple[str, ...] = ()
    # yuniplace admits Kubernetes' own gangs (the Workload API) placed in it; False leaves them to
    # kube-scheduler's gang plugin alone.
    native_gangs: bool = True

    @property
    def parent(self) -> str | None:
        head, _, _ = self.path.rpartition(".")
        return head or None

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]


class RuleKind(enum.Enum):
    PROVIDED = "provided"  # the queue the application names (label or annotation yunikorn.apache.org/queue)
    TAG = "tag"  # the value of one of the application's tags (`namespace`, or a label)
    FIXED = "fixed"  # always the same queue


@dataclass(frozen=True)
class RuleFilter:
    """Whom a placement rule applies to (YuniKorn's rule filter, as far as it maps to Kubernetes): the
    applications `who` allows, or, when `deny`, all others."""

    deny: bool = False
    who: Submitters = Submitters()

    def applies(self, namespace: str, service_account: str | None) -> bool:
        return self.who.allow(namespace, service_account) != self.deny


@dataclass(frozen=True)
class PlacementRule:
    """One of YuniKorn's placement rules: tried in order, the first that yields a queue places the
    application. `create`: the queue may be created (a leaf with no guarantee or limit of its own)
    if it does not exist; `parent`: the result is put under the queue this rule yields."""

    kind: RuleKind
    value: str = ""  # TAG: the tag (namespace, or a label key); FIXED: the queue
    create: bool = False
    parent: PlacementRule | None = None
    filter: RuleFilter = RuleFilter()


@dataclass(frozen=True)
class QueueConfig:
    """Every queue by path (root included) and the placement rules. Empty: no queue configuration, and
    admission queues applications by name, first in first out, as without one."""

    queues: Mapping[str, QueueSpec] = field(default_factory=dict)
    rules: tuple[PlacementRule, ...] = ()
    # Names that stand for a queue's path when an application provides them: a Volcano Queue's name
    # (cluster-wide unique, and how Volcano's jobs name their queue) wherever the queue sits.
    names: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # what was read but has no effect, each naming the queue and field

    @property
    def empty(self) -> bool:
        return not self.queues

    def ancestors(self, path: str) -> Iterator[QueueSpec]:
        """The queue itself, then each parent up to the root."""
        current: str | None = path
        while current is not None:
            queue = self.queues.get(current)
            if queue is None:
                return
            yield queue
            current = queue.parent

    def children(self, path: str) -> list[QueueSpec]:
        return [q for q in self.queues.values() if q.parent == path]

    def is_leaf(self, path: str) -> bool:
        """Applications are placed in leaves only; a queue with children, or configured as a parent, is none."""
        queue = self.queues.get(path)
        return queue is not None and not queue.parent_queue and not self.children(path)

    def leaves(self) -> list[QueueSpec]:
        parents = {q.parent for q in self.queues.values()}
        return [q for q in self.queues.values() if q.path not in parents and not q.parent_queue]
