"""The controller's view of the pods it is concerned with, trimmed and indexed by application.

Event handlers only update this store; reconciles read it. The controller's own writes are applied
here as soon as the API answers (write-through), and a newer resourceVersion always wins, so the
next reconcile never acts on a state the controller has itself already changed.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects.base import GangDialect
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.apppods import AppPods

Pod = p.Pod
MAX_TOMBSTONES = 20_000


class PodStore:
    def __init__(
        self, schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS, clock: Callable[[], float] = time.time
    ) -> None:
        self._schedulers = schedulers
        self._clock = clock
        self._lock = threading.Lock()
        self._pods: dict[str, Pod] = {}
        self._keys: dict[str, p.AppKey] = {}
        self._apps: dict[p.AppKey, AppPods] = {}
        # resourceVersion at which a pod was deleted, so a late event cannot bring it back. Late
        # events come within moments, so the oldest tombstones are let go past MAX_TOMBSTONES.
        self._deleted: OrderedDict[str, int] = OrderedDict()
        self._placeholders: set[str] = set()
        # Members released by a nominated swap and not bound yet: uid -> the node they are nominated to.
        self._in_flight: dict[str, str] = {}
        # Applications seen so far, as a count: watch events come in the order the API server stored
        # them, so it orders applications created within the same second (creationTimestamp's
        # resolution) by creation. After a restart, ties come in the order of the first list.
        self._seen = 0

    def _put(self, uid: str, pod: Pod, key: p.AppKey, identity: p.Identity) -> None:
        old_key = self._keys.get(uid)
        if old_key is not None and old_key != key:
            self._leave(old_key, uid)
        self._pods[uid] = pod
        self._keys[uid] = key
        app = self._apps.get(key)
        if app is None:
            app = self._apps[key] = AppPods(self._seen, self._clock())
            self._seen += 1
        app.put(uid, pod, identity, self._clock())
        if identity.placeholder:
            self._placeholders.add(uid)
        node = p.nominated_node(pod)
        if node and p.is_in_flight(pod):
            self._in_flight[uid] = node
        else:
            self._in_flight.pop(uid, None)

    def _leave(self, key: p.AppKey, uid: str) -> None:
        app = self._apps[key]
        app.drop(uid)
        if not app:
            del self._apps[key]

    def _drop(self, uid: str) -> p.AppKey | None:
        self._pods.pop(uid, None)
        self._placeholders.discard(uid)
        self._in_flight.pop(uid, None)
        key = self._keys.pop(uid, None)
        if key is not None:
            self._leave(key, uid)
        return key

    def first_seen(self, key: p.AppKey) -> int:
        """The application's place among those seen so far (see _seen)."""
        with self._lock:
            app = self._apps.get(key)
            return self._seen if app is None else app.order

    def arrived(self, key: p.AppKey) -> tuple[float, float]:
        """When the application's first pod was seen, and its latest new pod, by the controller's clock
        (creation times are the API server's, whose clock may differ)."""
        with self._lock:
            app = self._apps.get(key)
            if app is None:
                now = self._clock()
                return now, now
            return app.first_seen_at, app.last_added_at

    def changes(self, key: p.AppKey) -> int:
        """How often the application's pods have changed: a reader that saw it at one count knows it
        has news when the count moves."""
        with self._lock:
            app = self._apps.get(key)
            return 0 if app is None else app.changes

    def upsert(self, pod: Pod) -> p.AppKey | None:
        """Record a pod (from a watch event or a write's answer); return its application, if any."""
        uid = p.uid(pod)
        identity = p.identify(pod)
        key = p.app_key(pod, identity)
        with self._lock:
            version = p.resource_version(pod)
            if self._deleted.get(uid, -1) >= version:
                return None
            current = self._pods.get(uid)
            if current is not None and p.resource_version(current) > version:
                return self._keys.get(uid)
            if key is None or not p.is_concerned(pod, self._schedulers, identity):
                return self._drop(uid)
            self._put(uid, p.trim(pod, identity), key, identity)
            return key

    def delete(self, pod: Pod) -> p.AppKey | None:
        uid = p.uid(pod)
        with self._lock:
            self._deleted[uid] = max(self._deleted.get(uid, 0), p.resource_version(pod))
            self._deleted.move_to_end(uid)
            while len(self._deleted) > MAX_TOMBSTONES:
                self._deleted.popitem(last=False)
            return self._drop(uid)

    def replace(self, pods: Iterable[Pod]) -> set[p.AppKey]:
        """Take a fresh list as the whole truth (after a re-list); return every application touched."""
        with self._lock:
            before = set(self._apps)
            self._pods.clear()
            self._keys.clear()
            self._apps.clear()
            self._deleted.clear()
            self._placeholders.clear()
            self._in_flight.clear()
            for pod in pods:
                identity = p.identify(pod)
                key = p.app_key(pod, identity)
                if key is not None and p.is_concerned(pod, self._schedulers, identity):
                    self._put(p.uid(pod), p.trim(pod, identity), key, identity)
            return before | set(self._apps)

    def app_pods(self, key: p.AppKey) -> list[Pod]:
        with self._lock:
            app = self._apps.get(key)
            return [] if app is None else app.pods()

    def application(self, key: p.AppKey, pod_group: Mapping[str, object] | None, limits: Limits) -> Application:
        """The application as its pods (and PodGroup) show it now: read again only once one of them
        changed since the last read, and then from what the store keeps of it, in order."""
        with self._lock:
            app = self._apps.get(key)
            if app is not None:
                return app.application(key, pod_group, limits)
        return Application.of(key, [], pod_group, limits)

    def pod_group_dialect(self, key: p.AppKey) -> GangDialect | None:
        """The dialect whose pod group describes the application's gang: kube-scheduler's own, when its
        first pod is of a native pod group, else the first of its pods whose dialect has PodGroups
        (a scheduler-plugins and a Volcano PodGroup may share a name: the one its pods name is theirs)."""
        with self._lock:
            app = self._apps.get(key)
            return None if app is None else app.pod_group_dialect()

    def keys(self) -> list[p.AppKey]:
        with self._lock:
            return list(self._apps)

    def apps_on(self, node: str) -> set[p.AppKey]:
        """The applications with a pod bound to the node: those a node gone or in trouble concerns. A
        pass over every pod, for what happens to a node rarely."""
        with self._lock:
            return {self._keys[uid] for uid, pod in self._pods.items() if p.node_name(pod) == node}

    def placeholders(self) -> list[Pod]:
        with self._lock:
            return [self._pods[uid] for uid in self._placeholders]

    def in_flight_node(self, uid: str) -> str | None:
        """The node the pod, released by a nominated swap, is on its way to; None once bound (or never)."""
        with self._lock:
            return self._in_flight.get(uid)

    def nodes_in_flight(self) -> frozenset[str]:
        """Nodes a released member is nominated to and not yet bound on, whatever its application."""
        with self._lock:
            return frozenset(self._in_flight.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)
