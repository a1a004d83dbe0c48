"""The reservation controller: a pod watch feeding a store, a work queue of applications, and workers
that plan and apply one application at a time."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from yuniplace.controller.admission import Admission
from yuniplace.controller.apply import Executor, SwapTracker
from yuniplace.controller.capacity import ClusterRoom
from yuniplace.controller.events import EventRecorder
from yuniplace.controller.metrics import Metrics
from yuniplace.controller.plan import AppView, Granted, Plan, Settings, Waiting, gang_spec, plan_application
from yuniplace.controller.podgroups import PodGroups
from yuniplace.controller.store import PodStore
from yuniplace.controller.workqueue import WorkQueue
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import InvalidGang
from yuniplace.kube import KubeClient
from yuniplace.kube.watch import ListWatch

log = logging.getLogger(__name__)

MAX_RETRY_BACKOFF_S = 30.0
MIN_RECONCILE_INTERVAL_S = 0.1
GAUGE_REFRESH_S = 2.0
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
    ) -> None:
        self._client = client
        self._settings = settings
        self._workers = workers
        self._clock = clock
        self.metrics = metrics or Metrics()
        self.store = PodStore(settings.schedulers)
        self.queue: WorkQueue[p.AppKey] = WorkQueue()
        self.recorder = EventRecorder(client, on_posted=lambda kind, reason: self.metrics.events.labels(kind, reason).inc())
        self._tracker = SwapTracker(self.recorder, self.metrics, settings, clock)
        # Pods waiting for kube-scheduler (ungated, unbound): whether a swap's freed room must be
        # guarded by a nomination. Seen only when watching every namespace; otherwise always guard.
        self._waiting: dict[str, p.AppKey | None] = {}
        self._sees_everything = namespace is None and not settings.always_nominate
        self._executor = Executor(client, self.store, self.recorder, self.metrics, self._tracker, contended=self._contended)
        self._failures: Counter[p.AppKey] = Counter()
        self._last_reconciled: dict[p.AppKey, float] = {}
        self._states: dict[p.AppKey, AppState] = {}
        self._states_lock = threading.Lock()
        self._namespace = namespace
        # Admission needs what every pod of the cluster takes on its node, so with it the pod watch
        # covers every namespace even when only one namespace's applications are managed.
        self.pod_groups = PodGroups(client, namespace, self.queue.add)
        self.room: ClusterRoom | None = None
        self.admission: Admission | None = None
        self._node_watch: ListWatch | None = None
        if admission:
            self.room = ClusterRoom(on_freed=self._capacity_changed)
            self.admission = Admission(self.room, self.store, settings.limits, self.pod_groups.get, self.queue.add)
            self._node_watch = ListWatch(client, "/api/v1/nodes", on_list=self.room.nodes_listed,
                                         on_event=self.room.node_event, name="nodes")
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace and not admission else "/api/v1/pods"
        self._watch = ListWatch(client, path, on_list=self._on_list, on_event=self._on_event, name="pods")
        self.synced = threading.Event()

    # -- event handlers: update the store, enqueue; nothing else ------------------------------------

    @staticmethod
    def _is_waiting(pod: p.Pod) -> bool:
        spec = pod.get("spec", {})
        return not spec.get("nodeName") and not spec.get("schedulingGates") and p.phase(pod) == "Pending" and not p.is_deleting(pod)

    def _contended(self, key: p.AppKey) -> bool:
        """Whether a pod of another application waits to be scheduled and could take the room a swap
        frees (the application's own members may: they are reserved the same room)."""
        if not self._sees_everything:
            return True
        return any(owner != key for owner in list(self._waiting.values()))

    def _capacity_changed(self) -> None:
        if self.admission is not None:
            self.admission.capacity_changed()

    def _managed(self, pod: p.Pod) -> bool:
        return self._namespace is None or pod.get("metadata", {}).get("namespace") == self._namespace

    def _on_list(self, pods: list[p.Pod]) -> None:
        if self.room is not None:
            self.room.pods_listed(pods)
        pods = [pod for pod in pods if self._managed(pod)]
        self._waiting = {p.uid(pod): p.app_key(pod) for pod in pods if self._is_waiting(pod)}
        for key in self.store.replace(pods):
            self.queue.add(key)

    def _on_event(self, kind: str, pod: p.Pod) -> None:
        if self.room is not None:
            self.room.pod_event(kind, pod)
        if not self._managed(pod):
            return
        if kind != "DELETED" and self._is_waiting(pod):
            self._waiting[p.uid(pod)] = p.app_key(pod)
        else:
            self._waiting.pop(p.uid(pod), None)
        if kind == "DELETED":
            self._tracker.forget(pod)
            key = self.store.delete(pod)
        else:
            self._tracker.observe(pod)
            key = self.store.upsert(pod)
        if key is not None:
            # An application reconciled a moment ago waits out MIN_RECONCILE_INTERVAL_S: the events of
            # a large gang (a placeholder placed, a member bound, one each) then coalesce into one
            # reconcile instead of one each, while a quiet application still reacts at once.
            since = time.monotonic() - self._last_reconciled.get(key, 0.0)
            self.queue.add_after(key, MIN_RECONCILE_INTERVAL_S - since)

    # -- workers -----------------------------------------------------------------------------------

    def _state_of(self, ref: str) -> AppState | None:
        namespace, _, app_id = ref.partition("/")
        view = AppView.of(p.AppKey(namespace, app_id), self.store.app_pods(p.AppKey(namespace, app_id)))
        originator = view.originator
        return None if originator is None else AppState.parse(p.annotations(originator).get(keys.STATE))

    def _context(self, view: AppView) -> tuple[Granted | Waiting | None, dict[str, AppState | None]]:
        """What the plan needs from beyond the application: admission's ticket while it is pending,
        and the states of the other applications of its gang group."""
        originator = view.originator
        if originator is None:
            return None, {}
        try:
            spec = gang_spec(view, self._settings.limits)
        except InvalidGang:
            return None, {}
        peers = {ref: self._state_of(ref) for ref in spec.gang_group if ref != str(view.key)}
        state = AppState.parse(p.annotations(originator).get(keys.STATE))
        ticket = self.admission.ticket(view.key) if self.admission is not None and state == AppState.PENDING else None
        return ticket, peers

    def reconcile(self, key: p.AppKey) -> Plan:
        started = time.monotonic()
        self._last_reconciled[key] = started
        view = AppView.of(key, self.store.app_pods(key), self.pod_groups.get(key))
        ticket, peers = self._context(view)
        plan = plan_application(view, self._clock(), self._settings, self.store.nodes_in_flight(), ticket, peers)
        self._executor.apply(plan)
        if plan.state != self._states.get(key):
            for ref in peers:  # a gang group moves together: the others look again
                namespace, _, app_id = ref.partition("/")
                self.queue.add(p.AppKey(namespace, app_id))
        self._record(key, plan)
        self.metrics.reconcile_seconds.observe(time.monotonic() - started)
        return plan

    def _record(self, key: p.AppKey, plan: Plan) -> None:
        previous = self._states.get(key)
        if plan.state == AppState.RESERVED and previous == AppState.RESERVING and plan.originator is not None:
            begun = p.parse_time(p.annotations(plan.originator).get("yuniplace.io/reservation-started"))
            if begun is not None:
                self.metrics.reservation_seconds.observe(max(0.0, self._clock() - begun))
        if plan.state in (AppState.RESUMING, AppState.FAILED) and previous in (AppState.RESERVING, None) and any(
            e.reason == "PlaceholderTimeOut" for e in plan.events
        ):
            self.metrics.timeouts.labels("Hard" if plan.state == AppState.FAILED else "Soft").inc()
        with self._states_lock:
            if plan.forget:
                self._states.pop(key, None)
                self._last_reconciled.pop(key, None)
            else:
                self._states[key] = plan.state

    def _refresh_gauges(self, stop: threading.Event) -> None:
        """Applications by state and placeholders by state, every GAUGE_REFRESH_S: counting them on
        every reconcile would make each reconcile cost as much as the whole store."""
        while not stop.wait(GAUGE_REFRESH_S):
            with self._states_lock:
                counts = Counter(self._states.values())
            for state in AppState:
                self.metrics.applications.labels(state.value).set(counts.get(state, 0))
            placeholders = self.store.placeholders()
            placed = sum(1 for ph in placeholders if p.node_name(ph))
            self.metrics.placeholders.labels("placed").set(placed)
            self.metrics.placeholders.labels("pending").set(len(placeholders) - placed)
            if self.admission is not None:
                self.metrics.admission_waiting.set(self.admission.waiting)

    def _work(self, stop: threading.Event) -> None:
        while not stop.is_set():
            key = self.queue.get()
            if key is None:
                return
            try:
                plan = self.reconcile(key)
            except Exception as error:  # noqa: BLE001 - one application's failure must not stop the others
                self._failures[key] += 1
                delay = min(MAX_RETRY_BACKOFF_S, 0.5 * 2 ** self._failures[key])
                self.metrics.reconcile_errors.inc()
                log.warning("reconcile of %s failed (%s); retrying in %.1fs", key, error, delay, exc_info=log.isEnabledFor(logging.DEBUG))
                self.queue.add_after(key, delay)
            else:
                self._failures.pop(key, None)
                if plan.requeue_after_s is not None:
                    self.queue.add_after(key, plan.requeue_after_s)
            finally:
                self.queue.done(key)
                self.metrics.queue_depth.set(self.queue.depth())

    def start(self) -> None:
        """Start watching. Every replica watches, leader or not, so a standby is ready (its store
        synced) the moment it takes over, and readiness means the same on every replica."""
        watches = {"pods": self._watch}
        if self._node_watch is not None:
            watches["nodes"] = self._node_watch
        for name, watch in watches.items():
            threading.Thread(target=watch.run, name=f"watch-{name}", daemon=True).start()
        pod_groups_synced = self.pod_groups.start()
        waits = [w.synced for w in watches.values()] + ([pod_groups_synced] if pod_groups_synced else [])

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
        log.info("pod store synced: %d pods of %d applications; reconciling", len(self.store), len(self.store.keys()))
        for key in self.store.keys():
            self.queue.add(key)
        workers = [threading.Thread(target=self._work, args=(stop,), name=f"worker-{i}") for i in range(self._workers)]
        for worker in workers:
            worker.start()
        threading.Thread(target=self._refresh_gauges, args=(stop,), name="gauges", daemon=True).start()
        if self.admission is not None:
            threading.Thread(target=self.admission.run, args=(stop,), name="admission", daemon=True).start()
        stop.wait()
        log.info("stopping: finishing in-flight reconciles")
        self.queue.shutdown()
        for worker in workers:
            worker.join()

    def close(self) -> None:
        """Stop watching and post the events still queued."""
        self._watch.stop()
        if self._node_watch is not None:
            self._node_watch.stop()
        self.pod_groups.watch.stop()
        self._executor.close()
        self.recorder.close()
