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

One loop owns every cycle, in three phases: read a snapshot (snapshot.py), decide over it
(decision.py, a pure function), then publish the tickets and wake each application whose ticket
changed. Reconcile workers only read the last cycle's tickets: one that finds none for its
application asks for a cycle, and is woken when it has decided.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from yuniplace.admission.decision import AdmissionRules, Decided, Memory, Reclaim, decide
from yuniplace.admission.domains import DomainRoom, free_by_domain
from yuniplace.admission.growth import Growth
from yuniplace.admission.line import line
from yuniplace.admission.room import ClusterRoom
from yuniplace.admission.snapshot import Placing, Snapshot, Sources
from yuniplace.admission.tickets import Faulted, Granted, Ticket, Undecided, Waiting
from yuniplace.devices.inventory import DeviceInventory
from yuniplace.gang import pods as p
from yuniplace.gang.taskgroups import Limits
from yuniplace.queues.pools import Pool, pool_owners
from yuniplace.queues.quota import Ledger
from yuniplace.queues.report import PoolRow, QueuesReport, queue_rows, user_rows
from yuniplace.runtime.metrics import MAX_DOMAINS_SHOWN, MAX_LEVELS_SHOWN, Metrics
from yuniplace.runtime.store import PodStore

log = logging.getLogger(__name__)
COALESCE_S = 0.01
UNEVICTABLE_S = 60.0


class Queues(Protocol):
    """Where applications wait (the controller's QueueSource: the configuration in force, or none)."""

    def placing(self) -> Placing: ...


@dataclass(frozen=True)
class Standing:
    """What admission says of one application: its ticket while it is pending, the queue it was placed
    in, where that queue lets its placeholders go, and why its room is taken back, while it is."""

    ticket: Ticket | None
    queue: str | None
    pool: Pool
    reclaim: Reclaim | None


class Admission:
    def __init__(
        self,
        store: PodStore,
        limits: Limits,
        pod_group_of: Callable[[p.AppKey], Mapping[str, object] | None],
        queues: Queues,
        wake: Callable[[p.AppKey], None],
        rules: AdmissionRules = AdmissionRules(),
        clock: Callable[[], float] = time.time,
        metrics: Metrics | None = None,
    ) -> None:
        # Every node's room, fed by the node and pod watches; a change that frees room calls a cycle.
        self.room = ClusterRoom(on_freed=self.capacity_changed)
        # What an autoscaler's node pools can still add, fed by their watches where they are served.
        self.growth = Growth(on_change=self.capacity_changed)
        # The cluster's DRA devices, fed by their watches where the cluster serves them.
        self.devices = DeviceInventory(on_change=self.capacity_changed)
        self._store = store
        self._sources = Sources(store, self.room, pod_group_of, limits, self.growth, self.devices)
        self._queues = queues
        self._wake = wake
        self._rules = rules
        self._clock = clock
        self._metrics = metrics
        self._due = threading.Event()  # something changed since the last cycle
        self._cycling = threading.Lock()  # one cycle at a time
        self._lock = threading.Lock()  # the last cycle's results, which workers read
        self._memory = Memory()
        self._asked: set[p.AppKey] = set()  # applications that found no ticket, for the next cycle
        # Applications a cycle read as no candidates, at their store count then: until they change, asking
        # again would only bring the same answer. (A candidate without a ticket, one backing off, may
        # become one with time alone: it asks again each time.)
        self._passed: dict[p.AppKey, int] = {}
        self._announced: dict[p.AppKey, str] = {}
        self._unevictable: dict[p.AppKey, float] = {}  # gangs a budget kept whole, until when they are spared
        # The next time a decision may change with time alone: a head's claim runs out, or a gang whose
        # members are being created is no longer waited for.
        self._next_cycle_at: float | None = None
        self._pools: dict[p.AppKey, Pool] = {}
        self._last: Snapshot | None = None
        self.cycles = 0
        self.waiting = 0
        self.waiting_by_queue: Counter[str] = Counter()
        self.ledger: Ledger | None = None  # what each queue holds, as the last cycle counted it

    def capacity_changed(self) -> None:
        self._due.set()

    # -- what reconciles read -------------------------------------------------------------------------

    def standing(self, key: p.AppKey, *, pending: bool, attempt: str = "") -> Standing:
        """What the last cycle says of an application, read by its reconcile in one call; `attempt`: its
        originator's uid (a ticket granted to an earlier attempt is none of this one's)."""
        with self._lock:
            app = None if self._last is None else self._last.apps.get(key)
            ticket = self._ticket(key, attempt) if pending else None
            # A gang granted room it borrows is placed on the pool its ticket lets it use.
            lent = ticket.pool if isinstance(ticket, Granted) else None
            return Standing(
                ticket=ticket,
                queue=None if app is None else app.queue,
                pool=lent or self._pools.get(key, Pool()),
                reclaim=self._memory.reclaiming.get(key),
            )

    def _ticket(self, key: p.AppKey, attempt: str) -> Ticket:
        """The last cycle's decision for an application about to reserve. None yet (it is new, it
        changed after the cycle read it, or it is a new attempt of a gang granted before): the next
        cycle decides, and wakes it."""
        ticket = self._memory.tickets.get(key)
        if isinstance(ticket, Granted) and self._memory.attempts.get(key) != attempt:
            ticket = None
        if ticket is None:
            if self._passed.get(key) != self._store.changes(key):
                self._asked.add(key)
                self._due.set()
            return Undecided()
        if isinstance(ticket, Waiting):
            announce = self._announced.get(key) != ticket.message
            self._announced[key] = ticket.message
            return replace(ticket, announce=announce)
        if isinstance(ticket, Faulted):
            # Held through a fault of admission's own: decided again once its retry is due (asked for
            # by its reconcile then), and announced once for a run of faults.
            if self._clock() >= ticket.retry_at:
                self._asked.add(key)
                self._due.set()
            said = f"fault: {ticket.stage}"
            announce = self._announced.get(key) != said
            self._announced[key] = said
            return replace(ticket, announce=announce)
        self._announced.pop(key, None)
        return ticket

    def reclaim_refused(self, key: p.AppKey) -> None:
        """The gang cannot be evicted whole (a PodDisruptionBudget): it is no victim for a while, and the
        queue that wanted its room looks again."""
        with self._lock:
            reclaiming = {k: r for k, r in self._memory.reclaiming.items() if k != key}
            self._memory = replace(self._memory, reclaiming=reclaiming)
            self._unevictable[key] = self._clock() + UNEVICTABLE_S
        self._due.set()

    # -- the loop ----------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Decide again as soon as something changed or a head's claim runs out. A burst of changes (a
        gang's pods leaving together) is coalesced for COALESCE_S, and cycles are paced by the CPU
        they used (after a cycle that used t seconds of CPU, the next waits at least t), so admission
        keeps up with a busy cluster without ever taking more than half a core. Its CPU, not the time
        it took: a cycle that waited for the GIL behind the webhook and the watch took far longer
        than it worked, and a pause as long would have kept every gang arrived meanwhile waiting twice
        over. A failed cycle is logged and the next one tried: this thread serves every tenant and
        must never end while the controller runs."""
        cost = 0.0
        while not stop.is_set():
            lapse = self._next_cycle_at
            woken = self._due.wait(1.0 if lapse is None else min(1.0, max(0.0, lapse - self._clock())))
            if not woken and (lapse is None or self._clock() < lapse):
                continue
            if stop.wait(max(COALESCE_S, cost)):
                return
            started = time.thread_time()
            try:
                self.turn()
            except Exception:
                log.exception("admission cycle failed; deciding again on the next change")
                self._due.set()
            cost = time.thread_time() - started

    def turn(self) -> bool:
        """One turn of the loop: a cycle, if something changed since the last one (room freed, a queue
        edited, an application asking for its first ticket) or a head's claim has run out, and
        someone waits. True when a cycle ran."""
        lapse = self._next_cycle_at
        timed = lapse is not None and self._clock() >= lapse
        if not self._due.is_set() and not timed:
            return False
        self._due.clear()
        with self._lock:
            idle = not self.waiting and not self._asked and not timed
        if idle:
            return False  # nobody waits (a decision due later keeps its time: it cycles then)
        self.decide_now()
        return True

    def decide_now(self) -> None:
        """One cycle, at once (also for a view of the cluster read a single time: `yuniplace status
        --queues`)."""
        with self._cycling:
            started, cpu_started = time.monotonic(), time.thread_time()
            try:
                self._cycle()
            finally:
                self.cycles += 1
                if self._metrics is not None:
                    self._metrics.admission_cycle_seconds.observe(time.monotonic() - started)
                    self._metrics.admission_cycle_cpu.inc(time.thread_time() - cpu_started)

    def _cycle(self) -> None:
        with self._lock:
            now = self._clock()
            self._unevictable = {key: until for key, until in self._unevictable.items() if until > now}
            memory = replace(self._memory, spared=frozenset(self._unevictable))
            # Who asks from now on is read by the next cycle; those asking now, at their count before
            # the snapshot reads their pods.
            asked = {key: self._store.changes(key) for key in self._asked}
            self._asked.clear()
        # 1. The snapshot, read once.
        placing = self._queues.placing()
        faults = {key: ticket for key, ticket in memory.tickets.items() if isinstance(ticket, Faulted)}
        snapshot = self._sources.read(placing, now, watched=memory.reclaiming, faults=faults)
        # 2. The decision, over the snapshot alone.
        decided = decide(snapshot, self._rules, memory)
        if self._metrics is not None:
            for key, ticket in decided.tickets.items():
                if isinstance(ticket, Faulted) and ticket != faults.get(key):  # met in this cycle
                    self._metrics.internal_errors.labels(ticket.stage).inc()
        # 3. The results: the queues placement created, the tickets, and a wake for each that changed.
        placing.done()
        for key in self._publish(snapshot, decided, asked):
            self._wake(key)

    def _publish(self, snapshot: Snapshot, decided: Decided, asked: Mapping[p.AppKey, int]) -> list[p.AppKey]:
        """Make the cycle's results the ones workers read; return the applications to wake: those whose
        ticket changed, to reserve or wait, and those whose room is taken back, to give it."""
        with self._lock:
            previous, attempts = self._memory.tickets, self._memory.attempts
            # A gang found unevictable while the cycle ran is no victim, whatever the cycle chose.
            reclaiming = {k: r for k, r in decided.reclaiming.items() if k not in self._unevictable}
            self._memory = Memory(decided.tickets, decided.granted, decided.attempts, reclaiming)
            self._next_cycle_at = decided.next_cycle_at
            self._pools = {key: app.pool for key, app in snapshot.apps.items() if not app.pool.free}
            # A gang granted room it borrows reserves on that pool from then on: its next reconciles
            # (placeholders made once its DRA claims are) may come before a cycle reads its record.
            self._pools.update(
                {key: t.pool for key, t in decided.tickets.items() if isinstance(t, Granted) and t.pool is not None}
            )
            self.waiting = sum(1 for t in decided.tickets.values() if isinstance(t, Waiting))
            self.waiting_by_queue = Counter(decided.waiting_by_queue)
            self.ledger = decided.ledger
            self._last = snapshot
            for key in [k for k in self._announced if k not in decided.tickets]:
                del self._announced[key]
            self._passed = {
                key: count
                for key, count in {**self._passed, **asked}.items()
                if key not in snapshot.apps and key not in decided.tickets and self._store.changes(key) == count
            }
        changed = [
            key
            for key, ticket in decided.tickets.items()
            if previous.get(key) != ticket or attempts.get(key) != decided.attempts.get(key)
        ]
        return [*changed, *(key for key in decided.reclaims if key in reclaiming)]

    # -- the report --------------------------------------------------------------------------------

    def domain_room(self) -> list[DomainRoom]:
        """The free room of each topology domain of the levels the last cycle's gangs ask for (at most
        MAX_LEVELS_SHOWN levels, by name, and MAX_DOMAINS_SHOWN domains a level)."""
        with self._lock:
            snapshot = self._last
        if snapshot is None:
            return []
        levels = sorted(
            {
                level.key
                for app in snapshot.apps.values()
                for asked in (app.spec.topology, *(group.topology for group in app.spec.groups))
                if asked is not None
                for level in asked.levels
            }
        )
        return free_by_domain(snapshot.room, levels[:MAX_LEVELS_SHOWN], most=MAX_DOMAINS_SHOWN)

    def report(self) -> QueuesReport | None:
        """Each queue's and pool's holdings as the last cycle counted them; None without a queue
        configuration."""
        with self._lock:
            ledger, snapshot, tickets = self.ledger, self._last, self._memory.tickets
        if ledger is None or snapshot is None:
            return None
        waiting: dict[str, list[str]] = {}
        in_line = line(snapshot)
        for app in sorted((a for a in snapshot.apps.values() if isinstance(tickets.get(a.key), Waiting)), key=in_line):
            waiting.setdefault(app.queue, []).append(str(app.key))
        queue_of_pod = {uid: app.queue for key, app in snapshot.apps.items() for uid in snapshot.pods.get(key, ())}
        pending: Counter[str] = Counter()  # pods of each queue's gangs not on a node yet
        for app in snapshot.apps.values():
            pending[app.queue] += sum(app.needing.values())
        pools = []
        for path, pool in pool_owners(snapshot.config).items():

            def other_queue(uid: str, owner: str = path) -> bool:
                queue = queue_of_pod.get(uid)
                return queue is not None and queue != owner and not queue.startswith(owner + ".")

            owner = snapshot.config.queues[path]
            used = self.room.pool(pool, lambda _uid: True)
            pools.append(
                PoolRow(
                    queue=path,
                    selector=dict(pool.require),
                    nodes=used.nodes,
                    capacity=used.capacity,
                    allocatable=used.allocatable,
                    used=used.taken,
                    shared=self.room.pool(pool, other_queue).taken,
                    sharing=owner.sharing,
                    pending=sum(
                        count for queue, count in pending.items() if queue == path or queue.startswith(path + ".")
                    ),
                    preemption=owner.preemption,
                    borrowing=owner.borrowing,
                    rest=owner.owns_the_rest,
                )
            )
        return QueuesReport(queue_rows(ledger, waiting), tuple(pools), user_rows(ledger))
