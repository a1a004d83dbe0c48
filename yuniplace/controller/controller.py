"""The reservation controller: a pod watch feeding a store, a work queue of applications, and workers
that plan and apply one application at a time."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from yuniplace.admission.cycle import Admission
from yuniplace.admission.decision import AdmissionRules
from yuniplace.controller import faults, lifecycle
from yuniplace.controller.apply import Executor
from yuniplace.controller.devicewatches import DeviceWatches
from yuniplace.controller.landings import Landings
from yuniplace.controller.lifecycle.policies.onloss import LOSS_ACTIONS
from yuniplace.controller.nodepools import NodePoolWatches
from yuniplace.controller.observe import observe
from yuniplace.controller.optionalapis import ApiFollower, Change, Feed
from yuniplace.controller.plan import Outcome, Plan, SeatsToRelease, Settings, Surroundings
from yuniplace.controller.podgroups import PodGroups
from yuniplace.controller.queuesource import QueueSource
from yuniplace.controller.restarts import RestartLedger
from yuniplace.controller.seatcheck import SeatCheck, WatchProgress
from yuniplace.controller.unserved import UnservedPods
from yuniplace.gang import keys, watched
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.record import state_of
from yuniplace.gang.state import AppState
from yuniplace.kube import KubeClient
from yuniplace.kube.watch import ListWatch
from yuniplace.runtime.events import EVICTION_REFUSED, EventRecorder, ObjectRef, Reason
from yuniplace.runtime.metrics import Metrics
from yuniplace.runtime.store import PodStore
from yuniplace.runtime.workqueue import WorkQueue

log = logging.getLogger(__name__)

MIN_RECONCILE_SPACING_S = 0.01
MAX_RECONCILE_SPACING_S = 0.1
# An application's reconciles are spaced by this many times the CPU its last one took: a large gang's
# thousands of pod events then cost at most a tenth of a core, whatever they are.
RECONCILE_SPACING_PER_CPU_S = 10.0
GAUGE_REFRESH_S = 2.0
SEATS_RECHECK_S = 0.05  # a gang started directly whose seats are not yet seen to hold is looked at again
CLAIMS_RECHECK_S = 0.5  # a swap whose placeholder's DRA claims could not be handed over yet is tried again
CLAIMS_FORBIDDEN_RECHECK_S = 30.0  # ... and one the API forbids, until yuniplace is granted the permission
SYNC_TIMEOUT_S = 120.0


class Controller:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str | None = None,
        settings: Settings = Settings(),
        workers: int = 4,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        admission: bool = True,
        rules: AdmissionRules = AdmissionRules(),
        queues_configmap: tuple[str, str] | None = None,
        restarts_configmap: tuple[str, str] | None = None,
        speaks_on: ObjectRef | None = None,
    ) -> None:
        self._client = client
        self._settings = settings
        self._workers = workers
        self._clock = clock
        self.metrics = metrics = metrics or Metrics()
        self.store = PodStore(settings.schedulers, clock)
        self.queue: WorkQueue[p.AppKey] = WorkQueue()
        self.recorder = EventRecorder(client, metrics=self.metrics)
        self._landings = Landings(self.recorder, self.metrics, settings, clock)
        self.unserved = UnservedPods(self.recorder, settings.schedulers)
        self._sees_everything = namespace is None and not settings.always_nominate
        self.pod_groups = PodGroups(client, namespace, self.queue.add, self.store.pod_group_dialect)
        # The controller's bookkeeping, shared by the watch, the workers and the gauges: under one lock.
        self._lock = threading.Lock()
        # Pods waiting for kube-scheduler that could take room (pods.may_take_room): whether a swap's freed
        # room or a seat must be guarded by a nomination. Seen only when watching every namespace;
        # otherwise always guard.
        self._waiting: dict[str, p.AppKey | None] = {}
        self._last_reconciled: dict[p.AppKey, tuple[float, float]] = {}  # when, and its CPU (s)
        # Applications waiting to swap onto a node until another application's member lands there.
        self._node_waiters: dict[str, set[p.AppKey]] = {}
        self._states: dict[p.AppKey, AppState] = {}
        self._degraded: set[p.AppKey] = set()  # started gangs reported below their minimum
        self._announced_native: dict[p.AppKey, str] = {}  # what each native gang was last announced as
        self._refusals: dict[p.AppKey, str] = {}  # why the API refused an application's placeholders
        self._claims_refused: dict[p.AppKey, str] = {}  # why the API refused a swap's DRA claims, as last said
        self._faults_told: dict[p.AppKey, str] = {}  # the stage of each gang's run of faults, once told
        self._seats_to_release: dict[p.AppKey, SeatsToRelease] = {}  # direct starts left for a next reconcile
        self._watch_progress = WatchProgress()
        self._namespace = namespace
        # Admission needs what every pod of the cluster takes on its node, so with it the pod watch
        # covers every namespace even when only one namespace's applications are managed.
        self.admission: Admission | None = None
        self.queues: QueueSource | None = None
        self._node_watch: ListWatch | None = None
        feeds: list[Feed] = [*self.pod_groups.feeds()]
        if admission:
            self.queues = QueueSource(
                queues_configmap,
                recorder=self.recorder,
                on_change=self._capacity_changed,
                events_namespace=namespace or "default",
            )
            self.admission = Admission(
                self.store, settings.limits, self.pod_groups.get, self.queues, self.queue.add, rules, clock, metrics
            )
            self.queues.count_devices(self.admission.devices)
            room = self.admission.room
            metrics.count_nodes(room.node_count, room.nodes_taking_pods)
            self._node_watch = ListWatch(
                client,
                "/api/v1/nodes",
                on_list=room.nodes_listed,
                on_event=self._node_event,
                name="nodes",
                decoding=watched.NODES,
            )
            feeds += [
                NodePoolWatches(client, self.admission.growth),
                DeviceWatches(client, self.admission.devices),
                *self.queues.feeds(client),
            ]
        # The optional APIs (Karpenter's, the PodGroup dialects', ...), read while the cluster serves them.
        self.apis = ApiFollower(client, feeds, on_change=self._apis_changed, announce=self._announce)
        self._speaks_on = speaks_on
        self._leading = threading.Event()  # set while this replica reconciles (it leads, or runs alone)
        admitted = self.admission
        self._seat_check = SeatCheck(
            None if admitted is None else admitted.room.view, self._watch_progress, self.recorder
        )
        self._executor = Executor(
            client,
            self.store,
            self.recorder,
            self.metrics,
            self._landings,
            contended=self._contended,
            seats_hold=self._seat_check.holds,
            seats_clear=self._seat_check.clear,
            pod_group_status_path=self.pod_groups.status_path,
        )
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace and not admission else "/api/v1/pods"
        self._watch = ListWatch(
            client,
            path,
            on_list=self._on_list,
            on_event=self._on_event,
            name="pods",
            trim=p.trim,
            decoding=watched.PODS,
        )
        self.synced = threading.Event()
        # How often each gang was restarted for a lost member (None: counted in memory only).
        where = restarts_configmap or ("", "")
        self.restarts = RestartLedger(client if restarts_configmap else None, where[0], where[1], clock)

    # -- event handlers: update the store, enqueue; nothing else ------------------------------------

    def _contended(self, key: p.AppKey) -> bool:
        """Whether a pod of another application waits to be scheduled and could take the room a swap
        frees (the application's own members may: they are reserved the same room)."""
        if not self._sees_everything:
            return True
        with self._lock:
            return any(owner != key for owner in self._waiting.values())

    def _capacity_changed(self) -> None:
        if self.admission is not None:
            self.admission.capacity_changed()

    def _apis_changed(self) -> None:
        """An optional API came or went: what it feeds changed what admission counts and how gangs read,
        so every application is decided again (a gang waiting for room an autoscaler can now make, one
        whose PodGroups can now be read)."""
        self._capacity_changed()
        applications = self.store.keys()
        for key in applications:
            self.queue.add(key)

    def _announce(self, change: Change) -> None:
        """An optional API come or gone, told by an event on the controller's Lease (or its pod) by the
        replica that reconciles; the others only log it."""
        if self._speaks_on is None or not self._leading.is_set():
            return
        reason = Reason.OPTIONAL_API_GONE if change.gone else Reason.OPTIONAL_API_SERVED
        where = self._speaks_on
        self.recorder.record_on(
            {"metadata": {"name": where.name, "namespace": where.namespace}},
            where.api_version,
            where.kind,
            reason,
            change.note,
        )

    def _managed(self, pod: p.Pod) -> bool:
        return self._namespace is None or pod.get("metadata", {}).get("namespace") == self._namespace

    def _on_list(self, pods: list[p.Pod]) -> None:
        if self.admission is not None:
            self.admission.room.pods_listed(pods)
        pods = [pod for pod in pods if self._managed(pod)]
        self.unserved.replace(pods)
        waiting = {p.uid(pod): p.app_key(pod) for pod in pods if p.may_take_room(pod)}
        with self._lock:
            self._waiting = waiting
        for key in self.store.replace(pods):
            self.queue.add(key)
        self._watch_progress.saw(max((p.resource_version(pod) for pod in pods), default=0))

    def _on_event(self, kind: str, pod: p.Pod) -> None:
        """Take one pod's change in; a pod that cannot be read is skipped, never the watch that brings
        every other pod's changes."""
        try:
            self._take_in(kind, pod)
        except Exception:
            meta = pod.get("metadata") or {}
            log.exception("cannot take in the %s of pod %s/%s; skipped", kind, meta.get("namespace"), meta.get("name"))
        self._watch_progress.saw(p.resource_version(pod))

    def _take_in(self, kind: str, pod: p.Pod) -> None:
        if self.admission is not None:
            self.admission.room.pod_event(kind, pod)
        if not self._managed(pod):
            return
        self.unserved.observe(kind, pod)
        waiting = kind != "DELETED" and p.may_take_room(pod)
        with self._lock:
            if waiting:
                self._waiting[p.uid(pod)] = p.app_key(pod)
            else:
                self._waiting.pop(p.uid(pod), None)
        landing = self.store.in_flight_node(p.uid(pod))
        if kind == "DELETED":
            self._landings.forget(pod)
            key = self.store.delete(pod)
        else:
            self._landings.observe(pod)
            key = self.store.upsert(pod)
        if landing is not None and self.store.in_flight_node(p.uid(pod)) is None:
            with self._lock:
                waiters = self._node_waiters.pop(landing, set())
            for waiter in waiters:  # the node is free for their swaps now
                self.queue.add(waiter)
        if key is not None:
            # An application reconciled a moment ago waits a little, in proportion to the CPU its last
            # reconcile took (within MIN/MAX_RECONCILE_SPACING_S): the events of a large gang (a
            # placeholder placed, a member bound, one each) then coalesce into few reconciles instead
            # of one each, while a small or quiet application reacts at once.
            with self._lock:
                last, cpu = self._last_reconciled.get(key, (0.0, 0.0))
            spacing = min(MAX_RECONCILE_SPACING_S, max(MIN_RECONCILE_SPACING_S, RECONCILE_SPACING_PER_CPU_S * cpu))
            self.queue.add_after(key, spacing - (time.monotonic() - last))

    # -- workers -----------------------------------------------------------------------------------

    def admits_native(self, pod: Mapping[str, Any]) -> bool:
        """Whether the pod joins a native gang its queue has admitted with no placeholder (its record on
        its originator, as this replica's store has it, whether or not it leads): the webhook then lets
        it through ungated, for the gang plugin to hold with the rest. A gang whose placeholders hold
        its room keeps its members gated, each to take a placeholder's place. Only the current attempt's
        record counts: the pods of one the gang was restarted from, ended or still terminating, say
        nothing of the new one, whose members stay gated until it is admitted. A "no" for an admitted
        gang only costs a gate lifted a moment later, by the gang's next reconcile."""
        key = p.app_key(pod)
        if key is None:
            return False
        # Every pod creation of a held namespace asks, so it reads only the records, not the whole gang.
        current = [m for m in self.store.app_pods(key) if not p.is_terminal(m) and not p.is_deleting(m)]
        if any(p.is_placeholder(m) for m in current):
            return False
        records = (p.annotations_of(member) for member in current)
        states = (state_of(notes) for notes in records if keys.STATE in notes)
        return any(state in (AppState.RESERVED, AppState.RUNNING) for state in states)

    def _application(self, key: p.AppKey) -> Application:
        return self.store.application(key, self.pod_groups.get(key), self._settings.limits)

    def _state_of(self, key: p.AppKey) -> AppState | None:
        app = self._application(key)
        return None if app.originator is None else app.state

    def _surroundings(self, app: Application) -> Surroundings:
        """What the plan needs from beyond the application: admission's ticket while it is pending,
        where its queue lets it go and whether its room is taken back, and the states of the other
        applications of its gang group."""
        if app.spec is None:
            return Surroundings(self.store.nodes_in_flight())
        peers = {ref: self._state_of(p.AppKey.parse(ref)) for ref in app.spec.gang_group if ref != str(app.key)}
        owner = p.controller_of(app.originator) if app.originator is not None else None
        restarts = None if owner is None else self.restarts.get(app.key, str(owner.get("uid") or ""))
        admission = self.admission
        if admission is None:
            return Surroundings(self.store.nodes_in_flight(), peers=peers, restarts=restarts)
        attempt = p.uid(app.originator) if app.originator is not None else ""
        standing = admission.standing(app.key, pending=app.state == AppState.PENDING, attempt=attempt)
        with self._lock:
            to_release = self._seats_to_release.get(app.key)
        return Surroundings(
            self.store.nodes_in_flight(),
            ticket=standing.ticket,
            peers=peers,
            pool=standing.pool,
            queue=standing.queue,
            reclaimed=None if standing.reclaim is None else standing.reclaim.message,
            node_health=admission.room.node_health,
            restarts=restarts,
            seats_to_release=to_release,
        )

    def _node_event(self, kind: str, node: dict[str, Any]) -> None:
        """A node changed: admission's room follows it, and where the node is gone or in trouble (or
        well again) the applications with pods on it look at their members again (gang/losses.py)."""
        if self.admission is None:  # the node watch runs with admission only
            return
        room, name = self.admission.room, node["metadata"]["name"]
        before = room.node_health(name)
        room.node_event(kind, node)
        if room.node_health(name) != before:
            for key in self.store.apps_on(name):
                self.queue.add(key)

    def _observe_native(self, key: p.AppKey, app: Application) -> Plan:
        """A gang kube-scheduler binds by itself: events about it, and nothing written to its pods."""
        placed = self.admission.standing(key, pending=False).queue if self.admission is not None else None
        # Before admission's first count of it, the queue it asks for.
        queue = placed or (app.queue if app.originator is not None else None)
        with self._lock:
            announced = self._announced_native.get(key)
            before = self._states.get(key)
        with faults.at(faults.PLAN):
            plan, headline = observe(
                app, announced, queue, before=before, watched=self.pod_groups.native.version is not None
            )
        with faults.at(faults.APPLY):
            self._executor.apply(plan)
        with self._lock:
            if plan.forget:
                self._announced_native.pop(key, None)
            else:
                self._announced_native[key] = headline
        if plan.state != self._states.get(key):
            self._capacity_changed()  # it began to hold room, or let it go: admission counts again
        return plan

    def reconcile(self, key: p.AppKey) -> Plan:
        """Plan the application's next step and carry it out. A fault met on the way is raised as an
        InternalError naming its stage (faults.py), for the worker to hold the gang and try again."""
        started, cpu_started = time.monotonic(), time.thread_time()
        with self._lock:
            self._last_reconciled[key] = (started, self._last_reconciled.get(key, (0.0, 0.0))[1])
        with faults.at(faults.READ):
            app = self._application(key)
        if app.originator is not None and app.left_to_kube_scheduler:
            plan = self._observe_native(key, app)
            self._record(key, app, plan)
            return plan
        with faults.at(faults.READ):
            around = self._surroundings(app)
        with self._lock:
            refusal = self._refusals.pop(key, None)
        if refusal is not None:
            around = replace(around, ticket=None, refusal=refusal)
        with faults.at(faults.PLAN):
            plan = lifecycle.make_plan(app, self._clock(), self._settings, around)
        with faults.at(faults.APPLY):
            refused = self._executor.apply(plan)
        if refused.placeholders is not None:
            # The API would not create its placeholders: the next reconcile, at once, gives the
            # reservation back, so its room is free for others.
            with self._lock:
                self._refusals[key] = refused.placeholders
            self.queue.add(key)
        with self._lock:
            if refused.seats_to_release is not None:
                self._seats_to_release[key] = refused.seats_to_release
            else:
                self._seats_to_release.pop(key, None)  # given for one next reconcile, which this was
        if (to_release := refused.seats_to_release) is not None:
            # Back as soon as the watch has its record, or at the deadline to nominate its members.
            self._watch_progress.when_reached(to_release.recorded_at, lambda: self.queue.add(key))
            self.queue.add_after(key, max(0.0, to_release.deadline - time.monotonic()))
        if refused.seats_held:
            self.queue.add_after(key, SEATS_RECHECK_S)
        if refused.claims_forbidden is not None:
            self._said_once(key, plan, refused.claims_forbidden)
            self.queue.add_after(key, CLAIMS_FORBIDDEN_RECHECK_S)
        elif refused.claims_kept:
            self.queue.add_after(key, CLAIMS_RECHECK_S)
        if refused.eviction is not None and plan.originator is not None:
            # Not the whole gang may go: none of it does; a reclaim looks elsewhere, a restart is tried
            # again at the next look.
            restarting = plan.restarts is not None
            if not restarting and self.admission is not None:
                self.admission.reclaim_refused(key)
            self.recorder.record(
                plan.originator,
                Reason.GANG_RESTARTING if restarting else Reason.GANG_PREEMPTED,
                f"{EVICTION_REFUSED} ({refused.eviction}); it keeps running",
            )
        elif plan.restarts is not None:
            self.restarts.record(key, plan.restarts)
        if plan.transition is not None or plan.evict:
            for ref in around.peers:  # a gang group moves together: the others look again
                self.queue.add(p.AppKey.parse(ref))
            self._capacity_changed()  # what it holds or waits for changed: admission decides again
        if plan.waits_for_nodes:
            with self._lock:
                for node in plan.waits_for_nodes:
                    self._node_waiters.setdefault(node, set()).add(key)
            if not plan.waits_for_nodes <= self.store.nodes_in_flight():
                self.queue.add(key)  # one landed while the plan was made: no event is left to wake it
        self._record(key, app, plan)
        self.metrics.reconcile_seconds.observe(time.monotonic() - started)
        with self._lock:
            if key in self._last_reconciled:
                self._last_reconciled[key] = (started, time.thread_time() - cpu_started)
        return plan

    def _said_once(self, key: p.AppKey, plan: Plan, why: str) -> None:
        """A GangDevices event on the gang's originator, once for each thing the API refuses it."""
        with self._lock:
            said = self._claims_refused.get(key) == why
            self._claims_refused[key] = why
        if not said and plan.originator is not None:
            self.recorder.record(plan.originator, Reason.GANG_DEVICES, why)

    def _record(self, key: p.AppKey, app: Application, plan: Plan) -> None:
        """Metrics from what the plan says happened, and the state for the gauges."""
        if Outcome.RESERVED in plan.outcomes and app.record.reservation_started is not None:
            self.metrics.reservation_seconds.observe(max(0.0, self._clock() - app.record.reservation_started))
        if Outcome.STARTED_DIRECTLY in plan.outcomes:
            self.metrics.gang_starts.labels("direct").inc()
        if Outcome.RESERVING in plan.outcomes:
            self.metrics.gang_starts.labels("placeholders").inc()
        if Outcome.TIMED_OUT in plan.outcomes:
            assert plan.spec is not None
            self.metrics.timeouts.labels(plan.spec.policy.on_timeout.value).inc()
        if Outcome.DEGRADED in plan.outcomes:
            self.metrics.degradations.inc()
        for outcome, action in LOSS_ACTIONS.items():
            if outcome in plan.outcomes:
                self.metrics.loss_actions.labels(action).inc()
        if plan.placed_in is not None:
            self.metrics.placed_in(plan.placed_in)
        # Reported degraded now, or before (a restarted controller reads it from the record) and not recovered.
        said = plan.annotate.get(keys.DEGRADED_REPORTED, "true" if app.record.degraded_reported else None)
        with self._lock:
            if said == "true" and plan.state == AppState.RUNNING:
                self._degraded.add(key)
            else:
                self._degraded.discard(key)
            if plan.forget:
                self._states.pop(key, None)
                self._last_reconciled.pop(key, None)
                self._refusals.pop(key, None)
                self._claims_refused.pop(key, None)
                self._faults_told.pop(key, None)
                self._seat_check.forget(key)
            else:
                self._states[key] = plan.state

    def _refresh_gauges(self, stop: threading.Event) -> None:
        """Applications by state and placeholders by state, every GAUGE_REFRESH_S: counting them on
        every reconcile would make each reconcile cost as much as the whole store."""
        while not stop.wait(GAUGE_REFRESH_S):
            with self._lock:
                counts = Counter(self._states.values())
                degraded = len(self._degraded)
            for state in AppState:
                self.metrics.applications.labels(state.value).set(counts.get(state, 0))
            self.metrics.degraded.set(degraded)
            placeholders = self.store.placeholders()
            placed = sum(1 for ph in placeholders if p.node_name(ph))
            self.metrics.placeholders.labels("placed").set(placed)
            self.metrics.placeholders.labels("pending").set(len(placeholders) - placed)
            if self.admission is not None:
                self.metrics.admission_waiting.set(self.admission.waiting)
                self.metrics.report_queues(self.admission.report())
                self.metrics.report_domains(self.admission.domain_room())

    def _work(self, stop: threading.Event) -> None:
        while not stop.is_set():
            key = self.queue.get()
            if key is None:
                return
            try:
                self.process(key)
            finally:
                self.queue.done(key)
                self.metrics.queue_depth.set(self.queue.depth())

    def process(self, key: p.AppKey) -> Plan | None:
        """One reconcile of the application, as a worker runs it. A fault (of yuniplace's own: what users
        write is validated, and told, before it gets here) is logged with its trace, counted by stage and
        told once on the gang, which is held as it is and tried again after a backoff; None then. A plan
        moot by a pod deleted meanwhile is no fault: it is dropped, and the gang looked at again."""
        try:
            plan = self.reconcile(key)
        except faults.Moot as moot:
            # Looked at again when the deletion is heard; after a backoff too, should it never be.
            delay = self.queue.retry(key)
            log.info("plan of %s dropped: a pod it writes is gone (%s); looked at again in %.1fs", key, moot, delay)
            return None
        except Exception as error:
            delay = self.queue.retry(key)
            stage = faults.stage_of(error)
            self.metrics.reconcile_errors.inc()
            self.metrics.internal_errors.labels(stage).inc()
            log.exception("reconcile of %s failed (%s); held as it is, retrying in %.1fs", key, error, delay)
            self._tell_fault(key, stage, error, delay)
            return None
        self.queue.forget(key)
        with self._lock:
            self._faults_told.pop(key, None)
        if plan.requeue_after_s is not None:
            self.queue.add_after(key, plan.requeue_after_s)
        return plan

    def _tell_fault(self, key: p.AppKey, stage: str, error: Exception, retry_in_s: float) -> None:
        """An InternalError event on the gang (its originator, else its first pod), once for a run of
        faults at one stage: its users learn the gang waits on yuniplace, not on their task groups."""
        with self._lock:
            if self._faults_told.get(key) == stage:
                return
            self._faults_told[key] = stage
        pods = self.store.app_pods(key)
        try:
            told = self._application(key).originator
        except Exception:  # noqa: BLE001 - reading the gang may be the fault itself: its first pod is told
            told = None
        told = told or (pods[0] if pods else None)
        if told is not None:
            self.recorder.record(told, Reason.INTERNAL_ERROR, faults.note(stage, error, retry_in_s))

    def start(self) -> None:
        """Start watching. Every replica watches, leader or not, so a standby is ready (its store
        synced) the moment it takes over, and readiness means the same on every replica."""
        watches = {"pods": self._watch}
        if self._node_watch is not None:
            watches["nodes"] = self._node_watch
        for name, watch in watches.items():
            threading.Thread(target=watch.run, name=f"watch-{name}", daemon=True).start()
        waits = [w.synced for w in watches.values()] + self.apis.start()
        if self.queues is not None:
            waits += self.queues.start(self._client)

        def synced() -> None:
            for event in waits:
                event.wait()
            self.synced.set()

        threading.Thread(target=synced, name="synced", daemon=True).start()

    def run_workers(self, stop: threading.Event) -> None:
        """Reconcile until `stop` is set (shutdown, or leadership lost); in-flight reconciles finish."""
        while not self.synced.wait(1.0):
            if stop.is_set():
                return
        self.restarts.load()
        self._leading.set()
        applications = self.store.keys()
        log.info("pod store synced: %d pods of %d applications; reconciling", len(self.store), len(applications))
        for key in applications:
            self.queue.add(key)
        workers = [threading.Thread(target=self._work, args=(stop,), name=f"worker-{i}") for i in range(self._workers)]
        for worker in workers:
            worker.start()
        threading.Thread(target=self._refresh_gauges, args=(stop,), name="gauges", daemon=True).start()
        threading.Thread(target=self.unserved.run, args=(stop,), name="unserved", daemon=True).start()
        if self.admission is not None:
            threading.Thread(target=self.admission.run, args=(stop,), name="admission", daemon=True).start()
        stop.wait()
        self._leading.clear()
        log.info("stopping: finishing in-flight reconciles")
        self.queue.shutdown()
        for worker in workers:
            worker.join()

    def close(self) -> None:
        """Stop watching and post the events still queued."""
        self._watch.stop()
        if self._node_watch is not None:
            self._node_watch.stop()
        self.apis.stop()
        if self.queues is not None:
            self.queues.stop()
        self._executor.close()
        self.recorder.close()
