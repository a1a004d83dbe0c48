"""The controller's view of the pods it is concerned with, trimmed and indexed by application.

Event handlers only update this store; reconciles read it. The controller's own writes are applied
here as soon as the API answers (write-through), and a newer resourceVersion always wins, so the
next reconcile never acts on a state the controller has itself already changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterable

from yuniplace.gang import pods as p

Pod = p.Pod
MAX_TOMBSTONES = 20_000


def _version(pod: Pod) -> int:
    try:
        return int(pod["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


class PodStore:
    def __init__(self, schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS) -> None:
        self._schedulers = schedulers
        self._lock = threading.Lock()
        self._pods: dict[str, Pod] = {}
        self._keys: dict[str, p.AppKey] = {}
        self._by_app: dict[p.AppKey, set[str]] = defaultdict(set)
        # resourceVersion at which a pod was deleted, so a late event cannot bring it back. Late
        # events come within moments, so the oldest tombstones are let go past MAX_TOMBSTONES.
        self._deleted: OrderedDict[str, int] = OrderedDict()
        self._placeholders: set[str] = set()
        # Members released by a nominated swap and not bound yet: uid -> the node they are nominated to.
        self._in_flight: dict[str, str] = {}
        # When each application was first seen, as a count: watch events come in the order the API server
        # stored them, so it orders applications created within the same second (creationTimestamp's
        # resolution) by creation. After a restart, ties come in the order of the first list.
        self._first_seen: dict[p.AppKey, int] = {}
        self._seen = 0
        self._changes: dict[p.AppKey, int] = {}  # each application's changes so far, as a count

    def _put(self, uid: str, pod: Pod, key: p.AppKey) -> None:
        old_key = self._keys.get(uid)
        if old_key is not None and old_key != key:
            self._by_app[old_key].discard(uid)
        self._pods[uid] = pod
        self._keys[uid] = key
        if key not in self._by_app:
            self._first_seen[key] = self._seen
            self._seen += 1
        self._by_app[key].add(uid)
        self._changes[key] = self._changes.get(key, 0) + 1
        if p.is_placeholder(pod):
            self._placeholders.add(uid)
        node = p.nominated_node(pod)
        if node and p.is_in_flight(pod):
            self._in_flight[uid] = node
        else:
            self._in_flight.pop(uid, None)

    def _drop(self, uid: str) -> p.AppKey | None:
        self._pods.pop(uid, None)
        self._placeholders.discard(uid)
        self._in_flight.pop(uid, None)
        key = self._keys.pop(uid, None)
        if key is not None:
            members = self._by_app[key]
            members.discard(uid)
            self._changes[key] = self._changes.get(key, 0) + 1
            if not members:
                del self._by_app[key]
                self._first_seen.pop(key, None)
                self._changes.pop(key, None)
        return key

    def first_seen(self, key: p.AppKey) -> int:
        """The application's place among those seen so far (see _first_seen)."""
        with self._lock:
            return self._first_seen.get(key, self._seen)

    def changes(self, key: p.AppKey) -> int:
        """How often the application's pods have changed: a reader that saw it at one count knows it
        has news when the count moves."""
        with self._lock:
            return self._changes.get(key, 0)

    def upsert(self, pod: Pod) -> p.AppKey | None:
        """Record a pod (from a watch event or a write's answer); return its application, if any."""
        uid = p.uid(pod)
        identity = p.identify(pod)
        key = p.app_key(pod, identity)
        with self._lock:
            version = _version(pod)
            if self._deleted.get(uid, -1) >= version:
                return None
            current = self._pods.get(uid)
            if current is not None and _version(current) > version:
                return self._keys.get(uid)
            if key is None or not p.is_concerned(pod, self._schedulers, identity):
                return self._drop(uid)
            self._put(uid, p.trim(pod, identity), key)
            return key

    def delete(self, pod: Pod) -> p.AppKey | None:
        uid = p.uid(pod)
        with self._lock:
            self._deleted[uid] = max(self._deleted.get(uid, 0), _version(pod))
            self._deleted.move_to_end(uid)
            while len(self._deleted) > MAX_TOMBSTONES:
                self._deleted.popitem(last=False)
            return self._drop(uid)

    def replace(self, pods: Iterable[Pod]) -> set[p.AppKey]:
        """Take a fresh list as the whole truth (after a re-list); return every application touched."""
        with self._lock:
            before = set(self._by_app)
            self._pods.clear()
            self._keys.clear()
            self._by_app.clear()
            self._deleted.clear()
            self._placeholders.clear()
            self._in_flight.clear()
            for pod in pods:
                identity = p.identify(pod)
                key = p.app_key(pod, identity)
                if key is not None and p.is_concerned(pod, self._schedulers, identity):
                    self._put(p.uid(pod), p.trim(pod, identity), key)
            return before | set(self._by_app)

    def app_pods(self, key: p.AppKey) -> list[Pod]:
        with self._lock:
            return [self._pods[uid] for uid in self._by_app.get(key, ())]

    def keys(self) -> list[p.AppKey]:
        with self._lock:
            return list(self._by_app)

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
