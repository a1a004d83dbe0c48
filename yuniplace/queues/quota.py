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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from yuniplace.gang.fit import PODS
from yuniplace.gang.resources import format_quantity
from yuniplace.queues.model import Amounts, QueueConfig, QueueSpec


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


class Ledger:
    """What every queue holds, its subtree included, as admission decides: taking a gang's room adds it
    to its queue and to every ancestor, so limits are checked at every level at once."""

    def __init__(self, config: QueueConfig, held_by_queue: Mapping[str, Amounts]) -> None:
        self.config = config
        self.used: dict[str, dict[str, int]] = {path: {} for path in config.queues}
        self.guaranteed_resources = frozenset(name for q in config.queues.values() for name in q.guaranteed)
        for path, amounts in held_by_queue.items():
            self.take(path, amounts)

    def take(self, path: str, amounts: Amounts) -> None:
        for queue in self.config.ancestors(path):
            _add(self.used[queue.path], amounts)

    def release(self, path: str, amounts: Amounts) -> None:
        for queue in self.config.ancestors(path):
            _add(self.used[queue.path], amounts, -1)

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
            if other.path != path and not other.sharing:
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


def reclaim(
    ledger: Ledger,
    queue: str,
    needs: Amounts,
    holders: Sequence[Holder],
    fits_without: Callable[[Sequence[Holder]], bool],
) -> list[Holder] | None:
    """The gangs to take back so that a gang of `queue` needing `needs` fits: only when the queue
    reclaims at all and the gang stays within its guarantee (it takes back what it lent, it does not
    borrow by force); only gangs of queues holding more than their guarantee, and only while they
    still do; placeholders of gangs not running first, then running gangs of the lowest priority,
    newest first. None when no such set makes `fits_without` true."""
    spec: QueueSpec = ledger.config.queues[queue]
    if not spec.preemption:
        return None
    after = dict(ledger.used[queue])
    _add(after, needs)
    if _excess(after, spec.guaranteed, ledger.guaranteed_resources & set(needs)):
        return None
    order = sorted(
        (h for h in holders if h.queue != queue),
        key=lambda h: (h.running, h.priority, -h.arrival),
    )
    taken: list[Holder] = []
    for holder in order:
        if not set(ledger.borrowed(holder.queue)) & set(needs):
            continue  # its queue holds no more than its guarantee of what is needed
        taken.append(holder)
        ledger.release(holder.queue, holder.amounts)
        if fits_without(taken):
            break
    else:
        for holder in taken:  # nothing enough: the ledger is left as it was
            ledger.take(holder.queue, holder.amounts)
        return None
    for holder in taken:
        ledger.take(holder.queue, holder.amounts)
    return taken
