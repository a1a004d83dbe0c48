"""PodGroups, scheduler-plugins' and Volcano's: each API watched when it is installed (the gangs their
members name), and where their status is written (podgroupstatus.py says what it is)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from yuniplace.gang import pods as p
from yuniplace.gang.dialects import POD_GROUP_APIS, Dialect, pod_group_dialect
from yuniplace.kube import KubeClient
from yuniplace.kube.discovery import served_resources
from yuniplace.kube.watch import ListWatch

log = logging.getLogger(__name__)
PodGroup = dict[str, Any]
STATUS = "podgroups/status"


def _key(pod_group: PodGroup) -> p.AppKey:
    return p.AppKey(pod_group["metadata"]["namespace"], pod_group["metadata"]["name"])


def status_path(dialect: Dialect, key: p.AppKey, subresource: bool = True) -> str:
    """Where the status of the PodGroup of `key` is written: its status subresource, or, where the
    installed CRD has none (Volcano's own CRD), the PodGroup itself."""
    path = f"{POD_GROUP_APIS[dialect]}/namespaces/{key.namespace}/podgroups/{key.app_id}"
    return f"{path}/status" if subresource else path


class PodGroupWatch:
    """One API's PodGroups in the watched namespace(s), by application key (a PodGroup's name is its
    gang's application id); every change wakes that application."""

    def __init__(
        self, client: KubeClient, dialect: Dialect, namespace: str | None, wake: Callable[[p.AppKey], None]
    ) -> None:
        self._client = client
        self._wake = wake
        self.dialect = dialect
        self.api = POD_GROUP_APIS[dialect]
        self.status_subresource = True
        self._by_key: dict[p.AppKey, PodGroup] = {}
        path = f"{self.api}/namespaces/{namespace}/podgroups" if namespace else f"{self.api}/podgroups"
        self.name = "podgroups" if dialect == Dialect.POD_GROUP else f"{dialect.value.lower()}-podgroups"
        self.watch = ListWatch(client, path, on_list=self._listed, on_event=self._changed, name=self.name)

    def served(self) -> bool:
        """Whether the API (the CRD) is installed, and whether it serves a status subresource; without
        the API, that dialect is off."""
        what = f"{self.dialect.value} gangs" if self.dialect != Dialect.POD_GROUP else "PodGroup gangs"
        names = served_resources(self._client, self.api, what)
        if names is None:
            return False
        # Only a listing of podgroups without podgroups/status says there is none: discovery may not list
        # a CRD's resources yet a moment after it was installed.
        self.status_subresource = STATUS in names or "podgroups" not in names
        if not self.status_subresource:
            log.info("the %s PodGroup CRD has no status subresource: their status is written on the object", self.api)
        return True

    def get(self, key: p.AppKey) -> PodGroup | None:
        return self._by_key.get(key)

    def _listed(self, pod_groups: list[PodGroup]) -> None:
        before = set(self._by_key)
        self._by_key = {_key(g): g for g in pod_groups}
        for key in before | set(self._by_key):
            self._wake(key)

    def _changed(self, kind: str, pod_group: PodGroup) -> None:
        key = _key(pod_group)
        if kind == "DELETED":
            self._by_key.pop(key, None)
        else:
            self._by_key[key] = pod_group
        self._wake(key)

    def start(self) -> threading.Event | None:
        """Watch, if the API is served; return the event set once the first list is in."""
        if not self.served():
            return None
        threading.Thread(target=self.watch.run, name=f"watch-{self.name}", daemon=True).start()
        return self.watch.synced


class PodGroups:
    """Every PodGroup API's watch. A scheduler-plugins and a Volcano PodGroup may share a name: an
    application's PodGroup is the one of the API its pods name (`pods_of`: the application's pods)."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str | None,
        wake: Callable[[p.AppKey], None],
        pods_of: Callable[[p.AppKey], Sequence[p.Pod]],
    ) -> None:
        self._pods_of = pods_of
        self.watches = {dialect: PodGroupWatch(client, dialect, namespace, wake) for dialect in POD_GROUP_APIS}

    def get(self, key: p.AppKey) -> PodGroup | None:
        dialect = pod_group_dialect(self._pods_of(key))
        return None if dialect is None else self.watches[dialect].get(key)

    def status_path(self, dialect: Dialect, key: p.AppKey) -> str:
        return status_path(dialect, key, self.watches[dialect].status_subresource)

    def start(self) -> list[threading.Event]:
        """Watch every API that is served; return the events set once each first list is in."""
        return [synced for watch in self.watches.values() if (synced := watch.start()) is not None]

    def stop(self) -> None:
        for watch in self.watches.values():
            watch.watch.stop()
