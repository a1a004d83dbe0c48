"""One admission cycle's decisions, unit by unit in queue order: what each application waiting to
reserve may do now (reserve, wait and why, be refused), given the room left, what each namespace holds
and queues, which queue's head claims what, and, with a queue configuration, each queue's limits,
guarantees and what reclaim may take back for it.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from yuniplace.admission.domains import closest, first_required, place, shortfall
from yuniplace.admission.growth import GrowingPool, is_coming
from yuniplace.admission.line import units
from yuniplace.admission.snapshot import IN_FLIGHT, App, Snapshot
from yuniplace.admission.tickets import DECIDE, Granted, Refused, Ticket, Waiting, faulted
from yuniplace.devices.claims import ONE_DEVICE
from yuniplace.gang import pods as p
from yuniplace.gang.fit import PODS, Constraints, Need, Room
from yuniplace.gang.groups import GroupConsent
from yuniplace.gang.resources import format_quantity
from yuniplace.gang.state import AppState
from yuniplace.gang.topology import Domains, Pin
from yuniplace.queues.pools import pool_of
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
    # The same for a native gang (kube-scheduler's own), whose admission lifts no gate before all its
    # members exist: a burst of them (a Job's pods) is admitted whole once none has come for this long,
    # its gates lifted with nothing held; one whose members keep it waiting longer holds their room with
    # placeholders from then on.
    native_arrival_wait_s: float = 0.1


@dataclass(frozen=True)
class Reclaim:
    """A gang whose room is taken back for a queue that lent it: released (placeholders only) or
    evicted (running). `message` says who takes what from whom, for the victim's event; `within`, the
    one topology domain being freed, where the gang that takes the room back needs one."""

    beneficiary: p.AppKey
    message: str
    within: Pin | None = None


def _shown(text: str, limit: int = MAX_SHOWN_QUEUE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(unit: Sequence[App], short: Sequence[int], viewer: str, said: Mapping[p.AppKey, str] = {}) -> str:
    """What of the unit's gangs does not fit, as `viewer`'s namespace may read it: its own
    applications by name and size (or, `said`, why they fit in no domain they require), another
    namespace's only as such."""
    parts = []
    index = 0
    for app in unit:
        needs = app.needs
        missing = short[index : index + len(needs)]
        index += len(needs)
        if app.key in said and app.key.namespace == viewer:
            parts.append(f"{_shown(app.key.app_id)} {said[app.key]}")
            continue
        if not any(missing) and app.key not in said:
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


def _the(ticket: Granted, _app: App) -> Granted:
    return ticket


def _without(needs: Sequence[Need], dropped: Callable[[str], bool]) -> list[Need]:
    """The needs without the resources `dropped`; a need left asking nothing (a shared claim's) goes."""
    kept = [replace(need, requests={k: v for k, v in need.requests.items() if not dropped(k)}) for need in needs]
    return [need for need in kept if need.slot or need.requests]


def _devices_there(empty: Room, needs: Sequence[Need], is_device: Callable[[str], bool]) -> str:
    """How many devices of each class the needs ask for the cluster's nodes have, all told."""
    asked = sorted({name for need in needs for name in need.requests if is_device(name)})
    have = []
    for name in asked:
        nodes = [node.allocatable.get(name, 0) for node in empty.nodes if node.allocatable.get(name, 0) > 0]
        have.append(f"{sum(nodes) // ONE_DEVICE} of {name} on {len(nodes)} node(s)")
    return "the nodes have " + ", ".join(have) if have else "no node has any"


def _needs_of(unit: Sequence[App]) -> list[Need]:
    return [need for app in unit for need in app.needs]


def _asks_domains(app: App) -> bool:
    return app.spec.topology is not None or any(group.topology is not None for group in app.spec.groups)


def _pools_said(pools: Sequence[GrowingPool]) -> str:
    return "; ".join(pool.describe() for pool in pools)


def _named_for(key: p.AppKey, viewer: str) -> str:
    return str(key) if key.namespace == viewer else ANOTHER_NAMESPACE


@dataclass(frozen=True)
class Memory:
    """What admission carries from one cycle to the next."""

    tickets: Mapping[p.AppKey, Ticket] = field(default_factory=dict)
    granted: frozenset[p.AppKey] = frozenset()  # admitted and not reserving yet
    # The attempt (its originator's uid) each gang admitted was admitted as: a gang restarted whole is a
    # new attempt, which a ticket of the last one (seats on nodes since gone, say) never serves.
    attempts: Mapping[p.AppKey, str] = field(default_factory=dict)
    reclaiming: Mapping[p.AppKey, Reclaim] = field(default_factory=dict)  # gangs whose room is taken back
    spared: frozenset[p.AppKey] = frozenset()  # gangs a budget kept whole: no victims for a while


@dataclass(frozen=True)
class Decided:
    """One cycle's decisions."""

    tickets: Mapping[p.AppKey, Ticket]
    granted: frozenset[p.AppKey]
    attempts: Mapping[p.AppKey, str]  # of those granted (see Memory)
    reclaiming: Mapping[p.AppKey, Reclaim]  # every gang whose room is being taken back
    reclaims: Mapping[p.AppKey, Reclaim]  # those this cycle chose
    next_cycle_at: float | None  # the next time a decision may change with time alone (see Decision)
    waiting_by_queue: Mapping[str, int]
    ledger: Ledger | None  # what each queue holds, as this cycle counted it


def decide(snapshot: Snapshot, rules: AdmissionRules, memory: Memory = Memory()) -> Decided:
    """Every waiting application's ticket, unit by unit in line, over one snapshot: a pure function of
    its arguments. A fault of yuniplace's own met deciding one unit holds that unit (Faulted), never the
    others."""
    apps = snapshot.apps
    granted = {
        key
        for key in memory.granted
        if (app := apps.get(key)) is not None
        and app.state == AppState.PENDING
        and not app.backing_off
        and memory.attempts.get(key) == app.attempt
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
        except Exception as error:  # yuniplace's own fault, never its input's: the unit is held, not refused
            log.exception("admission cannot decide for %s (a fault of its own)", ", ".join(str(a.key) for a in unit))
            for app in unit:
                tickets[app.key] = faulted(DECIDE, error, memory.tickets.get(app.key), snapshot.now)
                granted.discard(app.key)
    return Decided(
        tickets=tickets,
        granted=frozenset(granted),
        attempts={key: attempt for key, attempt in decision.attempts.items() if key in granted},
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
        # One granted last cycle and not reserving yet takes its room in the domains its ticket chose.
        self._apps = apps = {
            key: replace(app, domains=ticket.domains)
            if key in granted and isinstance(ticket := previous.get(key), Granted) and ticket.domains
            else app
            for key, app in snapshot.apps.items()
        }
        self._now = snapshot.now
        self._granted = granted
        self._previous = previous
        self._tickets = tickets
        self._reclaiming = reclaiming
        self._spared = spared
        self._room = self._room_left()
        self.reclaims: dict[p.AppKey, Reclaim] = {}
        self.attempts: dict[p.AppKey, str] = {key: apps[key].attempt for key in granted}
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
        if any(app.devices.note for app in unit):
            self._wait(
                unit,
                lambda app: (
                    f"its DRA devices cannot be counted ({app.devices.note}): waiting, whole, until they can"
                    if app.devices.note and app.key.namespace == unit[0].key.namespace
                    else "the DRA devices of its gang group cannot be counted: waiting, whole, until they can"
                ),
                times_out=True,
                reason=Reason.GANG_DEVICES,
            )
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
        if any(never) and any(not any(self._snapshot.empty.copy().take_all(a.needs)) for a in self._borrowing(unit)):
            never = [0] * len(never)  # it fits once it borrows another pool's nodes
        if any(never) and any(app.spec.topology_required for app in unit):
            # Admitted anyway, its placeholders would be placed in no one domain: it waits for nodes.
            self._wait(
                unit,
                lambda app: (
                    f"the gang needs more than all matching nodes hold ({_describe(unit, never, app.key.namespace)}), "
                    "and it requires one topology domain: waiting for nodes to be added"
                ),
                times_out=True,
            )
            return
        if any(never) and (pools := self._pools_for(needs)):
            # Only growth could hold it, and its node pools cannot make that much: placeholders would
            # only make them grow for a gang that never starts.
            self._wait(
                unit,
                lambda app: (
                    f"the gang needs more than all matching nodes hold and its node pools can still make "
                    f"({_describe(unit, never, app.key.namespace)}): {_pools_said(pools)}; waiting for room to be "
                    "freed or for a pool's limits to be raised"
                ),
                times_out=True,
            )
            return
        is_device = self._snapshot.is_device
        if any(never) and not any(self._snapshot.empty.copy().take_all(_without(needs, is_device))):
            # Only devices are short, and no autoscaler makes a DRA driver's devices: placeholders would
            # only hold room for a gang that never starts.
            self._wait(
                unit,
                lambda app: (
                    f"no node's DRA devices can ever hold the gang ({_describe(unit, never, app.key.namespace)}; "
                    f"{_devices_there(self._snapshot.empty, needs, is_device)}): waiting, whole, for devices to be "
                    "added"
                ),
                times_out=True,
                reason=Reason.GANG_EXCEEDS_CAPACITY,
            )
            return
        if any(never):
            self._grant(
                unit,
                lambda app: Granted(
                    f"the gang needs more than all matching nodes hold ({_describe(unit, never, app.key.namespace)}); "
                    "admitting it anyway, so that added nodes can take its placeholders; otherwise it times out"
                ),
            )
            return
        direct = self._direct_seats(unit)
        if direct is not None:
            seats, domains = direct
            self._grant(unit, lambda _app: Granted(seats=seats, domains=domains))
            return
        before = self._room.copy()
        placed = self._place(self._room, unit)
        if placed is not None:
            grows = self._grows(before)
            self._grant(unit, lambda app: Granted(domains=placed[app.key], grows=grows))
        elif any(_asks_domains(app) for app in unit) and self._place(self._snapshot.empty.copy(), unit) is None:
            self._never_in_a_domain(unit)
        elif not self._reclaim_for(unit, needs) and not self._borrow_for(unit):
            self._queue(unit, needs)

    @staticmethod
    def _place(room: Room, unit: Sequence[App]) -> dict[p.AppKey, Domains] | None:
        """Take the room of every gang of the unit, each in the topology domains it asks (the tightest
        that hold it), if all fit, else take nothing: the domains chosen for each, or None."""
        if not any(_asks_domains(app) for app in unit):
            return dict.fromkeys((app.key for app in unit), Domains()) if room.reserve(_needs_of(unit)) else None
        trial = room.copy()
        chosen = {}
        for app in unit:
            domains = place(trial, app.spec, app.needs)
            if domains is None:
                return None
            chosen[app.key] = domains
        room.adopt(trial)
        return chosen

    def _never_in_a_domain(self, unit: Sequence[App]) -> None:
        """No domain a gang of the unit requires could hold it, even were every node empty: it waits (a
        rack may be added), its timeout running, and says so."""
        empty = self._snapshot.empty
        said = {
            app.key: shortfall(empty.copy(), app.spec, app.needs, empty=True)
            or "fits in no combination of the domains it requires"
            for app in unit
            if _asks_domains(app) and place(empty.copy(), app.spec, app.needs) is None
        }
        short = [0] * len(_needs_of(unit))
        self._wait(
            unit,
            lambda app: f"no single domain could ever hold the gang: {_describe(unit, short, app.key.namespace, said)}",
            times_out=True,
        )

    # -- nodes yet to come ----------------------------------------------------------------------------

    def _pools_for(self, needs: Sequence[Need]) -> list[GrowingPool]:
        """The autoscaler's node pools a pod of the needs could go to."""
        return self._snapshot.coming.pools_for(lambda node: any(need.constraints.accepts(node) for need in needs))

    def _grows(self, before: Room) -> tuple[str, ...]:
        """The node pools whose nodes yet to come a grant just took room on (the room `before` it)."""
        pools = {
            node.coming_from
            for node in self._snapshot.coming.nodes
            if node.coming_from and before.free_of(node.name) != self._room.free_of(node.name)
        }
        return tuple(sorted(pools))

    # -- the direct start -----------------------------------------------------------------------------

    def _still_arriving(self, unit: Sequence[App]) -> bool:
        """An application whose members are still being created (a Job's pods, coming together) is not
        decided while they keep coming, so that it may start directly once all exist: only once no new
        one has come for `direct_start_wait_s` (a Job whose parallelism is below the gang's minimum)
        or ARRIVAL_CAP_S after its first, a cycle decides it whatever has arrived. Until then it has no
        ticket, and none of its room. A native gang waits only `native_arrival_wait_s` for its next member:
        one admitted whole holds nothing, one admitted with members still to come holds their room with
        placeholders, which a burst need not pay for."""
        if len(unit) != 1 or not unit[0].arriving:
            return False
        native = unit[0].spec.native
        if not native and not self._rules.direct_start:
            return False
        wait_s = self._rules.native_arrival_wait_s if native else self._rules.direct_start_wait_s
        first, latest = unit[0].arrived
        until = min(latest + wait_s, first + ARRIVAL_CAP_S)
        if self._now >= until:
            return False
        self.next_cycle_at = min(until, self.next_cycle_at or until)
        return True

    def _direct_seats(self, unit: Sequence[App]) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], Domains] | None:
        """Where each member of a gang that may start directly goes (its room taken), and the topology
        domains it asks for, which the seats are chosen in (the tightest that hold it, as for
        placeholders); or None: a gang group, a gang with members yet to come, or one that does not
        fit now reserves with placeholders (which also keep its room while it grows). So does a gang
        while other pods wait to be scheduled: one of them could take a seat in the moment before its
        member is nominated to it, and the gang would then start in part, where a placeholder that
        loses the race only waits."""
        if not self._rules.direct_start or len(unit) != 1 or not unit[0].complete or unit[0].uses_devices:
            return None  # (a nomination holds no DRA device: a gang that asks for some holds them with placeholders)
        app = unit[0]
        domains = Domains()
        if _asks_domains(app):
            chosen = place(self._room.copy(), app.spec, app.needs)  # which domains, with no room taken yet
            if chosen is None:
                return None
            domains, app = chosen, replace(app, domains=chosen)  # its needs, kept in those domains
        trial = self._room.copy()
        seats = trial.seat(app.needs)
        if seats is None or any(is_coming(node) for nodes in seats for node in nodes):
            return None  # a seat is on a node there is: one yet to come is reserved with a placeholder
        if self._snapshot.room.contended({node for nodes in seats for node in nodes}):
            return None
        self._room = trial
        return tuple((need.label, tuple(nodes)) for need, nodes in zip(app.needs, seats, strict=True)), domains

    def _grant(self, unit: Sequence[App], ticket: Callable[[App], Granted]) -> None:
        for app in unit:
            self._tickets[app.key] = ticket(app)
            self.attempts[app.key] = app.attempt
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
        (victims chosen now, or earlier and still going). A gang that requires one topology domain
        frees room in one domain, the one where the fewest gangs must go, and never takes gangs
        spread over many domains when no one domain would then hold it."""
        if self.ledger is None or len(unit) != 1:
            return False
        app = unit[0]
        going = [reclaim_ for reclaim_ in self._reclaiming.values() if reclaim_.beneficiary == app.key]
        if going:
            self._claim(app, needs, f"room being freed for it: {len(going)} gang(s) going", going[0].within)
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
            and not other.spec.disrupted_by_kube_scheduler
            and other.key not in self._reclaiming
            and other.key not in self._spared
            and other.queue in self._queues.queues
            and self._snapshot.nodes_of(other.key) & usable  # only room the gang could use is worth taking back
        ]
        if not holders:
            return False
        found: tuple[Pin | None, bool, list[Holder]] | None = None
        for domain in self._domains_to_free(app):
            in_domain = holders
            if domain is not None:
                nodes = {node.name for node in self._room.domains(domain.key)[domain.values[0]]}
                in_domain = [
                    h for h in holders if isinstance(h.key, p.AppKey) and self._snapshot.nodes_of(h.key) & nodes
                ]
            chosen = self._victims(app, in_domain, domain)
            if chosen is not None and (found is None or len(chosen[1]) < len(found[2])):
                found = (domain, *chosen)
        if found is None:
            return False
        within, lent, victims = found
        queue = _shown(app.queue)
        if lent:
            lenders = ", ".join(sorted({v.queue for v in victims}))
            borrowed_nodes = self._on_its_nodes(app, victims)
            self._take_back(
                app,
                victims,
                lambda victim: (
                    f"queue {queue} takes back room it is guaranteed and lent to queue {_shown(victim.queue)}, "
                    + (
                        "whose gang borrowed its nodes"
                        if victim.key in borrowed_nodes
                        else "which holds more than its own guarantee"
                    )
                ),
                within,
            )
            self._claim(
                app, needs, f"taking back room its queue {queue} lent to {lenders}: {len(victims)} gang(s)", within
            )
            return True
        self._take_back(
            app,
            victims,
            lambda victim: (
                f"a gang of priority {app.priority} of its own queue {queue}, which preempts within "
                f"itself, needs its room (this gang's priority is {victim.priority})"
            ),
            within,
        )
        self._claim(app, needs, f"evicting {len(victims)} lower-priority gang(s) of its queue {queue}", within)
        return True

    # -- borrowing another pool's nodes ---------------------------------------------------------------

    def _borrowing(self, unit: Sequence[App]) -> list[App]:
        """The gang of a queue with a pool of its own, as it would be placed borrowing the idle nodes of
        each queue it may borrow from besides its own (the queues it names, else every queue whose pool is
        shared): the one with the most idle room first, then the one holding the fewest gangs. None for a
        gang group, a queue that does not borrow, and one with no pool of its own (its gangs may use every
        shared pool already)."""
        if len(unit) != 1 or self._queues.empty:
            return []
        app = unit[0]
        spec = self._queues.queues.get(app.queue)
        if spec is None or not spec.borrowing or app.pool.free or app.pool.lender:
            return []
        own = dict(app.pool.require)
        lenders = [
            queue
            for queue in self._queues.queues.values()
            if queue.node_selector
            and queue.sharing
            and queue.path != app.queue
            and dict(queue.node_selector) != own
            and (spec.lenders is None or queue.path in spec.lenders)
        ]
        if not lenders:
            return []
        # Nodes more than one pool selects are no pool's to lend (ai-scheduler's default pool owns them).
        shared = {name for queue in self._queues.queues.values() for name in queue.home_nodes}
        idle: dict[str, float] = {}
        gangs: Counter[str] = Counter()
        for lender in lenders:
            nodes = self._room.accepting([Constraints(dict(lender.node_selector))]) - shared
            free: Counter[str] = Counter()
            for node in nodes:
                free.update({name: max(0, amount) for name, amount in self._room.free_of(node).items()})
            # How much of the gang its idle room would hold: the resource it holds least of counts.
            idle[lender.path] = min(
                (free[name] / amount for name, amount in app.amounts.items() if amount > 0 and name != PODS),
                default=0.0,
            )
            gangs[lender.path] = sum(
                1
                for other in self._apps.values()
                if other.state in IN_FLIGHT and self._snapshot.nodes_of(other.key) & nodes
            )
        lenders.sort(key=lambda q: (-idle[q.path], gangs[q.path], q.path))
        return [replace(app, pool=app.pool.lent(lender.node_selector), lender=lender.path) for lender in lenders]

    def _borrow_for(self, unit: Sequence[App]) -> bool:
        """A gang that fits on its pool's nodes neither now nor once what its queue lent is taken back and
        its own lower-priority gangs are evicted (ai-scheduler preempts at home first, then borrows) borrows
        the idle nodes of another pool that shares: the first of `_borrowing` it fits on beside its own, at
        once (on seats, where it may start directly). True when granted."""
        for borrower in self._borrowing(unit):
            ticket = self._borrowed(borrower)
            if ticket is not None:
                self._grant([borrower], functools.partial(_the, ticket))
                return True
        return False

    def _borrowed(self, borrower: App) -> Granted | None:
        """Its ticket when the gang fits as it would borrow (on seats, where it may start directly)."""
        direct = self._direct_seats([borrower])
        if direct is not None:
            seats, domains = direct
            return Granted(seats=seats, domains=domains, lender=borrower.lender, pool=borrower.pool)
        placed = self._place(self._room, [borrower])
        if placed is None:
            return None
        return Granted(domains=placed[borrower.key], lender=borrower.lender, pool=borrower.pool)

    def _domains_to_free(self, app: App) -> list[Pin | None]:
        """Where a reclaim may free room for the gang: anywhere (None), or, for a gang whose first level
        is required, each domain of it that could hold the gang were it empty, tightest first."""
        level = first_required(app.spec)
        if level is None:
            return [None]
        empty = self._snapshot.empty
        return [
            pin
            for value in sorted(self._room.domains(level.key))
            if place(empty.copy(), app.spec, app.needs, pin := Pin(level.key, (value,), True)) is not None
        ]

    def _victims(self, app: App, holders: Sequence[Holder], within: Pin | None) -> tuple[bool, list[Holder]] | None:
        """The gangs to take back so that `app` fits (in the domain `within` when given): those its queue
        lent room to (True), else lower-priority gangs of its own queue if it preempts within itself
        (False); None when no such gangs would make it fit."""
        assert self.ledger is not None
        if not holders:
            return None

        def fits_without(taken: Sequence[Holder]) -> bool:
            room = self._room_left([h.key for h in taken if isinstance(h.key, p.AppKey)])
            return place(room, app.spec, app.needs, within) is not None

        victims = reclaim(self.ledger, app.queue, app.amounts, holders, fits_without, self._on_its_nodes(app, holders))
        if victims:
            return True, victims
        if not self._queues.queues[app.queue].preempts_within:
            return None
        victims = preempt_within(app.queue, app.priority, holders, fits_without)
        return (False, victims) if victims else None

    def _on_its_nodes(self, app: App, holders: Sequence[Holder]) -> frozenset[object]:
        """The gangs of other queues that hold room on the nodes the gang's queue owns (a pool's): they
        borrowed those nodes, whatever their own queue holds, and the pool takes them back."""
        pool = pool_of(self._queues, app.queue)
        if not pool.require and not pool.named and not pool.avoid:
            return frozenset()
        own = {node.name for node in self._room.nodes if pool.owns(node.name, node.labels)}
        return frozenset(
            holder.key
            for holder in holders
            if holder.queue != app.queue
            and not holder.queue.startswith(app.queue + ".")
            and isinstance(holder.key, p.AppKey)
            and self._snapshot.nodes_of(holder.key) & own
        )

    def _take_back(
        self, app: App, victims: Sequence[Holder], why: Callable[[Holder], str], within: Pin | None = None
    ) -> None:
        """The victims' room is taken back for `app`, each whole (in the domain `within`); `why` says so
        in the victim's event."""
        assert self.ledger is not None
        for victim in victims:
            key = victim.key
            assert isinstance(key, p.AppKey)
            how = "evicting all its pods" if victim.running else "releasing its placeholders"
            self.reclaims[key] = Reclaim(app.key, f"{why(victim)}: {how}, the whole gang", within)
            self.ledger.release(victim.queue, victim.amounts, victim.user)

    def _claim(self, app: App, needs: list[Need], why: str, within: Pin | None = None) -> None:
        """The application waits for room being freed for it, and claims it meanwhile (in the domain
        `within`, when one is freed for it)."""
        self._heads.setdefault(app.queue, app.key)
        self._room.take_all(needs, None if within is None else self._room.domains(within.key).get(within.values[0], []))
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
        said = {
            app.key: why for app in unit if _asks_domains(app) and (why := shortfall(self._room, app.spec, app.needs))
        }
        position = self._behind[queue]
        pools = self._pools_for(needs)
        grown = f"; {_pools_said(pools)}" if pools else ""  # why growth does not hold it either
        if queue not in self._heads:
            self._heads[queue] = first.key
            claimed_for = 0.0 if first.queued_since is None else self._now - first.queued_since
            after = self._rules.placeholders_after_s
            if after is not None and first.queued_since is not None and claimed_for < after:
                due = first.queued_since + after  # the next cycle comes when its time is up, not when room frees
                self.next_cycle_at = min(due, self.next_cycle_at or due)
            if after is not None and claimed_for >= after and not self._elastic_in_flight:
                self._elastic_in_flight = True
                self._grant(
                    unit,
                    lambda app: Granted(
                        f"no room for the gang after {claimed_for:.0f}s first in queue {_shown(queue)} "
                        f"({_describe(unit, short, app.key.namespace, said)}); creating its placeholders anyway, so "
                        "that a cluster autoscaler sees pods of the shapes it needs"
                    ),
                )
                return
            holds = claimed_for < self._rules.head_claim_s
            if holds:
                self._claim_room(unit, needs)  # the head claims what it can use; backfill only gets the rest
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
                lambda app: (
                    f"waiting for free capacity: {_describe(unit, short, app.key.namespace, said)}{grown}; {where}"
                ),
                times_out=True,
            )
            return
        head = self._heads[queue]
        self._wait(
            unit,
            lambda app: (
                f"waiting for free capacity: {_describe(unit, short, app.key.namespace, said)}{grown}; position "
                f"{position} in queue {_shown(queue)}, behind {_named_for(head, app.key.namespace)}"
            ),
            times_out=False,
        )

    def _claim_room(self, unit: Sequence[App], needs: list[Need]) -> None:
        """A head claims the room it can use: a gang that requires a domain, the room of the domain
        that holds most of it (the rest of the cluster is of no use to it)."""
        if not any(first_required(app.spec) for app in unit):
            self._room.take_all(needs)
            return
        for app in unit:
            self._room.take_all(app.needs, closest(self._room, app.spec, app.needs))

    def _wait(
        self,
        unit: Sequence[App],
        message: Callable[[App], str],
        *,
        times_out: bool,
        reason: Reason = Reason.GANG_WAITING,
    ) -> None:
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
            self._tickets[app.key] = Waiting(message(app), times_out=times_out, reason=reason)
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
