"""What each queue and pool holds, as admission counted it in its last cycle: for `yuniplace status
--queues` and the per-queue gauges, so that both show exactly what admission decides on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yuniplace.queues.model import Amounts
from yuniplace.queues.quota import Ledger, show_amount


@dataclass(frozen=True)
class QueueRow:
    path: str
    guaranteed: Amounts
    max: Amounts | None  # None: no limit
    used: Amounts  # its placeholders, its gangs' members, and ordinary pods on its pool's nodes
    borrowed: Amounts  # used beyond its guarantee (a parent: what the queues below it borrow)
    lent: Amounts  # its idle guarantee that other queues use
    waiting: int  # applications waiting for admission in it (and, for a parent, below it)
    waiting_applications: tuple[str, ...] = ()  # those in it, namespace/application, first in line first
    pool: Mapping[str, str] = field(default_factory=dict)  # the node selector of the nodes it owns


@dataclass(frozen=True)
class PoolRow:
    """A pool, as ai-scheduler's resource table shows it: what its nodes have, what every pod there takes
    (used) and what pods of other queues take (shared, lent), the pods of its gangs not on a node yet, and
    its switches (preempts, borrows, shares)."""

    queue: str  # the queue that owns it
    selector: Mapping[str, str]
    nodes: int
    capacity: Amounts
    allocatable: Amounts
    used: Amounts  # what every pod on its nodes takes
    shared: Amounts  # what pods of other queues take on its nodes
    sharing: bool
    pending: int = 0  # pods of its queue's gangs (and those of the queues below it) not on a node yet
    preemption: bool = True
    borrowing: bool = True
    rest: bool = False  # it owns the nodes no other pool selects (ai-scheduler's default pool)

    @property
    def switches(self) -> str:
        """ai-scheduler's p/b/s: preemption, borrowing, sharing, each on (+) or off (-)."""
        return "".join(
            ("+" if on else "-") + name
            for on, name in ((self.preemption, "p"), (self.borrowing, "b"), (self.sharing, "s"))
        )


def pools_total(pools: Sequence[PoolRow]) -> dict[str, Amounts]:
    """The cluster's total over every pool, column by column (each node is one pool's)."""
    total: dict[str, dict[str, int]] = {"capacity": {}, "allocatable": {}, "used": {}, "shared": {}}
    for pool in pools:
        for column, amounts in (
            ("capacity", pool.capacity),
            ("allocatable", pool.allocatable),
            ("used", pool.used),
            ("shared", pool.shared),
        ):
            for name, amount in amounts.items():
                total[column][name] = total[column].get(name, 0) + amount
    return dict(total)


@dataclass(frozen=True)
class UserRow:
    """What one submitter holds in a queue (and the queues below it), as its limits count it."""

    queue: str
    user: str
    applications: int
    used: Amounts


@dataclass(frozen=True)
class QueuesReport:
    queues: tuple[QueueRow, ...] = ()
    pools: tuple[PoolRow, ...] = ()
    users: tuple[UserRow, ...] = ()


def user_rows(ledger: Ledger) -> tuple[UserRow, ...]:
    """A row per queue and user holding anything in it."""
    return tuple(
        UserRow(queue, user, usage.applications, {name: amount for name, amount in usage.amounts.items() if amount})
        for (queue, user), usage in sorted(ledger.users.items())
        if usage.applications
    )


def queue_rows(ledger: Ledger, waiting: Mapping[str, Sequence[str]]) -> tuple[QueueRow, ...]:
    """A row per queue; `waiting`: the applications waiting in each queue, in line order."""
    lent = ledger.lent()
    # A leaf borrows beyond its own guarantee; a parent, what the leaves below it borrow.
    borrowed: dict[str, dict[str, int]] = {path: {} for path in ledger.config.queues}
    for leaf in ledger.config.leaves():
        for queue in ledger.config.ancestors(leaf.path):
            for name, amount in ledger.borrowed(leaf.path).items():
                borrowed[queue.path][name] = borrowed[queue.path].get(name, 0) + amount
    below: dict[str, int] = {}
    for path, names in waiting.items():
        for queue in ledger.config.ancestors(path):
            below[queue.path] = below.get(queue.path, 0) + len(names)
    return tuple(
        QueueRow(
            path=spec.path,
            guaranteed=dict(spec.guaranteed),
            max=None if spec.max is None else dict(spec.max),
            used={name: amount for name, amount in ledger.used[spec.path].items() if amount},
            borrowed=borrowed[spec.path],
            lent=lent[spec.path],
            waiting=below.get(spec.path, 0),
            waiting_applications=tuple(waiting.get(spec.path, ())),
            pool=dict(spec.node_selector),
        )
        for spec in sorted(ledger.config.queues.values(), key=lambda q: q.path)
    )


def quantities(amounts: Amounts | None) -> dict[str, str] | None:
    return None if amounts is None else {name: show_amount(name, amount) for name, amount in sorted(amounts.items())}


def as_json(report: QueuesReport) -> dict[str, Any]:
    return {
        "queues": [
            {
                "queue": row.path,
                "guaranteed": quantities(row.guaranteed),
                "max": quantities(row.max),
                "used": quantities(row.used),
                "borrowed": quantities(row.borrowed),
                "lent": quantities(row.lent),
                "waiting": row.waiting,
                "waitingApplications": list(row.waiting_applications),
                "pool": dict(row.pool),
            }
            for row in report.queues
        ],
        "pools": [
            {
                "queue": pool.queue,
                "nodeSelector": dict(pool.selector),
                "ownsTheRest": pool.rest,
                "nodes": pool.nodes,
                "capacity": quantities(pool.capacity),
                "allocatable": quantities(pool.allocatable),
                "used": quantities(pool.used),
                "shared": quantities(pool.shared),
                "pending": pool.pending,
                "preemption": pool.preemption,
                "borrowing": pool.borrowing,
                "sharing": pool.sharing,
            }
            for pool in report.pools
        ],
        "poolsTotal": {column: quantities(amounts) for column, amounts in pools_total(report.pools).items()}
        | {"nodes": sum(pool.nodes for pool in report.pools), "pending": sum(pool.pending for pool in report.pools)},
        "users": [
            {"queue": row.queue, "user": row.user, "applications": row.applications, "used": quantities(row.used)}
            for row in report.users
        ],
    }
