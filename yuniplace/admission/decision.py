"""One admission cycle's decisions, unit by unit in queue order: what each application waiting to
reserve may do now (reserve, wait and why, be refused), given the room left, what each namespace holds
and queues, which queue's head claims what, and, with a queue configuration, each queue's limits,
guarantees and what reclaim may take back for it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from yuniplace.admission.tickets import Granted, Refused, Ticket, Waiting
from yuniplace.gang import pods as p
from yuniplace.gang.fit import PODS, Constraints, Need, Room, amounts
from yuniplace.gang.groups import GroupConsent
from yuniplace.gang.resources import format_quantity
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec
from yuniplace.gang.userinfo import UserInfo
from yuniplace.queues.model import Amounts, Ordering, QueueConfig, QueueSpec
from yuniplace.queues.pools import Pool, confine
from yuniplace.queues.quota import NOBODY, Holder, Ledger, preempt_within, reclaim
from yuniplace.runtime.events import Reason

log = logging.getLogger(__name__)
MAX_SHOWN_QUEUE = 63

# States in which an application's gang may still be taking room it was admitted to.
IN_FLIGHT = frozenset({AppState.RESERVING, AppState.RESERVED, AppState.RUNNING})
ANOTHER_NAMESPACE = "an application of another namespace"


@dataclass(frozen=True)
class AdmissionRules:
    """What keeps one tenant from holding up the others."""

    head_claim_s: float = 300.0  # a queue's head claims the room it can use for this long at most
    max_placeholders_per_namespace: int = 5000  # placeholders a namespace's gangs may hold at once (0: no limit)
    max_waiting_per_namespace: int = 100  # applications a namespace may have waiting at once (0: no limit)
    consent: GroupConsent = GroupConsent()
    # A queue's head waiting this long has its placeholders created anyway, for a cluster autoscaler
    # to see pending pods of the right shapes (None: never).
    placeholders_after_s: float | None = None


@dataclass(frozen=True)
class App:
    key: p.AppKey
    spec: GangSpec
    state: AppState
    arrival: tuple[float, int, str]  # created (in seconds), first seen by the controller, its key
    queue: str  # with a queue configuration, the queue it was placed in; else the name it asks for
    holding: Mapping[str, int]  # room taken on nodes, by group: placed placeholders and members
    needing: Mapping[str, int]  # live members taking no room yet, by group
    placeholders: int  # live placeholders
    backing_off: bool
    queued_since: float | None  # when it became first in its queue
    priority: int = 0  # its pods' priority, which orders it within a queue that orders by priority
    pool: Pool = field(default_factory=Pool)
    held: Amounts = field(default_factory=dict)  # what its pods take on nodes (placeholders and members)
    running: bool = False  # its originator runs: taking its room back means evicting it
    reserving_since: float | None = None  # when its reservation began: the newest is taken back first
    # Kubernetes' own gang (the Workload API): counted where it holds room and about to take it, never
    # decided and never evicted, since kube-scheduler, not yuniplace, starts it.
    native: bool = False
    user: UserInfo = NOBODY  # who submitted it (the webhook's record), for the limits of users and groups

    def _outstanding(self, group: str, min_member: int) -> int:
        missing = max(0, min_member - self.holding.get(group, 0))
        # Once reserved, only members still to be swapped in need room: the rest have had theirs.
        return (
            missing
            if self.state in (AppState.PENDING, AppState.RESERVING)
            else min(missing, self.needing.get(group, 0))
        )

    def needs(self, outstanding: bool) -> list[Need]:
        """The gang's room: all of it, or (outstanding) what no pod of it takes on a node yet; placed
        as its queue's pool allows."""
        needs = []
        for group in self.spec.groups:
            confined = confine(group, self.pool)
            needs.append(
                Need(
                    count=self._outstanding(group.name, group.min_member) if outstanding else group.min_member,
                    requests=amounts(confined.min_resource),
                    constraints=Constraints(confined.node_selector, tuple(confined.tolerations), confined.affinity),
                    label=group.name,
                )
            )
        return needs

    def amounts(self, outstanding: bool) -> dict[str, int]:
        """The gang's needs summed over its pods (`pods` counting 1000 a pod): what its queue accounts."""
        total: dict[str, int] = {}
        for need in self.needs(outstanding):
            for name, amount in {**need.requests, PODS: 1000}.items():
                total[name] = total.get(name, 0) + amount * need.count
        return total

    @property
    def usage(self) -> dict[str, int]:
        """What it counts against its queue: the room its pods take, and what it is yet to take."""
        total = dict(self.held)
        for name, amount in self.amounts(outstanding=True).items():
            total[name] = total.get(name, 0) + amount
        return total

    @property
    def placeholder_budget(self) -> int:
        """Placeholders it holds or is about to create: a namespace's share against its limit."""
        return self.spec.min_members if self.state in (AppState.PENDING, AppState.RESERVING) else self.placeholders


def in_line(app: App, queue: QueueSpec | None, capacity: Amounts) -> tuple[int, float, tuple[float, int, str]]:
    """The application's place in its queue's line, as YuniKorn sorts a queue's applications: by
    priority first (unless the queue disables it), then, for a fair queue, the one using least first
    (its largest share of any resource of the cluster), then by arrival."""
    priority = -app.priority if queue is None or queue.by_priority else 0
    share = 0.0
    if queue is not None and queue.ordering is Ordering.FAIR:
        share = max((amount / capacity[name] for name, amount in app.held.items() if capacity.get(name)), default=0.0)
    return priority, share, app.arrival


@dataclass(frozen=True)
class Reclaim:
    """A gang whose room is taken back for a queue that lent it: released (placeholders only) or
    evicted (running). `message` says who takes what from whom, for the victim's event."""

    beneficiary: p.AppKey
    message: str


def _shown(text: str, limit: int = MAX_SHOWN_QUEUE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(unit: Sequence[App], short: Sequence[int], viewer: str) -> str:
    """What of the unit's gangs does not fit, as `viewer`'s namespace may read it: its own
    applications by name and size, another namespace's only as such."""
    parts = []
    index = 0
    for app in unit:
        needs = app.needs(outstanding=False)
        missing = short[index : index + len(needs)]
        index += len(needs)
        if not any(missing):
            continue
        if app.key.namespace != viewer:
            parts.append(f"{ANOTHER_NAMESPACE} (of the same gang group) does not fit")
            continue
        for need, lacking in zip(needs, missing, strict=True):
            if lacking:
                size = ", ".join(
                    f"{name} {format_quantity(Decimal(amount) / 1000)}"
                    for name, amount in sorted(need.requests.items())
                )
                placed = need.count - lacking
                parts.append(f"{_shown(app.key.app_id)}/{need.label}: {placed} of {need.count} pods of ({size}) fit")
    return "; ".join(parts)


def _named_for(key: p.AppKey, viewer: str) -> str:
    return str(key) if key.namespace == viewer else ANOTHER_NAMESPACE


class Decision:
    """One admission cycle's running state: the room left, what each namespace holds and queues, and
    which queue's head claims what; `decide` is called for each unit in queue order. `granted` (the
    applications admitted and not reserving yet) is updated in place; `reclaims` collects the gangs
    whose room is taken back."""

    def __init__(
        self,
        *,
        rules: AdmissionRules,
        queues: QueueConfig,
        apps: Mapping[p.AppKey, App],
        room: Room,
        empty: Room,
        now: float,
        granted: set[p.AppKey],
        previous: Mapping[p.AppKey, Ticket],
        tickets: dict[p.AppKey, Ticket],
        awaited_peers: Callable[[App], list[str]],
        room_without: Callable[[Sequence[p.AppKey]], Room],
        reclaiming: Mapping[p.AppKey, Reclaim],
        spared: frozenset[p.AppKey] = frozenset(),
        pool_usage: Mapping[str, Amounts] | None = None,
        nodes_of: Callable[[p.AppKey], set[str]] = lambda _key: set(),
    ) -> None:
        self._rules = rules
        self._queues = queues
        self._apps = apps
        self._room = room
        self._empty = empty
        self._now = now
        self._granted = granted
        self._previous = previous
        self._tickets = tickets
        self._awaited_peers = awaited_peers
        self._room_without = room_without
        self._reclaiming = reclaiming
        self._spared = spared
        self._nodes_of = nodes_of  # where an application's pods take room
        self.reclaims: dict[p.AppKey, Reclaim] = {}
        self._heads: dict[str, p.AppKey] = {}
        self.claim_lapses_at: float | None = None
        self._behind: Counter[str] = Counter()
        self._waiting: Counter[str] = Counter()
        self.waiting_by_queue: Counter[str] = Counter()
        self._placeholders: Counter[str] = Counter()
        self.ledger = None if queues.empty else Ledger(queues, pool_usage or {})
        for app in apps.values():
            if app.state in IN_FLIGHT or app.key in granted:
                self._placeholders[app.key.namespace] += app.placeholder_budget
                if self.ledger is not None:
                    usage = app.usage if app.key not in granted else app.amounts(outstanding=False)
                    self.ledger.take(app.queue, usage, app.user)
        self._elastic_in_flight = any(
            app.state == AppState.RESERVING and any(need.count for need in app.needs(outstanding=True))
            for app in apps.values()
        )

    def guarantees_first(self, units: Sequence[Sequence[App]]) -> list[Sequence[App]]:
        """The units of queues whose head stays within its guarantee, before those of queues whose
        head would borrow: room a queue is guaranteed goes to it before another borrows it (else a
        borrower evicted for that queue could take the freed room back at once). Each queue's own
        order stays as it is."""
        if self.ledger is None:
            return list(units)
        ledger = self.ledger
        borrows: dict[str, bool] = {}
        for unit in units:
            first = unit[0]
            if first.queue not in borrows:
                try:
                    borrows[first.queue] = any(
                        ledger.beyond_guarantee(app.queue, app.amounts(outstanding=False)) for app in unit
                    )
                except Exception:  # one application's data must not reorder, or stop, everyone's cycle
                    log.exception("cannot tell whether %s borrows; it comes last", first.key)
                    borrows[first.queue] = True
        return sorted(units, key=lambda unit: borrows[unit[0].queue])

    def decide(self, unit: Sequence[App]) -> None:
        if all(a.key in self._granted for a in unit):
            self._tickets.update({a.key: self._previous.get(a.key, Granted()) for a in unit})
            return
        unit = [a for a in unit if a.key not in self._granted]  # granted members' room is counted already
        if self._too_large_for_namespace(unit):
            return
        first = unit[0]
        awaited = self._awaited_peers(first)
        if awaited:
            message = (
                f"waiting for the other applications of its gang group to appear and, in another namespace, to "
                f"name this one in theirs: {', '.join(awaited)}"
            )
            self._wait(
                unit,
                lambda app: (
                    message
                    if app.key.namespace == first.key.namespace
                    else "waiting for the rest of its gang group to appear"
                ),
                times_out=True,
            )
            return
        crowded = self._crowded_namespaces(unit)
        if crowded:
            self._wait(
                unit,
                lambda app: (
                    crowded.get(app.key.namespace)
                    or f"{ANOTHER_NAMESPACE} of its gang group is at its namespace's placeholder limit"
                ),
                times_out=True,
            )
            return
        limited = self._queue_limit(unit)
        if limited is not None:
            self._wait(unit, lambda _app: f"waiting for its queue: {limited}", times_out=False)
            return
        needs = [need for app in unit for need in app.needs(outstanding=False)]
        never = self._empty.copy().take_all(needs)
        if any(never):
            self._grant(
                unit,
                lambda app: Granted(
                    f"the gang needs more than all matching nodes hold ({_describe(unit, never, app.key.namespace)}); "
                    "admitting it anyway, so that added nodes can take its placeholders; otherwise it times out"
                ),
            )
        elif self._room.reserve(needs):
            self._grant(unit, lambda _app: Granted())
        elif not self._reclaim_for(unit, needs):
            self._queue(unit, needs)

    def _grant(self, unit: Sequence[App], ticket: Callable[[App], Granted]) -> None:
        for app in unit:
            self._tickets[app.key] = ticket(app)
            self._granted.add(app.key)
            self._placeholders[app.key.namespace] += app.spec.min_members
            if self.ledger is not None:
                self.ledger.take(app.queue, app.amounts(outstanding=False), app.user)
            log.info("admitted %s", app.key)

    # -- queues -----------------------------------------------------------------------------------------

    def _queue_limit(self, unit: Sequence[App]) -> str | None:
        """What of its queue's configuration holds the unit back: a max or a maxapplications (its
        queue's or an ancestor's), a limit of its submitter or their group, or borrowing it may not do."""
        if self.ledger is None:
            return None
        for app in unit:
            needs = app.amounts(outstanding=False)
            blocked = (
                self.ledger.over_max(app.queue, needs)
                or self.ledger.over_limits(app.queue, needs, app.user)
                or self.ledger.borrowing_blocked(app.queue, needs, self._free_for(app))
            )
            if blocked is not None:
                return blocked.reason
        return None

    def _free_for(self, app: App) -> dict[str, int]:
        """The free room on the nodes the application's pool lets it use, summed."""
        return self._room.free_on([need.constraints for need in app.needs(outstanding=False)])

    def _reclaim_for(self, unit: Sequence[App], needs: list[Need]) -> bool:
        """A gang of a queue that lent its guarantee takes it back from borrowers, or, in a queue that
        preempts within itself, evicts lower-priority gangs of its own: True when it waits for that
        (victims chosen now, or earlier and still going)."""
        if self.ledger is None or len(unit) != 1:
            return False
        app = unit[0]
        going = [victim for victim, reclaim_ in self._reclaiming.items() if reclaim_.beneficiary == app.key]
        if going:
            self._claim(app, needs, f"room being freed for it: {len(going)} gang(s) going")
            return True
        usable = self._room.accepting([need.constraints for need in needs])
        holders = [
            Holder(
                other.key,
                other.queue,
                other.usage,
                other.priority,
                other.reserving_since or other.arrival[0],
                other.running,
                other.user,
            )
            for other in self._apps.values()
            if other.state in IN_FLIGHT
            and not other.native
            and other.key not in self._reclaiming
            and other.key not in self._spared
            and other.queue in self._queues.queues
            and self._nodes_of(other.key) & usable  # only room the gang could use is worth taking back
        ]
        if not holders:
            return False

        def fits_without(taken: Sequence[Holder]) -> bool:
            room = self._room_without([h.key for h in taken if isinstance(h.key, p.AppKey)])
            return room.reserve(needs)

        queue = _shown(app.queue)
        victims = reclaim(self.ledger, app.queue, app.amounts(outstanding=False), holders, fits_without)
        if victims:
            lent = ", ".join(sorted({v.queue for v in victims}))
            self._take_back(
                app,
                victims,
                lambda victim: (
                    f"queue {queue} takes back room it is guaranteed and lent to queue "
                    f"{_shown(victim.queue)}, which holds more than its own guarantee"
                ),
            )
            self._claim(app, needs, f"taking back room its queue {queue} lent to {lent}: {len(victims)} gang(s)")
            return True
        if not self._queues.queues[app.queue].preempts_within:
            return False
        victims = preempt_within(app.queue, app.priority, holders, fits_without)
        if not victims:
            return False
        self._take_back(
            app,
            victims,
            lambda victim: (
                f"a gang of priority {app.priority} of its own queue {queue}, which preempts within "
                f"itself, needs its room (this gang's priority is {victim.priority})"
            ),
        )
        self._claim(app, needs, f"evicting {len(victims)} lower-priority gang(s) of its queue {queue}")
        return True

    def _take_back(self, app: App, victims: Sequence[Holder], why: Callable[[Holder], str]) -> None:
        """The victims' room is taken back for `app`, each whole; `why` says so in the victim's event."""
        assert self.ledger is not None
        for victim in victims:
            key = victim.key
            assert isinstance(key, p.AppKey)
            how = "evicting all its pods" if victim.running else "releasing its placeholders"
            self.reclaims[key] = Reclaim(app.key, f"{why(victim)}: {how}, the whole gang")
            self.ledger.release(victim.queue, victim.amounts, victim.user)

    def _claim(self, app: App, needs: list[Need], why: str) -> None:
        """The application waits for room being freed for it, and claims it meanwhile."""
        self._heads.setdefault(app.queue, app.key)
        self._room.take_all(needs)
        self.waiting_by_queue[app.queue] += 1
        self._tickets[app.key] = Waiting(f"waiting for free capacity: {why}", times_out=False)
        self._waiting[app.key.namespace] += 1

    # -- waiting in line ---------------------------------------------------------------------------

    def _queue(self, unit: Sequence[App], needs: list[Need]) -> None:
        """The unit waits: first in its queue it claims the room it can use (for a while), behind
        another it only waits."""
        first = unit[0]
        queue = first.queue
        self._behind[queue] += 1
        short = self._room.copy().take_all(needs)
        position = self._behind[queue]
        if queue not in self._heads:
            self._heads[queue] = first.key
            claimed_for = 0.0 if first.queued_since is None else self._now - first.queued_since
            after = self._rules.placeholders_after_s
            if after is not None and claimed_for >= after and not self._elastic_in_flight:
                self._elastic_in_flight = True
                self._grant(
                    unit,
                    lambda app: Granted(
                        f"no room for the gang after {claimed_for:.0f}s first in queue {_shown(queue)} "
                        f"({_describe(unit, short, app.key.namespace)}); creating its placeholders anyway, so that "
                        "a cluster autoscaler sees pods of the shapes it needs"
                    ),
                )
                return
            holds = claimed_for < self._rules.head_claim_s
            if holds:
                self._room.take_all(needs)  # the head claims what it can use; backfill only gets the rest
                if first.queued_since is not None:
                    lapse = first.queued_since + self._rules.head_claim_s
                    self.claim_lapses_at = min(lapse, self.claim_lapses_at or lapse)
                where = f"first in queue {_shown(queue)}, holding the room it can use until the rest is free"
            else:
                where = (
                    f"first in queue {_shown(queue)}; after {self._rules.head_claim_s:.0f}s it no longer holds room "
                    "for itself, so others may use it meanwhile"
                )
            self._wait(
                unit,
                lambda app: f"waiting for free capacity: {_describe(unit, short, app.key.namespace)}; {where}",
                times_out=True,
            )
            return
        head = self._heads[queue]
        self._wait(
            unit,
            lambda app: (
                f"waiting for free capacity: {_describe(unit, short, app.key.namespace)}; position "
                f"{position} in queue {_shown(queue)}, behind {_named_for(head, app.key.namespace)}"
            ),
            times_out=False,
        )

    def _wait(self, unit: Sequence[App], message: Callable[[App], str], *, times_out: bool) -> None:
        """The unit waits, unless a namespace of it has as many applications waiting as it may:
        then the whole unit is refused, so that no namespace can queue without bound."""
        limit = self._rules.max_waiting_per_namespace
        full = {a.key.namespace for a in unit if 0 < limit <= self._waiting[a.key.namespace]}
        if full:
            self._refuse(
                unit,
                {
                    namespace: f"namespace {namespace} already has {limit} applications waiting for admission, "
                    "as many as it may (--max-waiting-per-namespace)"
                    for namespace in full
                },
            )
            return
        for app in unit:
            self._tickets[app.key] = Waiting(message(app), times_out=times_out)
            self._waiting[app.key.namespace] += 1
            self.waiting_by_queue[app.queue] += 1

    def _refuse(self, unit: Sequence[App], reasons: Mapping[str, str]) -> None:
        """Each application hears what its own namespace exceeded, nothing of another's."""
        for app in unit:
            why = (
                reasons.get(app.key.namespace)
                or f"{ANOTHER_NAMESPACE} of its gang group is over its namespace's limits"
            )
            self._tickets[app.key] = Refused(Reason.GANG_REFUSED, f"admission refuses the gang: {why}")

    def _too_large_for_namespace(self, unit: Sequence[App]) -> bool:
        """A gang with more placeholders than its namespace may ever hold is refused at once."""
        limit = self._rules.max_placeholders_per_namespace
        reasons = {
            app.key.namespace: (
                f"the gang needs {app.spec.min_members} placeholders, more than the {limit} a namespace "
                "may hold (--max-placeholders-per-namespace)"
            )
            for app in unit
            if 0 < limit < app.spec.min_members
        }
        if reasons:
            self._refuse(unit, reasons)
        return bool(reasons)

    def _crowded_namespaces(self, unit: Sequence[App]) -> dict[str, str]:
        """Namespaces whose placeholders, with this unit's, would pass their limit now."""
        limit = self._rules.max_placeholders_per_namespace
        if limit <= 0:
            return {}
        wanted: Counter[str] = Counter()
        for app in unit:
            wanted[app.key.namespace] += app.spec.min_members
        return {
            namespace: (
                f"waiting for its namespace's other gangs to release placeholders: they hold "
                f"{self._placeholders[namespace]} of the {limit} a namespace may hold, and this gang needs {count}"
            )
            for namespace, count in wanted.items()
            if self._placeholders[namespace] + count > limit
        }
