"""The arithmetic of queues that share a cluster: what each queue holds, what it may still take (its
own max and every ancestor's), what it would borrow beyond its guarantee and whether the room it
would borrow is anyone's to lend, and which whole gangs to take back when a queue needs the guarantee
it lent.

Amounts are integer milli-units per resource name, summed over a gang's pods (placeholders and the
members that took their place; `pods` counts 1000 per pod). A resource a queue's max leaves out is not
limited; one its guarantee leaves out is guaranteed nothing. Guarantees are kept, lent and borrowed in
the resources some queue is guaranteed (cpu and memory, say): a gang's pod count, which every gang
needs, is no borrowing unless some queue is guaranteed pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from yuniplace.gang.fit import PODS
from yuniplace.gang.resources import format_quantity
from yuniplace.gang.userinfo import UserInfo
from yuniplace.queues.model import WILDCARD, Amounts, Limit, QueueConfig, QueueSpec

# Who an application without a recorded submitter counts as: YuniKorn's default user.
NOBODY = UserInfo("nobody")


def _add(into: dict[str, int], amounts: Amounts, sign: int = 1) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + sign * amount


def _excess(used: Amounts, bound: Amounts, names: Iterable[str]) -> dict[str, int]:
    """How far `used` goes beyond `bound`, for the resources named (a resource `bound` leaves out: 0)."""
    return {name: over for name in names if (over := used.get(name, 0) - bound.get(name, 0)) > 0}


@dataclass(frozen=True)
class Blocked:
    """Why a gang may not take room in its queue now."""

    reason: str


@dataclass
class Usage:
    """What one user, or one group, holds in a queue and its subtree."""

    applications: int = 0
    amounts: dict[str, int] = field(default_factory=dict)


def _applicable(queue: QueueSpec, kind: str, names: Sequence[str]) -> tuple[Limit, str] | None:
    """The limit of `queue` that holds for one of `names` (a user, or a user's groups in order), and
    the name it counts: the first named by a limit of their own, else the first under a wildcard
    limit, as YuniKorn resolves them."""

    def named(limit: Limit) -> frozenset[str]:
        return limit.users if kind == "user" else limit.groups

    for name in names:
        for limit in queue.limits:
            if name in named(limit):
                return limit, name
    wildcard = next((limit for limit in queue.limits if WILDCARD in named(limit)), None)
    return (wildcard, names[0]) if wildcard is not None and names else None


class Ledger:
    """What every queue holds, its subtree included, as admission decides: taking a gang's room adds it
    to its queue and to every ancestor, so limits are checked at every level at once. An application's
    room (`user` given) also counts as one running application of its queues, and of its submitter and
    the group its queues' limits track it by."""

    def __init__(self, config: QueueConfig, held_by_queue: Mapping[str, Amounts]) -> None:
        self.config = config
        self.used: dict[str, dict[str, int]] = {path: {} for path in config.queues}
        self.applications: Counter[str] = Counter()
        self.users: dict[tuple[str, str], Usage] = {}  # by (queue, user)
        self.groups: dict[tuple[str, str], Usage] = {}  # by (queue, group)
        self.guaranteed_resources = frozenset(name for q in config.queues.values() for name in q.guaranteed)
        for path, amounts in held_by_queue.items():
            self.take(path, amounts)

    def take(self, path: str, amounts: Amounts, user: UserInfo | None = None, sign: int = 1) -> None:
        """Count room in the queue; with `user`, an application's room, submitted by `user`."""
        for queue in self.config.ancestors(path):
            _add(self.used[queue.path], amounts, sign)
            if user is None:
                continue
            self.applications[queue.path] += sign
            for usage in self._usages(queue, user):
                usage.applications += sign
                _add(usage.amounts, amounts, sign)

    def release(self, path: str, amounts: Amounts, user: UserInfo | None = None) -> None:
        self.take(path, amounts, user, -1)

    def _usages(self, queue: QueueSpec, user: UserInfo) -> Iterator[Usage]:
        """The user's usage in the queue and that of the group the queue's limits count the user in."""
        yield self.users.setdefault((queue.path, user.user), Usage())
        group = _applicable(queue, "group", user.groups)
        if group is not None:
            yield self.groups.setdefault((queue.path, group[1]), Usage())

    def over_limits(self, path: str, needs: Amounts, user: UserInfo) -> Blocked | None:
        """The first limit the application would pass, in its queue or an ancestor: a maxapplications,
        or its submitter's or group's limit (applications and resources)."""
        for queue in self.config.ancestors(path):
            whose = "its" if queue.path == path else f"its parent {queue.path}'s"
            running = self.applications[queue.path]
            if queue.max_applications and running >= queue.max_applications:
                return Blocked(
                    f"queue {path} is at {whose} maxapplications: {running} of {queue.max_applications} "
                    "applications running"
                )
            for kind, names, usages in (
                ("user", (user.user,), self.users),
                ("group", user.groups, self.groups),
            ):
                found = _applicable(queue, kind, names)
                if found is None:
                    continue
                limit, name = found
                usage = usages.get((queue.path, name), Usage())
                label = (
                    f"{kind} {name} is at the limit {limit.name!r} of queue {queue.path}"
                    if limit.name
                    else (f"{kind} {name} is at queue {queue.path}'s {kind} limit")
                )
                if limit.max_applications and usage.applications >= limit.max_applications:
                    return Blocked(f"{label}: {usage.applications} of {limit.max_applications} applications running")
                after = dict(usage.amounts)
                _add(after, needs)
                over = _excess(after, limit.max_resources, (n for n in needs if n in limit.max_resources))
                if over:
                    resource = sorted(over)[0]
                    return Blocked(
                        f"{label}: {show_amount(resource, usage.amounts.get(resource, 0))} of "
                        f"{show_amount(resource, limit.max_resources[resource])} {resource} used, and the gang "
                        f"needs {show_amount(resource, needs[resource])}"
                    )
        return None

    def borrowed(self, path: str) -> dict[str, int]:
        """What the queue holds beyond its guarantee."""
        queue = self.config.queues[path]
        return _excess(self.used[path], queue.guaranteed, self.guaranteed_resources)

    def idle_guarantee(self, path: str) -> dict[str, int]:
        """What the queue is guaranteed and does not hold: room it may lend, or must be kept for it."""
        queue = self.config.queues[path]
        used = self.used[path]
        return {name: idle for name, amount in queue.guaranteed.items() if (idle := amount - used.get(name, 0)) > 0}

    def lent(self) -> dict[str, dict[str, int]]:
        """What each queue lends: the room queues use beyond their guarantees, shared among the leaves
        that lend (their idle guarantee, where sharing is on) in proportion to what each has idle; a
        parent lends what its leaves lend."""
        leaves = self.config.leaves()
        borrowed: dict[str, int] = {}
        idle: dict[str, dict[str, int]] = {}
        for leaf in leaves:
            _add(borrowed, self.borrowed(leaf.path))
            if leaf.sharing:
                idle[leaf.path] = self.idle_guarantee(leaf.path)
        idle_total: dict[str, int] = {}
        for amounts in idle.values():
            _add(idle_total, amounts)
        lent: dict[str, dict[str, int]] = {path: {} for path in self.config.queues}
        for path, amounts in idle.items():
            share = {
                name: amount * min(borrowed.get(name, 0), idle_total[name]) // idle_total[name]
                for name, amount in amounts.items()
            }
            for queue in self.config.ancestors(path):
                _add(lent[queue.path], {name: amount for name, amount in share.items() if amount})
        return lent

    def _owns_pool(self, path: str) -> bool:
        return any(queue.node_selector for queue in self.config.ancestors(path))

    def over_max(self, path: str, needs: Amounts) -> Blocked | None:
        """The first queue, the queue itself or an ancestor, whose max the gang would pass."""
        for queue in self.config.ancestors(path):
            if queue.max is None:
                continue
            after = dict(self.used[queue.path])
            _add(after, needs)
            over = _excess(after, queue.max, (name for name in needs if name in queue.max))
            if over:
                name = sorted(over)[0]
                held, limit = self.used[queue.path].get(name, 0), queue.max[name]
                whose = "its" if queue.path == path else f"its parent {queue.path}'s"
                return Blocked(
                    f"queue {path} is at {whose} max {name}: {show_amount(name, held)} of "
                    f"{show_amount(name, limit)} used, and the gang needs {show_amount(name, needs[name])}"
                )
        return None

    def beyond_guarantee(self, path: str, needs: Amounts) -> dict[str, int]:
        """What the queue would hold beyond its guarantee with the gang: what the gang borrows."""
        after = dict(self.used[path])
        _add(after, needs)
        return _excess(after, self.config.queues[path].guaranteed, self.guaranteed_resources & set(needs))

    def borrowing_blocked(self, path: str, needs: Amounts, free: Amounts) -> Blocked | None:
        """Whether the part of the gang beyond its queue's guarantee may be borrowed: the queue must
        borrow at all, and the room must not be guaranteed to a queue that does not lend (its idle
        guarantee is kept for it; `free` is the free room the gang could use)."""
        queue = self.config.queues[path]
        beyond = self.beyond_guarantee(path, needs)
        if not beyond:
            return None
        if not queue.borrowing:
            name = sorted(beyond)[0]
            return Blocked(
                f"queue {path} would go {show_amount(name, beyond[name])} beyond its guaranteed {name}, "
                "and it does not borrow"
            )
        kept: dict[str, int] = {}
        for other in self.config.leaves():
            # A queue that owns a pool keeps its idle room by keeping others off its nodes: that room is
            # not in `free` already, and counting it here too would hold it out twice.
            if other.path != path and not other.sharing and not self._owns_pool(other.path):
                _add(kept, self.idle_guarantee(other.path))
        for name, amount in needs.items():
            # Short of free room at all is the room's to say (the gang waits for capacity); here only
            # room that is free but kept for a queue that does not lend it.
            lendable = free.get(name, 0) - kept.get(name, 0)
            if lendable < amount <= free.get(name, 0):
                return Blocked(
                    f"the free {name} beyond queue {path}'s guarantee is guaranteed to queues that do not lend it"
                )
        return None


def show_amount(name: str, milli: int) -> str:
    """An amount as Kubernetes writes it (1500m, 4Gi), pods as a count."""
    return format_quantity(Decimal(milli) / 1000) if name != PODS else str(milli // 1000)


@dataclass(frozen=True)
class Holder:
    """A gang holding room that reclaim may take back: whole, or not at all."""

    key: object  # the application's key
    queue: str
    amounts: Amounts  # what it holds
    priority: int
    arrival: float  # when it took its room (its reservation began): newer gangs are taken back first
    running: bool  # its pods run (evicted) or it only holds placeholders (released)
    user: UserInfo = NOBODY  # who submitted it


def preempt_within(
    queue: str, priority: int, holders: Sequence[Holder], fits_without: Callable[[Sequence[Holder]], bool]
) -> list[Holder] | None:
    """The gangs of `queue` itself, of lower priority than `priority`, to evict so that a gang of it
    fits: the lowest priority first, newest first, whole gangs, as few as fit. None when no such set
    makes `fits_without` true."""
    order = sorted(
        (h for h in holders if h.queue == queue and h.priority < priority),
        key=lambda h: (h.running, h.priority, -h.arrival),
    )
    taken: list[Holder] = []
    for holder in order:
        taken.append(holder)
        if fits_without(taken):
            return taken
    return None


def reclaim(
    ledger: Ledger,
    queue: str,
    needs: Amounts,
    holders: Sequence[Holder],
    fits_without: Callable[[Sequence[Holder]], bool],
    on_its_nodes: frozenset[object] = frozenset(),
) -> list[Holder] | None:
    """The gangs to take back so that a gang of `queue` needing `needs` fits: only when the queue
    reclaims at all and the gang stays within its guarantee (it takes back what it lent, it does not
    borrow by force); only gangs of queues holding more than their guarantee, and only while they
    still do, or gangs holding room on the nodes the queue owns (`on_its_nodes`, by key: they borrowed
    its pool's nodes, whatever their own queue holds), and never those of a queue whose gangs are not
    reclaimable (YuniKorn's preemption.policy disabled, Volcano's reclaimable: false); placeholders of
    gangs not running first, then running gangs of the lowest priority, newest first. None when no such
    set makes `fits_without` true."""
    spec: QueueSpec = ledger.config.queues[queue]
    if not spec.preemption:
        return None
    after = dict(ledger.used[queue])
    _add(after, needs)
    if _excess(after, spec.guaranteed, ledger.guaranteed_resources & set(needs)):
        return None
    order = sorted(
        (h for h in holders if h.queue != queue and ledger.config.queues[h.queue].reclaimable),
        key=lambda h: (h.running, h.priority, -h.arrival),
    )
    taken: list[Holder] = []
    for holder in order:
        if holder.key not in on_its_nodes and not set(ledger.borrowed(holder.queue)) & set(needs):
            continue  # its queue holds no more than its guarantee of what is needed, nor room on these nodes
        taken.append(holder)
        ledger.release(holder.queue, holder.amounts, holder.user)
        if fits_without(taken):
            break
    else:
        for holder in taken:  # nothing enough: the ledger is left as it was
            ledger.take(holder.queue, holder.amounts, holder.user)
        return None
    for holder in taken:
        ledger.take(holder.queue, holder.amounts, holder.user)
    return taken
