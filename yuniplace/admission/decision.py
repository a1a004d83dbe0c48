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

from yuniplace.admission.line import units
from yuniplace.admission.snapshot import IN_FLIGHT, App, Snapshot
from yuniplace.admission.tickets import Granted, Refused, Ticket, Waiting
from yuniplace.gang import pods as p
from yuniplace.gang.fit import Need, Room
from yuniplace.gang.groups import GroupConsent
from yuniplace.gang.resources import format_quantity
from yuniplace.gang.state import AppState
from yuniplace.queues.quota import Holder, Ledger, preempt_within, reclaim
from yuniplace.runtime.events import Reason

log = logging.getLogger(__name__)
MAX_SHOWN_QUEUE = 63

ANOTHER_NAMESPACE = "an application of another namespace"
ARRIVAL_CAP_S = 30.0  # the longest a gang whose members are still being created waits for them


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
    # A gang whose members all exist and which fits now starts on the nodes admission chose, without
    # placeholders (False: placeholders always, as YuniKorn does).
    direct_start: bool = True
    # How long after its latest new pod a gang whose members are still being created (every task group
    # has some, not all) waits for the rest before admission decides: all there, it starts directly.
    # A Job controller creating a thousand pods keeps some coming every few milliseconds.
    direct_start_wait_s: float = 1.0


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
        needs = app.needs
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


@dataclass(frozen=True)
class Memory:
    """What admission carries from one cycle to the next."""

    tickets: Mapping[p.AppKey, Ticket] = field(default_factory=dict)
    granted: frozenset[p.AppKey] = frozenset()  # admitted and not reserving yet
    reclaiming: Mapping[p.AppKey, Reclaim] = field(default_factory=dict)  # gangs whose room is taken back
    spared: frozenset[p.AppKey] = frozenset()  # gangs a budget kept whole: no victims for a while


@dataclass(frozen=True)
class Decided:
    """One cycle's decisions."""

    tickets: Mapping[p.AppKey, Ticket]
    granted: frozenset[p.AppKey]
    reclaiming: Mapping[p.AppKey, Reclaim]  # every gang whose room is being taken back
    reclaims: Mapping[p.AppKey, Reclaim]  # those this cycle chose
    next_cycle_at: float | None  # the next time a decision may change with time alone (see Decision)
    waiting_by_queue: Mapping[str, int]
    ledger: Ledger | None  # what each queue holds, as this cycle counted it


def decide(snapshot: Snapshot, rules: AdmissionRules, memory: Memory = Memory()) -> Decided:
    """Every waiting application's ticket, unit by unit in line, over one snapshot: a pure function of
    its arguments. One application's bad data costs that application its admission, never the others
    theirs."""
    apps = snapshot.apps
    granted = {
        key
        for key in memory.granted
        if (app := apps.get(key)) is not None and app.state == AppState.PENDING and not app.backing_off
    }
    # A reclaim lasts until its gang's pods have left their nodes (evicted pods may take a while to
    # stop): until then the room is not free, and choosing another victim for it would take more
    # than the waiting gang needs.
    reclaiming = {key: why for key, why in memory.reclaiming.items() if snapshot.holds_room(key)}
    tickets: dict[p.AppKey, Ticket] = dict(snapshot.refused)
    decision = Decision(snapshot, rules, granted, memory.tickets, tickets, reclaiming, memory.spared)
    for unit in decision.guarantees_first(units(snapshot, rules.consent)):
        try:
            decision.decide(unit)
        except Exception as error:
            log.exception("admission cannot decide for %s", ", ".join(str(a.key) for a in unit))
            for app in unit:
                tickets[app.key] = Refused(
                    Reason.TASK_GROUPS_ERROR, f"admission cannot evaluate this application ({type(error).__name__})"
                )
    return Decided(
        tickets=tickets,
        granted=frozenset(granted),
        reclaiming={**reclaiming, **decision.reclaims},
        reclaims=decision.reclaims,
        next_cycle_at=decision.next_cycle_at,
        waiting_by_queue=decision.waiting_by_queue,
        ledger=decision.ledger,
    )


class Decision:
    """One admission cycle's running state: the room left, what each namespace holds and queues, and
    which queue's head claims what; `decide` is called for each unit in line. `granted` (the
    applications admitted and not reserving yet) is updated in place; `reclaims` collects the gangs
    whose room is taken back."""

    def __init__(
        self,
        snapshot: Snapshot,
        rules: AdmissionRules,
        granted: set[p.AppKey],
        previous: Mapping[p.AppKey, Ticket],
        tickets: dict[p.AppKey, Ticket],
        reclaiming: Mapping[p.AppKey, Reclaim],
        spared: frozenset[p.AppKey] = frozenset(),
    ) -> None:
        self._snapshot = snapshot
        self._rules = rules
        self._queues = queues = snapshot.config
        self._apps = apps = snapshot.apps
        self._now = snapshot.now
        self._granted = granted
        self._previous = previous
        self._tickets = tickets
        self._reclaiming = reclaiming
        self._spared = spared
        self._room = self._room_left()
        self.reclaims: dict[p.AppKey, Reclaim] = {}
        self._heads: dict[str, p.AppKey] = {}
        self.next_cycle_at: float | None = None  # a head's claim runs out, or a gang's members stop being waited for
        self._behind: Counter[str] = Counter()
        self._waiting: Counter[str] = Counter()
        self.waiting_by_queue: Counter[str] = Counter()
        self._placeholders: Counter[str] = Counter()
        self.ledger = None if queues.empty else Ledger(queues, snapshot.pool_usage)
        for app in apps.values():
            if app.state in IN_FLIGHT or app.key in granted:
                self._placeholders[app.key.namespace] += app.placeholder_budget
                if self.ledger is not None:
                    usage = app.usage if app.key not in granted else app.amounts
                    self.ledger.take(app.queue, usage, app.user)
        self._elastic_in_flight = any(
            app.state == AppState.RESERVING and any(need.count for need in app.needs_left) for app in apps.values()
        )

    def _room_left(self, without: Sequence[p.AppKey] = ()) -> Room:
        """The free room once every reservation in flight (and every one granted) has taken what it is
        still to take; `without` those applications, as if they and their pods were gone (a removal
        tried on the snapshot, which is left as it was)."""
        gone = set(without)
        room = self._snapshot.free_room(without=gone)
        for app in self._apps.values():
            if app.key in gone or (app.state not in IN_FLIGHT and app.key not in self._granted):
                continue
            ticket = self._previous.get(app.key)
            if app.key in self._granted and isinstance(ticket, Granted) and ticket.seats:
                room.take_seats(app.needs, [ticket.seats_of(need.label) for need in app.needs])
            else:
                room.take_all(app.needs_left)
        return room

    def _awaited_peers(self, app: App) -> list[str]:
        """The applications of its gang group it still waits for: ones not created yet, and ones of
        another namespace that have not named it back. Both read alike, so a tenant learns nothing of
        another namespace's applications from them."""
        awaited = []
        consent = self._rules.consent
        for ref in app.spec.gang_group:
            key = p.AppKey.parse(ref)
            if key == app.key:
                continue
            peer = self._snapshot.peer(key)
            if consent.trusts(app.key.namespace, key.namespace):
                if not peer.exists:
                    awaited.append(ref)
            elif not consent.joins(app.key, key, peer.gang_group):
                awaited.append(ref)
        return awaited

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
                    borrows[first.queue] = any(ledger.beyond_guarantee(app.queue, app.amounts) for app in unit)
                except Exception:  # one application's data must not reorder, or stop, everyone's cycle
                    log.exception("cannot tell whether %s borrows; it comes last", first.key)
                    borrows[first.queue] = True
        return sorted(units, key=lambda unit: borrows[unit[0].queue])

    def decide(self, unit: Sequence[App]) -> None:
        if all(a.key in self._granted for a in unit):
            self._tickets.update({a.key: self._previous.get(a.key, Granted()) for a in unit})
            return
        if self._still_arriving(unit):
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
        needs = [need for app in unit for need in app.needs]
        never = self._snapshot.empty.copy().take_all(needs)
        if any(never):
            self._grant(
                unit,
                lambda app: Granted(
                    f"the gang needs more than all matching nodes hold ({_describe(unit, never, app.key.namespace)}); "
                    "admitting it anyway, so that added nodes can take its placeholders; otherwise it times out"
                ),
            )
        elif (seats := self._direct_seats(unit, needs)) is not None:
            self._grant(unit, lambda _app: Granted(seats=seats))
        elif self._room.reserve(needs):
            self._grant(unit, lambda _app: Granted())
        elif not self._reclaim_for(unit, needs):
            self._queue(unit, needs)

    # -- the direct start -----------------------------------------------------------------------------

    def _still_arriving(self, unit: Sequence[App]) -> bool:
        """An application whose members are still being created (a Job's pods, coming together) is not
        decided while they keep coming, so that it may start directly once all exist: only once no new
        one has come for `direct_start_wait_s` (a Job whose parallelism is below the gang's minimum)
        or ARRIVAL_CAP_S after its first, a cycle decides it whatever has arrived. Until then it has no
        ticket, and none of its room."""
        if not self._rules.direct_start or len(unit) != 1 or not unit[0].arriving:
            return False
        first, latest = unit[0].arrived
        until = min(latest + self._rules.direct_start_wait_s, first + ARRIVAL_CAP_S)
        if self._now >= until:
            return False
        self.next_cycle_at = min(until, self.next_cycle_at or until)
        return True

    def _direct_seats(
        self, unit: Sequence[App], needs: Sequence[Need]
    ) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
        """Where each member of a gang that may start directly goes (its room taken), or None: a gang
        group, a gang with members yet to come, or one that does not fit now reserves with placeholders
        (which also keep its room while it grows). So does a gang while other pods wait to be scheduled:
        one that could go to a node of its seats could take the seat in the moment before its member is
        nominated to it, and the gang would then start in part, where a placeholder that loses the race
        only waits."""
        if not self._rules.direct_start or len(unit) != 1 or not unit[0].complete:
            return None
        trial = self._room.copy()
        seats = trial.seat(needs)
        if seats is None or self._snapshot.room.contended({node for nodes in seats for node in nodes}):
            return None
        self._room = trial
        return tuple((need.label, tuple(nodes)) for need, nodes in zip(needs, seats, strict=True))

    def _grant(self, unit: Sequence[App], ticket: Callable[[App], Granted]) -> None:
        for app in unit:
            self._tickets[app.key] = ticket(app)
            self._granted.add(app.key)
            self._placeholders[app.key.namespace] += app.spec.min_members
            if self.ledger is not None:
                self.ledger.take(app.queue, app.amounts, app.user)
            log.info("admitted %s", app.key)

    # -- queues -----------------------------------------------------------------------------------------

    def _queue_limit(self, unit: Sequence[App]) -> str | None:
        """What of its queue's configuration holds the unit back: a max or a maxapplications (its
        queue's or an ancestor's), a limit of its submitter or their group, or borrowing it may not do."""
        if self.ledger is None:
            return None
        for app in unit:
            needs = app.amounts
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
        return self._room.free_on([need.constraints for need in app.needs])

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
            and self._snapshot.nodes_of(other.key) & usable  # only room the gang could use is worth taking back
        ]
        if not holders:
            return False

        def fits_without(taken: Sequence[Holder]) -> bool:
            room = self._room_left([h.key for h in taken if isinstance(h.key, p.AppKey)])
            return room.reserve(needs)

        queue = _shown(app.queue)
        victims = reclaim(self.ledger, app.queue, app.amounts, holders, fits_without)
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
                    self.next_cycle_at = min(lapse, self.next_cycle_at or lapse)
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
