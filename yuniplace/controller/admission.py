"""Capacity-aware admission: an application begins reserving only when its whole gang fits in the
free room, so gangs reserving at once can never split a full cluster between them and all wait.

Applications wait in FIFO queues (YuniKorn's queue label, else the namespace), ordered by arrival.
The first application of a queue that does not fit is the queue's head: it claims every bit of free
room it could use, and later applications (of any queue) may only backfill into what is left. A
stream of small gangs therefore cannot starve a large one: each time room is freed, the head, which
comes first, takes it, and it starts as soon as the room it needs has been freed once.

Reservations in flight count as used: the placeholders an admitted application has not placed yet
are placed, hypothetically, before anyone else is considered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from yuniplace.controller.capacity import ClusterRoom
from yuniplace.controller.plan import AppView, Granted, Waiting, gang_spec
from yuniplace.controller.store import PodStore
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.fit import Constraints, Need, amounts, fits
from yuniplace.gang.resources import format_quantity
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, InvalidGang, Limits

log = logging.getLogger(__name__)
MIN_CYCLE_INTERVAL_S = 0.5

Ticket = Granted | Waiting
# States in which an application's gang may still be taking room it was admitted to.
IN_FLIGHT = frozenset({AppState.RESERVING, AppState.RESERVED, AppState.RUNNING})


@dataclass(frozen=True)
class App:
    key: p.AppKey
    spec: GangSpec
    state: AppState
    arrival: tuple[float, str]
    queue: str
    holding: Mapping[str, int]  # room taken on nodes, by group: placed placeholders and members
    needing: Mapping[str, int]  # live members taking no room yet, by group
    backing_off: bool

    def _outstanding(self, group: str, min_member: int) -> int:
        missing = max(0, min_member - self.holding.get(group, 0))
        # Once reserved, only members still to be swapped in need room: the rest have had theirs.
        return missing if self.state in (AppState.PENDING, AppState.RESERVING) else min(missing, self.needing.get(group, 0))

    def needs(self, outstanding: bool) -> list[Need]:
        """The gang's room: all of it, or (outstanding) what no pod of it takes on a node yet."""
        return [
            Need(
                count=self._outstanding(g.name, g.min_member) if outstanding else g.min_member,
                requests=amounts(g.min_resource),
                constraints=Constraints(g.node_selector, tuple(g.tolerations), g.affinity),
                label=f"{self.key.app_id}/{g.name}",
            )
            for g in self.spec.groups
        ]


def _describe(needs: Sequence[Need], short: Sequence[int]) -> str:
    parts = []
    for need, missing in zip(needs, short):
        if missing:
            size = ", ".join(f"{name} {format_quantity(Decimal(amount) / 1000)}" for name, amount in sorted(need.requests.items()))
            parts.append(f"{need.label}: {need.count - missing} of {need.count} pods of ({size}) fit")
    return "; ".join(parts)


class Admission:
    def __init__(
        self,
        room: ClusterRoom,
        store: PodStore,
        limits: Limits,
        pod_group_of: Callable[[p.AppKey], Mapping[str, object] | None],
        wake: Callable[[p.AppKey], None],
    ) -> None:
        self._room = room
        self._store = store
        self._limits = limits
        self._pod_group_of = pod_group_of
        self._wake = wake
        self._lock = threading.Lock()
        self._tickets: dict[p.AppKey, Ticket] = {}
        self._granted: set[p.AppKey] = set()
        self._announced: dict[p.AppKey, str] = {}
        self._dirty = threading.Event()
        self.waiting = 0

    def capacity_changed(self) -> None:
        self._dirty.set()

    def ticket(self, key: p.AppKey) -> Ticket:
        """The decision for an application about to reserve; decided now if it is new."""
        with self._lock:
            if key not in self._tickets or isinstance(self._tickets[key], Waiting):
                self._cycle()
            ticket = self._tickets.get(key)
            if ticket is None:
                # Not a candidate as the store stands now (its pods are going, say): nothing to tell.
                return Waiting("not a candidate for admission", announce=False)
            if isinstance(ticket, Waiting):
                announce = self._announced.get(key) != ticket.message
                self._announced[key] = ticket.message
                return Waiting(ticket.message, announce)
            self._announced.pop(key, None)
            return ticket

    def run(self, stop: threading.Event) -> None:
        """Decide again whenever room is freed (at most every MIN_CYCLE_INTERVAL_S), waking the
        applications whose decision changed."""
        while not stop.is_set():
            if not self._dirty.wait(1.0):
                continue
            if stop.wait(MIN_CYCLE_INTERVAL_S):
                return
            self._dirty.clear()
            with self._lock:
                if self.waiting:
                    self._cycle()

    # -- the decision ------------------------------------------------------------------------------

    def _apps(self) -> Iterable[App]:
        now = time.time()
        held = self._room.held()
        for key in self._store.keys():
            pods = self._store.app_pods(key)
            # Most applications of a busy cluster just run: every live pod already has its room.
            # They need nothing more and are passed over before the costlier work below.
            if not any(p.is_placeholder(pod) or (p.uid(pod) not in held and not p.is_terminal(pod)) for pod in pods):
                continue
            view = AppView.of(key, pods, self._pod_group_of(key))
            originator = view.originator
            if originator is None or p.is_terminal(originator):
                continue
            notes = p.annotations(originator)
            state = AppState.parse(notes.get(keys.STATE))
            if state not in IN_FLIGHT and state != AppState.PENDING:
                continue
            try:
                spec = gang_spec(view, self._limits)
            except InvalidGang:
                continue
            # A swap deletes a placeholder before it releases the member taking its room. Counted as
            # the room sees them (not as the store does, which learns of writes sooner), a member
            # between the two still needs room, so the room its placeholder left never looks free.
            holding: dict[str, int] = {}
            needing: dict[str, int] = {}
            for pod in view.placeholders + view.members:
                group = p.task_group_name(pod) or ""
                if p.uid(pod) in held:
                    holding[group] = holding.get(group, 0) + 1
                elif not p.is_placeholder(pod) and not p.is_terminal(pod) and not p.is_deleting(pod):
                    needing[group] = needing.get(group, 0) + 1
            retry = p.parse_time(notes.get(keys.RETRY_AFTER))
            yield App(key, spec, state, (p.created_at(originator), str(key)), p.queue(originator), holding, needing,
                      backing_off=retry is not None and now < retry and state == AppState.PENDING)

    def _cycle(self) -> None:
        apps = {app.key: app for app in self._apps()}
        self._granted &= {k for k, a in apps.items() if a.state == AppState.PENDING}
        room = self._room.room()
        for app in apps.values():
            if app.state in IN_FLIGHT or app.key in self._granted:
                room.take_all(app.needs(outstanding=True))
        empty = self._room.empty_room()
        tickets: dict[p.AppKey, Ticket] = {}
        heads: dict[str, str] = {}
        behind: dict[str, int] = {}
        for unit in self._units(apps):
            first = unit[0]
            if any(a.key in self._granted for a in unit):
                tickets.update({a.key: self._tickets.get(a.key, Granted()) for a in unit})
                continue
            missing = self._missing_peers(first, apps)
            if missing:
                tickets.update({a.key: Waiting(f"waiting for the other applications of its gang group to appear: {missing}") for a in unit})
                continue
            needs = [need for app in unit for need in app.needs(outstanding=False)]
            never = empty.copy().take_all(needs)
            if any(never):
                warning = (f"the gang needs more than all matching nodes hold ({_describe(needs, never)}); "
                           "admitting it anyway, so that added nodes can take its placeholders; otherwise it times out")
                self._grant(unit, tickets, Granted(warning))
                continue
            if fits(room, needs):
                self._grant(unit, tickets, Granted())
                continue
            queue = first.queue
            behind[queue] = behind.get(queue, 0) + 1
            short = room.copy().take_all(needs)
            why = f"waiting for free capacity: {_describe(needs, short)}"
            if queue not in heads:
                heads[queue] = str(first.key)
                room.take_all(needs)  # the head claims what it can use; backfill only gets the rest
                message = f"{why}; first in queue {queue}, holding the room it can use until the rest is free"
            else:
                message = f"{why}; position {behind[queue]} in queue {queue}, behind {heads[queue]}"
            tickets.update({a.key: Waiting(message) for a in unit})
        changed = [key for key, ticket in tickets.items() if self._tickets.get(key) != ticket]
        self._tickets = tickets
        self.waiting = sum(1 for t in tickets.values() if isinstance(t, Waiting))
        for key in changed:  # reconciled again: to reserve, or to tell why it still waits
            self._wake(key)
        for key in list(self._announced):
            if key not in tickets:
                del self._announced[key]

    def _grant(self, unit: Sequence[App], tickets: dict[p.AppKey, Ticket], ticket: Granted) -> None:
        for app in unit:
            tickets[app.key] = ticket
            self._granted.add(app.key)
            log.info("admitted %s%s", app.key, f" ({ticket.warning})" if ticket.warning else "")

    @staticmethod
    def _units(apps: Mapping[p.AppKey, App]) -> list[list[App]]:
        """Pending applications in arrival order; a gang group's pending members form one unit,
        which arrives with its earliest member."""
        seen: set[p.AppKey] = set()
        units: list[list[App]] = []
        pending = sorted((a for a in apps.values() if a.state == AppState.PENDING and not a.backing_off), key=lambda a: a.arrival)
        for app in pending:
            if app.key in seen:
                continue
            members = [app]
            for ref in app.spec.gang_group:
                namespace, _, app_id = ref.partition("/")
                peer = apps.get(p.AppKey(namespace, app_id))
                if peer is not None and peer.key != app.key and peer.state == AppState.PENDING and not peer.backing_off:
                    members.append(peer)
            seen.update(a.key for a in members)
            units.append(members)
        return units

    def _missing_peers(self, app: App, apps: Mapping[p.AppKey, App]) -> str:
        missing = []
        for ref in app.spec.gang_group:
            namespace, _, app_id = ref.partition("/")
            key = p.AppKey(namespace, app_id)
            if key != app.key and key not in apps and not self._store.app_pods(key):
                missing.append(ref)
        return ", ".join(missing)

