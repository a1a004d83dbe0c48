"""Capacity-aware admission: an application begins reserving only when its whole gang fits in the
free room, so gangs reserving at once can never split a full cluster between them and all wait.

Applications wait in queues: without a queue configuration, FIFO queues by name (YuniKorn's queue
label, else the namespace); with one, the queue its placement rules give it, ordered by priority then
arrival, within its queue's limits and guarantee (see decision.py). The first application of a queue
that does not fit is the queue's head: it claims every bit of free room it could use, and later
applications (of any queue) may only backfill into what is left. A stream of small gangs therefore
cannot starve a large one: each time room is freed, the head, which comes first, takes it.

The cluster is shared, so no tenant may hold it up: a head keeps its claim for `head_claim_s` at most
(then others may use the room; it keeps its place), each namespace has a bound on the placeholders
it holds and the applications it queues, a gang group across namespaces only binds applications that
agree to it, and an application whose data cannot be read is refused alone, never the cycle.

Reservations in flight count as used: the placeholders an admitted application has not placed yet
are placed, hypothetically, before anyone else is considered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from yuniplace.admission.decision import IN_FLIGHT, AdmissionRules, App, Decision, Reclaim, in_line
from yuniplace.admission.room import ClusterRoom, room_node
from yuniplace.admission.tickets import Refused, Ticket, Waiting
from yuniplace.controller.queuesource import QueueSource
from yuniplace.gang import pods as p
from yuniplace.gang import userinfo
from yuniplace.gang.application import Application
from yuniplace.gang.dialects.registry import started_by_kube_scheduler
from yuniplace.gang.fit import Room
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, Limits
from yuniplace.queues.model import Amounts, Ordering, QueueConfig, QueueSpec
from yuniplace.queues.pools import Pool, pool_of
from yuniplace.queues.quota import NOBODY, Ledger
from yuniplace.queues.report import PoolRow, QueuesReport, queue_rows, user_rows
from yuniplace.runtime.events import Reason
from yuniplace.runtime.store import PodStore

log = logging.getLogger(__name__)
COALESCE_S = 0.01
UNEVICTABLE_S = 60.0


class Placing(Protocol):
    """One cycle's placements: the queue each application goes to (or why none takes it), and the
    configuration they are in (`config`: as it was when the cycle began, with the queues placement
    created since)."""

    @property
    def config(self) -> QueueConfig: ...

    def place(self, app: Application) -> str | Refused: ...

    def done(self) -> None: ...


class Queues(Protocol):
    """Where applications wait (QueueSource: the configuration in force, or none)."""

    def placing(self) -> Placing: ...


class Admission:
    def __init__(
        self,
        room: ClusterRoom,
        store: PodStore,
        limits: Limits,
        pod_group_of: Callable[[p.AppKey], Mapping[str, object] | None],
        wake: Callable[[p.AppKey], None],
        rules: AdmissionRules = AdmissionRules(),
        clock: Callable[[], float] = time.time,
        queues: Queues | None = None,
        on_cycle: Callable[[float, float], None] = lambda _seconds, _cpu_seconds: None,
    ) -> None:
        self._room = room
        self._on_cycle = on_cycle  # the time and the CPU time each cycle took
        self._queues: Queues = queues or QueueSource()
        self._store = store
        self._limits = limits
        self._pod_group_of = pod_group_of
        self._wake = wake
        self._rules = rules
        self._clock = clock
        self._lock = threading.Lock()
        self._tickets: dict[p.AppKey, Ticket] = {}
        self._granted: set[p.AppKey] = set()
        self._announced: dict[p.AppKey, str] = {}
        self._dirty = threading.Event()
        self._claim_lapses_at: float | None = None  # the next time a head's claim runs out
        self._pools: dict[p.AppKey, Pool] = {}
        # Gangs whose room is being taken back for a queue that lent it, until they are gone.
        self._reclaiming: dict[p.AppKey, Reclaim] = {}
        self._unevictable: dict[p.AppKey, float] = {}  # gangs a budget kept whole, until when they are spared
        self.waiting = 0
        self.waiting_by_queue: Counter[str] = Counter()
        self.ledger: Ledger | None = None  # what each queue holds, as the last cycle counted it
        self._config = QueueConfig()
        self._apps_seen: Mapping[p.AppKey, App] = {}

    def capacity_changed(self) -> None:
        self._dirty.set()

    def ticket(self, key: p.AppKey) -> Ticket:
        """The decision for an application about to reserve; decided now if it is new."""
        with self._lock:
            # A waiting application is decided again only when something changed since the last cycle:
            # deciding every reconcile of every waiting gang anew would cost a cycle each, for the
            # same answer, and the cycle that follows a change wakes each application it decides anew.
            if key not in self._tickets or (isinstance(self._tickets[key], Waiting) and self._dirty.is_set()):
                self._dirty.clear()
                self._cycle()
            ticket = self._tickets.get(key)
            if ticket is None:
                # Not a candidate as the store stands now (its pods are going, say): nothing to tell.
                return Waiting("not a candidate for admission", announce=False)
            if isinstance(ticket, Waiting):
                announce = self._announced.get(key) != ticket.message
                self._announced[key] = ticket.message
                return Waiting(ticket.message, announce, ticket.times_out)
            self._announced.pop(key, None)
            return ticket

    def pool_of(self, key: p.AppKey) -> Pool:
        """Where the application's queue lets its placeholders go."""
        with self._lock:
            return self._pools.get(key, Pool())

    def queue_of(self, key: p.AppKey) -> str | None:
        """The queue the application was placed in, as the last cycle saw it."""
        with self._lock:
            app = self._apps_seen.get(key)
            return None if app is None else app.queue

    def reclaim_of(self, key: p.AppKey) -> Reclaim | None:
        """Why the application's room is taken back, while it is."""
        with self._lock:
            return self._reclaiming.get(key)

    def reclaim_refused(self, key: p.AppKey) -> None:
        """The gang cannot be evicted whole (a PodDisruptionBudget): it is no victim for a while, and the
        queue that wanted its room looks again."""
        with self._lock:
            self._reclaiming.pop(key, None)
            self._unevictable[key] = self._clock() + UNEVICTABLE_S
        self._dirty.set()

    def run(self, stop: threading.Event) -> None:
        """Decide again as soon as room is freed or a head's claim runs out, waking the applications
        whose decision changed. A burst of changes (a gang's pods leaving together) is coalesced for
        COALESCE_S, and cycles are paced by their own cost (after a cycle of t seconds, the next waits
        at least t), so admission keeps up with a busy cluster without ever taking more than half a
        core. A failed cycle is logged and the next one tried: this thread serves every tenant and
        must never end while the controller runs."""
        cost = 0.0
        while not stop.is_set():
            lapse = self._claim_lapses_at
            woken = self._dirty.wait(1.0 if lapse is None else min(1.0, max(0.0, lapse - self._clock())))
            if not woken and (lapse is None or self._clock() < lapse):
                continue
            if stop.wait(max(COALESCE_S, cost)):
                return
            self._dirty.clear()
            started = time.monotonic()
            try:
                with self._lock:
                    if self.waiting:
                        self._cycle()
                    else:
                        self._claim_lapses_at = None  # nobody waits: no claim to run out
            except Exception:
                log.exception("admission cycle failed; deciding again on the next change")
                self._dirty.set()
            cost = time.monotonic() - started

    # -- the applications --------------------------------------------------------------------------

    def _app(
        self, key: p.AppKey, pods: Sequence[p.Pod], held: frozenset[str], now: float, placing: Placing
    ) -> App | Refused | None:
        """The application as admission sees it; None when it is no candidate (nothing to reserve, or
        nothing left to decide: its annotations cannot be read, which its own reconcile reports);
        Refused when no queue takes it."""
        app = Application.of(key, pods, self._pod_group_of(key), self._limits)
        originator, record, spec = app.originator, app.record, app.spec
        if originator is None or spec is None or p.is_terminal(originator):
            return None
        # kube-scheduler places a native gang as soon as its pods exist: in flight from the start.
        native = started_by_kube_scheduler([originator])
        state = AppState.RUNNING if native else record.state
        if state not in IN_FLIGHT and state != AppState.PENDING:
            return None
        queue = placing.place(app)
        if isinstance(queue, Refused):
            return queue
        config = placing.config
        # A swap deletes a placeholder before it releases the member taking its room. Counted as
        # the room sees them (not as the store does, which learns of writes sooner), a member
        # between the two still needs room, so the room its placeholder left never looks free.
        holding: Counter[str] = Counter()
        needing: Counter[str] = Counter()
        for pod in app.placeholders + app.members:
            group = p.task_group_name(pod) or ""
            if p.uid(pod) in held:
                holding[group] += 1
            elif not p.is_placeholder(pod) and not p.is_terminal(pod) and not p.is_deleting(pod):
                needing[group] += 1
        backing_off = record.retry_after is not None and now < record.retry_after and record.state == AppState.PENDING
        holders = [p.uid(pod) for pod in app.placeholders + app.members if p.uid(pod) in held]
        return App(
            key,
            spec,
            state,
            (app.arrival[0], self._store.first_seen(key), app.arrival[1]),
            queue,
            holding,
            needing,
            placeholders=len(app.live_placeholders()),
            backing_off=backing_off,
            queued_since=record.queued_since,
            priority=app.priority,
            pool=Pool() if config.empty else pool_of(config, queue),
            held=self._room.held_amounts(holders) if not config.empty else {},
            running=bool(p.node_name(originator)),
            reserving_since=record.reservation_started,
            native=native,
            user=userinfo.of_object(originator) or NOBODY,
        )

    def _apps(self, placing: Placing) -> tuple[dict[p.AppKey, App], dict[p.AppKey, Refused]]:
        """Every candidate, and a refusal for each application that could not be read at all (or that no
        queue takes): one application's bad data costs that application its admission, never the
        others theirs."""
        now = self._clock()
        held = self._room.held()
        apps: dict[p.AppKey, App] = {}
        broken: dict[p.AppKey, Refused] = {}
        applications = self._store.keys()
        configured = not placing.config.empty
        for key in applications:
            pods = self._store.app_pods(key)
            # Most applications of a busy cluster just run: every live pod already has its room. They
            # need nothing more and, unless queues count what they hold, are passed over before the
            # costlier work below.
            if not configured and not any(
                p.is_placeholder(pod) or (p.uid(pod) not in held and not p.is_terminal(pod)) for pod in pods
            ):
                continue
            try:
                app = self._app(key, pods, held, now, placing)
            except Exception as error:
                log.exception("admission cannot evaluate %s", key)
                broken[key] = Refused(
                    Reason.TASK_GROUPS_ERROR, f"admission cannot evaluate this application ({type(error).__name__})"
                )
                continue
            if isinstance(app, Refused):
                broken[key] = app
            elif app is not None:
                apps[key] = app
        return apps, broken

    def _spec_of(self, key: p.AppKey, apps: Mapping[p.AppKey, App]) -> GangSpec | None:
        """The gang spec of an application that may not be a candidate (it runs already, say); None
        for one not seen, or unreadable: it agrees to nothing."""
        if key in apps:
            return apps[key].spec
        pods = self._store.app_pods(key)
        return Application.of(key, pods, self._pod_group_of(key), self._limits).spec if pods else None

    # -- the decision ------------------------------------------------------------------------------

    def _room_taken(self, apps: Mapping[p.AppKey, App], without: Sequence[p.AppKey] = ()) -> Room:
        """The free room once every reservation in flight (and every one granted) has taken what it is
        still to take; `without` those applications, as if they and their pods were gone."""
        gone = set(without)
        released = [p.uid(pod) for key in gone for pod in self._store.app_pods(key)]
        room = self._room.room(releasing=released)
        for app in apps.values():
            if app.key not in gone and (app.state in IN_FLIGHT or app.key in self._granted):
                room.take_all(app.needs(outstanding=True))
        return room

    @staticmethod
    def _pool_owners(config: QueueConfig) -> dict[tuple[tuple[str, str], ...], QueueSpec]:
        """Each pool (a node selector) and the queue that owns it: the first configured with it."""
        owners: dict[tuple[tuple[str, str], ...], QueueSpec] = {}
        for queue in config.queues.values():
            if queue.node_selector:
                owners.setdefault(tuple(sorted(queue.node_selector.items())), queue)
        return owners

    def _queue_of_pods(self, apps: Mapping[p.AppKey, App]) -> dict[str, str]:
        return {p.uid(pod): app.queue for key, app in apps.items() for pod in self._store.app_pods(key)}

    def _pool_usage(self, config: QueueConfig, apps: Mapping[p.AppKey, App]) -> dict[str, dict[str, int]]:
        """What pods of no candidate application (ordinary pods, mostly) take on each pool's nodes, by
        the queue that owns the pool: they use its room as much as its gangs do."""
        owners = self._pool_owners(config)
        if not owners:
            return {}
        gang_pods = self._queue_of_pods(apps)
        return {
            queue.path: self._room.pool(dict(selector), lambda uid: uid not in gang_pods).taken
            for selector, queue in owners.items()
        }

    def report(self) -> QueuesReport | None:
        """Each queue's and pool's holdings as the last cycle counted them; None without a queue
        configuration."""
        with self._lock:
            ledger, config, apps, tickets = self.ledger, self._config, self._apps_seen, self._tickets
        if ledger is None:
            return None
        waiting: dict[str, list[str]] = {}
        line = self._line(config)
        for app in sorted((app for app in apps.values() if isinstance(tickets.get(app.key), Waiting)), key=line):
            waiting.setdefault(app.queue, []).append(str(app.key))
        queue_of_pod = self._queue_of_pods(apps)
        pools = []
        for selector, owner in self._pool_owners(config).items():

            def other_queue(uid: str, owner: str = owner.path) -> bool:
                queue = queue_of_pod.get(uid)
                return queue is not None and queue != owner and not queue.startswith(owner + ".")

            used = self._room.pool(dict(selector), lambda _uid: True)
            pools.append(
                PoolRow(
                    queue=owner.path,
                    selector=dict(selector),
                    nodes=used.nodes,
                    capacity=used.capacity,
                    allocatable=used.allocatable,
                    used=used.taken,
                    shared=self._room.pool(dict(selector), other_queue).taken,
                    sharing=owner.sharing,
                )
            )
        return QueuesReport(queue_rows(ledger, waiting), tuple(pools), user_rows(ledger))

    def decide_now(self) -> None:
        """One cycle, at once: for a view of the cluster read a single time (`yuniplace status --queues`)."""
        with self._lock:
            self._cycle()

    def _cycle(self) -> None:
        started, cpu_started = time.monotonic(), time.thread_time()
        try:
            self._decide_all()
        finally:
            self._on_cycle(time.monotonic() - started, time.thread_time() - cpu_started)

    def _decide_all(self) -> None:
        placing = self._queues.placing()
        apps, broken = self._apps(placing)
        config = placing.config
        placing.done()
        self._granted &= {k for k, a in apps.items() if a.state == AppState.PENDING and not a.backing_off}
        # A reclaim lasts until its gang's pods have left their nodes (evicted pods may take a while to
        # stop): until then the room is not free, and choosing another victim for it would take more
        # than the waiting gang needs.
        held = self._room.held() if self._reclaiming else frozenset()
        self._reclaiming = {
            key: reclaim_
            for key, reclaim_ in self._reclaiming.items()
            if any(p.uid(pod) in held for pod in self._store.app_pods(key))
        }
        now = self._clock()
        self._unevictable = {key: until for key, until in self._unevictable.items() if until > now}
        tickets: dict[p.AppKey, Ticket] = dict(broken)
        decision = Decision(
            rules=self._rules,
            queues=config,
            apps=apps,
            room=self._room_taken(apps),
            empty=self._room.empty_room(),
            now=self._clock(),
            granted=self._granted,
            previous=self._tickets,
            tickets=tickets,
            awaited_peers=lambda app: self._awaited_peers(app, apps),
            room_without=lambda keys: self._room_taken(apps, keys),
            reclaiming=self._reclaiming,
            spared=frozenset(self._unevictable),
            pool_usage=self._pool_usage(config, apps),
            nodes_of=lambda key: {n for pod in self._store.app_pods(key) if (n := room_node(pod)) is not None},
        )
        for unit in decision.guarantees_first(self._units(apps, config)):
            try:
                decision.decide(unit)
            except Exception as error:
                log.exception("admission cannot decide for %s", ", ".join(str(a.key) for a in unit))
                for app in unit:
                    tickets[app.key] = Refused(
                        Reason.TASK_GROUPS_ERROR, f"admission cannot evaluate this application ({type(error).__name__})"
                    )
        changed = [key for key, ticket in tickets.items() if self._tickets.get(key) != ticket]
        self._tickets = tickets
        self._claim_lapses_at = decision.claim_lapses_at
        self._pools = {key: app.pool for key, app in apps.items() if not app.pool.free}
        self._reclaiming.update(decision.reclaims)
        self.waiting = sum(1 for t in tickets.values() if isinstance(t, Waiting))
        self.waiting_by_queue = decision.waiting_by_queue
        self.ledger = decision.ledger
        self._config, self._apps_seen = config, apps
        for key in [*changed, *decision.reclaims]:  # reconciled again: to reserve, to wait, to give room back
            self._wake(key)
        for key in list(self._announced):
            if key not in tickets:
                del self._announced[key]

    def _line(self, config: QueueConfig) -> Callable[[App], tuple[int, float, tuple[float, int, str]]]:
        """How applications stand in line: without a queue configuration, by arrival; with one, as
        each one's queue orders them (decision.in_line)."""
        if config.empty:
            return lambda app: (0, 0.0, app.arrival)
        capacity: Amounts = {}
        if any(queue.ordering is Ordering.FAIR for queue in config.queues.values()):
            capacity = self._room.pool({}, lambda _uid: False).allocatable
        return lambda app: in_line(app, config.queues.get(app.queue), capacity)

    def _units(self, apps: Mapping[p.AppKey, App], config: QueueConfig) -> list[list[App]]:
        """Pending applications in line (see _line); a gang group's pending members that agree to it
        form one unit, which comes with its first member."""
        seen: set[p.AppKey] = set()
        units: list[list[App]] = []
        pending = sorted(
            (a for a in apps.values() if a.state == AppState.PENDING and not a.backing_off), key=self._line(config)
        )
        for app in pending:
            if app.key in seen:
                continue
            members = [app]
            for ref in app.spec.gang_group:
                peer = apps.get(p.AppKey.parse(ref))
                if (
                    peer is not None
                    and peer.key != app.key
                    and peer.key not in seen
                    and peer.state == AppState.PENDING
                    and not peer.backing_off
                    and self._rules.consent.joins(app.key, peer.key, peer.spec.gang_group)
                ):
                    members.append(peer)
            seen.update(a.key for a in members)
            units.append(members)
        return units

    def _awaited_peers(self, app: App, apps: Mapping[p.AppKey, App]) -> list[str]:
        """The applications of its gang group it still waits for: ones not created yet, and ones of
        another namespace that have not named it back. Both read alike, so a tenant learns nothing of
        another namespace's applications from them."""
        awaited = []
        for ref in app.spec.gang_group:
            key = p.AppKey.parse(ref)
            if key == app.key:
                continue
            if self._rules.consent.trusts(app.key.namespace, key.namespace):
                if key not in apps and not self._store.app_pods(key):
                    awaited.append(ref)
            else:
                peer_spec = self._spec_of(key, apps)
                if not self._rules.consent.joins(app.key, key, peer_spec.gang_group if peer_spec else None):
                    awaited.append(ref)
        return awaited
