"""One application's pods as the store keeps them, in the order an Application reads them.

A gang of a thousand members has its application read on every reconcile and every admission cycle,
while its pods change one at a time. So its members, its placeholders and its gated members are each
kept in order (oldest first) as each pod changes, with the members that may be its originator: a read
copies three lists, and parses nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application, describes_gang
from yuniplace.gang.dialects.base import GangDialect
from yuniplace.gang.resources import Resources, pod_requests
from yuniplace.gang.taskgroups import Limits

Pod = p.Pod
Place = tuple[float, str, str]  # created, name, uid: the order an application's pods are read in


class _Ordered:
    """Pods in the order of their places, kept as they come, change and go."""

    def __init__(self) -> None:
        self.places: list[Place] = []
        self.pods: list[Pod] = []

    def put(self, place: Place, pod: Pod) -> None:
        index = bisect.bisect_left(self.places, place)
        if index < len(self.places) and self.places[index] == place:
            self.pods[index] = pod
        else:
            self.places.insert(index, place)
            self.pods.insert(index, pod)

    def drop(self, place: Place) -> None:
        index = bisect.bisect_left(self.places, place)
        if index < len(self.places) and self.places[index] == place:
            del self.places[index], self.pods[index]


def _has_pod_groups(identity: p.Identity) -> bool:
    return identity.dialect is not None and identity.dialect.pod_groups is not None


class AppPods:
    def __init__(self, order: int, now: float) -> None:
        self.order = order  # the application's place among those seen (see PodStore.first_seen)
        self.first_seen_at = now  # when its first pod came, and its latest new one, by the store's clock
        self.last_added_at = now
        self.changes = 0  # how often its pods have changed: a reader that saw one count knows there is news
        self._pods: dict[str, Pod] = {}
        self._identities: dict[str, p.Identity] = {}
        self._requests: dict[str, Resources] = {}  # what each pod requests, worked out as it changes
        self._places: dict[str, Place] = {}
        self._members = _Ordered()
        self._placeholders = _Ordered()
        self._gated = _Ordered()
        self._candidates: set[str] = set()  # members that may be its originator (application.describes_gang)
        self._stateful: set[str] = set()  # of those, the ones carrying the application's state
        self._read: tuple[int, object, Application] | None = None  # the last read, at its count and PodGroup
        # Its pods whose dialects have PodGroups, in the order of _identities (see pod_group_dialect).
        self._grouped: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pods)

    def pods(self) -> list[Pod]:
        return list(self._pods.values())

    def put(self, uid: str, pod: Pod, identity: p.Identity, now: float) -> None:
        place = self._places.get(uid)
        if place is None:
            self.last_added_at = now
            place = self._places[uid] = (p.created_at(pod), pod["metadata"].get("name") or "", uid)
        self._pods[uid] = pod
        self._requests[uid] = pod_requests(pod.get("spec", {}))
        before = self._identities.get(uid)
        self._identities[uid] = identity
        if before is None:
            if _has_pod_groups(identity):
                self._grouped[uid] = None
        elif before.dialect != identity.dialect:  # rare: a pod's dialect changes with its annotations
            self._grouped = dict.fromkeys(u for u, i in self._identities.items() if _has_pod_groups(i))
        if identity.placeholder:
            self._placeholders.put(place, pod)
        else:
            self._members.put(place, pod)
            (self._gated.put(place, pod) if p.is_held(pod) else self._gated.drop(place))
        candidate = not identity.placeholder and describes_gang(pod, identity)
        (self._candidates.add if candidate else self._candidates.discard)(uid)
        (self._stateful.add if candidate and keys.STATE in p.annotations_of(pod) else self._stateful.discard)(uid)
        self.changes += 1

    def drop(self, uid: str) -> None:
        if self._pods.pop(uid, None) is None:
            return
        place = self._places.pop(uid)
        del self._requests[uid]
        if self._identities.pop(uid).placeholder:
            self._placeholders.drop(place)
        else:
            self._members.drop(place)
            self._gated.drop(place)
        self._candidates.discard(uid)
        self._stateful.discard(uid)
        self._grouped.pop(uid, None)
        self.changes += 1

    def application(self, key: p.AppKey, pod_group: Mapping[str, object] | None, limits: Limits) -> Application:
        """The application as its pods (and PodGroup) show it now; the same object again while none of
        them changed. Called under the store's lock."""
        read = self._read
        if read is not None and read[0] == self.changes and read[1] is pod_group:
            return read[2]
        # As application._originator chooses: the oldest carrying the application's state, else the
        # oldest that has not ended, else the oldest of all.
        live = {uid for uid in self._candidates if not p.is_terminal(self._pods[uid])}
        chosen = min((self._places[uid] for uid in self._stateful or live or self._candidates), default=None)
        app = Application.read(
            key,
            tuple(self._members.pods),
            tuple(self._placeholders.pods),
            [] if chosen is None else [self._pods[chosen[2]]],
            pod_group,
            limits,
            MappingProxyType(self._identities),
            tuple(self._gated.pods),
            MappingProxyType(self._requests),
        )
        self._read = (self.changes, pod_group, app)
        return app

    def pod_group_dialect(self) -> GangDialect | None:
        """See PodStore.pod_group_dialect: its first pod's dialect, if kube-scheduler starts its gangs,
        else the first of its pods' dialects that has PodGroups."""
        first = next(iter(self._identities.values()), None)
        if first is not None and first.dialect is not None and first.dialect.started_by_kube_scheduler:
            return first.dialect
        grouped = next(iter(self._grouped), None)
        return None if grouped is None else self._identities[grouped].dialect
